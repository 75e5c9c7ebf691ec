"""The container engine: found once per process, configured for this host, called as a program.

podman is preferred, docker accepted (``AICONSOLE_CONTAINER_ENGINE`` picks one or names a path).
For podman the console writes the ``containers.conf`` this kind of host needs and points every
call at it (``CONTAINERS_CONF``), instead of asking the administrator to: default ulimits no
higher than the hard limits the runtime is started with (a higher ``nofile`` needs
CAP_SYS_RESOURCE), runc where crun refuses a hybrid cgroup layout, cgroupfs where systemd does
not run, and a file events logger where journald does not.

Engine calls get a minimal environment: the console's own (its secrets included) never reaches
the engine, so never a container.
"""

from __future__ import annotations

import functools
import json
import os
import resource
import shutil
import subprocess
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from django.conf import settings

from aiconsole import yamlsafe

ENGINES = ("podman", "docker")
NPROC_RUNTIME_CEILING = 32768  # the OCI runtime is started with this nproc hard limit on such hosts
NOFILE_CEILING = 20000
CALL_SECONDS = 120.0


class EngineError(Exception):
    """An engine call failed; the message is the engine's own words."""


@dataclass(frozen=True)
class Engine:
    name: str  # "podman" or "docker"
    path: str
    version: str
    conf: Path | None  # podman: the containers.conf the console wrote
    limits: bool  # whether --cpus/--memory/--pids-limit are enforced on this host
    gpus: tuple[str, ...] = ()  # device names containers can be given (CDI names, or docker indices)
    notes: tuple[str, ...] = field(default=())
    security: tuple[str, ...] = ()  # options every container runs with (seccomp_options)

    @property
    def is_podman(self) -> bool:
        return self.name == "podman"

    @property
    def output_options(self) -> tuple[str, ...]:
        """A replica's output reaches the console through the attached ``run`` client only: podman
        would otherwise keep a second copy of every line in a log file under its storage, which
        nothing reads and nothing bounds while the container lives (a chatty trainer's gigabytes).
        Its ``passthrough`` driver would spare conmon's copy too; bench/containers.py's cancel
        looked slower with it (noisy runs), so it waits for a closer measurement."""
        return ("--log-driver", "none") if self.is_podman else ()

    def environment(self) -> dict[str, str]:
        env = {"PATH": os.environ.get("PATH", os.defpath), "HOME": os.environ.get("HOME", "/root"), "LANG": "C.UTF-8"}
        for name in ("XDG_RUNTIME_DIR", "TMPDIR", "DOCKER_HOST"):
            if name in os.environ:
                env[name] = os.environ[name]
        if self.conf is not None:
            env["CONTAINERS_CONF"] = str(self.conf)
        return env

    def command(self, *args: str) -> list[str]:
        return [self.path, *args]

    def call(self, *args: str, input: bytes | None = None, stdin=None, timeout: float = CALL_SECONDS) -> str:
        """Run the engine; its stdout, or an EngineError with its stderr."""
        try:
            result = subprocess.run(
                self.command(*args),
                input=input,
                stdin=stdin if input is None else None,
                capture_output=True,
                env=self.environment(),
                timeout=timeout,
            )
        except subprocess.TimeoutExpired:
            raise EngineError(f"{self.name} {args[0]} did not answer within {timeout:.0f} s.") from None
        if result.returncode != 0:
            words = result.stderr.decode(errors="replace").strip() or f"exit status {result.returncode}"
            raise EngineError(words.removeprefix("Error: ").strip())
        return result.stdout.decode(errors="replace")

    def inspect_image(self, reference: str) -> dict | None:
        """The engine's description of a local image (never pulled), None when it has none."""
        try:
            found = json.loads(self.call("image", "inspect", reference) or "[]")
        except (EngineError, json.JSONDecodeError):
            return None
        return found[0] if found else None

    def describe(self) -> dict:
        """What the engine page and ``aiconsole containers status`` say."""
        return {
            "engine": self.name,
            "path": self.path,
            "version": self.version,
            "limitsEnforced": self.limits,
            "gpus": list(self.gpus),
            "notes": list(self.notes),
        }


class Unavailable:
    """No engine: why, in a sentence a submit error can carry."""

    def __init__(self, reason: str):
        self.reason = reason

    def describe(self) -> dict:
        return {"engine": None, "reason": self.reason}


@functools.cache
def current() -> Engine | Unavailable:
    """The engine this console runs containers with, found and checked once per process."""
    choice = settings.CONTAINER_ENGINE
    if choice == "none":
        return Unavailable("Custom containers are turned off on this server (AICONSOLE_CONTAINER_ENGINE=none).")
    candidates = [choice] if choice != "auto" else list(ENGINES)
    for candidate in candidates:
        path = shutil.which(candidate)
        if path is None:
            continue
        name = "docker" if Path(path).name.startswith("docker") else "podman"
        try:
            return _checked(name, path)
        except EngineError as error:
            if choice != "auto":
                return Unavailable(f"The container engine {path} does not work on this host: {error}")
    if choice != "auto":
        return Unavailable(f"The container engine {choice} named by AICONSOLE_CONTAINER_ENGINE was not found.")
    return Unavailable(
        "No container engine was found on this server: install podman (Debian: apt install podman runc "
        "catatonit uidmap) or docker, then restart the console."
    )


def available() -> Engine | None:
    engine = current()
    return engine if isinstance(engine, Engine) else None


