"""Stored log lines and log WebSocket clients."""

from __future__ import annotations

import asyncio
import json
import time
from datetime import UTC, datetime, timedelta

from channels.db import database_sync_to_async
from channels.testing import WebsocketCommunicator
from django.test import Client

from jobs.models import LogLine

START = datetime(2026, 11, 21, 16, 0, 0, tzinfo=UTC)


def store(
    job, *messages: str, task: str = "master-replica-0", severity: str = "INFO", trial: str = "", stream: str = "stdout"
) -> list[LogLine]:
    """Store lines as the log writer would (numbered after the task's last line)."""
    last = LogLine.objects.filter(job=job, task_name=task, trial_id=trial).order_by("-seq").first()
    first_seq = (last.seq if last else 0) + 1
    rows = [
        LogLine(
            job=job,
            task_name=task,
            trial_id=trial,
            seq=first_seq + n,
            stream=stream,
            severity=severity,
            message=message,
            time=START + timedelta(milliseconds=first_seq + n),
        )
        for n, message in enumerate(messages)
    ]
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


async def until_true(predicate, timeout: float = 30, message: str = "condition"):
    """Await a database condition (checked in a thread) without blocking the event loop."""
    deadline = time.monotonic() + timeout
    check = database_sync_to_async(predicate)
    while not (result := await check()):
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {message}")
        await asyncio.sleep(0.02)
    return result
