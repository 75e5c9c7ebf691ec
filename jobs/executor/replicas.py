"""Replica processes: TF_CONFIG, the trainer's environment, starting, watching and stopping.

The pure parts (``cluster_configs``, ``trainer_command``, ``trainer_environment``) build plain
data and are tested without a database. ``ReplicaProcess`` owns one running trainer: its own
process group (so stopping it stops everything it started), its own working directory and TMPDIR,
and two reader threads that feed its output into the job's log sink.
"""

from __future__ import annotations

import atexit
import json
import os
import re
import signal
import socket
import subprocess
import sys
import threading
import time
from collections import deque
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from aiconsole.trainer_user import TrainerUser
from jobs import catalogue, runtimes
from jobs.executor.sink import LogSink
from jobs.logs.lines import LineSplitter

if TYPE_CHECKING:
    from jobs.metrics import system

CLUSTER_TYPES = ("master", "worker", "ps")
_SIGNAL_NAMES = {
    signal.SIGKILL: "SIGKILL",
    signal.SIGTERM: "SIGTERM",
    signal.SIGSEGV: "SIGSEGV",
    signal.SIGABRT: "SIGABRT",
    signal.SIGINT: "SIGINT",
    signal.SIGBUS: "SIGBUS",
}


@dataclass(frozen=True)
class Placement:
    plan: catalogue.ReplicaPlan
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"

    @property
    def label(self) -> str:
        return catalogue.replica_label(self.plan.task_type, self.plan.index)


def free_port(host: str = "127.0.0.1") -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind((host, 0))
        return probe.getsockname()[1]


def cluster_configs(
    placements: list[Placement], *, job_id: str, training_input: dict, use_chief: bool, trial_id: str = ""
) -> dict[str, tuple[dict, dict]]:
    """TF_CONFIG and CLUSTER_SPEC for every replica, keyed by replica label.

    TF_CONFIG's cluster names the master ``chief`` or ``master`` by runtime version and never lists
    evaluators; CLUSTER_SPEC always says ``master`` and lists every replica, evaluators included.
    """
    master_key = "chief" if use_chief else "master"
    cluster: dict[str, list[str]] = {}
    spec_cluster: dict[str, list[str]] = {}
    for placement in placements:
        task_type = placement.plan.task_type
        spec_cluster.setdefault(task_type, []).append(placement.address)
        if task_type in CLUSTER_TYPES:
            key = master_key if task_type == "master" else task_type
            cluster.setdefault(key, []).append(placement.address)
    job = {"job_name": job_id, **training_input}
    configs = {}
    for placement in placements:
        task_type = placement.plan.task_type
        task: dict = {"type": master_key if task_type == "master" else task_type, "index": placement.plan.index}
        if trial_id:
            task["trial"] = trial_id
        tf_config = {"cluster": cluster, "task": task, "job": job, "environment": "cloud"}
        spec_task = {"type": task_type, "index": placement.plan.index}
        if trial_id:
            spec_task["trial"] = trial_id
        cluster_spec = {"cluster": spec_cluster, "task": spec_task, "job": job, "environment": "cloud"}
        configs[placement.label] = (tf_config, cluster_spec)
    return configs


def trainer_command(python: Path, module: str, args: list[str], job_dir: str | None) -> list[str]:
    """``python -m module args… --job-dir DIR``: the job dir comes after the user's arguments."""
    command = [str(python), "-m", module, *args]
    if job_dir:
        command += ["--job-dir", job_dir]
    return command


def trainer_environment(
    *,
    passthrough: dict[str, str],
    bin_dir: Path,
    tmp_dir: Path,
    tf_config: dict,
    cluster_spec: dict,
    job_id: str,
    replica_id: int,
    extra: dict[str, str] | None = None,
) -> dict[str, str]:
    """A clean environment built from scratch: nothing of the console's is inherited but the
    allow-listed ``passthrough`` variables (never secrets, database or broker URLs)."""
    env = dict(passthrough)
    env.update(
        {
            "PATH": f"{bin_dir}{os.pathsep}{os.defpath}",
            "VIRTUAL_ENV": str(bin_dir.parent),
            "TMPDIR": str(tmp_dir),
            "PYTHONUNBUFFERED": "1",
            "TF_CONFIG": json.dumps(tf_config),
            "CLUSTER_SPEC": json.dumps(cluster_spec),
            "CLOUD_ML_JOB_ID": job_id,
            # Lets a restarted console recognise its own orphans before stopping them.
            "AICONSOLE_REPLICA": str(replica_id),
        }
    )
    env.update(extra or {})
    return env


