"""One replica as a container of the job's image, in its job's (or trial's) pod.

The attached ``podman run`` (or ``docker run``) client is the replica's process: its stdout and
stderr are the container's, read by the same readers and log pipeline as a package trainer's, and
its exit status is the container's. The container runs as root inside a user namespace whose root
is the project's account outside (``user_namespace``), with every capability dropped and
``no-new-privileges``; it sees its own replica folder, its job (or trial) dir, the folders its
arguments name (``mounts_for_args``) and nothing else of the host. Its replicas share one pod: a
network namespace of their own on their project's network, where they reach each other on
127.0.0.1 and never the host's loopback services.

Killing the client leaves the container running (the engine's monitor is detached), so every
container and pod is labelled with the console's tag and the replica's id: ``stop`` stops the
container itself, nothing is removed before its exit status is read, and ``sweep`` removes what a
console that was killed left behind.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar

from django.conf import settings

from aiconsole import trainer_user
from algorithms import definitions as algos
from jobs import catalogue
from jobs.containers import engine as engines
from jobs.containers import staged as staging
from jobs.executor.replicas import WORKER_LEASE, ReplicaProcess, lease_option, reaped
from jobs.metrics import system

logger = logging.getLogger(__name__)

LABEL_CONSOLE = "ai-console.console"
LABEL_REPLICA = "ai-console.replica"
LABEL_JOB = "ai-console.job"
LABEL_OWNER = "ai-console.owner"  # "embedded", or a scaled-mode worker's name: whose leftovers a sweep removes
STOP_MARGIN_SECONDS = 10.0
# Environment variables of the console a container may see (TRAINER_ENV_PASSTHROUGH, less the
# ones that describe the console's own account).
_ACCOUNT_VARIABLES = {"HOME", "USER", "LOGNAME"}


def runs_container(training_input: dict | None) -> bool:
    """Whether the job runs the user's container image (not a built-in algorithm's)."""
    image = ((training_input or {}).get("masterConfig") or {}).get("imageUri")
    return bool(image) and algos.by_image(image) is None


_CONFIG_KEYS = {
    "master": "masterConfig",
    "worker": "workerConfig",
    "ps": "parameterServerConfig",
    "evaluator": "evaluatorConfig",
}


def replica_config(training_input: dict, task_type: str) -> dict:
    """A role's ReplicaConfig (``workerConfig`` for workers…), empty when the job sets none."""
    return training_input.get(_CONFIG_KEYS[task_type]) or {}


def image_for(training_input: dict, task_type: str) -> str:
    """A role's image: its own config's imageUri, else the master's."""
    return replica_config(training_input, task_type).get("imageUri") or training_input["masterConfig"]["imageUri"]


def container_arguments(
    training_input: dict, task_type: str, extra_args: list[str]
) -> tuple[list[str] | None, list[str]]:
    """The entrypoint override (None: the image's) and the arguments, as the original built them:
    ``containerCommand`` replaces the entrypoint, ``containerArgs`` (or else the job's ``args``)
    come next, then a trial's ``--param=value`` flags and ``--job-dir`` (``extra_args``): the order
    package trainers get them in too."""
    config = replica_config(training_input, task_type)
    command = list(config.get("containerCommand") or []) or None
    args = list(config.get("containerArgs") or training_input.get("args") or [])
    return command, [*args, *extra_args]


def console_label() -> str:
    return trainer_user.console_tag()


_owner = ["embedded"]


def set_owner(name: str) -> None:
    """Scaled mode: the worker's name, so that a worker sweeps only its own leftovers."""
    _owner[0] = name


def owner_labels() -> list[str]:
    return ["--label", f"{LABEL_CONSOLE}={console_label()}", "--label", f"{LABEL_OWNER}={_owner[0]}"]


