"""Web-facing hardening: private files, login throttling, deeply nested JSON, and the
ASGI fast paths holding to the same host check and response headers as Django."""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import sys
import urllib.request
from pathlib import Path

import pytest
from django.conf import settings

from bench.support.packages import build_package
from bench.support.waiting import wait_for
from tests.helpers.identity import bearer, entries
from tests.helpers.jobs import submit
from tests.helpers.models import deploy

# --- deeply nested JSON ---------------------------------------------------------------------------

# The decoder itself overflows on this one; the second decodes, but nests past any real request.
TOO_DEEP = {
    "100000 lists": b"[" * 100_000 + b"]" * 100_000,
    "400 lists in a label": ('{"labels": {"a": ' + "[" * 400 + "]" * 400 + "}}").encode(),
}


def _invalid_argument(response) -> dict:
    assert response.status_code == 400, response.content[:300]
    assert response["Content-Type"] == "application/json"
    error = response.json()["error"]
    assert error["code"] == 400 and error["status"] == "INVALID_ARGUMENT"
    return error


@pytest.mark.parametrize("body", TOO_DEEP.values(), ids=TOO_DEEP.keys())
@pytest.mark.parametrize(
    "method, path",
    [
        ("post", "/v1/projects/project-a/jobs"),
        ("patch", "/v1/projects/project-a/jobs/shared_job?updateMask=labels"),
        ("post", "/v1/projects/project-a:setIamPolicy"),
        ("post", "/v1/projects/project-a:testIamPermissions"),
        ("post", "/v1/projects/project-a/jobs/shared_job:setIamPolicy"),
        ("post", "/v1/projects/project-a/models"),
    ],
)
def test_deeply_nested_json_gets_the_invalid_argument_envelope(client, project, admin, method, path, body):
    submit(project, "shared_job", admin)
    client.raise_request_exception = False
    response = getattr(client, method)(path, body, content_type="application/json", **bearer(admin))
    assert "nests more than 100 levels" in _invalid_argument(response)["message"]


def test_json_nested_within_the_limit_is_still_parsed(client, project, admin):
    labels = {"a": json.loads("[" * 98 + "]" * 98)}  # 100 levels with the body and "labels"
    response = client.post(
        "/v1/projects/project-a/models",
        {"name": "deep", "labels": labels},
        content_type="application/json",
        **bearer(admin),
    )
    assert "nests more than" not in _invalid_argument(response)["message"]  # a label is a string


# --- NUL characters -------------------------------------------------------------------------------

# PostgreSQL stores no NUL (0x00) in text or JSON: a NUL that reached a query or a row was an HTML
# 500 there (and passed on SQLite). They are refused as the request comes in, on either database.
NUL_BODIES = {
    "a Vertex display name": (
        "/v1/projects/project-a/locations/us-central1/customJobs",
        {"displayName": "a\u0000b", "jobSpec": {"workerPoolSpecs": [{}]}},
    ),
    "a trainer's argument": (
        "/v1/projects/project-a/jobs",
        {"jobId": "nul", "trainingInput": {"region": "us-central1", "pythonModule": "t.m", "args": ["a\u0000b"]}},
    ),
    "a model's description": ("/v1/projects/project-a/models", {"name": "nul", "description": "a\u0000b"}),
    "a label's key": ("/v1/projects/project-a/models", {"name": "nul", "labels": {"a\u0000": "b"}}),
}


@pytest.mark.parametrize("path, body", NUL_BODIES.values(), ids=NUL_BODIES.keys())
def test_a_nul_in_a_json_body_gets_the_invalid_argument_envelope(client, project, admin, path, body):
    response = client.post(path, json.dumps(body), content_type="application/json", **bearer(admin))
    assert "NUL character" in _invalid_argument(response)["message"]


@pytest.mark.parametrize(
    "path",
    [
        "/v1/projects/project-a/jobs?filter=jobId%3D%22a%00b%22",
        "/v1/projects/project-a/locations/us-central1/customJobs?filter=display_name%3D%22a%00b%22",
        "/v1/projects/a%00b/jobs",
        "/v1/projects/project-a/locations/a%00b/customJobs/1234567890123456789",
        "/v1/projects/project-a/jobs/a%00b",
    ],
)
def test_a_nul_in_an_api_path_or_query_gets_the_invalid_argument_envelope(client, project, admin, path):
    assert "NUL character" in _invalid_argument(client.get(path, **bearer(admin)))["message"]


def test_a_nul_in_a_pages_address_is_a_bad_request(client, project, admin):
    client.force_login(admin)
    for path in ("/projects/project-a/jobs/?q=a%00b", "/projects/project-a/jobs/a%00b/"):
        answer = client.get(path)
        assert answer.status_code == 400 and b"NUL character" in answer.content, path