def _checked(name: str, path: str) -> Engine:
    conf = write_podman_conf() if name == "podman" else None
    probe = Engine(name, path, "", conf, False)
    version = probe.call("version", "--format", "{{.Client.Version}}", timeout=30).strip()
    if name == "podman":
        info = json.loads(probe.call("info", "--format", "json", timeout=60))
        host = info.get("host", {})
        rootless = bool(host.get("security", {}).get("rootless"))
        limits = not (rootless and host.get("cgroupVersion") == "v1")
        notes = () if limits else ("Rootless podman on cgroup v1 ignores resource limits on this host.",)
        security, said = seccomp_options()
        return Engine(name, path, version, conf, limits, _cdi_gpus(), (*notes, *said), security)
    info = json.loads(probe.call("info", "--format", "{{json .}}", timeout=60))
    gpus = tuple(str(i) for i in range(_host_gpu_count())) if "nvidia" in (info.get("Runtimes") or {}) else ()
    return Engine(name, path, version, None, True, gpus)


def write_podman_conf() -> Path:
    """The containers.conf podman needs on this host, under the data dir."""
    nofile = _ceiling(resource.RLIMIT_NOFILE, NOFILE_CEILING)
    nproc = _ceiling(resource.RLIMIT_NPROC, NPROC_RUNTIME_CEILING)
    lines = [
        "# Written by AI Console at start-up (jobs/containers/engine.py); rewritten every start.",
        "[containers]",
        f'default_ulimits = ["nofile={nofile}:{nofile}", "nproc={nproc}:{nproc}"]',
        "[engine]",
        f'events_logger = "{"journald" if Path("/run/systemd/journal/socket").exists() else "file"}"',
    ]
    if shutil.which("runc"):
        lines.append('runtime = "runc"')  # crun 1.8 refuses a hybrid cgroup layout; runc runs on every layout
    if not Path("/run/systemd/system").is_dir():
        lines.append('cgroup_manager = "cgroupfs"')  # no systemd to ask for cgroups
    folder = settings.DATA_DIR / "containers"
    folder.mkdir(parents=True, exist_ok=True)
    conf = folder / "containers.conf"
    conf.write_text("\n".join(lines) + "\n")
    return conf


SECCOMP_SOURCES = (Path("/usr/share/containers/seccomp.json"), Path("/etc/containers/seccomp.json"))
CLONE_NEWUSER = 0x10000000
EPERM, ENOSYS = 1, 38
_NAMESPACE_CALLS = {"unshare", "clone", "clone3"}


def seccomp_options() -> tuple[tuple[str, ...], tuple[str, ...]]:
    """The engine's options that keep containers from creating user namespaces (``unshare -U``,
    ``clone(CLONE_NEWUSER)``), where a process that looks root inside one reaches kernel code no
    unprivileged user should, and notes for the engine page. The engine's own seccomp profile, with
    ``unshare`` and ``clone`` refused when they ask for a user namespace and ``clone3`` answered
    ENOSYS (C libraries then use ``clone``), written beside containers.conf. An administrator allows
    them with ``AICONSOLE_CONTAINER_USER_NAMESPACES=allow``."""
    if settings.CONTAINER_USER_NAMESPACES == "allow":
        return (), ("Containers may create user namespaces (AICONSOLE_CONTAINER_USER_NAMESPACES=allow).",)
    source = next((path for path in SECCOMP_SOURCES if path.is_file()), None)
    if source is None:
        return (), ("The engine's seccomp profile was not found: containers may create user namespaces.",)
    profile = json.loads(source.read_text())
    for rule in profile.get("syscalls", []):
        rule["names"] = [name for name in rule.get("names") or [] if name not in _NAMESPACE_CALLS]
    no_new_user = {"index": 0, "value": CLONE_NEWUSER, "valueTwo": 0, "op": "SCMP_CMP_MASKED_EQ"}
    new_user = {**no_new_user, "valueTwo": CLONE_NEWUSER}
    profile["syscalls"] += [
        {"names": ["unshare", "clone"], "action": "SCMP_ACT_ALLOW", "args": [no_new_user]},
        {"names": ["unshare", "clone"], "action": "SCMP_ACT_ERRNO", "errnoRet": EPERM, "args": [new_user]},
        {"names": ["clone3"], "action": "SCMP_ACT_ERRNO", "errnoRet": ENOSYS},
    ]
    path = settings.DATA_DIR / "containers" / "seccomp.json"
    path.write_text(json.dumps(profile))
    return ("--security-opt", f"seccomp={path}"), ()


def _ceiling(limit: int, most: int) -> int:
    _, hard = resource.getrlimit(limit)
    return most if hard == resource.RLIM_INFINITY else max(1024, min(hard, most))


def _cdi_gpus() -> tuple[str, ...]:
    """CDI device names for NVIDIA GPUs (``nvidia.com/gpu=0``…), from the specs ``nvidia-ctk cdi
    generate`` writes; a spec's ``all`` device is left out, each replica gets devices by index."""
    names: list[str] = []
    for folder in (Path("/etc/cdi"), Path("/var/run/cdi")):
        for spec_file in sorted(p for p in folder.glob("*") if p.suffix in {".json", ".yaml", ".yml"}):
            try:
                spec = yamlsafe.load(spec_file.read_bytes(), max_bytes=4 * 1024 * 1024, max_values=200_000)
            except (OSError, yaml.YAMLError):
                continue
            if not isinstance(spec, dict) or spec.get("kind") != "nvidia.com/gpu":
                continue
            for device in spec.get("devices") or []:
                name = str((device or {}).get("name", ""))
                if name and name != "all":
                    names.append(f"nvidia.com/gpu={name}")
    return tuple(dict.fromkeys(names))


def _host_gpu_count() -> int:
    folder = Path("/proc/driver/nvidia/gpus")
    if folder.is_dir():
        return len(list(folder.iterdir()))
    return len([p for p in Path("/dev").glob("nvidia[0-9]*")])
