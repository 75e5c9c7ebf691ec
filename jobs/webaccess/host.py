"""The shells a replica's process offers: one listener per console process that runs replicas.

The executor (embedded mode) or a worker (scaled mode) *offers* each replica of a job submitted
with ``enableWebAccess`` once it runs (``offer``): how to start a shell into it (the replica's own
``ReplicaProcess.shell``: its account, working folder and environment, or ``exec`` into its
container) and whether it still runs. The web process connects to the listener (its port is on the
replica's row), shows a token only the console can sign (``protocol``) and gets a shell on a
terminal of its own (a pty), which lives as long as the connection and never longer than the
replica: once it ends (or a failed replica's hold runs out), its shells end with it.

Bounds: ``MAX_SHELLS`` shells at once in this process, ``SHELLS_PER_REPLICA`` per replica, and a
connection that has not shown a good token within ``HANDSHAKE_SECONDS`` is dropped.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import logging
import os
import pty
import select
import signal
import socket
import struct
import subprocess
import termios
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from django.core import signing

from jobs.validation.names import hold_minutes
from jobs.webaccess import protocol

logger = logging.getLogger(__name__)

MAX_SHELLS = 32
SHELLS_PER_REPLICA = 4
HANDSHAKE_SECONDS = 10.0
HANDSHAKES = 16  # connections still to show their token at once; more are closed at once
WATCH_SECONDS = 0.5  # how often the offers are checked for a replica that ended
DECIDE_SECONDS = 60.0  # a replica that may be held waits this long, once ended, for its owner to say whether it is
END_SECONDS = 3.0  # a shell told to end and still holding its terminal this long is cut off
REMEMBERED_SESSIONS = 4096  # tokens already used, so none is used twice
EMBEDDED = "127.0.0.1"  # where embedded mode's shells are offered: its replicas' own address


@dataclass
class Offer:
    """A replica shells may be opened into: ``shell()`` says how (argv, folder, environment) and
    ``running()`` whether it still runs; a failed replica is held open until ``held_until``.

    One whose job asked to hold a failed replica (``may_hold``) stays open once it ends until the
    process that runs it has said whether it is held (``hold`` or ``release``), at most
    ``DECIDE_SECONDS``: noticing its end here first must neither end its shells nor lose the hold."""

    replica_pk: int
    label: str
    shell: Callable[[], tuple[list[str], Path, dict[str, str]]]
    running: Callable[[], bool]
    may_hold: bool = False
    held_until: float | None = None  # time.monotonic(); None while whether it is held is not said
    ended_at: float | None = None  # when it was first seen ended, still undecided
    shells: set[Shell] = field(default_factory=set)

    def is_open(self) -> bool:
        now = time.monotonic()
        if self.running():
            return True
        if self.held_until is not None or not self.may_hold:
            return self.held_until is not None and now < self.held_until
        if self.ended_at is None:
            self.ended_at = now
        return now - self.ended_at < DECIDE_SECONDS


class Shell:
    """One shell: its pty, its process and the connection it answers."""

    def __init__(self, connection: socket.socket, offer: Offer, rows: int, cols: int, lock: threading.Lock):
        self.connection, self.offer, self.lock = connection, offer, lock
        self.size = (rows, cols)
        self.master = -1
        self.process: subprocess.Popen | None = None
        self.reason = ""
        self._send_lock = threading.Lock()
        self._ended = threading.Event()
        self._cut = threading.Event()  # stop reading the terminal: something outside still holds it

    def spawn(self) -> None:
        """Start the shell on a terminal of its own; ``pump`` once the connection was told."""
        argv, cwd, env = self.offer.shell()
        master, slave = pty.openpty()
        try:
            _set_size(master, *self.size)
            self.process = subprocess.Popen(
                argv,
                stdin=slave,
                stdout=slave,
                stderr=slave,
                cwd=cwd,
                env={**env, "TERM": "xterm-256color"},
                start_new_session=True,
                close_fds=True,
            )
        except BaseException:
            os.close(master)
            raise
        finally:
            os.close(slave)
        self.master = master

    def pump(self) -> None:
        threading.Thread(target=self._output, daemon=True, name=f"shell-{self.offer.label}-out").start()
        threading.Thread(target=self._input, daemon=True, name=f"shell-{self.offer.label}-in").start()

    def _send(self, data: bytes) -> bool:
        with self._send_lock:
            try:
                self.connection.sendall(data)
                return True
            except OSError:
                return False

    def _output(self) -> None:
        """The terminal's output to the connection, until nothing holds the terminal any more."""
        while not self._cut.is_set():
            if not select.select([self.master], [], [], WATCH_SECONDS)[0]:
                continue
            try:
                chunk = os.read(self.master, protocol.FRAME_BYTES)
            except OSError:  # EIO: every process on the terminal is gone
                break
            if not chunk or not self._send(protocol.frame(protocol.OUTPUT, chunk)):
                break
        code = None
        if self.process is not None:
            with contextlib.suppress(subprocess.TimeoutExpired):
                code = self.process.wait(timeout=END_SECONDS)
        self._send(protocol.exit_frame(self.reason or _ending(code)))
        self._close()

    def _input(self) -> None:
        """The connection's frames to the terminal, until it closes."""
        try:
            while True:
                header = _read_exact(self.connection, protocol.HEADER.size)
                kind, length = protocol.HEADER.unpack(header)
                if length > protocol.FRAME_BYTES:
                    break
                payload = _read_exact(self.connection, length)
                if kind == protocol.INPUT:
                    _write_all(self.master, payload)
                elif kind == protocol.RESIZE:
                    rows, _, cols = payload.decode("ascii", "replace").partition(",")
                    _set_size(self.master, *protocol.size(rows, cols))
        except (OSError, EOFError, struct.error):
            pass
        self.end("The browser closed the shell.")

    def end(self, reason: str) -> None:
        """Stop the shell: SIGTERM to what started it (a package's reaper stops every process the
        shell started, SIGKILL after a second; a container's ``exec`` client), SIGKILL after
        ``END_SECONDS``; the connection is told why."""
        if self.reason or self.process is None:
            return
        self.reason = reason
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGTERM)
        timer = threading.Timer(END_SECONDS, self._cut_off)
        timer.daemon = True
        timer.start()

    def _cut_off(self) -> None:
        """Still not gone: kill it, and stop waiting for whatever still holds the terminal."""
        if not self._ended.is_set() and self.process is not None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self._cut.set()

    def _close(self) -> None:
        self._ended.set()
        with contextlib.suppress(OSError):
            self.connection.shutdown(socket.SHUT_RDWR)
        self.connection.close()
        if self.master >= 0:
            os.close(self.master)
            self.master = -1
        with self.lock:
            self.offer.shells.discard(self)


