"""Telling whatever runs jobs that a job needs attention (a new job, a cancel request).

This module sits below the executor and the coordinator (the services call it), so it imports
neither: it knows how to reach them. An executor running in this process attaches its own wake;
otherwise, in ``aiconsole up``, a datagram wakes the worker process's executor, and in scaled
mode a Redis message wakes the coordinator, wherever it runs.
"""

from __future__ import annotations

import logging
import socket
from collections.abc import Callable

from django.conf import settings
from django.db import transaction

from aiconsole.events import relay_path

logger = logging.getLogger(__name__)

WAKE_SOCKET = "wake.sock"  # in 'aiconsole up': the worker process's, in its private folder
WAKE_CHANNEL = "aiconsole:coordinator:wake"  # scaled mode: the coordinator listens on it

_local: list[Callable[[], None]] = []  # the wake of an executor running in this process
_redis: list = []


def attach(wake: Callable[[], None]) -> None:
    """An executor started in this process: wake it directly."""
    _local[:] = [wake]


def detach() -> None:
    _local.clear()


def job_changed(job_pk: int) -> None:
    """After commit, wake whatever runs jobs."""
    transaction.on_commit(wake)


def wake() -> None:
    """Look at the queue now: here, in the worker process (a datagram, lost only when that
    process is away, and it looks every second anyway), or the coordinator (Redis)."""
    if _local:
        _local[0]()
    elif settings.EXECUTOR == "inprocess":
        path = relay_path(WAKE_SOCKET)
        if path:
            with socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM) as sender:
                try:
                    sender.sendto(b"w", path)
                except OSError:
                    pass
    else:
        _wake_coordinator()


def _wake_coordinator() -> None:
    # deferred: the Redis client is wanted only in scaled mode
    import redis

    try:
        if not _redis:
            _redis.append(redis.Redis.from_url(settings.REDIS_URL, socket_timeout=2))
        _redis[0].publish(WAKE_CHANNEL, "1")
    except Exception:
        logger.warning("Could not wake the coordinator; it will see the change on its next tick", exc_info=True)