def exit_description(returncode: int) -> str:
    """``1`` or ``9(SIGKILL)``, as the original's messages write statuses."""
    if returncode < 0:
        number = -returncode
        name = _SIGNAL_NAMES.get(number, f"signal {number}")
        return f"{number}({name})"
    return str(returncode)


def traceback_tail(lines: list[str], limit: int = 40) -> str:
    """The last traceback the replica printed, or its last lines of stderr."""
    start = None
    for index in range(len(lines) - 1, -1, -1):
        if lines[index].startswith("Traceback (most recent call last)"):
            start = index
            break
    chosen = lines[start:] if start is not None else lines[-10:]
    return "\n".join(chosen[-limit:])


def failure_message(training_input: dict, message: str, stderr_tail: list[str]) -> str:
    """The replica's failure, and the runtime when the trainer imports a framework it does not provide."""
    tail = traceback_tail(stderr_tail)
    missing = re.search(r"No module named '([\w.]+)'", tail or "")
    if missing:
        runtime, python = runtimes.resolve_pair(
            training_input.get("runtimeVersion"), training_input.get("pythonVersion")
        )
        module = missing.group(1)
        message += (
            f" The trainer imports {module}, which runtime version {runtime.name} (Python {python}) "
            "does not provide; list it in the package's install_requires, or choose a runtime "
            "version that has it."
        )
    return message + (" \n" + tail if tail else "")