class ShellHost:
    """The listener on ``address``: a port of this host, for the web process and nothing else."""

    def __init__(self, address: str):
        self.server = socket.create_server((address, 0))
        self.port = self.server.getsockname()[1]
        self.offers: dict[int, Offer] = {}
        self.used: OrderedDict[int, None] = OrderedDict()
        self.lock = threading.Lock()
        self.closed = threading.Event()
        self.handshakes = threading.BoundedSemaphore(HANDSHAKES)
        threading.Thread(target=self._accept, daemon=True, name="shell-host").start()
        threading.Thread(target=self._watch, daemon=True, name="shell-host-watch").start()

    def offer(self, offer: Offer) -> int:
        with self.lock:
            self.offers[offer.replica_pk] = offer
        return self.port

    def hold(self, replica_pk: int, seconds: float) -> bool:
        """Keep a failed replica's shells open for ``seconds`` more; whether it is still offered."""
        with self.lock:
            offer = self.offers.get(replica_pk)
            if offer is not None:
                offer.held_until = time.monotonic() + seconds
            return offer is not None

    def release(self, replica_pk: int) -> None:
        """It is not held (or no longer): once it has ended, its shells end with it."""
        self.hold(replica_pk, 0)

    def withdraw(self, replica_pk: int, reason: str) -> None:
        with self.lock:
            offer = self.offers.pop(replica_pk, None)
            shells = list(offer.shells) if offer is not None else []
        for shell in shells:
            shell.end(reason)

    def close(self) -> None:
        self.closed.set()
        self.server.close()
        for replica_pk, offer in list(self.offers.items()):
            self.withdraw(replica_pk, f"{offer.label}'s console process stopped.")

    def _watch(self) -> None:
        while not self.closed.wait(WATCH_SECONDS):
            with self.lock:
                ended = [offer for offer in self.offers.values() if not _is_open(offer)]
            for offer in ended:
                self.withdraw(offer.replica_pk, f"{offer.label} has ended; its shell ends with it.")

    def _accept(self) -> None:
        while not self.closed.is_set():
            try:
                connection, _ = self.server.accept()
            except OSError:
                if self.closed.is_set():
                    return
                time.sleep(0.1)  # out of descriptors: a moment, then go on
                continue
            if not self.handshakes.acquire(blocking=False):  # a flood of connections: none waits
                connection.close()
                continue
            threading.Thread(target=self._admit, args=(connection,), daemon=True, name="shell-admit").start()

    def _admit(self, connection: socket.socket) -> None:
        """Read the token and the size, start the shell or say why not."""
        try:
            connection.settimeout(HANDSHAKE_SECONDS)
            request = json.loads(_read_line(connection))
            token = protocol.admit(str(request.get("token", "")))
            rows, cols = protocol.size(request.get("rows"), request.get("cols"))
            connection.settimeout(None)
        except (OSError, ValueError, AttributeError, signing.BadSignature):
            connection.close()  # not the web process, or too slow: nothing to say
            return
        finally:
            self.handshakes.release()
        shell, refusal = self._take(connection, token, rows, cols)
        if shell is None:
            _answer(connection, {"error": refusal})
            connection.close()
            return
        try:
            shell.spawn()
        except OSError as error:
            with self.lock:
                shell.offer.shells.discard(shell)
            _answer(connection, {"error": f"The shell could not start: {error.strerror or error}"})
            connection.close()
            return
        _answer(connection, {"ok": True})
        shell.pump()

    def _take(self, connection: socket.socket, token: dict, rows: int, cols: int) -> tuple[Shell | None, str]:
        with self.lock:
            if token["session"] in self.used:
                return None, "This shell's token was used already; open it again."
            self.used[token["session"]] = None
            while len(self.used) > REMEMBERED_SESSIONS:
                self.used.popitem(last=False)
            offer = self.offers.get(token["replica"])
            if offer is None or not _is_open(offer):
                return None, "The replica runs no more here; its shell ended with it."
            if len(offer.shells) >= SHELLS_PER_REPLICA:
                return None, f"{offer.label} has {SHELLS_PER_REPLICA} shells open already; close one first."
            if sum(len(o.shells) for o in self.offers.values()) >= MAX_SHELLS:
                return None, f"This console process has {MAX_SHELLS} shells open already; close one first."
            shell = Shell(connection, offer, rows, cols, self.lock)
            offer.shells.add(shell)
        return shell, ""