def container_name(replica_id: int, attempt: int = 0) -> str:
    """A replica's container; in scaled mode one per start (``attempt``), so that a start on another
    worker never meets the name of a copy that is still being stopped."""
    return f"aic-{console_label()}-r{replica_id}" + (f"-a{attempt}" if attempt else "")


# --- the pod ----------------------------------------------------------------------------------------------


@dataclass
class Pod:
    """The network namespace a job's (or a trial's) replicas share. Docker has no pods: its
    replicas join the first replica's namespace instead (``--network container:NAME``)."""

    engine: engines.Engine
    name: str
    job_pk: int
    network: str = "none"  # its project's own network (project_network), or none
    userns: tuple[str, ...] = ()  # podman: the user namespace its replicas share (user_namespace)
    created: bool = False
    first_container: str = ""
    shared: bool = True  # False for a single replica: its own namespace, no pod (a pod's start costs ~0.2 s)

    def create(self) -> None:
        if not self.engine.is_podman or not self.shared or self.created:  # no pod, or one made ahead
            return
        self.engine.call("pod", "rm", "--force", "--ignore", self.name)
        self.engine.call(
            "pod",
            "create",
            "--name",
            self.name,
            *owner_labels(),
            "--label",
            f"{LABEL_JOB}={self.job_pk}",
            "--network",
            self.network,
            *self.userns,
        )
        self.created = True

    def take_spare(self) -> None:
        """Run in a pod made ahead (``SparePods``), a lone replica too, when one is ready."""
        spare = SPARE_PODS.take(self.engine, self.network, self.userns)
        if spare is not None:
            self.name, self.created, self.shared = spare, True, True

    def network_options(self, container: str) -> list[str]:
        if not self.shared:
            return ["--network", self.network]
        if self.engine.is_podman:
            return ["--pod", self.name]
        if not self.first_container:
            self.first_container = container
            return ["--network", self.network]
        return ["--network", f"container:{self.first_container}"]

    def remove(self) -> None:
        if not self.created:
            return
        _remove_pod(self.engine, self.name)
        self.created = False


class SparePods:
    """Pods made ahead, per project network and user namespace. A pod's create and start cost about
    0.3 s, and a lone container's own network on a bridge about 0.2 s of its ``run``: taken from a
    ready pod instead, a replica's start pays neither. A replica set takes one when it is built, and
    one more is made in the background; a key found empty wants one more spare next time (at most
    ``MOST``, as a study's parallel trials take them). The spares carry the console's labels, so
    the sweep of a console that was killed removes them; a console that stops removes its own."""

    MOST = 4
    # The next one is made a moment after a take: not while the taker's own container starts,
    # which would wait for the engine's locks behind it.
    REFILL_DELAY_SECONDS = 2.0

    def __init__(self):
        self._lock = threading.Lock()
        self._ready: dict[tuple, list[str]] = {}
        self._wanted: dict[tuple, int] = {}
        self._making: dict[tuple, int] = {}
        self._closed = False
        self._closing = threading.Event()  # wakes the makers waiting out their delay
        self._threads: list[threading.Thread] = []

    def take(self, engine: engines.Engine, network: str, userns: tuple[str, ...]) -> str | None:
        """A started pod on ``network`` with ``userns``, now the caller's to remove; None when none
        is ready (one is made for next time)."""
        if not engine.is_podman:
            return None
        key = (engine, network, userns)
        with self._lock:
            ready = self._ready.get(key) or []
            name = ready.pop(0) if ready else None
            wanted = self._wanted.get(key, 0)
            self._wanted[key] = max(wanted, 1) if name else min(self.MOST, wanted + 1)
            self._refill(key)
        return name

    def _refill(self, key: tuple) -> None:
        missing = self._wanted.get(key, 0) - len(self._ready.get(key) or []) - self._making.get(key, 0)
        for _ in range(max(0, missing) if not self._closed else 0):
            self._making[key] = self._making.get(key, 0) + 1
            thread = threading.Thread(target=self._make, args=(key,), name="spare-pod", daemon=True)
            self._threads = [t for t in self._threads if t.is_alive()] + [thread]
            thread.start()

    def _make(self, key: tuple) -> None:
        engine, network, userns = key
        name = f"aic-{console_label()}-spare-{os.urandom(4).hex()}"
        made = False
        if self._closing.wait(self.REFILL_DELAY_SECONDS):
            with self._lock:
                self._making[key] -= 1
            return
        try:
            ensure_network(engine, network)  # a sweep may have removed it once no container used it
            engine.call("pod", "create", "--name", name, *owner_labels(), "--network", network, *userns)
            made = True
            engine.call("pod", "start", name)
        except engines.EngineError as error:
            logger.warning("Could not make a spare pod: %s", error)
            if made:
                _remove_pod(engine, name)
            name = ""
        with self._lock:
            self._making[key] -= 1
            if name and not self._closed:
                self._ready.setdefault(key, []).append(name)
                name = ""
        if name:  # made after close: nobody will take it
            _remove_pod(engine, name)

    def ready(self) -> set[str]:
        """The names of the spares ready to be taken."""
        with self._lock:
            return {name for names in self._ready.values() for name in names}

    def close(self) -> None:
        """Remove every spare not taken, and those being made (the console stops)."""
        self._closing.set()
        with self._lock:
            self._closed = True
            threads = list(self._threads)
        for thread in threads:
            thread.join(60)
        with self._lock:
            ready = [(key[0], name) for key, names in self._ready.items() for name in names]
            self._ready.clear()
            self._wanted.clear()  # a console that starts again learns anew what its projects take
        for engine, name in ready:
            _remove_pod(engine, name)

    def reopen(self) -> None:
        with self._lock:
            self._closed = False
            self._closing.clear()


