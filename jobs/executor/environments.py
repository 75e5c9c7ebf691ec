"""Python environments for jobs: a cached runtime stack per runtime version, and a per-job layer.

A runtime version is a pre-built environment with its framework stack (the original's machine
image). A job's packages are installed into a separate layer on top of it: a virtual environment
whose ``.pth`` file puts the runtime's site-packages on the path. The layer gets only what the
runtime lacks: ``uv pip compile`` resolves the trainer packages with the runtime's installed
versions as constraints, and what the runtime already has at that version is left out. Both
kinds are cached by a hash of their content, built under a file lock, and marked complete only
once built, so a crash mid-build is rebuilt rather than reused.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

from django.conf import settings

COMPLETE_MARKER = ".aiconsole-complete.json"
LAYER_PTH = "_aiconsole_runtime.pth"

# The framework stack every runtime provides (modern releases that install on current Pythons).
BASE_STACK = (
    "numpy",
    "scipy",
    "pandas",
    "scikit-learn",
    "xgboost-cpu",
    "google-cloud-storage",
    "cloudml-hypertune",
)
# Python versions each TensorFlow release published wheels for: TensorFlow joins a runtime's
# stack only where the interpreter allows.
TENSORFLOW_PYTHONS = {
    "1.15": ("3.5", "3.7"),
    "2.1": ("3.5", "3.7"),
    "2.2": ("3.5", "3.8"),
    "2.3": ("3.5", "3.8"),
    "2.4": ("3.6", "3.8"),
    "2.5": ("3.6", "3.9"),
    "2.6": ("3.6", "3.9"),
    "2.7": ("3.7", "3.9"),
    "2.8": ("3.7", "3.10"),
    "2.9": ("3.7", "3.10"),
    "2.10": ("3.7", "3.10"),
    "2.11": ("3.7", "3.10"),
}

Log = Callable[[str], None]


class EnvironmentError_(Exception):
    """An environment could not be built; the message is shown to the user as the job's error."""


@dataclass(frozen=True)
class Environment:
    path: Path
    key: str

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def bin_dir(self) -> Path:
        return self.path / "bin"

    def site_packages(self) -> Path:
        return next((self.path / "lib").glob("python3*/site-packages"))

    def frozen(self) -> dict[str, str]:
        return json.loads((self.path / COMPLETE_MARKER).read_text())["packages"]


def _version_tuple(version: str) -> tuple[int, ...]:
    return tuple(int(part) for part in version.split(".")[:2])


def base_python() -> str:
    return settings.RUNTIME_PYTHON or sys.executable