def _is_open(offer: Offer) -> bool:
    try:
        return offer.is_open()
    except Exception:  # a process object that cannot say: it is not running
        logger.exception("Could not tell whether %s still runs", offer.label)
        return False


_HOST_LOCK = threading.Lock()
_hosts: dict[str, ShellHost] = {}


def host_for(address: str) -> ShellHost:
    """This process's listener on ``address``, started on first use."""
    with _HOST_LOCK:
        host = _hosts.get(address)
        if host is None or host.closed.is_set():
            host = _hosts[address] = ShellHost(address)
        return host


def release(address: str, replica_pk: int) -> None:
    """``ShellHost.release`` on this process's listener on ``address``, if it has one."""
    with _HOST_LOCK:
        host = _hosts.get(address)
    if host is not None:
        host.release(replica_pk)


def offer_replica(process, *, training_input: dict, labels: dict | None, address: str = EMBEDDED) -> int | None:
    """A replica that has just started (a ``ReplicaProcess``) of a job submitted with
    ``enableWebAccess``: shells into it offered on ``address``; the port to record on its row (None
    without web access, or when it did not start). ``labels``: those that ask to hold it if it
    fails (its job's; None where it is never held), so its end waits for ``hold`` or ``release``."""
    if not training_input.get("enableWebAccess") or process.popen is None:
        return None
    may_hold = bool(hold_minutes(labels)) and process.holds_for_shell

    def running() -> bool:
        return process.poll() is None

    return host_for(address).offer(Offer(process.replica_id, process.label, process.shell, running, may_hold))


def close_all() -> None:
    with _HOST_LOCK:
        hosts = list(_hosts.values())
        _hosts.clear()
    for host in hosts:
        host.close()


def _set_size(fd: int, rows: int, cols: int) -> None:
    with contextlib.suppress(OSError):
        fcntl.ioctl(fd, termios.TIOCSWINSZ, struct.pack("HHHH", rows, cols, 0, 0))


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        written = os.write(fd, view)
        view = view[written:]


def _read_exact(connection: socket.socket, count: int) -> bytes:
    parts, wanted = [], count
    while wanted:
        chunk = connection.recv(min(wanted, protocol.FRAME_BYTES))
        if not chunk:
            raise EOFError
        parts.append(chunk)
        wanted -= len(chunk)
    return b"".join(parts)


def _read_line(connection: socket.socket) -> bytes:
    line = bytearray()
    while not line.endswith(b"\n"):
        chunk = connection.recv(1)
        if not chunk or len(line) >= protocol.HANDSHAKE_BYTES:
            raise ValueError("no handshake")
        line += chunk
    return bytes(line)


def _answer(connection: socket.socket, answer: dict) -> None:
    with contextlib.suppress(OSError):
        connection.sendall(json.dumps(answer).encode() + b"\n")


def _ending(code: int | None) -> str:
    if code is None:
        return "The shell ended."
    if code < 0:
        return f"The shell was stopped by {signal.Signals(-code).name}."
    return f"The shell exited with status {code}."