def _remove_pod(engine: engines.Engine, name: str) -> None:
    _removed(engine, ["pod", "rm", "--force", "--ignore", name], f"pod {name}")


SPARE_PODS = SparePods()


def pod_for(job, trial_id: str = "") -> Pod | None:
    engine = engines.available()
    if engine is None:
        return None
    suffix = f"-t{trial_id}" if trial_id else ""
    account = trainer_user.for_project(job.project)
    return Pod(
        engine,
        f"aic-{console_label()}-j{job.pk}{suffix}",
        job.pk,
        project_network(engine, job.project),
        user_namespace(engine, account),
    )


def user_namespace(engine: engines.Engine, account: trainer_user.TrainerUser | None) -> tuple[str, ...]:
    """The engine's options that run a container as root inside, that root being the project's
    account outside (podman with a root console): the image's own files, modes and ``/root`` work as
    the original ran them, and what it writes to its job dir is the account's on the host. One
    user, root, is mapped: the kernel's overlay of idmapped layers refuses a mapping of more (so an
    image's other users' files are nobody's in the container, and it runs as root whatever its
    USER says). Docker maps users per daemon: there a container runs as the account itself."""
    if account is None or not engine.is_podman:
        return ()
    return ("--uidmap", f"0:{account.uid}:1", "--gidmap", f"0:{account.gid}:1")


_networks: set[str] = set()  # made or found by this process; a sweep that removes one forgets it
_networks_lock = threading.Lock()
LABEL_DATA_DIR = "ai-console.data-dir"  # a network's console, by its data dir: whose it is once that console is gone


def project_network(engine: engines.Engine, project) -> str:
    """The network a project's containers join (``AICONSOLE_CONTAINER_NETWORK=bridge``): a bridge of
    its own, made when missing, from which no other project's containers can be reached (podman's
    ``isolate`` option; docker isolates its user-made bridges from each other already). Outbound
    access is as the default bridge's; the host's loopback is never reachable from a container.
    Asked of the engine once per process (a call costs 80 ms of a container's start); only this
    process's sweep removes it, and forgets it then."""
    if settings.CONTAINER_NETWORK == "none":
        return "none"
    return ensure_network(engine, f"aic-{console_label()}-{project.project_id}")


