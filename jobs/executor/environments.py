"""Python environments for jobs: a cached runtime stack per runtime version, and a per-job layer.

A runtime version is a pre-built environment with its framework stack (the original's machine
image), installed from its hash-checked lock file (``jobs/runtimes/locks``) on an interpreter of
its Python. A job's packages go into a separate layer on top of it, as the original's
``pip install`` went over the image: a virtual environment whose ``.pth`` file adds the runtime's
site-packages after its own. The trainer's requirements are resolved with the runtime's versions
as preferences, not constraints, so the runtime satisfies what it can and a trainer's pin
(``pandas==1.1.5``) replaces the runtime's version in the layer, listed in the job's log; the
runtime itself stays untouched and shared. Both kinds are cached by a hash of their content,
built under a file lock, and marked complete only once built, so a crash mid-build is rebuilt
rather than reused.

Their modules are compiled to bytecode when they are installed, as pip does: trainers run as their
project's account (``aiconsole.trainer_user``), which cannot write the shared environment, so a
module not compiled there was compiled from its source again by every replica, serving process
and TensorBoard that imported it (BENCHMARKS.md).
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import shutil
import subprocess
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from aiconsole import archives, trainer_user
from aiconsole.storage import file_digest
from jobs import runtimes
from jobs.executor import builds
from jobs.runtimes import pythons

COMPLETE_MARKER = ".aiconsole-complete.json"
LAYER_PTH = "_aiconsole_runtime.pth"
FRAMEWORK_COLUMNS = ("TensorFlow", "scikit-learn", "XGBoost", "pandas", "NumPy")

Log = Callable[..., None]  # a job log's writer: the line, and a severity


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
        return next((self.path / "lib").glob("python*/site-packages"))

    def info(self) -> dict:
        return json.loads((self.path / COMPLETE_MARKER).read_text())

    def frozen(self) -> dict[str, str]:
        """Every distribution the environment's Python sees, with its version."""
        return self.info()["packages"]


# uv compiles nothing unless asked (pip compiles by default); every install here asks, and says so
# in the environment's complete marker.
COMPILE = "--compile-bytecode"
BYTECODE = "bytecode"


def run_uv(args: list[str], *, what: str) -> str:
    result = subprocess.run([pythons.uv_binary(), *args], capture_output=True, text=True, env=pythons.tool_env())
    if result.returncode != 0:
        raise EnvironmentError_(f"{what} failed:\n{_tail((result.stderr or result.stdout).strip(), 60)}")
    return result.stdout


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])


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


def _ready(path: Path) -> bool:
    return (path / COMPLETE_MARKER).is_file()


def _mark_complete(path: Path, info: dict) -> None:
    """Write the environment's complete marker, whole or not at all: a marker cut short by a crash
    would say complete and then fail every read of it."""
    partial = path / f"{COMPLETE_MARKER}.partial"
    partial.write_text(json.dumps(info, indent=1, sort_keys=True))
    partial.replace(path / COMPLETE_MARKER)


def build_once(path: Path, key: str, build: Callable[[Path], dict]) -> Environment:
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
            _mark_complete(path, info)
    return Environment(path=path, key=key)


# --- runtimes --------------------------------------------------------------------------------


def interpreter_for(python: str, log: Log) -> str:
    """The interpreter of a Python version, installed with uv where it is missing and allowed."""
    try:
        found = pythons.find_python(python)
        if found:
            return found
        if pythons.downloads_allowed():
            return pythons.install_python(python, log)
    except pythons.PythonNotFound as error:
        raise EnvironmentError_(str(error)) from None
    raise EnvironmentError_(f"No Python {python} interpreter was found. {pythons.how_to_provide(python)}")


