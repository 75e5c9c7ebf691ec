"""jobs.list's ASGI front answers exactly what the view answers, or lets the view answer.

Each case is sent twice: to the front (with the console's Django application behind it) and to
Django alone. The bodies must be equal; the front must have answered the plain cases itself and
handed everything else on.
"""

from __future__ import annotations

import asyncio
import json

import pytest

from tests.helpers.jobs import submit

pytestmark = pytest.mark.django_db(transaction=True)  # the front reads on its own connections


class Recorder:
    def __init__(self, app):
        self.app = app
        self.calls = 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await self.app(scope, receive, send)


def call(app, path: str, token: str | None, query: str = "") -> tuple[int, dict, dict]:
    headers = [(b"host", b"testserver")]
    if token is not None:
        headers.append((b"authorization", f"Bearer {token}".encode()))
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": "GET", "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode(), "headers": headers,
             "client": ("127.0.0.1", 5000), "server": ("testserver", 80), "root_path": ""}
    sent: list[dict] = []
    requested: list[bool] = []

    async def receive():
        if not requested:
            requested.append(True)
            return {"type": "http.request", "body": b"", "more_body": False}
        await asyncio.Event().wait()  # the client stays connected until the answer is sent

    async def send(message):
        sent.append(message)

    asyncio.run(app(scope, receive, send))
    start = next(m for m in sent if m["type"] == "http.response.start")
    body = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], json.loads(body), {k.decode(): v.decode() for k, v in start["headers"]}


@pytest.fixture
def apps():
    from django.core.asgi import get_asgi_application

    from jobs.asgi import JobsListFront

    django_app = get_asgi_application()
    recorder = Recorder(django_app)
    return JobsListFront(recorder), recorder, django_app


@pytest.fixture
def jobs(project, admin):
    from jobs.models import Job, JobState

    made = [submit(project, f"job_{i}", admin) for i in range(5)]
    Job.objects.filter(pk=made[0].pk).update(state=JobState.SUCCEEDED, error_message="")
    Job.objects.filter(pk=made[1].pk).update(state=JobState.FAILED, error_message="boom \u2028 line",
                                             labels={"team": "vision"})
    return made


def token_for(user) -> str:
    from aiconsole.tokens import create_token

    return create_token(user, name="test")[1]


def both(apps, path, token, query=""):
    front, recorder, django_app = apps
    before = recorder.calls
    answered = call(front, path, token, query)
    handed_on = recorder.calls > before
    return answered, call(django_app, path, token, query), handed_on


PATH = "/v1/projects/project-a/jobs"


@pytest.mark.parametrize("persona", ["admin", "developer", "viewer"])
def test_front_answers_project_members_exactly_as_the_view(apps, jobs, persona, request):
    token = token_for(request.getfixturevalue(persona))
    (status, body, headers), (view_status, view_body, _), handed_on = both(apps, PATH, token)
    assert not handed_on
    assert (status, body) == (view_status, view_body) == (200, body)
    assert [job["jobId"] for job in body["jobs"]] == [f"job_{i}" for i in range(4, -1, -1)]
    assert body["jobs"][0]["jobPosition"] == "3"  # the newest of three QUEUED jobs is third in line
    assert headers["content-type"] == "application/json" and headers["x-request-id"]


def test_pages_and_tokens_match_the_view(apps, jobs, admin):
    token = token_for(admin)
    (_, first, _), (_, view_first, _), handed_on = both(apps, PATH, token, "pageSize=2")
    assert not handed_on and first == view_first and len(first["jobs"]) == 2
    query = f"pageSize=2&pageToken={first['nextPageToken']}"
    (_, second, _), (_, view_second, _), handed_on = both(apps, PATH, token, query)
    assert not handed_on and second == view_second
    assert [j["jobId"] for j in second["jobs"]] == ["job_2", "job_1"]


@pytest.mark.parametrize("query", ["filter=state%3DFAILED", "pageToken=not-a-token", "pageSize=lots",
                                   "orderBy=createTime", "alt=proto"])
def test_anything_unusual_goes_to_the_view(apps, jobs, admin, query):
    token = token_for(admin)
    (status, body, _), (view_status, view_body, _), handed_on = both(apps, PATH, token, query)
    assert handed_on
    assert (status, body) == (view_status, view_body)


def test_bad_token_and_outsider_get_the_views_refusals(apps, jobs, outsider):
    (status, body, _), _, handed_on = both(apps, PATH, "not-a-token")
    assert handed_on and status == 401 and body["error"]["status"] == "UNAUTHENTICATED"
    (status, body, _), _, handed_on = both(apps, PATH, token_for(outsider))
    assert handed_on and status == 404


def test_job_level_owner_sees_only_their_jobs_through_the_view(apps, jobs, project):
    from django.contrib.auth import get_user_model

    from aiconsole import iam

    owner = get_user_model().objects.create_user("olga_owner", "olga@example.com", "pw")
    iam.grant(owner, "roles/ml.jobOwner", jobs[2])
    (status, body, _), (_, view_body, _), handed_on = both(apps, PATH, token_for(owner))
    assert handed_on and status == 200 and body == view_body
    assert [job["jobId"] for job in body["jobs"]] == ["job_2"]


def test_data_access_logging_goes_through_the_view_and_is_audited(apps, jobs, project, admin):
    from aiconsole.models import AuditEntry

    project.data_access_logs = True
    project.save()
    before = AuditEntry.objects.filter(method_name__endswith="ListJobs").count()
    (status, _, _), _, handed_on = both(apps, PATH, token_for(admin))
    assert handed_on and status == 200
    assert AuditEntry.objects.filter(method_name__endswith="ListJobs").count() == before + 2