@pytest.mark.asyncio
async def test_deeply_nested_predictions_get_the_invalid_argument_envelope_on_both_paths(
    serving, project, admin, trained
):  # noqa: F811
    from channels.db import database_sync_to_async
    from django.test import AsyncClient

    from console.asgi import application
    from models_registry import services

    @database_sync_to_async
    def setup():
        model = services.create_model(project, {"name": "census"}, actor=admin)
        deploy(model, "v1", trained["linear"], admin)
        return bearer(admin)

    auth = await setup()
    path = "/v1/projects/project-a/models/census:predict"
    deep_instances = b'{"instances": ' + b"[" * 100_000 + b"]" * 100_000 + b"}"
    for body in (TOO_DEEP["100000 lists"], deep_instances):
        # A bearer token: answered by the predict front, before Django.
        status, headers, answer = await asgi_call(
            application, "POST", path, body, {"authorization": auth["HTTP_AUTHORIZATION"]}
        )
        assert status == 400 and headers["content-type"] == "application/json", answer[:300]
        assert json.loads(answer)["error"]["status"] == "INVALID_ARGUMENT"
    # The console's own prediction panel (a session): the view.
    client = AsyncClient()
    await client.aforce_login(admin)
    response = await client.post(path, deep_instances, content_type="application/json")
    _invalid_argument(response)


# --- private files ----------------------------------------------------------------------------


def _not_private(root: Path) -> list[str]:
    """Everything under root that its group or other users may read, write or enter, beyond what
    a root console's projects' accounts need (aiconsole.trainer_user): others may enter, not list,
    the console's folders on the way to a project's, a project's group may enter its areas, and
    what an account owns (its working dirs) is its own."""
    accounts = settings.TRAINER_UIDS if os.geteuid() == 0 else range(0)
    found = []
    for path in [root, *root.rglob("*")]:
        info = path.lstat()
        if path.is_symlink() or info.st_uid in accounts:
            continue
        may_enter = (0o001 | (0o010 if info.st_gid in accounts else 0)) if accounts and path.is_dir() else 0
        if info.st_mode & 0o077 & ~may_enter:
            found.append(f"{oct(stat.S_IMODE(info.st_mode))} {path}")
    return found


@pytest.mark.slow
def test_a_first_start_makes_the_data_dir_and_database_private(tmp_path):
    data_dir = tmp_path / "new" / "data"
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    env["AICONSOLE_DATA_DIR"] = str(data_dir)
    result = subprocess.run(
        [sys.executable, "manage.py", "migrate", "-v0"], capture_output=True, text=True, env=env, timeout=300
    )
    assert result.returncode == 0, result.stderr
    assert (data_dir / "aiconsole.sqlite3").exists() and (data_dir / "secret_key").exists()
    assert _not_private(data_dir) == []


@pytest.mark.executor
def test_the_console_tightens_a_readable_data_dir_and_keeps_what_it_writes_later_private(tmp_path):
    from tests.helpers.console import Server, token_for

    data_dir = tmp_path / "data"
    data_dir.mkdir(mode=0o755)
    data_dir.chmod(0o755)  # as an older console left it
    for name in ("secret_key", "aiconsole.sqlite3"):
        (data_dir / name).write_text("k" * 64 if name == "secret_key" else "")
        (data_dir / name).chmod(0o644)
    console = Server(data_dir)
    try:
        token = token_for(data_dir)
        package = build_package(
            tmp_path / "pkg",
            {
                "trainer/task.py": """
            from pathlib import Path
            Path("scratch.txt").write_text("written in the working dir")
            print("trainer read back:", Path("scratch.txt").read_text(), flush=True)
        """
            },
        )
        request = urllib.request.Request(
            f"{console.url}/upload/v1/projects/default-project/packages?name={package.name}",
            data=package.read_bytes(),
            method="POST",
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/octet-stream"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            uri = json.loads(response.read())["uri"]
        status, job = console.api(
            "POST",
            "/v1/projects/default-project/jobs",
            token,
            {
                "jobId": "private_files",
                "trainingInput": {
                    "scaleTier": "BASIC",
                    "packageUris": [uri],
                    "pythonModule": "trainer.task",
                    "region": "us-central1",
                },
            },
        )
        assert status == 200, job

        def finished():
            state = console.api("GET", "/v1/projects/default-project/jobs/private_files", token)[1]
            return state if state["state"] in {"SUCCEEDED", "FAILED", "CANCELLED"} else None

        ended = wait_for(finished, 240, interval=0.2, message="the job to end")
        assert ended["state"] == "SUCCEEDED"
        assert _not_private(data_dir) == []
    finally:
        console.stop()


# --- sign-in throttling ----------------------------------------------------------------------


def _sign_in(client, username: str, password: str, address: str = "10.0.0.1"):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_five_wrong_passwords_lock_the_user_out_from_that_address_even_with_the_right_password(client, admin):
    for _ in range(4):
        assert _sign_in(client, "alice_admin", "wrong").status_code == 200  # the form again
    assert _sign_in(client, "alice_admin", "wrong").status_code == 429  # the fifth locks
    response = _sign_in(client, "alice_admin", "pw-alice_admin")
    assert response.status_code == 429
    page = response.content.decode()
    assert "Too many failed sign-ins for this user from this address" in page and "15 minutes" in page
    assert "_auth_user_id" not in client.session
    # One address alone cannot lock the account for the user's other addresses.
    response = _sign_in(client, "alice_admin", "pw-alice_admin", address="10.0.0.2")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(admin.pk)


def test_wrong_passwords_for_other_names_never_refuse_the_right_one(client, admin, developer):
    """Five failures for made-up names used to lock every user out of the
    address (behind a proxy or NAT, everyone) for 15 minutes, the platform admin included."""
    for number in range(12):
        _sign_in(client, f"guess{number % 3}", "wrong", address="10.0.0.9")  # three names locked
    response = _sign_in(client, "alice_admin", "pw-alice_admin", address="10.0.0.9")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(admin.pk)
    response = _sign_in(client, "dave_dev", "pw-dave_dev", address="10.0.0.9")
    assert response.status_code == 302 and client.session["_auth_user_id"] == str(developer.pk)


def test_a_lockout_ends_after_the_cool_off(client, admin):
    from datetime import timedelta

    from axes.models import AccessAttempt
    from django.utils import timezone

    for _ in range(5):
        _sign_in(client, "alice_admin", "wrong")
    assert _sign_in(client, "alice_admin", "pw-alice_admin").status_code == 429
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=16))
    assert _sign_in(client, "alice_admin", "pw-alice_admin").status_code == 302