def runtime_environment(
    runtime_version: str | None, log: Log, *, python_version: str | None = None, variant: str = "cpu"
) -> Environment:
    """The cached environment of a runtime version on its Python, built from its lock on first use."""
    runtime, python = runtimes.resolve_pair(runtime_version, python_version)
    reason = None if python in runtime.pythons else runtimes.unavailable_reason(runtime.name, python)
    if reason:
        raise EnvironmentError_(reason)
    interpreter = for_trainers(interpreter_for(python, log), log)
    lock = runtime.lock_path(python, variant)
    full_version = pythons.interpreter_version(interpreter)
    # The interpreter's path too: a virtual environment runs the interpreter it was made with.
    identity = {"python": full_version, "lock": lock.read_text(), "interpreter": interpreter}
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()
    path = settings.ENV_DIR / f"runtime-{runtime.name}-py{python}-{variant}-{key[:16]}"
    if _ready(path):
        return shared(Environment(path=path, key=key))
    log(
        f"Building the environment of runtime version {runtime.name} ({variant.upper()} build, TensorFlow "
        f"{runtime.tensorflow}) on Python {full_version} from {lock.name}; this happens once per machine."
    )

    def build(target: Path) -> dict:
        run_uv(["venv", "--quiet", "--python", interpreter, str(target)], what="Creating the runtime environment")
        python = str(target / "bin" / "python")
        sync = ["pip", "sync", "--quiet", "--require-hashes", COMPILE, "--python", python, str(lock)]
        what = f"Installing runtime version {runtime.name} from {lock.name}"
        try:
            run_uv(sync, what=what)
        except EnvironmentError_ as error:
            if "hash mismatch" not in str(error).lower():
                raise
            # A cache entry that does not match the lock (another process wrote it mid-way, or it
            # was corrupted): fetch again once; a second mismatch is the index's, and is reported.
            log(f"uv's cache gave a file whose hash is not in {lock.name}; downloading again.")
            run_uv([*sync[:2], "--refresh", *sync[2:]], what=what)
        return {
            "kind": "runtime",
            "runtimeVersion": runtime.name,
            "python": full_version,
            "variant": variant,
            "lock": lock.name,
            "lockSha256": file_digest(lock),
            "packages": runtimes.distributions([Environment(path=target, key=key).site_packages()]),
            "sizeBytes": size_on_disk(target),
            BYTECODE: True,
        }  # measured once: listing runtimes never walks them

    environment = shared(build_once(path, key, build))
    log(f"Runtime version {runtime.name} environment is ready.")
    return environment


def for_trainers(interpreter: str, log: Log) -> str:
    """The interpreter, or a copy the projects' accounts can run (aiconsole.trainer_user)."""
    try:
        return trainer_user.reachable_python(interpreter, log)
    except trainer_user.TrainerUserError as error:
        raise EnvironmentError_(str(error)) from None


def shared(environment: Environment, account: trainer_user.TrainerUser | None = None) -> Environment:
    """The environment, readable by every project's account (a runtime) or by ``account``'s group
    alone (a job's layer, which holds that project's packages), when trainers run as such."""
    if trainer_user.switching():
        with _locked(environment.path):
            compile_bytecode(environment)
            if account is None:
                trainer_user.open_to_all(environment.path)
            else:
                account.share(environment.path)
    return environment


COMPILE_SECONDS = 900


def compile_bytecode(environment: Environment) -> None:
    """Compile an environment built before installs compiled (no ``bytecode`` in its marker), once.

    The bytecode is written as the console (its umask keeps it private), so the environment is
    opened to the trainers' accounts again afterwards: its sharing marker is removed. A module
    that does not compile on the environment's Python (a Python 2 file some package ships) is left
    as it is, as pip leaves it."""
    info = environment.info()
    if info.get(BYTECODE):
        return
    subprocess.run(
        # -S: a job's layer holds the user's .pth files, which the site module would run.
        [str(environment.python), "-I", "-S", "-m", "compileall", "-q", "-j", "0", str(environment.site_packages())],
        capture_output=True,
        env=pythons.tool_env(),
        timeout=COMPILE_SECONDS,
    )
    _mark_complete(environment.path, {**info, BYTECODE: True})
    (environment.path / trainer_user.SHARED_MARKER).unlink(missing_ok=True)


def built_runtime(runtime: runtimes.Runtime, python: str, variant: str = "cpu") -> Environment | None:
    """The built environment of a runtime/Python/build from its current lock file, if there is one."""
    digest = file_digest(runtime.lock_path(python, variant))
    for path in sorted(settings.ENV_DIR.glob(f"runtime-{runtime.name}-py{python}-{variant}-*")):
        if _ready(path):
            environment = Environment(path=path, key="")
            if environment.info().get("lockSha256") == digest:
                return environment
    return None


def used(path: Path) -> None:
    """Note that a job takes the layer now: its marker's time is its last use, which the clean-up
    reads (``unused_job_layers``)."""
    try:
        os.utime(path / COMPLETE_MARKER)
    except OSError:
        pass  # a marker the console cannot touch only makes the layer look older; it is rebuilt if removed