def ensure_network(engine: engines.Engine, name: str) -> str:
    """A project's network by its name, made when missing (``project_network``)."""
    if name == "none":
        return name
    with _networks_lock:
        if name in _networks:
            return name
        try:
            engine.call("network", "inspect", name)
            _networks.add(name)
            return name
        except engines.EngineError:
            pass
        isolate = ["--opt", "isolate=true"] if engine.is_podman else []
        labels = [*owner_labels(), "--label", f"{LABEL_DATA_DIR}={settings.DATA_DIR}"]
        try:
            engine.call("network", "create", *isolate, *labels, name)
        except engines.EngineError:
            engine.call("network", "inspect", name)  # made by another process at the same moment, or a real failure
        _networks.add(name)
    return name


def remove_networks(engine: engines.Engine, *, gone_consoles: bool = False) -> None:
    """Remove the projects' networks this process's owner made that no container uses (each is
    made again on its project's next container): a network holds one of the engine's subnets.
    ``gone_consoles``: also those of consoles on this host whose data dir is gone (a test run's)."""
    mine = ["--filter", f"label={LABEL_CONSOLE}={console_label()}", "--filter", f"label={LABEL_OWNER}={_owner[0]}"]
    names = engine.call("network", "ls", *mine, "--format", "{{.Name}}").split()
    if gone_consoles:
        for name in engine.call("network", "ls", "--filter", f"label={LABEL_CONSOLE}", "--format", "{{.Name}}").split():
            found = json.loads(engine.call("network", "inspect", name) or "[{}]")[0]
            folder = (found.get("labels") or found.get("Labels") or {}).get(LABEL_DATA_DIR)
            if folder and not Path(folder).exists():
                names.append(name)
    with _networks_lock:
        for name in dict.fromkeys(names):
            try:
                engine.call("network", "rm", name)  # refused while a container uses it
                _networks.discard(name)
            except engines.EngineError:
                pass


# --- what a container is started with ------------------------------------------------------------------------


def resource_options(engine: engines.Engine, machine_type: str) -> list[str]:
    """The machine type's CPUs and memory as cgroup limits, where this host enforces them."""
    machine = catalogue.MACHINE_TYPES.get(machine_type)
    if not engine.limits or machine is None:
        return []
    options = []
    if machine.vcpus:
        options += ["--cpus", f"{min(machine.vcpus, os.cpu_count() or machine.vcpus)}"]
    if machine.memory_gb:
        memory = f"{int(machine.memory_gb * 1024)}m"
        options += ["--memory", memory, "--memory-swap", memory]
    return options


def run_command(
    engine: engines.Engine,
    *,
    name: str,
    image: str,
    pod: Pod,
    replica_id: int,
    job_pk: int,
    entrypoint: list[str] | None,
    args: list[str],
    staged: list[str],
    account: trainer_user.TrainerUser | None,
    machine_type: str,
    devices: list[str],
    publish: int | None = None,
) -> list[str]:
    """The engine's ``run`` command line for one replica; ``staged``: its folders and environment,
    as options that name only the console's private folder (``staged.Staged``)."""
    options = [
        "run",
        "--name",
        name,
        "--pull=never",
        "--init",  # the trainer is not PID 1: SIGTERM reaches it, and zombies are reaped
        "--cap-drop=all",
        "--security-opt",
        "no-new-privileges",
        *engine.security,
        *engine.output_options,
        *owner_labels(),
        "--label",
        f"{LABEL_REPLICA}={replica_id}",
        "--label",
        f"{LABEL_JOB}={job_pk}",
        "--pids-limit",
        "4096",
        *pod.network_options(name),
        *resource_options(engine, machine_type),
    ]
    if publish is not None:
        options += ["--publish", f"{publish}:{publish}"]  # scaled mode: peers on other hosts reach it here
    userns = user_namespace(engine, account)
    if userns:
        # Root inside, whatever the image's USER: the one user mapped. A pod's replicas share its
        # user namespace; devpts is mounted without the tty group (gid 5), which is not mapped.
        options += ["--user", "0:0", "--mount", "type=devpts,destination=/dev/pts"]
        options += [] if pod.shared else list(userns)
    elif account is not None:
        options += ["--user", f"{account.uid}:{account.gid}"]
    elif os.geteuid() != 0 and engine.is_podman:
        options += ["--userns=keep-id"]  # rootless: files the container writes are the console user's
    options += staged
    for device in devices:
        options += ["--device", device] if engine.is_podman else ["--gpus", f"device={device}"]
    if entrypoint is not None:
        options += ["--entrypoint", json.dumps(entrypoint)]
    return engine.command(*options, image, *args)