def test_failed_sign_ins_and_the_lockout_are_audited(client, admin):
    from aiconsole import audit, signin

    for _ in range(5):
        _sign_in(client, "alice_admin", "wrong")
    for _ in range(3):  # refused unchecked while locked out: not counted, not logged
        _sign_in(client, "alice_admin", "pw-alice_admin")
    failures = entries(signin.LOGIN)
    assert len(failures) == 5
    seen = {(e.principal, e.resource_name, e.granted, e.caller_ip, e.project_id) for e in failures}
    assert seen == {("anonymous", "users/alice_admin", False, "10.0.0.1", "")}
    assert failures[0].request == {"username": "alice_admin"}  # never the password
    [lockout] = entries(signin.LOCK_OUT)
    assert lockout.resource_name == "users/alice_admin" and not lockout.granted
    assert "Locked out for 15 minutes after 5 failed sign-ins" in lockout.status_message
    assert audit.verify_chain() == []


def test_a_lockout_leaves_bearer_tokens_and_signed_in_sessions_alone(client, admin, project):
    from django.test import Client

    signed_in = Client()
    signed_in.force_login(admin)
    for number in range(10):
        username = "alice_admin" if number % 2 else f"guess{number}"
        _sign_in(client, username, "wrong", address="127.0.0.1")
    assert _sign_in(client, "alice_admin", "pw-alice_admin", address="127.0.0.1").status_code == 429
    response = client.get("/v1/projects/project-a/jobs", REMOTE_ADDR="127.0.0.1", **bearer(admin))
    assert response.status_code == 200
    assert signed_in.get("/v1/projects/project-a/jobs", REMOTE_ADDR="127.0.0.1").status_code == 200


# --- the predict front (online prediction's data plane) ------------------------------------------------------------

SECURITY_HEADERS = (
    "x-content-type-options",
    "referrer-policy",
    "cross-origin-opener-policy",
    "x-frame-options",
    "strict-transport-security",
)


class Recorder:
    """The Django application behind the fronts, counting what they hand on."""

    def __init__(self, app):
        self.app, self.calls = app, 0

    async def __call__(self, scope, receive, send):
        self.calls += 1
        await self.app(scope, receive, send)


def make_fronts() -> tuple:
    """The predict front as ``console/asgi.py`` mounts it, and Django alone (whose middleware
    reads the settings when it is made: make it after changing them)."""
    from django.core.asgi import get_asgi_application

    from models_registry.asgi import PredictFront

    django_app = get_asgi_application()
    recorder = Recorder(django_app)
    return PredictFront(recorder), recorder, django_app


@pytest.fixture
def fronts():
    return make_fronts()


def _security(headers: dict) -> dict:
    return {name: value for name, value in headers.items() if name in SECURITY_HEADERS}


LIST = ("GET", "/v1/projects/project-a/jobs")
PREDICT = ("POST", "/v1/projects/project-a/models/census:predict")