def unused_job_layers(before: float) -> list[tuple[Path, int]]:
    """The jobs' layers (``job-…``, never a runtime) last used before ``before`` (seconds since the
    epoch), with their size."""
    found = []
    try:
        entries = [entry for entry in os.scandir(settings.ENV_DIR) if entry.name.startswith("job-")]
    except OSError:
        return []
    for entry in entries:
        if not entry.is_dir(follow_symlinks=False):
            continue
        try:
            last_use = os.lstat(os.path.join(entry.path, COMPLETE_MARKER)).st_mtime
        except OSError:
            continue  # being built, or a leftover that build_once replaces
        if last_use < before:
            found.append((Path(entry.path), size_on_disk(Path(entry.path))))
    return sorted(found)


def remove_job_layer(path: Path, before: float) -> bool:
    """Remove a job's layer under its build lock, if it is still unused since ``before``: a job
    that took it meanwhile touched its marker, and keeps it."""
    with _locked(path):
        try:
            if os.lstat(path / COMPLETE_MARKER).st_mtime >= before:
                return False
        except OSError:
            return False
        shutil.rmtree(path)
    return True


def size_on_disk(path: Path) -> int:
    """Bytes under a folder, links not followed."""
    total = 0
    for root, _, names in os.walk(path):
        for name in names:
            try:
                total += os.lstat(os.path.join(root, name)).st_size
            except OSError:
                pass
    return total


def _size_of(environment: Environment) -> int:
    return environment.info().get("sizeBytes") or size_on_disk(environment.path)  # built before it was kept


def describe(runtime: Environment, packages: dict[str, str]) -> str:
    """``Runtime version 2.11, Python 3.7.16 (CPU build): TensorFlow 2.11.0, scikit-learn 1.0.2, …``"""
    info = runtime.info()
    frameworks = [f"{label} {version}" for label, version in runtimes.framework_versions(packages).items()]
    return runtimes.describe_build(info["runtimeVersion"], info["python"], info["variant"], frameworks)


# --- the job's layer -------------------------------------------------------------------------


def job_environment(
    runtime: Environment, packages: list[Path], log: Log, account: trainer_user.TrainerUser | None = None
) -> Environment:
    """The job's layer on top of a runtime: its packages, and its pins over the runtime's versions.
    With ``account`` (trainers run as their project's), the layer is that project's alone, and
    everything of it that must be built is built as that account (``jobs.executor.builds``)."""
    key = _layer_key([runtime.key], packages, account)
    path = settings.ENV_DIR / f"job-{key[:20]}"
    if _ready(path):
        log("Reusing the cached environment for these trainer packages.")
        used(path)
        _log_changes(Environment(path=path, key=key).info(), log)
        return shared(Environment(path=path, key=key), account)
    log("Installing the trainer packages: " + ", ".join(p.name for p in packages))

    def build(target: Path) -> dict:
        frozen = runtime.frozen()
        with builds.Sandbox(account, runtime.python, packages) as box, tempfile.TemporaryDirectory() as private:
            plan = _plan(box, runtime, frozen)
            pins = [pin for pin in plan.pins if not _provided(pin, frozen)]
            wheels = [box.take_wheel(wheel, Path(private), name, version) for name, version, wheel in plan.built]
            _install_layer(runtime, target, pins, wheels, Path(private), copies=account is not None)
        from_index = [f"{name}=={version}" for name, version in pins + [entry[:2] for entry in plan.from_sdists]]
        info = {
            "kind": "job",
            "runtime": runtime.key,
            "installed": from_index + [f"{name}=={version}" for name, version, _ in plan.own],
            "changes": _changes(from_index, frozen),
            "packages": runtimes.distributions(
                [Environment(path=target, key=key).site_packages(), runtime.site_packages()]
            ),
            BYTECODE: True,
        }
        _log_changes(info, log)
        return info

    environment = shared(build_once(path, key, build), account)
    log("The job environment is ready.")
    return environment


# --- a job's packages for one of Google's pre-built images ---------------------------------------


IMAGE_STUB = "Installer: ai-console image stub\n"


