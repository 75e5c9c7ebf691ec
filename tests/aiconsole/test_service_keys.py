"""Default credentials: the service-account key file ``aiconsole credentials create`` writes is read
by ``google.auth.default()`` unchanged, and acts as its user (their roles, nothing more) whether the
client exchanges its signed JWT at ``token_uri`` or sends a self-signed JWT as the bearer token."""

from __future__ import annotations

import json
import os
import stat
import subprocess
import time
from pathlib import Path

import pytest
import requests

from aiconsole import service_keys
from aiconsole.models import AuditEntry, ServiceAccountKey

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def key_file(live_server, tmp_path, monkeypatch):
    """``make(user)``: a key file for the user, named by GOOGLE_APPLICATION_CREDENTIALS."""

    def make(user):
        content = service_keys.create_key(user, project_id="project-a", token_uri=f"{live_server.url}/oauth2/token")
        path = tmp_path / f"{user.username}.json"
        path.write_text(service_keys.key_file_text(content))
        monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(path))
        return path

    return make


def _default_token() -> str:
    import google.auth
    from google.auth.transport.requests import Request

    credentials, project = google.auth.default(scopes=["https://www.googleapis.com/auth/cloud-platform"])
    assert project == "project-a"
    credentials.refresh(Request())
    return credentials.token


def test_google_auth_default_gets_an_access_token_that_acts_as_the_user(live_server, project, admin, key_file):
    key_file(admin)
    token = _default_token()
    answer = requests.get(
        f"{live_server.url}/v1/projects/project-a/jobs", headers={"Authorization": f"Bearer {token}"}, timeout=30
    )
    assert answer.status_code == 200, answer.text
    assert AuditEntry.objects.filter(method_name="aiconsole.TokenService.CreateServiceAccountKey").exists()


def test_a_viewers_key_reads_but_cannot_submit(live_server, project, viewer, key_file):
    key_file(viewer)
    headers = {"Authorization": f"Bearer {_default_token()}"}
    base = f"{live_server.url}/v1/projects/project-a/jobs"
    assert requests.get(base, headers=headers, timeout=30).status_code == 200
    refused = requests.post(base, json={"jobId": "x", "trainingInput": {}}, headers=headers, timeout=30)
    assert refused.status_code == 403


@pytest.mark.slow
def test_the_vertex_sdk_runs_on_default_credentials_alone(live_server, project, admin, key_file):
    from google.cloud import aiplatform

    key_file(admin)
    aiplatform.init(project="project-a", location="us-central1", api_endpoint=live_server.url, api_transport="rest")
    assert aiplatform.CustomJob.list() == []


def test_revoking_a_key_stops_the_access_tokens_it_was_exchanged_for(live_server, project, admin, key_file):
    key_file(admin)
    token = _default_token()
    url = f"{live_server.url}/v1/projects/project-a/jobs"
    assert requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code == 200
    service_keys.revoke_key(ServiceAccountKey.objects.get(user=admin))
    assert requests.get(url, headers={"Authorization": f"Bearer {token}"}, timeout=30).status_code == 401
    assert AuditEntry.objects.filter(method_name="aiconsole.TokenService.RevokeServiceAccountKey").exists()


def test_a_self_signed_jwt_is_a_bearer_token_until_its_key_is_revoked(live_server, project, admin, key_file):
    from google.oauth2 import service_account

    path = key_file(admin)
    credentials = service_account.Credentials.from_service_account_file(str(path))
    signed = credentials._make_authorization_grant_assertion().decode()  # what a client signs: iat, exp, kid
    url = f"{live_server.url}/v1/projects/project-a/jobs"
    assert requests.get(url, headers={"Authorization": f"Bearer {signed}"}, timeout=30).status_code == 200
    head, body, signature = signed.split(".")
    forged = ".".join([head, body, signature[:-4] + ("AAAA" if signature[-4:] != "AAAA" else "BBBB")])
    assert requests.get(url, headers={"Authorization": f"Bearer {forged}"}, timeout=30).status_code == 401

    service_keys.revoke_key(ServiceAccountKey.objects.get(user=admin))
    assert requests.get(url, headers={"Authorization": f"Bearer {signed}"}, timeout=30).status_code == 401
    refused = requests.post(
        f"{live_server.url}/oauth2/token",
        data={"grant_type": service_keys.GRANT_TYPE, "assertion": signed},
        timeout=30,
    )
    assert refused.status_code == 400 and refused.json()["error"] == "invalid_grant"


def test_the_token_endpoint_refuses_what_is_not_a_valid_grant(live_server, project, admin, key_file):
    key_file(admin)
    url = f"{live_server.url}/oauth2/token"
    wrong = requests.post(url, data={"grant_type": "password", "assertion": "x"}, timeout=30)
    assert wrong.status_code == 400 and wrong.json()["error"] == "unsupported_grant_type"
    junk = requests.post(url, data={"grant_type": service_keys.GRANT_TYPE, "assertion": "not.a.jwt"}, timeout=30)
    assert junk.status_code == 400 and junk.json()["error"] == "invalid_grant"
    # An assertion made for another audience, or one that lived past its hour, is refused.
    from google.auth import crypt, jwt

    key = json.loads(Path(os.environ["GOOGLE_APPLICATION_CREDENTIALS"]).read_text())
    signer = crypt.RSASigner.from_service_account_info(key)
    now = int(time.time())
    for claims in (
        {"iss": key["client_email"], "aud": "https://elsewhere.example/token", "iat": now, "exp": now + 600},
        {"iss": key["client_email"], "aud": url, "iat": now - 7300, "exp": now - 3700},
    ):
        assertion = jwt.encode(signer, claims).decode()
        answer = requests.post(url, data={"grant_type": service_keys.GRANT_TYPE, "assertion": assertion}, timeout=30)
        assert answer.status_code == 400 and answer.json()["error"] == "invalid_grant", claims


@pytest.mark.slow
def test_the_command_writes_a_private_key_file_once(tmp_path):
    from tests.helpers.console import AICONSOLE, console_env

    env = console_env(tmp_path / "data", DJANGO_SUPERUSER_PASSWORD="a-long-password-123")

    def run(*argv: str) -> subprocess.CompletedProcess:
        return subprocess.run([AICONSOLE, *argv], capture_output=True, text=True, env=env, timeout=120)

    unknown = run("credentials", "create", "nobody", "--output", str(tmp_path / "other.json"))  # migrates too
    assert unknown.returncode == 2 and "no active user named 'nobody'" in unknown.stderr
    made = run("manage", "createsuperuser", "--noinput", "--username", "keyholder", "--email", "k@example.com")
    assert made.returncode == 0, made.stderr
    output = tmp_path / "key.json"
    done = run("credentials", "create", "keyholder", "--output", str(output))
    assert done.returncode == 0, done.stderr
    assert f"export GOOGLE_APPLICATION_CREDENTIALS={output}" in done.stdout
    content = json.loads(output.read_text())
    assert content["type"] == "service_account" and content["token_uri"] == "http://127.0.0.1:8000/oauth2/token"
    assert content["client_email"] == "keyholder@default-project.iam.gserviceaccount.com"
    assert stat.S_IMODE(output.stat().st_mode) == 0o600
    again = run("credentials", "create", "keyholder", "--output", str(output))
    assert again.returncode != 0 and json.loads(output.read_text()) == content  # never over an existing file
