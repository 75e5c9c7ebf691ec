"""TensorBoard processes, one per job dir (or trial dir), kept by the console process that serves them.

A board is started by the first request for it and stopped by :class:`Boards`' watcher thread once
no request has reached it for ``settings.TENSORBOARD_IDLE_SECONDS``. At most
``settings.TENSORBOARD_MAX`` run at once: a new one stops the board idle the longest, or, when every
board is serving a request at that moment, the board of the user holding the most boards, when
that is at least two more than the asking user holds (so one user cannot keep every slot by
holding requests open: their request is cut, and they keep the rest); else it is refused with
:class:`Busy` (the page says so, 503).

Boards die with the console process: each reaper is started from one long-lived spawner thread
with ``PR_SET_PDEATHSIG`` (which fires when the *thread* that forked it ends, hence not from a
request's thread), so a console killed with SIGKILL leaves no TensorBoard behind.

TensorBoard runs under the executor's reaper (``jobs/executor/reaper.py``), in its own session, as
the trainer user when trainers run as one (it reads the event files trainers wrote), with the
trainers' environment: the ``TRAINER_ENV_PASSTHROUGH`` variables, so ``gs://`` job dirs are read
with the trainers' credentials (or ``STORAGE_EMULATOR_HOST``). It listens on a free port of
127.0.0.1 (``--port 0``; the port is read from the line TensorBoard prints) with ``--path_prefix``
set to the URL the console serves it under, so its own links work through the proxy.
"""

from __future__ import annotations

import atexit
import ctypes
import itertools
import logging
import os
import re
import secrets
import shutil
import signal
import subprocess
import threading
import time
from collections import Counter, deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, TYPE_CHECKING

from django.conf import settings

from aiconsole import trainer_user
from jobs.executor.replicas import REAPER_MARGIN_SECONDS, reaped

if TYPE_CHECKING:
    from aiconsole.models import Project

logger = logging.getLogger(__name__)

LISTENING = re.compile(r"TensorBoard \S+ at http://127\.0\.0\.1:(\d+)/")
LOST_REQUEST_SECONDS = 600.0
MARKER = "AICONSOLE_TENSORBOARD"  # in the process's environment: which board it serves
GUARDED = Path(__file__).with_name("guarded.py")
_PR_SET_PDEATHSIG = 1
# One thread forks every board's reaper, and never ends while the process runs: the death signal
# is tied to the forking thread, and a request's thread may come and go.
_SPAWNER = ThreadPoolExecutor(max_workers=1, thread_name_prefix="tensorboard-spawner")


def _die_with_console() -> None:
    """In the reaper before exec: SIGKILL when the console process is gone; the reaper's own
    child, TensorBoard, dies with the reaper in turn."""
    ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


class BoardError(Exception):
    """TensorBoard could not be started or stopped answering; the message is shown on the page."""


class Busy(BoardError):
    """As many boards as allowed run, and each is serving a request."""


_SERIALS = itertools.count(1)