def image_layer(
    image: str,
    python: str,
    provided: dict[str, str],
    packages: list[Path],
    log: Log,
    account: trainer_user.TrainerUser | None = None,
) -> Environment:
    """The job's packages for a pre-built image (``jobs.containers.prebuilt``), as ``pip install``
    in that image would leave them: a folder the replicas' containers see first on ``PYTHONPATH``.

    ``image`` identifies the image's contents (its recipe key), ``python`` its Python ("3.11") and
    ``provided`` its distributions. The job's sdists are built as the project's account, on an
    interpreter of the image's Python version; the console then installs the wheels with no build
    step into a folder where every distribution the image has is present as a stub, so that what
    the image provides satisfies the requirements (and a requirement it does not satisfy replaces
    it, as pip would), and removes the stubs after."""
    key = _layer_key(["image", image, python, sorted(provided.items())], packages, account)
    path = settings.ENV_DIR / f"image-job-{key[:20]}"
    if _ready(path):
        log("Reusing the installed trainer packages for this image.")
        return shared(Environment(path=path, key=key), account)
    log("Installing the trainer packages for the image: " + ", ".join(p.name for p in packages))
    interpreter = for_trainers(interpreter_for(python, log), log)

    def build(target: Path) -> dict:
        target.mkdir(parents=True, exist_ok=True)
        with builds.Sandbox(account, Path(interpreter), packages) as box, tempfile.TemporaryDirectory() as private:
            try:
                built = box.build_sdists()
                wheels = [
                    box.take_wheel(
                        Path(local.requirement), Path(private), *builds.wheel_identity(Path(local.requirement).name)
                    )
                    for local in built
                ]
            except builds.BuildError as error:
                raise EnvironmentError_(str(error)) from None
            stubs = _stub_distributions(target, provided)
            run_uv(
                ["pip", "install", "--quiet", "--no-build", COMPILE, "--link-mode", "copy", "--target", str(target)]
                + ["--python", interpreter, *map(str, wheels)],
                what="Installing the trainer packages",
            )
        for stub in stubs:
            if (stub / "INSTALLER").is_file() and (stub / "INSTALLER").read_text() == IMAGE_STUB:
                shutil.rmtree(stub)
        shutil.rmtree(target / "bin", ignore_errors=True)  # scripts naming this machine's interpreter
        added = runtimes.distributions([target])
        replaced = {name: version for name, version in added.items() if name in provided}
        if replaced:
            log(
                "The trainer packages need other versions than the image has: "
                + ", ".join(f"{name} {provided[name]} → {version}" for name, version in sorted(replaced.items()))
                + ".",
                severity="WARNING",
            )
        return {"kind": "image-job", "image": image, "packages": added, BYTECODE: True}

    environment = shared(build_once(path, key, build), account)
    added = ", ".join(f"{name} {version}" for name, version in environment.frozen().items())
    log(f"The trainer packages are installed for the image: {added or 'nothing the image lacks'}.")
    return environment


def _layer_key(base: list, packages: list[Path], account: trainer_user.TrainerUser | None) -> str:
    """What a job's layer is made of, as a digest: its base, its packages' contents, its account. A
    wheel's file name is part of what it is (its tags); an sdist's is not (the Vertex SDK stages its
    script's package under a name with the time in it)."""
    identity = [*base, *(f"{_name_part(p)}:{contents_digest(p)}" for p in packages)]
    if account is not None:
        identity.append(f"account:{account.uid}")
    return hashlib.sha256(json.dumps(identity).encode()).hexdigest()


def _name_part(package: Path) -> str:
    return package.name if package.name.lower().endswith(".whl") else "source"


_CONTENTS_MAX_ENTRIES = 20_000
_CONTENTS_MAX_BYTES = 1 << 30


class _TooMuch(Exception):
    pass


def contents_digest(path: Path) -> str:
    """A package's digest by what it holds (each member's name, kind, executable bit and bytes),
    not by the archive's own bytes: the same sources packaged again (the Vertex SDK packages a local
    script on every run, ``--package-path`` makes a new sdist on every submit) differ only in the
    times tar and gzip write, and should share one environment. The file's own digest for what is
    not an archive read here, or one past the bounds."""
    name = path.name.lower()
    try:
        if name.endswith((".tar.gz", ".tgz", ".tar")):
            return "contents:" + _tar_contents(path)
        if name.endswith((".zip", ".whl")):
            return "contents:" + _zip_contents(path)
    except (tarfile.TarError, zipfile.BadZipFile, OSError, EOFError, _TooMuch):
        pass
    return file_digest(path)


def _member_digest(handle, budget: list[int]) -> str:
    digest = hashlib.sha256()
    while chunk := handle.read(1 << 16):
        budget[0] -= len(chunk)
        if budget[0] < 0:
            raise _TooMuch()
        digest.update(chunk)
    return digest.hexdigest()


