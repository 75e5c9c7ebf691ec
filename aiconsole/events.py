"""Publishing typed events to Channels groups, always after the transaction commits."""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref

from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def group_for_job(job_pk: int) -> str:
    return f"job-{job_pk}"


def group_for_project_jobs(project_pk: int) -> str:
    return f"project-{project_pk}-jobs"


# --- sending from any thread ------------------------------------------------------------------
# The in-memory channel layer is not thread-safe: executor threads hand their messages to the
# event loop that listeners run on (or a private one when nobody listens), in FIFO order.

_listening_loop: asyncio.AbstractEventLoop | None = None
_own_loop: asyncio.AbstractEventLoop | None = None
_own_loop_lock = threading.Lock()
_send_locks: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()  # loop → its FIFO lock


def listen_here() -> None:
    """Called by listeners (consumers, long-polls) from their event loop: publish there."""
    global _listening_loop
    _listening_loop = asyncio.get_running_loop()


def _private_loop() -> asyncio.AbstractEventLoop:
    global _own_loop
    with _own_loop_lock:
        if _own_loop is None:
            _own_loop = asyncio.new_event_loop()
            threading.Thread(target=_own_loop.run_forever, name="log-publisher", daemon=True).start()
        return _own_loop


def _target_loop() -> asyncio.AbstractEventLoop:
    loop = _listening_loop
    if loop is not None and loop.is_running() and not loop.is_closed():
        return loop
    return _private_loop()


async def _group_send(group: str, message: dict) -> None:
    loop = asyncio.get_running_loop()
    lock = _send_locks.setdefault(loop, asyncio.Lock())
    async with lock:  # FIFO: messages leave in the order they were published
        await get_channel_layer().group_send(group, message)


def _report_failure(future) -> None:
    if not future.cancelled() and future.exception() is not None:
        logger.warning("Could not publish live log lines: %s", future.exception())


def send_to_group(group: str, message: dict) -> None:
    """Publish from any thread without waiting; never raises into the caller."""
    if get_channel_layer() is None:
        return
    try:
        future = asyncio.run_coroutine_threadsafe(_group_send(group, message), _target_loop())
    except RuntimeError:  # the loop closed between the check and the call
        return
    future.add_done_callback(_report_failure)


def send_now(group: str, payload: dict) -> None:
    """Publish now, from any thread, without waiting."""
    send_to_group(group, payload)


def publish(group: str, payload: dict) -> None:
    """Send after commit, so listeners never see a change that was rolled back."""
    transaction.on_commit(lambda: send_now(group, payload))