def container_environment(
    *, passthrough: dict[str, str], tf_config: dict, cluster_spec: dict, job_id: str, extra: dict[str, str]
) -> dict[str, str]:
    """What a container replica is told: the original's variables and nothing of the console's. Its
    HOME is the image's (``/root`` for root), as the original left it."""
    env = {key: value for key, value in passthrough.items() if key not in _ACCOUNT_VARIABLES}
    env.update(
        {
            "PYTHONUNBUFFERED": "1",
            "TF_CONFIG": json.dumps(tf_config),
            "CLUSTER_SPEC": json.dumps(cluster_spec),
            "CLOUD_ML_JOB_ID": job_id,
        }
    )
    env.update(extra)
    return env


# --- GPUs ---------------------------------------------------------------------------------------------------


class _GpuLedger:
    """Which of the host's GPU devices running containers hold, so that each replica gets its own."""

    def __init__(self):
        self._lock = threading.Lock()
        self._held: dict[str, int] = {}

    def take(self, engine: engines.Engine, count: int, holder: int) -> list[str]:
        if count <= 0 or not engine.gpus:
            return []
        with self._lock:
            free = [device for device in engine.gpus if device not in self._held]
            if len(free) < count:
                return []
            chosen = free[:count]
            for device in chosen:
                self._held[device] = holder
            return chosen

    def give_back(self, holder: int) -> None:
        with self._lock:
            for device in [d for d, h in self._held.items() if h == holder]:
                del self._held[device]


gpus = _GpuLedger()


# --- the replica's process ------------------------------------------------------------------------------------