@dataclass(eq=False)
class Board:
    """One TensorBoard process and what the console knows of it."""

    key: str
    logdir: str
    prefix: str
    project: Project | None = None  # whose account it runs as (aiconsole.trainer_user); its job's project
    port: int = 0
    popen: subprocess.Popen | None = None
    error: str = ""
    active: int = 0  # requests being served through it now
    holders: Counter = field(default_factory=Counter)  # whose they are: user → requests
    last_used: float = field(default_factory=time.monotonic)
    ready: threading.Event = field(default_factory=threading.Event)
    output: deque = field(default_factory=lambda: deque(maxlen=40))
    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))  # what the proxy shows it (guarded.py)
    serial: int = field(default_factory=lambda: next(_SERIALS))  # tells apart boards of one key

    @property
    def alive(self) -> bool:
        return self.popen is not None and self.popen.poll() is None

    @property
    def home(self) -> Path:
        """Its HOME and working folder, removed when it stops: one per board, not per key, so that
        a board stopping in the background (idle, or replaced) never removes the folder of the
        board started for the same job meanwhile."""
        folder = re.sub(r"[^A-Za-z0-9_.-]", "_", self.key) + f"-{self.serial}"
        if self.project is None:
            return settings.WORK_DIR / "tensorboard" / folder
        return settings.WORK_DIR / self.project.project_id / ".tensorboard" / folder  # no job id starts with "."

    def start(self, python: Path) -> None:
        """Start TensorBoard and wait until it listens (``TENSORBOARD_START_SECONDS`` at most)."""
        shutil.rmtree(self.home, ignore_errors=True)
        self.home.mkdir(parents=True)
        user = trainer_user.for_project(self.project) if self.project is not None else None
        if user is not None:
            user.hand_over(self.home)
        command = [
            str(python),
            "-c",  # its source, not its path: the account may not reach the console's install
            GUARDED.read_text(),  # answers the console's proxy only (the token it sends)
            "--logdir",
            self.logdir,
            "--host",
            "127.0.0.1",
            "--port",
            "0",
            "--path_prefix",
            self.prefix,
            "--load_fast",
            "false",
            "--window_title",
            f"TensorBoard: {self.key}",
        ]
        listening = threading.Event()
        self.popen = _SPAWNER.submit(
            subprocess.Popen,
            reaped(command, settings.STOP_GRACE_SECONDS, user.reaper_option() if user else []),
            cwd=self.home,
            env=self._environment(python),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,  # its own session: stopping it signals nothing else
            preexec_fn=_die_with_console,
        ).result()
        threading.Thread(
            target=self._read_output,
            args=(self.popen.stdout, listening),
            daemon=True,
            name=f"tensorboard-{self.key}",
        ).start()
        deadline = time.monotonic() + settings.TENSORBOARD_START_SECONDS
        while not listening.wait(0.05):
            if self.popen.poll() is not None or time.monotonic() > deadline:
                self.stop()
                said = "\n".join(list(self.output)[-15:])
                raise BoardError(
                    f"TensorBoard did not start within {settings.TENSORBOARD_START_SECONDS:g} "
                    f"seconds (AICONSOLE_TENSORBOARD_START_SECONDS).\n{said}".strip()
                )

    def _environment(self, python: Path) -> dict[str, str]:
        # deferred: the executor's environments load only when a board starts
        from jobs.executor.preparing import passthrough_env

        env = passthrough_env()
        env.update(
            {
                "PATH": f"{python.parent}{os.pathsep}{os.defpath}",
                "HOME": str(self.home),
                "TMPDIR": str(self.home),
                "PYTHONUNBUFFERED": "1",
                MARKER: self.key,
                "TENSORBOARD_GUARD_TOKEN": self.token,
            }
        )
        if "STORAGE_EMULATOR_HOST" in env and "GOOGLE_APPLICATION_CREDENTIALS" not in env:
            env["FSSPEC_GS_TOKEN"] = "anon"  # gcsfs, as the console's client: no credentials for the emulator
        return env

    def _read_output(self, stdout: IO[bytes], listening: threading.Event) -> None:
        for raw in stdout:
            line = raw.decode(errors="replace").rstrip()
            self.output.append(line)
            match = LISTENING.search(line)
            if match and not listening.is_set():
                self.port = int(match.group(1))
                listening.set()
        stdout.close()

    def stop(self) -> None:
        """SIGTERM TensorBoard (through its reaper), SIGKILL after the stop grace period."""
        if self.popen is None:
            return
        if self.popen.poll() is None:
            _kill_group(self.popen.pid, signal.SIGTERM)
            try:
                self.popen.wait(timeout=settings.STOP_GRACE_SECONDS + REAPER_MARGIN_SECONDS)
            except subprocess.TimeoutExpired:
                _kill_group(self.popen.pid, signal.SIGKILL)
                self.popen.wait()
        _kill_group(self.popen.pid, signal.SIGKILL)
        shutil.rmtree(self.home, ignore_errors=True)


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class Boards:
    """The boards of this console process, and the thread that stops idle ones."""

    def __init__(self):
        self._changed = threading.Condition()
        self._boards: dict[str, Board] = {}
        self._watcher: threading.Thread | None = None

    def running(self) -> dict[str, Board]:
        with self._changed:
            return dict(self._boards)

    def acquire(self, key: str, logdir: str, prefix: str, project=None, user=None) -> Board:
        """The board for ``key``, started if needed, counted as serving a request of ``user`` (an
        id) until :meth:`release`, run as ``project``'s account. Raises :class:`BoardError`
        (:class:`Busy`) when it cannot be had."""
        to_stop = []
        with self._changed:
            board = self._boards.get(key)
            if board is not None and (
                board.logdir != logdir or board.prefix != prefix or (board.ready.is_set() and not board.alive)
            ):
                to_stop.append(self._boards.pop(key))
                board = None
            starting = board is None
            if board is None:
                to_stop += self._make_room(user)
                board = self._boards[key] = Board(key=key, logdir=logdir, prefix=prefix, project=project)
            board.active += 1
            board.holders[user] += 1
            board.last_used = time.monotonic()
            self._watch()
        for old in to_stop:  # in the background: the new board need not wait for the old one to exit
            threading.Thread(target=old.stop, daemon=True, name=f"tensorboard-stop-{old.key}").start()
        if starting:
            self._start(board)
        board.ready.wait()
        if board.error or not board.alive:
            self.release(board, user)
            with self._changed:
                if self._boards.get(key) is board:
                    del self._boards[key]
            raise BoardError(board.error or "TensorBoard stopped unexpectedly; reload the page to start it again.")
        return board

    def release(self, board: Board, user=None) -> None:
        with self._changed:
            board.active -= 1
            board.holders[user] -= 1
            if board.holders[user] <= 0:
                del board.holders[user]
            board.last_used = time.monotonic()
            self._changed.notify_all()

    def stop_all(self) -> None:
        with self._changed:
            boards, self._boards = list(self._boards.values()), {}
            self._changed.notify_all()
        for board in boards:
            board.stop()

    def _start(self, board: Board) -> None:
        # deferred: the executor's environments load only when a board starts
        from jobs.executor.environments import EnvironmentError_
        from jobs.tensorboard.environment import tensorboard_environment

        try:
            board.start(tensorboard_environment().python)
            logger.info("Started TensorBoard for %s on port %s", board.key, board.port)
        except (BoardError, EnvironmentError_, trainer_user.TrainerUserError, OSError) as error:
            logger.warning("TensorBoard for %s did not start: %s", board.key, error)
            board.error = str(error) or error.__class__.__name__
        finally:
            board.ready.set()

    def _make_room(self, user) -> list[Board]:
        """Called with the lock held, before ``user`` adds a board: the board to stop to make room."""
        if len(self._boards) < settings.TENSORBOARD_MAX:
            return []
        idle = [b for b in self._boards.values() if b.active == 0 and b.ready.is_set()]
        if idle:
            oldest = min(idle, key=lambda b: b.last_used)
            del self._boards[oldest.key]
            logger.info("Stopping TensorBoard for %s to make room for another", oldest.key)
            return [oldest]
        held = Counter(holder for b in self._boards.values() for holder in b.holders)
        richest, most = max(held.items(), key=lambda pair: pair[1], default=(None, 0))
        theirs = [b for b in self._boards.values() if b.ready.is_set() and set(b.holders) == {richest}]
        if most >= held[user] + 2 and theirs:
            taken = min(theirs, key=lambda b: b.last_used)
            del self._boards[taken.key]
            logger.info("Stopping TensorBoard for %s, one of %s held by one user, for another user", taken.key, most)
            return [taken]
        raise Busy(
            f"{len(self._boards)} TensorBoards are running and each is answering a request; at most "
            f"{settings.TENSORBOARD_MAX} run at once (AICONSOLE_TENSORBOARD_MAX), shared fairly between the "
            "users asking. Try again in a moment."
        )

    def _watch(self) -> None:
        if self._watcher is None:
            self._watcher = threading.Thread(target=self._stop_idle_forever, daemon=True, name="tensorboard-idle")
            self._watcher.start()
            atexit.register(self.stop_all)

    def _stop_idle_forever(self) -> None:
        while True:
            with self._changed:
                idle = self._due()
                for board in idle:
                    del self._boards[board.key]
                if not idle:
                    self._changed.wait(self._next_check())
                    continue
            for board in idle:
                logger.info("Stopping TensorBoard for %s (idle)", board.key)
                board.stop()

    def _due(self) -> list[Board]:
        """Boards idle for the idle time, and those whose process ended by itself. A request
        counted for far longer than any of TensorBoard's takes was lost (its client went away
        while it started): it does not keep the board up forever."""
        now = time.monotonic()
        idle = settings.TENSORBOARD_IDLE_SECONDS
        return [
            b
            for b in self._boards.values()
            if b.ready.is_set()
            and (b.active == 0 or now - b.last_used >= idle + LOST_REQUEST_SECONDS)
            and (now - b.last_used >= idle or not b.alive)
        ]

    def _next_check(self) -> float:
        now = time.monotonic()
        deadlines = [
            b.last_used + settings.TENSORBOARD_IDLE_SECONDS - now for b in self._boards.values() if b.active == 0
        ]
        return max(0.05, min([*deadlines, 5.0]))  # every few seconds at least: a process may die


BOARDS = Boards()