@dataclass
class ReplicaProcess:
    """One running trainer process and its output readers."""

    replica_id: int
    label: str
    task_type: str
    command: list[str]
    env: dict[str, str]
    cwd: Path
    sink: LogSink
    max_line_bytes: int
    trial_id: str = ""
    preexec: Callable[[], None] | None = None  # scaled mode: die with the worker (PR_SET_PDEATHSIG)
    user: TrainerUser | None = None  # run as its project's account (aiconsole.trainer_user), owning only its folders
    stop_grace: float = 10.0  # SIGTERM → SIGKILL, for its reaper too (settings.STOP_GRACE_SECONDS)
    gcs: Path | None = None  # the job's view of Cloud Storage, bound at /gcs for this trainer alone
    popen: subprocess.Popen | None = None
    started: float = 0.0
    stopped_by_platform: bool = False
    stderr_tail: deque = field(default_factory=lambda: deque(maxlen=200))
    _readers: list[threading.Thread] = field(default_factory=list)
    # Whether a shell can still be opened into it once it failed (its folder and environment stay).
    holds_for_shell: ClassVar[bool] = True

    def start(self) -> None:
        env, user_option = self.env, []
        if self.user is not None:
            self.user.hand_over(self.cwd)
            env = {**env, **self.user.environment(self.cwd)}
            user_option = self.user.reaper_option()
        # Scaled mode's die-with-the-worker and lease are per start: no spare there.
        spare = SPARES.take() if self.preexec is None and WORKER_LEASE[0] is None else None
        if spare is not None and SPARES.tell(spare, self.command, env, self.cwd, self.stop_grace, self.user, self.gcs):
            self.popen = spare
        else:
            gcs_option = ["--gcs", str(self.gcs)] if self.gcs is not None else []
            self.popen = subprocess.Popen(
                reaped(self.command, self.stop_grace, [*user_option, *gcs_option, *lease_option()]),
                cwd=self.cwd,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                start_new_session=True,  # the reaper's own session: signals to it reach nothing else
                preexec_fn=self.preexec,
            )
        self.started = time.monotonic()
        self._start_readers()

    def _start_readers(self) -> None:
        assert self.popen is not None
        for stream, pipe in (("stdout", self.popen.stdout), ("stderr", self.popen.stderr)):
            reader = threading.Thread(
                target=self._pump, args=(stream, pipe), daemon=True, name=f"{self.label}-{stream}"
            )
            reader.start()
            self._readers.append(reader)

    def _pump(self, stream: str, pipe) -> None:
        progress = getattr(self.sink, "progress", None)  # a stand-in sink (local train) may only print
        splitter = LineSplitter(
            self.max_line_bytes,
            on_progress=progress and (lambda text: progress(self.label, stream, text, trial_id=self.trial_id)),
        )
        fd = pipe.fileno()
        try:
            while True:
                chunk = os.read(fd, 65536)
                if not chunk:
                    break
                self._emit(stream, splitter.feed(chunk))
            self._emit(stream, splitter.close())
        finally:
            pipe.close()

    def _emit(self, stream: str, lines: list[str]) -> None:
        if stream == "stderr":
            self.stderr_tail.extend(lines)
        if hasattr(self.sink, "emit_lines"):  # a whole read at once: the log sink's fast path
            self.sink.emit_lines(self.label, stream, lines, trial_id=self.trial_id)
            return
        for line in lines:
            self.sink.emit(self.label, stream, line, trial_id=self.trial_id)

    @property
    def pid(self) -> int | None:
        return self.popen.pid if self.popen else None

    def usage_probe(self, memory_limit: int | None, *, own_network: bool) -> system.ProcessTree:
        """What the console samples of it (jobs.metrics.system): its reaper's descendants, whose
        network is the host's (never reported as theirs)."""
        # deferred: `aiconsole local train` loads this module without Django, and the sampler reads models
        from jobs.metrics import system

        return system.ProcessTree(lambda: self.pid, memory_limit=memory_limit)

    def gpu_devices(self, accelerator_count: int) -> list[str] | None:
        """The GPUs it was given, to sample; None for none."""
        # deferred: as above
        from jobs.metrics import system

        return system.gpu_devices(accelerator_count, self.env.get("CUDA_VISIBLE_DEVICES"))

    def poll(self) -> int | None:
        return self.popen.poll() if self.popen else None

    def shell(self) -> tuple[list[str], Path, dict[str, str]]:
        """How to start an interactive shell into this replica (web access, ``jobs.webaccess``):
        as its account, in its working folder, with its environment and its view of /gcs, under a
        reaper of its own, so that nothing the shell starts outlives it."""
        env, options = dict(self.env), ["--tty"]
        if self.user is not None:
            env.update(self.user.environment(self.cwd))
            options += self.user.reaper_option()
        if self.gcs is not None:
            options += ["--gcs", str(self.gcs)]
        env["PS1"] = rf"\u@{self.label}:\w\$ "
        # bash without the host's rc files, whose prompt would hide which replica this is
        shell = ["/bin/bash", "--norc", "-i"] if os.access("/bin/bash", os.X_OK) else ["/bin/sh", "-i"]
        return reaped(shell, SHELL_STOP_GRACE, options), self.cwd, env

    def wait_output(self, timeout: float = 5.0) -> None:
        """Let the readers drain what the process printed before it exited."""
        deadline = time.monotonic() + timeout
        for reader in self._readers:
            reader.join(max(0.0, deadline - time.monotonic()))

    def stop(self, grace: float) -> None:
        """SIGTERM the trainer and every descendant (through its reaper), SIGKILL after the grace."""
        if self.popen is None or self.popen.poll() is not None:
            _kill_group(self.pid, signal.SIGKILL)  # anything left in the reaper's group
            return
        self.stopped_by_platform = True
        _kill_group(self.pid, signal.SIGTERM)
        try:
            self.popen.wait(timeout=grace + REAPER_MARGIN_SECONDS)
        except subprocess.TimeoutExpired:  # the reaper itself is stuck: the trainer dies with it
            _kill_group(self.pid, signal.SIGKILL)
            self.popen.wait()
        _kill_group(self.pid, signal.SIGKILL)


# Scaled mode: the file a worker touches each time it renews its leases, and the seconds after
# which its trainers stop themselves when it has not (reaper.py's --lease). None in embedded mode.
WORKER_LEASE: list[tuple[Path, float] | None] = [None]


def set_worker_lease(path: Path, seconds: float) -> None:
    """This process is a worker: every trainer it starts from now on stops itself when ``path``
    is older than ``seconds``."""
    WORKER_LEASE[0] = (path, seconds)


def lease_option() -> list[str]:
    lease = WORKER_LEASE[0]
    return ["--lease", f"{lease[0]}:{lease[1]:g}"] if lease is not None else []


REAPER = Path(__file__).with_name("reaper.py")
REAPER_MARGIN_SECONDS = 5.0
SHELL_STOP_GRACE = 1.0  # a web access shell told to end: SIGKILL for what is left after this


def reaped(command: list[str], grace: float, user_option: list[str] = ()) -> list[str]:
    """``command`` under the reaper (jobs/executor/reaper.py), with the stop grace period in
    seconds: no descendant of the trainer outlives it, even one that left its process group or
    session. ``user_option`` (``--user UID:GID``, ``--gcs PATH``) makes the reaper start the trainer
    as that user, with PATH at /gcs in a mount namespace of its own."""
    return [sys.executable, "-I", "-S", str(REAPER), repr(float(grace)), *user_option, "--", *command]