def _tar_contents(path: Path) -> str:
    entries: list[str] = []
    budget = [_CONTENTS_MAX_BYTES]
    with tarfile.open(path, "r:*") as archive:
        for member in archive:
            if len(entries) >= _CONTENTS_MAX_ENTRIES:
                raise _TooMuch()
            if member.isfile():
                handle = archive.extractfile(member)
                content = _member_digest(handle, budget) if handle is not None else ""
                entries.append(f"f:{member.name}:{bool(member.mode & 0o111)}:{content}")
            elif member.issym() or member.islnk():
                entries.append(f"l:{member.name}:{member.linkname}")
            elif member.isdir():
                entries.append(f"d:{member.name.rstrip('/')}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def _zip_contents(path: Path) -> str:
    entries: list[str] = []
    budget = [_CONTENTS_MAX_BYTES]
    with zipfile.ZipFile(path) as archive:
        for info in archive.infolist():
            if len(entries) >= _CONTENTS_MAX_ENTRIES:
                raise _TooMuch()
            if info.is_dir():
                entries.append(f"d:{info.filename.rstrip('/')}")
                continue
            with archive.open(info) as handle:
                executable = bool((info.external_attr >> 16) & 0o111)
                entries.append(f"f:{info.filename}:{executable}:{_member_digest(handle, budget)}")
    return hashlib.sha256("\n".join(sorted(entries)).encode()).hexdigest()


def _stub_distributions(target: Path, provided: dict[str, str]) -> list[Path]:
    """A metadata-only stand-in for each distribution the image has, in ``target``."""
    stubs = []
    for name, version in provided.items():
        stub = target / f"{name.replace('-', '_')}-{version}.dist-info"
        stub.mkdir()
        (stub / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n\n")
        (stub / "INSTALLER").write_text(IMAGE_STUB)
        (stub / "RECORD").write_text("")
        stubs.append(stub)
    return stubs


def _plan(box: builds.Sandbox, runtime: Environment, frozen: dict[str, str]) -> builds.Plan:
    """As the project's account: the job's sdists built, the whole resolved on the runtime with its
    versions preferred, and what the index has only as sdists built too."""
    try:
        built = box.build_sdists()
        try:
            lock = box.resolve([local.requirement for local in built], frozen)
        except builds.ResolutionError as error:
            raise EnvironmentError_(_diagnose(runtime, box, str(error))) from None
        plan, sdists = box.plan(lock, built)
        plan.from_sdists = box.build_from_index([sdist for sdist in sdists if not _provided(sdist[:2], frozen)])
    except builds.BuildError as error:
        raise EnvironmentError_(str(error)) from None
    return plan


def _install_layer(
    runtime: Environment, target: Path, pins: list[tuple[str, str]], wheels: list[Path], scratch: Path, *, copies: bool
) -> None:
    """Install pins from the index and wheels into a new layer at ``target``, as the console, with
    no build step (``--no-build``) and with the runtime's interpreter (``--prefix``): the layer's
    own interpreter would run the ``.pth`` files the wheels just put there, the user's code."""
    run_uv(["venv", "--quiet", "--python", str(runtime.python), str(target)], what="Creating the job environment")
    site = Environment(path=target, key="").site_packages()
    # addsitedir, not a bare path: the runtime's own .pth files (namespace packages) apply too.
    (site / LAYER_PTH).write_text(f"import site; site.addsitedir({str(runtime.site_packages())!r})\n")
    to_install = scratch / "install.txt"
    to_install.write_text("".join(f"{name}=={version}\n" for name, version in pins))
    # Copies, not links into uv's cache: the layer's files get the project's group, and a file
    # linked into two projects' layers could carry only one of them.
    link = ["--link-mode", "copy"] if copies else []
    run_uv(
        [
            "pip",
            "install",
            "--quiet",
            "--no-deps",
            "--no-build",
            COMPILE,
            *link,
            "--python",
            str(runtime.python),
            "--prefix",
            str(target),
            "-r",
            str(to_install),
            *map(str, wheels),
        ],
        what="Installing the trainer packages",
    )
    _point_scripts_at(target, runtime)


def _point_scripts_at(layer: Path, runtime: Environment) -> None:
    """Scripts installed with the runtime's interpreter name it in their first line; the layer's
    own scripts run on the layer's interpreter, which sees the layer's packages."""
    wrong, right = f"#!{runtime.python}".encode(), f"#!{layer / 'bin' / 'python'}".encode()
    for script in (layer / "bin").iterdir():
        if script.is_symlink() or not script.is_file():
            continue
        with open(script, "rb") as handle:
            first = handle.readline()
        if first.rstrip(b"\r\n") == wrong:
            script.write_bytes(right + b"\n" + script.read_bytes()[len(first) :])


def _diagnose(runtime: Environment, box: builds.Sandbox, combined: str) -> str:
    """Every requirement that cannot be installed on the runtime's Python, each with uv's reason
    (each asked as the project's account, in its sandbox)."""
    requirements = [req for path in box.packages for req in package_requirements(path)]
    info = runtime.info()
    where = f"runtime version {info['runtimeVersion']} (Python {info['python']})"
    with ThreadPoolExecutor(max_workers=4) as pool:
        reasons = list(pool.map(box.check, requirements))
    failing = [(req, _reason(why)) for req, why in zip(requirements, reasons, strict=True) if why]
    if not failing:
        return f"The trainer packages' requirements cannot be installed together on {where}:\n{_tail(combined, 30)}"
    lines = "\n".join(f"- {req}: {why}" for req, why in failing)
    return (
        f"{len(failing)} requirement{'s' if len(failing) > 1 else ''} of the trainer packages cannot be "
        f"installed on {where}:\n{lines}"
    )


def _reason(uv_message: str) -> str:
    """uv's explanation without its framing: the lines after ``× No solution found``."""
    lines = [line.strip(" ╰─▶×│") for line in uv_message.splitlines()[1:]]
    useful = [line for line in lines if line and not line.lower().startswith("no solution found")]
    return " ".join(useful)[:600] or uv_message[:600]


def package_requirements(path: Path) -> list[str]:
    """The requirements a trainer package declares (Requires-Dist, or an sdist's egg-info)."""

    try:
        return list(archives.inspect_package(path).requires)
    except archives.ArchiveError:
        return []


_PIN = re.compile(r"^([A-Za-z0-9][A-Za-z0-9._-]*)(?:\[[^\]]*\])?==([^\s;]+)")


def _provided(pin: tuple[str, str], frozen: dict[str, str]) -> bool:
    """Whether the runtime has this (name, version) already."""
    return frozen.get(runtimes.canonical_name(pin[0])) == pin[1]


def _changes(installed: list[str], frozen: dict[str, str]) -> list[dict]:
    """What the layer changes in the runtime: versions replaced, packages added."""
    changes = []
    for line in installed:
        match = _PIN.match(line)
        if match:
            name = runtimes.canonical_name(match.group(1))
            changes.append({"name": name, "from": frozen.get(name), "to": match.group(2)})
    return changes


def _log_changes(info: dict, log: Log) -> None:
    replaced = [f"{c['name']} {c['from']} → {c['to']}" for c in info.get("changes", []) if c["from"]]
    added = [f"{c['name']} {c['to']}" for c in info.get("changes", []) if not c["from"]]
    if replaced:
        log("The trainer's requirements replace runtime packages: " + ", ".join(replaced) + ".")
    if added:
        log("Installed what the runtime lacks: " + ", ".join(added) + ".")


def inventory(*, with_sizes: bool = False) -> list[dict]:
    """Every runtime/Python/build: its framework versions, interpreter, and whether it is built here."""
    rows = []
    for runtime in runtimes.RUNTIMES.values():
        for python in runtime.pythons:
            try:
                interpreter = pythons.find_python(python)
            except pythons.PythonNotFound:
                interpreter = None
            for variant in runtimes.VARIANTS:
                if not runtime.lock_path(python, variant).is_file():
                    continue
                built = built_runtime(runtime, python, variant)
                frameworks = runtime.frameworks()
                rows.append(
                    {
                        "runtimeVersion": runtime.name,
                        "pythonVersion": python,
                        "variant": variant,
                        "frameworks": frameworks,
                        "interpreter": interpreter,
                        "columns": [frameworks.get(label, "—") for label in FRAMEWORK_COLUMNS],
                        "downloadable": interpreter is None and pythons.downloads_allowed(),
                        "built": built is not None,
                        "path": str(built.path) if built else None,
                        "sizeBytes": _size_of(built) if built and with_sizes else None,
                        "notes": list(runtime.notes),
                        "extension": runtime.is_extension,
                    }
                )
    return rows
