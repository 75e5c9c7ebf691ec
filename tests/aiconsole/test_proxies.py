"""The client's address behind a reverse proxy. X-Forwarded-For is believed only
from AICONSOLE_TRUSTED_PROXIES; sign-in throttling and the audit log key on what it says there,
and on the real peer when an untrusted caller sends the header to dodge them."""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
from http.cookies import SimpleCookie
from urllib.parse import urlencode

import pytest

from aiconsole import signin
from aiconsole.proxies import TrustedProxyMiddleware, client_address, parse_networks
from tests.helpers.identity import entries

PROXIES = parse_networks(["10.1.0.0/24", "192.0.2.1", "2001:db8::/32"])


@pytest.mark.parametrize(
    ("peer", "forwarded", "client"),
    [
        ("10.1.0.5", "203.0.113.7", "203.0.113.7"),  # one trusted proxy
        ("10.1.0.5", "198.51.100.1, 203.0.113.7", "203.0.113.7"),  # the client wrote the first entry itself
        ("10.1.0.5", "203.0.113.7, 192.0.2.1", "203.0.113.7"),  # two proxies of ours
        ("10.1.0.5", "", "10.1.0.5"),  # the proxy's own request
        ("198.51.100.9", "203.0.113.7", "198.51.100.9"),  # not a proxy of ours: the header is ignored
        ("10.1.0.5", "unknown", "10.1.0.5"),  # the proxy could not say
        ("10.1.0.5", "203.0.113.7, garbage, 192.0.2.1", "192.0.2.1"),
        ("2001:db8::5", "[2001:db9::7]:443, 2001:0db8::9", "2001:db9::7"),
        ("2001:db8::5", "2001:db9::7", "2001:db9::7"),
        ("::ffff:10.1.0.5", "203.0.113.7", "203.0.113.7"),  # IPv4 on an IPv6 socket
    ],
)
def test_the_client_is_the_first_address_from_the_right_that_is_not_a_trusted_proxy(peer, forwarded, client):
    assert client_address(peer, forwarded, PROXIES) == client


def test_no_proxy_is_trusted_unless_named():
    assert client_address("127.0.0.1", "203.0.113.7", ()) == "127.0.0.1"


def test_a_malformed_setting_is_refused_at_start(tmp_path):
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    env.update({"AICONSOLE_DATA_DIR": str(tmp_path), "AICONSOLE_TRUSTED_PROXIES": "10.0.0.1,proxy.internal"})
    result = subprocess.run(
        [sys.executable, "manage.py", "check"], capture_output=True, text=True, env=env, timeout=120
    )
    assert result.returncode != 0
    assert "AICONSOLE_TRUSTED_PROXIES: 'proxy.internal' is not an IP address or network" in result.stderr


# --- through the application ----------------------------------------------------------------------


class Browser:
    """Sign-in through the ASGI application as uvicorn hands requests over, from ``peer`` with the
    headers a proxy adds; the CSRF cookie and token as a browser carries them."""

    def __init__(self, app, peer: str):
        self.app, self.peer, self.cookies = app, peer, {}

    async def request(self, method: str, path: str, body: bytes = b"", headers: dict | None = None) -> tuple:
        header_list = [(b"host", b"testserver")]
        header_list += [(k.encode(), v.encode()) for k, v in (headers or {}).items()]
        if self.cookies:
            header_list.append((b"cookie", "; ".join(f"{k}={v}" for k, v in self.cookies.items()).encode()))
        scope = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": b"",
            "headers": header_list,
            "root_path": "",
            "client": (self.peer, 40000),
            "server": ("testserver", 80),
        }
        sent: list[dict] = []
        done = asyncio.Event()

        async def receive():
            if not done.is_set():
                done.set()
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()

        async def send(message):
            sent.append(message)

        await self.app(scope, receive, send)
        start = next(m for m in sent if m["type"] == "http.response.start")
        for name, value in start["headers"]:
            if name.lower() == b"set-cookie":
                cookie = SimpleCookie(value.decode())
                self.cookies.update({key: morsel.value for key, morsel in cookie.items()})
        return start["status"], b"".join(m.get("body", b"") for m in sent if m["type"] == "http.response.body")

    def sign_in(self, username: str, password: str, forwarded_for: str | None = None) -> int:
        headers = {"x-forwarded-for": forwarded_for} if forwarded_for else {}

        async def both():
            _, page = await self.request("GET", "/login/", headers=headers)
            token = re.search(rb'name="csrfmiddlewaretoken" value="([^"]+)"', page).group(1).decode()
            form = urlencode({"username": username, "password": password, "csrfmiddlewaretoken": token})
            status, _ = await self.request(
                "POST", "/login/", form.encode(), {**headers, "content-type": "application/x-www-form-urlencoded"}
            )
            return status

        return asyncio.run(both())


@pytest.fixture
def app(settings):
    from django.core.asgi import get_asgi_application

    settings.TRUSTED_PROXIES = ["10.1.0.0/24"]
    return TrustedProxyMiddleware(get_asgi_application())


@pytest.mark.django_db(transaction=True)  # the application's views run on their own connection
def test_through_a_trusted_proxy_each_client_is_throttled_and_audited_on_its_own_address(app, admin):
    proxy = Browser(app, "10.1.0.5")
    for _ in range(4):
        assert proxy.sign_in("alice_admin", "wrong", forwarded_for="203.0.113.7") == 200
    assert proxy.sign_in("alice_admin", "wrong", forwarded_for="203.0.113.7") == 429
    assert proxy.sign_in("alice_admin", "pw-alice_admin", forwarded_for="203.0.113.7") == 429
    # Another client behind the same proxy signs in: the proxy's address is not what was locked.
    assert Browser(app, "10.1.0.5").sign_in("alice_admin", "pw-alice_admin", forwarded_for="203.0.113.8") == 302
    assert {e.caller_ip for e in entries(signin.LOGIN)} == {"203.0.113.7"}
    [lockout] = entries(signin.LOCK_OUT)
    assert lockout.caller_ip == "203.0.113.7" and "from this address" in lockout.status_message


@pytest.mark.django_db(transaction=True)
def test_a_forwarded_header_from_an_untrusted_caller_is_ignored(app, admin):
    """Naming a new address in each request does not dodge the throttle: the peer is counted."""
    caller = Browser(app, "198.51.100.9")
    for number in range(4):
        assert caller.sign_in("alice_admin", "wrong", forwarded_for=f"203.0.113.{number}") == 200
    assert caller.sign_in("alice_admin", "wrong", forwarded_for="203.0.113.50") == 429
    assert caller.sign_in("alice_admin", "pw-alice_admin", forwarded_for="203.0.113.51") == 429
    assert {e.caller_ip for e in entries(signin.LOGIN)} == {"198.51.100.9"}
