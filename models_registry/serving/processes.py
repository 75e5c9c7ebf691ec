"""Serving processes as the console sees them: a zygote per runtime environment, and its children.

``Zygote`` starts ``worker.py zygote`` with the runtime environment's Python in an environment
built from scratch (none of the console's variables but an allow-list, so no secrets), in its own
session: stopping its process group stops every serving process it forked. ``ServingProcess`` is
one forked child: a stream socket for framed requests and a pipe carrying what it prints.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from pathlib import Path

from django.conf import settings

from aiconsole.trainer_user import TrainerUser
from models_registry.serving.worker import FAILED, HEADER, INTERNAL, INVALID, OK

logger = logging.getLogger("aiconsole.models")

WORKER_SCRIPT = Path(__file__).with_name("worker.py")
ONLINE, BATCH = ord("P"), ord("B")
RECEIVE = 1 << 16
__all__ = ["OK", "INVALID", "FAILED", "INTERNAL", "Zygote", "ServingProcess", "ServingError", "LoadFailure"]

LogCallback = Callable[[str, str], None]  # (process label, line)


class ServingError(Exception):
    """A serving process could not answer (it died, or took too long)."""


class LoadFailure(ServingError):
    """The model did not load; the message says why, in words for the version's errorMessage."""


def serving_environment(bin_dir: Path, tmp_dir: Path, label: str) -> dict[str, str]:
    """What a serving process sees: allow-listed variables only, one thread per numeric library
    (one request at a time; threads would only add latency on a small model), its own TMPDIR."""
    env = {name: os.environ[name] for name in settings.TRAINER_ENV_PASSTHROUGH if name in os.environ}
    env.update(
        {
            "PATH": f"{bin_dir}{os.pathsep}{os.defpath}",
            "VIRTUAL_ENV": str(bin_dir.parent),
            "TMPDIR": str(tmp_dir),
            "PYTHONUNBUFFERED": "1",
            "PYTHONDONTWRITEBYTECODE": "1",
            "OMP_NUM_THREADS": "1",
            "OPENBLAS_NUM_THREADS": "1",
            "MKL_NUM_THREADS": "1",
            "AICONSOLE_SERVING": label,
        }
    )
    return env


def _kill_group(pgid: int, sig: int) -> None:
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