class Spares:
    """One reaper started ahead (``reaper.py --ready``), so that a replica's start does not wait
    for an interpreter to start and import (about 8 ms of a package trainer's first line, measured
    in bench/run.py). It has an empty environment, its own session and the executor's niceness, as
    a reaper started for its replica has; the replica's command, environment, folder and account
    reach it on its stdin. Taking it starts the next one on a thread of its own, which lives as
    long as the process (so nothing started from it is tied to a thread that ends)."""

    def __init__(self):
        self._lock = threading.Lock()
        self._spare: subprocess.Popen | None = None
        self._starter: ThreadPoolExecutor | None = None

    def prepare(self) -> None:
        """Have a spare ready (in the background) for the next replica's start."""
        with self._lock:
            if self._starter is None:
                self._starter = ThreadPoolExecutor(max_workers=1, thread_name_prefix="reaper-spare")
                atexit.register(self.close)
            self._starter.submit(self._start_one)

    def take(self) -> subprocess.Popen | None:
        """The ready spare, if there is one (the next is started meanwhile); else None."""
        with self._lock:
            spare, self._spare = self._spare, None
        self.prepare()
        return spare if spare is not None and spare.poll() is None else None

    def tell(self, spare: subprocess.Popen, command, env, cwd, grace: float, user, gcs: Path | None = None) -> bool:
        """Hand ``spare`` its trainer; False when it is gone (the caller starts a reaper anew)."""
        told = {
            "command": command,
            "env": env,
            "cwd": str(cwd),
            "grace": float(grace),
            "user": [user.uid, user.gid] if user is not None else None,
            "gcs": str(gcs) if gcs is not None else None,
        }
        assert spare.stdin is not None
        try:
            spare.stdin.write(json.dumps(told).encode() + b"\n")
            spare.stdin.close()
            return True
        except (BrokenPipeError, ValueError):
            _kill_group(spare.pid, signal.SIGKILL)
            spare.wait()
            return False

    def close(self) -> None:
        with self._lock:
            spare, self._spare = self._spare, None
        if spare is not None:
            self._close_one(spare)

    def _start_one(self) -> None:
        with self._lock:
            if self._spare is not None and self._spare.poll() is None:
                return
        spare = subprocess.Popen(
            [sys.executable, "-I", "-S", str(REAPER), "--ready"],
            cwd="/",
            env={},
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        with self._lock:
            old, self._spare = self._spare, spare
        if old is not None:
            self._close_one(old)

    @staticmethod
    def _close_one(spare: subprocess.Popen) -> None:
        """Its input ends before any line: it exits."""
        if spare.stdin is not None:
            spare.stdin.close()
        spare.wait()


SPARES = Spares()


def _kill_group(pgid: int | None, sig: int) -> None:
    if not pgid:
        return
    try:
        os.killpg(pgid, sig)
    except (ProcessLookupError, PermissionError):
        pass


def stop_orphan(pid: int, replica_id: int) -> bool:
    """Stop a replica left running by an earlier console process, if it really is ours."""
    try:
        environ = Path(f"/proc/{pid}/environ").read_bytes()
    except OSError:
        return False
    marker = f"AICONSOLE_REPLICA={replica_id}".encode()
    marked = _marked(marker)  # the trainer and whatever it started and left behind
    # A reaper started for its replica has the marker itself; one started ahead (Spares) has an
    # empty environment and is known by its trainer, its child, that has it.
    if marker not in environ.split(b"\0") and not any(_parent(other) == pid for other in marked):
        return False  # the pid was reused by something else: leave it alone
    _kill_group(pid, signal.SIGKILL)  # the reaper; the trainer dies with it (PR_SET_PDEATHSIG)
    for other in marked:
        try:
            os.kill(other, signal.SIGKILL)
        except OSError:
            pass
    return True


def _marked(marker: bytes) -> list[int]:
    found = []
    for other in Path("/proc").glob("[0-9]*"):
        try:
            if marker in (other / "environ").read_bytes().split(b"\0"):
                found.append(int(other.name))
        except (OSError, ValueError):
            pass
    return found


def _parent(pid: int) -> int:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return 0
    return int(stat[stat.rfind(b")") + 2 :].split()[1])