@pytest.mark.django_db(transaction=True)
def test_the_predict_front_refuses_a_host_outside_allowed_hosts_as_django_does(fronts, project, admin):
    app, recorder, _ = fronts
    method, path = PREDICT
    auth = {"authorization": bearer(admin)["HTTP_AUTHORIZATION"]}
    status, _, body = asyncio.run(asgi_call(app, method, path, b"{}", auth, host="evil.example"))
    assert (status, recorder.calls) == (400, 1), body[:200]  # handed to Django, which refuses it
    status, _, body = asyncio.run(asgi_call(app, method, path, b"{}", auth, host="127.0.0.1:8000"))
    assert recorder.calls == 1 and status in {200, 404}, body[:200]  # answered by the front


@pytest.mark.django_db(transaction=True)
@pytest.mark.parametrize("scheme", ["http", "https"])
def test_the_predict_front_sends_the_security_headers_django_sends(project, admin, settings, scheme):
    settings.SECURE_HSTS_SECONDS = 3600
    settings.SECURE_REFERRER_POLICY = "no-referrer"
    settings.X_FRAME_OPTIONS = "SAMEORIGIN"
    app, recorder, django_app = make_fronts()
    submit(project, "one_job", admin)
    auth = {"authorization": bearer(admin)["HTTP_AUTHORIZATION"]}
    for method, path, body in [(*PREDICT, b"{}")]:
        fast = asyncio.run(asgi_call(app, method, path, body, auth, scheme=scheme))
        slow = asyncio.run(asgi_call(django_app, method, path, body, auth, scheme=scheme))
        assert recorder.calls == 0 and fast[0] == slow[0] and fast[0] in {200, 404}
        assert _security(fast[1]) == _security(slow[1]), (slow, fast)
        assert _security(fast[1])["x-frame-options"] == "SAMEORIGIN"
        assert ("strict-transport-security" in fast[1]) == (scheme == "https")


@pytest.mark.django_db(transaction=True)
def test_the_predict_front_redirects_plain_http_as_django_does_under_ssl_redirect(project, admin, settings):
    settings.SECURE_SSL_REDIRECT = True
    app, recorder, _ = make_fronts()
    auth = {"authorization": bearer(admin)["HTTP_AUTHORIZATION"]}
    for method, path in (LIST, PREDICT):
        status, headers, _ = asyncio.run(asgi_call(app, method, path, b"{}", auth))
        assert status == 301 and headers["location"] == f"https://testserver{path}"
    assert recorder.calls == 2  # both handed to Django, which redirects


@pytest.mark.django_db(transaction=True)
def test_the_predict_front_hands_a_nul_in_the_path_to_django_which_refuses_it(fronts, project, admin):
    app, recorder, _ = fronts
    auth = {"authorization": bearer(admin)["HTTP_AUTHORIZATION"]}
    for path in ("/v1/projects/a\x00b/models/census:predict", "/v1/projects/project-a/models/a\x00b:predict"):
        status, _, body = asyncio.run(asgi_call(app, "POST", path, b"{}", auth))
        assert status == 400 and b"NUL character" in body, body[:200]
    assert recorder.calls == 2


# --- helpers --------------------------------------------------------------------------------------


async def asgi_call(
    app,
    method: str,
    path: str,
    body: bytes = b"",
    headers: dict | None = None,
    *,
    host: str = "testserver",
    scheme: str = "http",
    query: str = "",
) -> tuple:
    """One HTTP request through an ASGI application, as uvicorn would hand it over."""
    header_list = [(b"host", host.encode())]
    header_list += [(name.lower().encode(), value.encode()) for name, value in (headers or {}).items()]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": method,
        "scheme": scheme,
        "path": path,
        "raw_path": path.encode(),
        "query_string": query.encode(),
        "headers": header_list,
        "root_path": "",
        "client": ("127.0.0.1", 5000),
        "server": ("testserver", 80),
    }
    sent: list[dict] = []
    requested: list[bool] = []

    async def receive():
        if not requested:
            requested.append(True)
            return {"type": "http.request", "body": body, "more_body": False}
        await asyncio.Event().wait()  # the client stays connected until the answer is sent

    async def send(message):
        sent.append(message)

    await app(scope, receive, send)
    start = next(m for m in sent if m["type"] == "http.response.start")
    content = b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")
    return start["status"], {k.decode().lower(): v.decode() for k, v in start["headers"]}, content


@pytest.mark.django_db
def test_a_format_query_parameter_gets_json_not_an_html_404(client, admin, project):
    client.force_login(admin)
    answer = client.get("/v1/projects/project-a/jobs?format=null")
    assert answer.status_code == 200 and answer["Content-Type"].startswith("application/json")