@dataclass
class ContainerReplicaProcess(ReplicaProcess):
    """A replica whose process is the engine's attached ``run`` client."""

    engine: engines.Engine | None = None
    container: str = ""
    removed: bool = False
    devices: list[str] = field(default_factory=list)
    staged: staging.Staged | None = None  # its folders and environment, released with it
    holds_for_shell: ClassVar[bool] = False  # its shell is inside it, and ends with it

    def start(self) -> None:
        assert self.engine is not None
        env = {**self.engine.environment(), "AICONSOLE_REPLICA": str(self.replica_id)}  # found again after a restart
        command = self.command
        if WORKER_LEASE[0] is not None:
            # Scaled mode: the engine's client under a reaper that stops the container itself when
            # the worker dies (its death signal) or cannot renew the replica's lease; stopping only
            # the client would leave the container running beside its replacement.
            on_stop = json.dumps(self.engine.command("stop", "--time", "1", self.container))
            command = reaped(command, self.stop_grace, ["--no-subreaper", "--on-stop", on_stop, *lease_option()])
        self.popen = subprocess.Popen(
            command,
            cwd=self.cwd,
            env=env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
            preexec_fn=self.preexec,
        )
        self.started = time.monotonic()
        self._start_readers()

    def shell(self) -> tuple[list[str], Path, dict[str, str]]:
        """A shell inside the container (web access): its user, its working folder and its
        environment, bash where the image has it. Asked right after the start, it waits (a
        while) for the engine to have made the container."""
        assert self.engine is not None
        deadline = time.monotonic() + SHELL_WAIT_SECONDS
        while self.init_pid() is None and self.poll() is None and time.monotonic() < deadline:
            time.sleep(0.2)
        command = self.engine.command(
            "exec",
            "--interactive",
            "--tty",
            "--env",
            "TERM=xterm-256color",
            "--env",
            rf"PS1=\u@{self.label}:\w\$ ",
            self.container,
            "/bin/sh",
            "-c",
            "if command -v bash >/dev/null 2>&1; then exec bash --norc -i; else exec sh -i; fi",
        )
        return command, self.cwd, self.engine.environment()

    def usage_probe(self, memory_limit: int | None, *, own_network: bool) -> system.ProcessTree:
        """The container's processes, found from its init, and its network when its namespace is its own."""
        return system.container_tree(self.init_pid, memory_limit=memory_limit, network=own_network)

    def gpu_devices(self, accelerator_count: int) -> list[str] | None:
        return system.gpu_devices(accelerator_count, None, self.devices) if self.devices else None

    def init_pid(self) -> int | None:
        """The host's pid of the container's init, once the engine has started it; None before."""
        if self.engine is None or self.popen is None or self.popen.poll() is not None:
            return None
        try:
            answer = self.engine.call("inspect", "--format", "{{.State.Pid}}", self.container).strip()
        except engines.EngineError:
            return None
        return int(answer) if answer.isdigit() and int(answer) > 0 else None

    def stop(self, grace: float) -> None:
        """Stop the container (SIGTERM, SIGKILL after ``grace``) and wait for its status; ``remove``
        once the job has recorded it."""
        assert self.engine is not None
        if self.popen is not None and self.popen.poll() is None:
            self.stopped_by_platform = True
            try:
                self.engine.call(
                    "stop", "--time", str(int(round(grace))), self.container, timeout=grace + STOP_MARGIN_SECONDS
                )
            except engines.EngineError as error:
                logger.warning("Could not stop container %s: %s", self.container, error)
            try:
                self.popen.wait(timeout=STOP_MARGIN_SECONDS)
            except subprocess.TimeoutExpired:
                os.killpg(self.popen.pid, signal.SIGKILL)
                self.popen.wait()

    def remove(self) -> None:
        if self.popen is None:
            self.release_staged()  # it never started
            return
        if self.removed or self.popen.poll() is None:
            return
        assert self.engine is not None
        self.removed = True
        gpus.give_back(self.replica_id)
        remove_container(self.engine, self.container)
        self.release_staged()

    def release_staged(self) -> None:
        if self.staged is not None:
            self.staged.release()


SHELL_WAIT_SECONDS = 30.0  # a shell asked for as the container starts waits this long for it
REMOVE_TRIES = 6  # 0.25 s, then 0.5 s … : about 5 s in all


def remove_container(engine: engines.Engine, name: str) -> None:
    _removed(engine, ["rm", "--force", "--ignore", name], f"container {name}")


def _removed(engine: engines.Engine, command: list[str], what: str) -> None:
    """``rm --force`` a container or pod, tried again a few times: just after a container in a user
    namespace stops, its shm mount can still be busy for a moment ("device or resource busy")."""
    for attempt in range(REMOVE_TRIES):
        try:
            engine.call(*command, timeout=60)
            return
        except engines.EngineError as error:
            if attempt == REMOVE_TRIES - 1 or "busy" not in str(error):
                logger.warning("Could not remove %s: %s", what, error)
                return
            time.sleep(0.25 * (attempt + 1))


