"""Publishing typed events to Channels groups, always after the transaction commits.

In ``aiconsole up`` the executor runs in a worker process and the viewers in the web process,
with no Redis between them: the worker forwards its messages to the web process over a Unix
socket (``forward_to`` and ``receive_forwarded``), which publishes them to its in-memory layer.
"""

from __future__ import annotations

import asyncio
import json
import logging
import os
import queue
import socket
import struct
import threading
import time
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
    forwarder = _forwarder
    if forwarder is not None:
        forwarder.put(group, message)
        return
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


# --- between the processes of 'aiconsole up' -------------------------------------------------
# The worker process's messages travel to the web process as frames on a Unix stream socket:
# the group's length and the body's (struct "!HI"), the group, the body as JSON. One socket, one
# sending thread: the web process gets them in the order they were published. Nothing waits on
# the web process: while it is away (restarting) or slow, log messages are dropped, which live
# viewers notice (each batch names the previous batch's last id) and read back from the
# database; viewers reconnect to a restarted web process and resume from their cursor anyway.

RELAY_VARIABLE = "AICONSOLE_RELAY_DIR"  # set by 'aiconsole up' for its web and worker processes
RELAY_SOCKET = "events.sock"
RELAY_QUEUE = 10_000  # messages waiting for the web process, at most
# A frame: the group's name, the message as JSON, and its "entries" (a batch of log lines, already
# JSON) as raw text beside it: embedded in the message they would be escaped by the worker and
# unescaped by the web process, megabytes a second of a flooding job (bench/abuse.py's long lines).
_FRAME_HEAD = struct.Struct("!HII")
_RECONNECT_SECONDS = 0.2

_forwarder: _Forwarder | None = None


def relay_path(name: str) -> str | None:
    """A socket in the private folder 'aiconsole up' made for its processes; None outside it."""
    folder = os.environ.get(RELAY_VARIABLE)
    return os.path.join(folder, name) if folder else None


class _Forwarder:
    def __init__(self, path: str):
        self.path = path
        self.queue: queue.Queue = queue.Queue(RELAY_QUEUE)
        self.dropped = 0
        self._socket: socket.socket | None = None
        self._next_try = 0.0
        threading.Thread(target=self._run, name="event-forwarder", daemon=True).start()

    def put(self, group: str, message: dict) -> None:
        try:
            if str(message.get("type", "")).startswith("log."):
                self.queue.put_nowait((group, message))  # a gap viewers read back
            else:
                self.queue.put((group, message), timeout=1.0)  # job states: worth a short wait
        except queue.Full:
            self.dropped += 1

    def _connected(self) -> socket.socket | None:
        if self._socket is None and time.monotonic() >= self._next_try:
            candidate = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            try:
                candidate.connect(self.path)
                self._socket = candidate
            except OSError:
                candidate.close()
                self._next_try = time.monotonic() + _RECONNECT_SECONDS
        return self._socket

    def _run(self) -> None:
        while True:
            group, message = self.queue.get()
            connection = self._connected()
            if connection is None:
                continue  # the web process is not listening (yet, or again): nobody is watching there
            raw = message.get("entries")
            if isinstance(raw, str):
                message = {key: value for key, value in message.items() if key != "entries"}
            raw_bytes = raw.encode() if isinstance(raw, str) else b""
            name, body = group.encode(), json.dumps(message, separators=(",", ":")).encode()
            try:
                connection.sendall(_FRAME_HEAD.pack(len(name), len(body), len(raw_bytes)) + name + body + raw_bytes)
            except OSError:
                connection.close()
                self._socket = None


def forward_to(path: str) -> None:
    """From now on this process's messages go to the web process listening at ``path``."""
    global _forwarder
    _forwarder = _Forwarder(path)


def _has_listeners(group: str) -> bool:
    groups = getattr(get_channel_layer(), "groups", None)  # the in-memory layer's members
    return groups is None or bool(groups.get(group))


def _receive_from(connection: socket.socket) -> None:
    with connection, connection.makefile("rb") as stream:
        while True:
            head = stream.read(_FRAME_HEAD.size)
            if len(head) < _FRAME_HEAD.size:
                return
            name_length, body_length, raw_length = _FRAME_HEAD.unpack(head)
            group = stream.read(name_length).decode()
            body = stream.read(body_length)
            raw = stream.read(raw_length)
            if len(body) < body_length or len(raw) < raw_length:
                return
            if _has_listeners(group):  # nobody here watches: not even decoded
                message = json.loads(body)
                if raw_length:
                    message["entries"] = raw.decode()
                send_to_group(group, message)


def receive_forwarded(path: str) -> None:
    """Listen at ``path`` for the worker process's messages and publish them here."""
    if os.path.exists(path):
        os.unlink(path)  # left by a web process that was killed
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(path)
    listener.listen(8)

    def accept() -> None:
        while True:
            connection, _ = listener.accept()
            threading.Thread(target=_receive_from, args=(connection,), name="event-receiver", daemon=True).start()

    threading.Thread(target=accept, name="event-listener", daemon=True).start()