class ServingProcess:
    """One serving process: ``request`` is used by one caller at a time (hold ``lock``)."""

    def __init__(self, channel: socket.socket, pid: int, log_fd: int, label: str, on_log: LogCallback | None):
        self.channel = channel
        self.pid = pid
        self.label = label
        self.lock = threading.Lock()
        self.started = time.monotonic()
        self.last_use = self.started
        self.requests = 0
        self.exited = threading.Event()
        self.log_tail: deque[str] = deque(maxlen=200)
        self._on_log = on_log
        self._timeout: float | None = None
        self._reader = threading.Thread(target=self._read_log, args=(log_fd,), daemon=True, name=f"log-{label}")
        self._reader.start()

    @property
    def alive(self) -> bool:
        return not self.exited.is_set()

    def _read_log(self, fd: int) -> None:
        with os.fdopen(fd, "rb", buffering=0) as pipe:
            pending = b""
            while chunk := pipe.read(RECEIVE):
                pending += chunk
                *lines, pending = pending.split(b"\n")
                for raw in lines:
                    self._log(raw)
            if pending:
                self._log(pending)
        self.exited.set()

    def _log(self, raw: bytes) -> None:
        line = raw.decode("utf-8", errors="replace").rstrip("\r")
        self.log_tail.append(line)
        if self._on_log is not None:
            try:
                self._on_log(self.label, line)
            except Exception:
                logger.exception("Serving log callback failed")

    def _receive(self) -> tuple[int, bytes]:
        data = self.channel.recv(RECEIVE)
        while len(data) < HEADER.size:
            more = self.channel.recv(RECEIVE)
            if not more:
                raise EOFError
            data += more
        code, size = HEADER.unpack_from(data)
        end = HEADER.size + size
        while len(data) < end:
            more = self.channel.recv(max(RECEIVE, end - len(data)))
            if not more:
                raise EOFError
            data += more
        return code, data[HEADER.size : end]

    def request(self, kind: int, payload: bytes, timeout: float) -> tuple[int, bytes]:
        """Send one request and wait for its answer; ServingError when the process cannot answer."""
        if self._timeout != timeout:
            self.channel.settimeout(timeout)
            self._timeout = timeout
        try:
            self.channel.sendall(HEADER.pack(kind, len(payload)) + payload)
            answer = self._receive()
        except TimeoutError:
            self.kill()
            raise ServingError(f"The serving process did not answer within {timeout:g}s and was stopped.") from None
        except (OSError, EOFError):
            self.kill()
            self.exited.wait(2)
            raise ServingError("The serving process exited while handling the request" + self._last_words()) from None
        self.requests += 1
        self.last_use = time.monotonic()
        return answer

    def _last_words(self) -> str:
        tail = [line for line in self.log_tail if line.strip()][-3:]
        return (": " + " | ".join(tail)[-600:]) if tail else "."

    def wait_ready(self, timeout: float) -> dict:
        """The child's first message: readiness, or why its model did not load."""
        self.channel.settimeout(timeout)
        try:
            code, body = self._receive()
        except TimeoutError:
            self.kill()
            raise LoadFailure(f"The model did not load within {timeout:g}s.") from None
        except (OSError, EOFError):
            self.kill()
            self.exited.wait(2)
            raise LoadFailure("The serving process exited while loading the model" + self._last_words()) from None
        if code != OK:
            self.exited.wait(2)
            raise LoadFailure(body.decode("utf-8", errors="replace"))
        return json.loads(body)

    def stop(self) -> None:
        """Close its socket (it exits on end of input), then make sure it is gone."""
        try:
            self.channel.close()
        except OSError:
            pass
        if not self.exited.wait(2):
            self.kill()

    def kill(self) -> None:
        try:
            self.channel.close()
        except OSError:
            pass
        if not self.exited.is_set():
            try:
                os.kill(self.pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass


class Zygote:
    """The runtime environment's pre-loaded parent of serving processes."""

    def __init__(self, python: Path, work_dir: Path, label: str, user: TrainerUser | None = None):
        self.python = python
        self.work_dir = work_dir
        self.label = label
        # A model is user content (a pickle runs code as it loads): as root, serve it as its
        # project's account (aiconsole.trainer_user), which can read none of the console's secrets
        # and nothing of another project's.
        self.user = user
        self.lock = threading.Lock()
        self.process: subprocess.Popen | None = None
        self.control: socket.socket | None = None
        self.info: dict = {}
        self.output: deque[str] = deque(maxlen=100)

    @property
    def alive(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self, timeout: float) -> None:
        parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        tmp = self.work_dir / "tmp"
        tmp.mkdir(parents=True, exist_ok=True)
        script, env, as_user = WORKER_SCRIPT, serving_environment(self.python.parent, tmp, self.label), {}
        if self.user is not None:
            script = self._readable_script()
            self.user.hand_over(self.work_dir)
            env = {**env, **self.user.environment(self.work_dir)}
            as_user = self.user.popen_options()
        try:
            self.process = subprocess.Popen(
                [str(self.python), "-I", str(script), "zygote", str(child.fileno())],
                pass_fds=[child.fileno()],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                cwd=self.work_dir,
                start_new_session=True,
                env=env,
                **as_user,
            )
        finally:
            child.close()
        threading.Thread(target=self._drain, daemon=True, name=f"zygote-{self.label}").start()
        parent.settimeout(timeout)
        try:
            hello = parent.recv(RECEIVE)
        except TimeoutError:
            hello = b""
        if not hello:
            self.stop()
            raise LoadFailure("The serving environment did not start: " + " | ".join(self.output)[-800:])
        parent.settimeout(None)
        self.control = parent
        self.info = json.loads(hello)
        logger.info(
            "Serving zygote for %s ready in %ss (pid %s)", self.label, self.info.get("seconds"), self.process.pid
        )

    def _readable_script(self) -> Path:
        """worker.py where the serving account can read it (the console's own copy may lie in a
        private home): the console's, readable by the account's group, not writable by it."""
        copy = self.work_dir.parent / WORKER_SCRIPT.name
        data = WORKER_SCRIPT.read_bytes()
        if not copy.is_file() or copy.read_bytes() != data:
            scratch = copy.with_name(f".{copy.name}.{os.getpid()}.{threading.get_ident()}")
            scratch.write_bytes(data)
            scratch.replace(copy)
        self.user.lend(copy)
        return copy

    def _drain(self) -> None:
        assert self.process is not None and self.process.stdout is not None
        for raw in self.process.stdout:
            self.output.append(raw.decode("utf-8", errors="replace").rstrip())

    def spawn(self, spec: dict, label: str, on_log: LogCallback | None = None) -> ServingProcess:
        """Fork a serving process for one model; call ``wait_ready`` on it next."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        read_fd, write_fd = os.pipe()
        try:
            with self.lock:
                if self.control is None:
                    raise ServingError("The serving environment is not running.")
                try:
                    socket.send_fds(self.control, [json.dumps(spec).encode()], [theirs.fileno(), write_fd])
                    reply = json.loads(self.control.recv(RECEIVE) or b"{}")
                except (OSError, ValueError) as error:
                    raise ServingError(f"The serving environment stopped: {error}") from None
        except BaseException:
            ours.close()
            os.close(read_fd)
            raise
        finally:
            theirs.close()
            os.close(write_fd)
        if "pid" not in reply:
            ours.close()
            os.close(read_fd)
            raise ServingError(reply.get("error") or "The serving environment did not start a process.")
        return ServingProcess(ours, int(reply["pid"]), read_fd, label, on_log)

    def stop(self) -> None:
        """Stop the zygote and, with its process group, every serving process it forked."""
        if self.control is not None:
            try:
                self.control.close()
            except OSError:
                pass
            self.control = None
        if self.process is None:
            return
        _kill_group(self.process.pid, signal.SIGTERM)
        try:
            self.process.wait(timeout=3)
        except subprocess.TimeoutExpired:
            pass
        _kill_group(self.process.pid, signal.SIGKILL)
        try:
            self.process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            logger.warning("Serving zygote %s did not stop", self.label)
