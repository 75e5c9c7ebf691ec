"""Live-log fixtures: stored lines, signed-in WebSocket clients, the real Redis channel layer."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import threading
import time
import uuid
from datetime import UTC, datetime, timedelta

import pytest
import pytest_asyncio
from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from jobs.models import LogLine

REDIS_HOST, REDIS_PORT = "127.0.0.1", 6379
START = datetime(2026, 11, 21, 16, 0, 0, tzinfo=UTC)


def store(job, *messages: str, task: str = "master-replica-0", severity: str = "INFO", trial: str = "",
          stream: str = "stdout") -> list[LogLine]:
    """Store lines as the log writer would (numbered after the task's last line)."""
    last = LogLine.objects.filter(job=job, task_name=task, trial_id=trial).order_by("-seq").first()
    first_seq = (last.seq if last else 0) + 1
    rows = [LogLine(job=job, task_name=task, trial_id=trial, seq=first_seq + n, stream=stream, severity=severity,
                    message=message, time=START + timedelta(milliseconds=first_seq + n))
            for n, message in enumerate(messages)]
    return LogLine.objects.bulk_create(rows)


def socket_path(job, **query) -> str:
    path = f"/ws/projects/{job.project.project_id}/jobs/{job.job_id}/logs/"
    return path + ("?" + "&".join(f"{k}={v}" for k, v in query.items()) if query else "")


def session_cookie(user) -> str:
    client = Client()
    client.force_login(user)
    return client.cookies["sessionid"].value


class LogSocket(WebsocketCommunicator):
    """A browser tab's socket: JSON frames, and waiting for what a user would see."""

    async def next(self, timeout: float = 10) -> dict:
        return json.loads(await self.receive_from(timeout))

    async def until(self, predicate, timeout: float = 30) -> list[dict]:
        """Every frame up to and including the first one the predicate accepts."""
        frames, deadline = [], time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise AssertionError(f"Timed out after {timeout}s; got {[f['type'] for f in frames]}")
            frames.append(await self.next(remaining))
            if predicate(frames[-1]):
                return frames


@pytest_asyncio.fixture
async def open_socket():
    """``await open_socket(user, path)``: a connected LogSocket (or a refused one), closed after."""
    from aiconsole.asgi import application

    opened: list[LogSocket] = []

    async def connect(user, path: str, *, origin: str = "http://testserver", host: str = "testserver",
                      refused: bool = False) -> LogSocket:
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


async def until_true(predicate, timeout: float = 30, message: str = "condition"):
    """Await a database condition (checked in a thread) without blocking the event loop."""
    deadline = time.monotonic() + timeout
    check = database_sync_to_async(predicate)
    while not (result := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(0.02)
    return result


@pytest.fixture
def long_poll_waiting(monkeypatch):
    """Set once a long-poll request sleeps on the job's group; with the database re-check pushed
    out of reach, so only a channel-layer event can wake it in time."""
    from jobs import log_api

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
    settings.CHANNEL_LAYERS = {"default": {
        "BACKEND": "channels_redis.pubsub.RedisPubSubChannelLayer",
        # A prefix of its own: other test runs may share this Redis.
        "CONFIG": {"hosts": [f"redis://{REDIS_HOST}:{REDIS_PORT}/0"], "prefix": f"aiconsole-test-{uuid.uuid4().hex}"},
    }}
    yield