def exit_explanation(code: int | None, process: ContainerReplicaProcess) -> str:
    """What a container's exit status means, where the engine's own status says more than a number."""
    exec_failed = next((line for line in process.stderr_tail if "failed to exec pid1" in line), "")
    if code == 127 or "No such file or directory" in exec_failed:
        return " The container's command was not found in the image: check containerCommand, or the image's ENTRYPOINT."
    if code == 126 or exec_failed:
        return " The container's command cannot be run: it is not executable, or the user it runs as may not run it."
    if code == 125:
        return " The container engine could not start the container; its message is above."
    if code and any("Permission denied" in line or "Read-only file system" in line for line in process.stderr_tail):
        return (
            " It was refused a file: the container runs as root mapped to the project's account, with no "
            "capabilities, so it cannot read the image's files of other users that only they may read, and it "
            "writes only its job dir, its own folder and the folders its arguments name in the project's area "
            "(its stored inputs are read-only)."
        )
    if code == 137 and not process.stopped_by_platform:
        return (
            " The container was killed (SIGKILL): it most likely ran out of the memory its machine type allows "
            f"({process.label})."
        )
    return ""


# --- leftovers ------------------------------------------------------------------------------------------------


STAGING_MIN_AGE_SECONDS = 120.0


def sweep_lost_workers(live_owners: set[str]) -> int:
    """Scaled mode, every so often on each worker: the containers of this host's workers that were
    killed (their death stopped them, ``agent``) are removed, with what they were given (mount
    points, env files); never a live worker's. The count removed."""
    engine = engines.available()
    if engine is None:
        return 0
    removed = 0
    try:
        found = json.loads(
            engine.call("ps", "--all", "--format", "json", "--filter", f"label={LABEL_CONSOLE}={console_label()}")
            or "[]"
        )
        for container in found:
            owner = (container.get("Labels") or {}).get(LABEL_OWNER, "")
            if not owner.startswith("worker:") or owner in live_owners or owner == _owner[0]:
                continue
            if container.get("State") == "running":
                engine.call("stop", "--time", "1", container["Id"], timeout=60)
            remove_container(engine, container["Id"])
            for name in container.get("Names") or []:
                staging.release_folder(staging.root() / name)
            removed += 1
    except (engines.EngineError, json.JSONDecodeError, KeyError) as error:
        logger.warning("Could not remove the containers of lost workers: %s", error)
    return removed


def sweep(live_owners: set[str] | None = None) -> int:
    """Remove the containers and pods an earlier process of this console left behind (it was killed,
    the host restarted); the count of containers removed. Other consoles' are left alone, and so are
    other live workers' (scaled mode: ``live_owners``, whose leftovers are theirs to sweep)."""
    engine = engines.available()
    if engine is None:
        return 0
    mine = _owner[0]

    def ours(labels: dict | None) -> bool:
        owner = (labels or {}).get(LABEL_OWNER, "")
        if owner == mine:
            return True
        return live_owners is not None and owner.startswith("worker:") and owner not in live_owners

    console_filter = ["--filter", f"label={LABEL_CONSOLE}={console_label()}"]
    removed = 0
    try:
        found = json.loads(engine.call("ps", "--all", "--format", "json", *console_filter) or "[]")
        live: set[str] = set()
        for container in found:
            if ours(container.get("Labels")):
                engine.call("rm", "--force", "--ignore", container["Id"], timeout=60)
                removed += 1
            else:
                live.update(container.get("Names") or [])
        # Scaled mode: other live workers on this host may be staging a container right now.
        min_age = STAGING_MIN_AGE_SECONDS if live_owners is not None else 0.0
        staging.sweep(engine, live, prefix=container_name(0).removesuffix("r0"), min_age=min_age)
        remove_networks(engine)
        if engine.is_podman:
            for pod in json.loads(engine.call("pod", "ps", "--format", "json", *console_filter) or "[]"):
                if ours(pod.get("Labels")):
                    _remove_pod(engine, pod["Id"])  # one at a time: one gone meanwhile stops no other
    except (engines.EngineError, json.JSONDecodeError, KeyError) as error:
        logger.warning("Could not remove the containers an earlier console left: %s", error)
    return removed
