"""Live-log fixtures: stored lines, signed-in WebSocket clients, the real Redis channel layer."""

from __future__ import annotations

import json
import os
import socket
import threading
import uuid

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async

from aiconsole.tokens import create_token
from tests.helpers.logs import LogSocket, session_cookie

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379


@pytest_asyncio.fixture
async def open_socket():
    """``await open_socket(user, path)``: a connected LogSocket (or a refused one), closed after."""
    from console.asgi import application

    opened: list[LogSocket] = []

    async def connect(
        user, path: str, *, origin: str = "http://testserver", host: str = "testserver", refused: bool = False
    ) -> LogSocket:
        headers = [(b"host", host.encode())]
        if origin:
            headers.append((b"origin", origin.encode()))
        if user is not None:
            cookie = await database_sync_to_async(session_cookie)(user)
            headers.append((b"cookie", f"sessionid={cookie}".encode()))
        communicator = LogSocket(application, path, headers=headers)
        connected, _ = await communicator.connect(timeout=10)
        assert connected is not refused, "the handshake was refused" if connected is False else "it was accepted"
        opened.append(communicator)
        return communicator

    yield connect
    for communicator in opened:
        await communicator.disconnect()


@pytest.fixture
def long_poll_waiting(monkeypatch):
    """Set once a long-poll request sleeps on the job's group; with the database re-check pushed
    out of reach, so only a channel-layer event can wake it in time."""
    from jobs.logs import api as log_api

    waiting = threading.Event()
    original = log_api.JobListener.next_event

    async def next_event(self, timeout):
        waiting.set()
        await original(self, timeout)

    monkeypatch.setattr(log_api, "RECHECK_SECONDS", 60)
    monkeypatch.setattr(log_api.JobListener, "next_event", next_event)
    return waiting


def _redis_running() -> bool:
    try:
        socket.create_connection((REDIS_HOST, REDIS_PORT), timeout=1).close()
        return True
    except OSError:
        return False


@pytest.fixture
def redis_layer(settings):
    """The scaled mode's channel layer on the real Redis (required, not skipped, in CI)."""
    if not _redis_running():
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail(f"Redis must run at {REDIS_HOST}:{REDIS_PORT} in CI for the scaled-mode tests")
        pytest.skip(f"no Redis at {REDIS_HOST}:{REDIS_PORT}")
    settings.CHANNEL_LAYERS = {
        "default": {
            "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
            # A prefix of its own: other test runs may share this Redis.
            "CONFIG": {
                "hosts": [f"redis://{REDIS_HOST}:{REDIS_PORT}/0"],
                "prefix": f"aiconsole-test-{uuid.uuid4().hex}",
            },
        }
    }
    yield


@pytest.fixture
def api(client, admin):
    """Call the REST API as the admin with a bearer token: ``status, body = api("GET", path)``."""
    _, raw = create_token(admin)

    def call(method: str, path: str, body=None, **extra):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}", **extra}
        if body is not None:
            kwargs.update(
                data=json.dumps(body) if not isinstance(body, bytes) else body,
                content_type=extra.pop("content_type", "application/json"),
            )
        response = getattr(client, method.lower())(path, **kwargs)
        return response.status_code, (response.json() if response.content else None)

    return call


@pytest.fixture
def api_as(client):
    """Call the REST API as any user with a bearer token: ``status, body = api_as(user, "GET", path)``."""

    def call(user, method: str, path: str, body=None):
        _, raw = create_token(user)
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        response = getattr(client, method.lower())(path, **kwargs)
        return response.status_code, (response.json() if response.content else None)

    return call