@lru_cache(maxsize=8)
def python_version(python: str) -> str:
    result = subprocess.run(
        [python, "-I", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
        capture_output=True, text=True, check=True,
    )
    return result.stdout.strip()


def runtime_stack(runtime_version: str, interpreter_version: str) -> list[str]:
    """The package requirements of a runtime version on a given interpreter."""
    stack = list(BASE_STACK)
    supported = TENSORFLOW_PYTHONS.get(runtime_version)
    if supported:
        low, high = (_version_tuple(v) for v in supported)
        if low <= _version_tuple(interpreter_version) <= high:
            stack.append(f"tensorflow-cpu=={runtime_version}.*")
    return stack


def _uv() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def _tool_env() -> dict[str, str]:
    """What uv sees: enough to reach the package index, none of the console's secrets."""
    keep = ("PATH", "HOME", "LANG", "SSL_CERT_FILE", "SSL_CERT_DIR", "HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY",
            "http_proxy", "https_proxy", "no_proxy")
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update({name: value for name, value in os.environ.items() if name.startswith("UV_")})
    env["UV_NO_PROGRESS"] = "1"
    return env


def _run_uv(args: list[str], log: Log, *, what: str) -> str:
    result = subprocess.run([_uv(), *args], capture_output=True, text=True, env=_tool_env())
    if result.returncode != 0:
        reason = (result.stderr or result.stdout).strip()
        # uv's first lines say what failed; keep the message readable but complete enough.
        raise EnvironmentError_(f"{what} failed:\n{_tail(reason, 60)}")
    return result.stdout


def _tail(text: str, lines: int) -> str:
    parts = text.splitlines()
    return "\n".join(parts[-lines:])


@contextmanager
def _locked(path: Path):
    path.parent.mkdir(parents=True, exist_ok=True)
    lock_path = path.parent / f".{path.name}.lock"
    with open(lock_path, "w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _freeze(python: Path) -> dict[str, str]:
    code = (
        "import importlib.metadata as m, json\n"
        "print(json.dumps({d.metadata['Name']: d.version for d in m.distributions() if d.metadata['Name']}))"
    )
    # -I: isolated, so the caller's working directory and PYTHONPATH do not leak into the list.
    result = subprocess.run([str(python), "-I", "-c", code], capture_output=True, text=True, check=True)
    return {canonical_name(name): version for name, version in json.loads(result.stdout).items()}


def canonical_name(name: str) -> str:
    return re.sub(r"[-_.]+", "-", name).lower()


def _ready(path: Path) -> bool:
    return (path / COMPLETE_MARKER).is_file()


def _build(path: Path, key: str, log: Log, build: Callable[[Path], dict]) -> Environment:
    """Build an environment at ``path`` under a lock unless a complete one is there already."""
    with _locked(path):
        if not _ready(path):
            if path.exists():
                shutil.rmtree(path)  # a half-built leftover from a crash
            try:
                info = build(path)
            except BaseException:
                shutil.rmtree(path, ignore_errors=True)
                raise
            (path / COMPLETE_MARKER).write_text(json.dumps(info, indent=1, sort_keys=True))
    return Environment(path=path, key=key)


def runtime_environment(runtime_version: str, log: Log) -> Environment:
    """The cached environment of a runtime version, built on first use."""
    python = base_python()
    version = python_version(python)
    stack = runtime_stack(runtime_version, version)
    key = hashlib.sha256(json.dumps({"python": version, "stack": stack}).encode()).hexdigest()
    path = settings.ENV_DIR / f"runtime-{runtime_version}-{key[:16]}"
    if _ready(path):
        return Environment(path=path, key=key)
    log(f"Building the environment of runtime version {runtime_version} on Python {version} "
        f"({', '.join(stack)}); this happens once.")
    if "tensorflow" not in " ".join(stack):
        log(f"TensorFlow {runtime_version} publishes no packages for Python {version}; "
            "this runtime environment has no TensorFlow.")

    def build(target: Path) -> dict:
        _run_uv(["venv", "--quiet", "--python", python, str(target)], log, what="Creating the runtime environment")
        _run_uv(["pip", "install", "--quiet", "--python", str(target / "bin" / "python"), *stack], log,
                what=f"Installing runtime version {runtime_version}")
        return {"kind": "runtime", "runtimeVersion": runtime_version, "python": version,
                "stack": stack, "packages": _freeze(target / "bin" / "python")}

    environment = _build(path, key, log, build)
    log(f"Runtime version {runtime_version} environment is ready.")
    return environment


def file_digest(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return digest.hexdigest()


def job_environment(runtime: Environment, packages: list[Path], log: Log) -> Environment:
    """The job's layer on top of a runtime: its packages and whatever they need that is missing."""
    identity = [runtime.key] + [f"{p.name}:{file_digest(p)}" for p in packages]
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()
    path = settings.ENV_DIR / f"job-{key[:20]}"
    if _ready(path):
        log("Reusing the cached environment for these trainer packages.")
        return Environment(path=path, key=key)
    log("Installing the trainer packages: " + ", ".join(p.name for p in packages))

    def build(target: Path) -> dict:
        frozen = runtime.frozen()
        _run_uv(["venv", "--quiet", "--python", str(runtime.python), str(target)], log,
                what="Creating the job environment")
        python = target / "bin" / "python"
        site = Environment(path=target, key=key).site_packages()
        (site / LAYER_PTH).write_text(str(runtime.site_packages()) + "\n")
        with tempfile.TemporaryDirectory() as scratch:
            requirements = Path(scratch) / "requirements.in"
            requirements.write_text("".join(f"{p.resolve()}\n" for p in packages))
            constraints = Path(scratch) / "runtime.txt"
            constraints.write_text("".join(f"{name}=={version}\n" for name, version in sorted(frozen.items())))
            pinned = _run_uv(
                ["pip", "compile", "--quiet", "--no-header", "--no-annotate", "--python", str(python),
                 "--constraint", str(constraints), str(requirements)],
                log, what="Resolving the trainer packages' requirements against the runtime",
            )
            missing = [line for line in _requirement_lines(pinned) if not _provided(line, frozen)]
            to_install = Path(scratch) / "install.txt"
            to_install.write_text("".join(f"{line}\n" for line in missing))
            extra = [line for line in missing if "==" in line]
            if extra:
                log("Installing what the runtime lacks: " + ", ".join(extra))
            _run_uv(["pip", "install", "--quiet", "--no-deps", "--python", str(python), "-r", str(to_install)],
                    log, what="Installing the trainer packages")
        return {"kind": "job", "runtime": runtime.key, "installed": missing, "packages": {}}

    environment = _build(path, key, log, build)
    log("The job environment is ready.")
    return environment


def _requirement_lines(compiled: str) -> list[str]:
    return [line.strip() for line in compiled.splitlines() if line.strip() and not line.lstrip().startswith("#")]


def _provided(line: str, frozen: dict[str, str]) -> bool:
    """Whether a pinned ``name==version`` line is already satisfied by the runtime."""
    match = re.match(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;]+)", line)
    if not match:
        return False
    return frozen.get(canonical_name(match.group(1))) == match.group(2)
