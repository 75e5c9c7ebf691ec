"""One request stack for the control plane (Django), and online prediction's front beside it: both
check the Host, send the same headers, authenticate bearer tokens once and ask IAM once per
request, so a permission change shows on the very next request whichever path answers it."""

from __future__ import annotations

import asyncio
import json
from datetime import timedelta

import pytest
from django.utils import timezone

from aiconsole import iam
from aiconsole.middleware import RequestContext, request_scope
from aiconsole.models import ApiToken, RoleBinding
from aiconsole.tokens import TOUCH_SECONDS, authenticate_bearer, create_token
from models_registry import services
from tests.aiconsole.test_security_web import asgi_call, make_fronts
from tests.helpers.jobs import submit

pytestmark = pytest.mark.django_db(transaction=True)  # the front answers in threads of its own

LIST = ("GET", "/v1/projects/project-a/jobs", b"")  # Django answers
PREDICT = ("POST", "/v1/projects/project-a/models/census:predict", b'{"instances": [[1, 2]]}')
MODELS = ("GET", "/v1/projects/project-a/models", b"")  # Django answers
# What differs between two answers to the same request whoever gives it.
PER_ANSWER = {"date", "content-length", "x-request-id"}


def auth(raw: str) -> dict:
    return {"authorization": f"Bearer {raw}"}


def call(app, request: tuple, raw: str, **options) -> tuple[int, dict, bytes]:
    method, path, body = request
    return asyncio.run(asgi_call(app, method, path, body, auth(raw), **options))


@pytest.fixture
def world(project, admin):
    submit(project, "one_job", admin)
    services.create_model(project, {"name": "census"}, actor=admin)  # no version: a precondition
    return create_token(admin)[1]


@pytest.mark.parametrize("request_", [LIST, PREDICT, MODELS], ids=["jobs.list", "predict", "django"])
def test_every_path_refuses_a_host_outside_allowed_hosts_with_djangos_400(world, request_):
    app, recorder, django_app = make_fronts()
    status, _, body = call(app, request_, world, host="evil.example")
    assert status == 400 and recorder.calls == 1, body[:200]  # Django's answer, not a front's
    assert call(django_app, request_, world, host="evil.example")[0] == 400
    status, _, _ = call(app, request_, world, host="localhost:8000")
    assert status in {200, 400} and status != 404  # the same request under an allowed name is served


@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_fronts_answer_carries_exactly_the_headers_of_djangos(world, settings, scheme):
    settings.SECURE_HSTS_SECONDS = 600
    app, recorder, django_app = make_fronts()
    for request_ in (PREDICT,):
        fast_status, fast, fast_body = call(app, request_, world, scheme=scheme)
        slow_status, slow, slow_body = call(django_app, request_, world, scheme=scheme)
        assert recorder.calls == 0  # answered by the front
        assert (fast_status, json.loads(fast_body)) == (slow_status, json.loads(slow_body))
        names = set(fast) - PER_ANSWER
        assert names == set(slow) - PER_ANSWER, request_
        assert {n: fast[n] for n in names} == {n: slow[n] for n in names}, request_
        assert {
            "x-content-type-options",
            "referrer-policy",
            "cross-origin-opener-policy",
            "x-frame-options",
            "x-request-id",
        } <= set(fast)
        assert ("strict-transport-security" in fast) == (scheme == "https")
    # and a path with no front sends the same security headers
    _, plain, _ = call(django_app, MODELS, world, scheme=scheme)
    assert {n: plain[n] for n in ("x-content-type-options", "referrer-policy", "x-frame-options")} == {
        n: fast[n] for n in ("x-content-type-options", "referrer-policy", "x-frame-options")
    }


def test_a_permission_change_shows_on_the_next_request_on_either_path(world, project, admin, developer):
    app, recorder, _ = make_fronts()
    raw = create_token(developer)[1]
    status, _, body = call(app, LIST, raw)
    assert status == 200 and json.loads(body)["jobs"][0]["jobId"] == "one_job" and recorder.calls == 1
    status, _, body = call(app, PREDICT, raw)
    assert status == 400 and json.loads(body)["error"]["status"] == "FAILED_PRECONDITION"

    RoleBinding.objects.filter(user=developer).delete()
    assert call(app, LIST, raw)[0] == 404  # no longer a member: refused (by the view, which audits it)
    status, _, body = call(app, PREDICT, raw)
    assert status == 404 and json.loads(body)["error"]["status"] == "NOT_FOUND"

    iam.grant(developer, "roles/ml.viewer", project)  # may list jobs, may not predict
    assert call(app, LIST, raw)[0] == 200
    status, _, body = call(app, PREDICT, raw)
    assert status == 403 and "ml.models.predict" in json.loads(body)["error"]["message"]


def test_iam_decisions_are_cached_for_one_request_only(project, developer):
    def demote_behind_the_caches_back():  # an update sends no signal: only a new request sees it
        RoleBinding.objects.filter(user=developer).update(role="roles/ml.viewer")

    with request_scope(RequestContext(request_id="one")):
        assert iam.can(developer, "ml.jobs.create", project)
        demote_behind_the_caches_back()
        assert iam.can(developer, "ml.jobs.create", project)  # the same request: read once
    with request_scope(RequestContext(request_id="two")):
        assert not iam.can(developer, "ml.jobs.create", project)  # the next request reads again
        assert iam.can(developer, "ml.jobs.list", project)
        RoleBinding.objects.filter(user=developer).delete()  # through the ORM: the cache is emptied
        assert not iam.can(developer, "ml.jobs.list", project)
    assert not iam.can(developer, "ml.jobs.list", project)  # outside a request: no cache at all


def test_a_token_is_marked_used_at_most_once_a_minute(admin):
    token, raw = create_token(admin)
    assert authenticate_bearer(raw).pk == admin.pk
    token.refresh_from_db()
    first = token.last_used
    assert first is not None
    authenticate_bearer(raw)
    token.refresh_from_db()
    assert token.last_used == first  # a busy script's reads stay reads
    earlier = timezone.now() - timedelta(seconds=TOUCH_SECONDS + 1)
    ApiToken.objects.filter(pk=token.pk).update(last_used=earlier)
    authenticate_bearer(raw)
    token.refresh_from_db()
    assert token.last_used > earlier + timedelta(seconds=TOUCH_SECONDS)
