"""Sign-in throttling locks accounts, never addresses. Failures for one user from
one address refuse that user there; failures for one user from any addresses refuse that user
everywhere; failures for other names never refuse anyone. Both limits and the cool-off are
settings, the API tokens and the profile page are not locked by others' failures, and behind a
trusted proxy a real ``aiconsole up`` throttles each client on its own address."""

from __future__ import annotations

import http.client
import re
from datetime import timedelta
from http.cookies import SimpleCookie
from urllib.parse import urlencode

import pytest
from axes.models import AccessAttempt
from django.utils import timezone

from aiconsole import signin
from tests.helpers.console import Server
from tests.helpers.identity import bearer, entries


def _sign_in(client, username: str, password: str, address: str):
    return client.post("/login/", {"username": username, "password": password}, REMOTE_ADDR=address)


def test_failures_for_one_user_from_several_addresses_lock_the_account_everywhere(client, admin):
    for _ in range(5):
        _sign_in(client, "alice_admin", "wrong", "10.0.0.1")  # locks alice at 10.0.0.1 only
    for _ in range(4):
        assert _sign_in(client, "alice_admin", "wrong", "10.0.0.2").status_code == 200
    assert _sign_in(client, "alice_admin", "pw-alice_admin", "10.0.0.3").status_code == 302  # 9 of 10
    client.logout()
    assert _sign_in(client, "alice_admin", "wrong", "10.0.0.2").status_code == 429  # the tenth
    response = _sign_in(client, "alice_admin", "pw-alice_admin", "10.0.0.4")
    assert response.status_code == 429
    assert "Too many failed sign-ins for this user. Try again in 15 minutes" in response.content.decode()
    reasons = [e.status_message for e in entries(signin.LOCK_OUT)]
    assert reasons == [
        "Locked out for 15 minutes after 5 failed sign-ins from this address.",
        "Locked out for 15 minutes after 10 failed sign-ins from any address.",
    ]
    assert len(entries(signin.LOGIN)) == 10  # each counted failure, never the refused ones


def test_both_limits_and_the_cool_off_are_settings(client, admin, settings):
    settings.AXES_FAILURE_LIMIT = 2
    settings.LOGIN_ACCOUNT_FAILURE_LIMIT = 3
    settings.AXES_COOLOFF_TIME = timedelta(minutes=5)
    assert _sign_in(client, "alice_admin", "wrong", "10.0.0.1").status_code == 200
    assert _sign_in(client, "alice_admin", "wrong", "10.0.0.1").status_code == 429
    assert _sign_in(client, "alice_admin", "pw-alice_admin", "10.0.0.2").status_code == 302
    client.logout()
    assert _sign_in(client, "alice_admin", "wrong", "10.0.0.2").status_code == 429
    assert "Try again in 5 minutes" in _sign_in(client, "alice_admin", "pw-alice_admin", "10.0.0.3").content.decode()
    AccessAttempt.objects.update(attempt_time=timezone.now() - timedelta(minutes=6))
    assert _sign_in(client, "alice_admin", "pw-alice_admin", "10.0.0.1").status_code == 302


def test_others_failures_leave_a_users_token_and_profile_password_change_alone(client, developer, project):
    for number in range(30):
        _sign_in(client, f"guess{number % 6}" if number % 3 else "alice_admin", "wrong", "10.0.0.9")
    assert client.get("/v1/projects/project-a/jobs", REMOTE_ADDR="10.0.0.9", **bearer(developer)).status_code == 200
    assert _sign_in(client, "dave_dev", "pw-dave_dev", "10.0.0.9").status_code == 302
    new = "a-brand-new-horse-7"
    response = client.post(
        "/profile/password/",
        {"current_password": "pw-dave_dev", "new_password": new, "confirm_password": new},
        REMOTE_ADDR="10.0.0.9",
    )
    assert response.status_code == 302
    developer.refresh_from_db()
    assert developer.check_password(new)


# --- a real console behind a proxy -----------------------------------------------------------------

PROXY = "127.0.0.2"  # loopback: this host's second address, the one the console trusts
PASSWORD = "the-admins-own-pass-1"


def _live_sign_in(server: Server, username: str, password: str, *, source: str, forwarded_for: str) -> int:
    """One browser's sign-in over HTTP from ``source``, with the header a proxy adds."""

    def call(method: str, body: str = "", cookie: str = "") -> tuple[int, str, list[str]]:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=30, source_address=(source, 0))
        headers = {"X-Forwarded-For": forwarded_for, "Cookie": cookie}
        if body:
            headers["Content-Type"] = "application/x-www-form-urlencoded"
        try:
            connection.request(method, "/login/", body=body or None, headers=headers)
            answer = connection.getresponse()
            return answer.status, answer.read().decode(), answer.headers.get_all("Set-Cookie") or []
        finally:
            connection.close()

    _, page, cookies = call("GET")
    csrf = SimpleCookie("; ".join(cookies))["csrftoken"].value
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1)
    form = urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
    status, _, _ = call("POST", form, f"csrftoken={csrf}")
    return status


@pytest.fixture
def behind_a_proxy(tmp_path):
    server = Server(tmp_path / "data", AICONSOLE_ADMIN_PASSWORD=PASSWORD, AICONSOLE_TRUSTED_PROXIES=PROXY)
    try:
        yield server
    finally:
        server.stop()


@pytest.mark.slow
def test_a_console_behind_a_trusted_proxy_throttles_each_client_and_ignores_a_spoofed_header(behind_a_proxy):
    server = behind_a_proxy
    # Through the proxy: one client's failures lock the admin out of that client's address only.
    for _ in range(4):
        assert _live_sign_in(server, "admin", "wrong", source=PROXY, forwarded_for="203.0.113.7") == 200
    assert _live_sign_in(server, "admin", "wrong", source=PROXY, forwarded_for="203.0.113.7") == 429
    assert _live_sign_in(server, "admin", PASSWORD, source=PROXY, forwarded_for="203.0.113.7") == 429
    assert _live_sign_in(server, "admin", PASSWORD, source=PROXY, forwarded_for="203.0.113.8") == 302

    # Not through the proxy: a header naming a new address each time is ignored, the caller is counted.
    for number in range(4):
        assert _live_sign_in(server, "ghost", "wrong", source="127.0.0.1", forwarded_for=f"198.51.100.{number}") == 200
    assert _live_sign_in(server, "ghost", "wrong", source="127.0.0.1", forwarded_for="198.51.100.50") == 429

    # And the made-up name's lockout at that address refuses nobody else there.
    assert _live_sign_in(server, "admin", PASSWORD, source="127.0.0.1", forwarded_for="198.51.100.51") == 302
