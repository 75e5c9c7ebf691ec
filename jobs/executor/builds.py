"""A job's packages are built as its project's account, never as the console.

Building a trainer package runs its code: ``setup.py``, a PEP 517 backend (``backend-path``
included), and the same for every sdist it pins from the package index. The console (root, with
the secret key and the database) therefore never builds. A :class:`Sandbox` is a folder of the
project's account under its project's work area (``WORK_DIR/<project>/.builds/``), holding copies
of the job's packages and nothing of the console's; there, as the account, under the reaper (so no
descendant outlives a step), with the trainers' niceness and an environment built from scratch:

1. each sdist of the job is built into a wheel (``uv build``);
2. the requirements are resolved on the runtime's Python, the runtime's versions preferred
   (``uv pip compile``), and written as a lock that says, for each distribution, whether the index
   has a wheel for this Python (``pylock.toml``);
3. each pinned distribution the index has only as an sdist is downloaded and built into a wheel.

The console then reads the lock (bounded, no link followed), checks every name and version, copies
the wheels the account built out of its folder (regular files it owns, reached beneath the work
dir without following a link) and installs them with the index's wheels, with no build step at all
(``--no-build``). What it installs is the project's own code in the project's own layer; what it
never does is run that code.
"""

from __future__ import annotations

import fcntl
import os
import re
import selectors
import shutil
import signal
import stat
import subprocess
import time
import tomllib
from collections import deque
from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import unquote, urlparse

from django.conf import settings

from aiconsole import beneath, trainer_user
from jobs import runtimes
from jobs.executor import replicas
from jobs.runtimes import pythons

BUILDS_FOLDER = ".builds"  # in WORK_DIR/<project>/; no job id starts with "."
CACHE_FOLDER = "uv-cache"  # the account's own uv cache, kept between its builds
LOCK_MAX_BYTES = 8 * 1024 * 1024
OUTPUT_TAIL_BYTES = 64 * 1024
WHEELS_MAX = 1000

_NAME = re.compile(r"^[A-Za-z0-9](?:[A-Za-z0-9._-]{0,198}[A-Za-z0-9])?$")
_VERSION = re.compile(r"^[A-Za-z0-9][A-Za-z0-9.+!_-]{0,99}$")

# Downloads one sdist the lock names, as the account, on the runtime's Python (3.7 and later, no
# site): the URL comes from the index through uv, the hash from the lock.
_FETCH = """
import hashlib, os, shutil, sys, urllib.request
url, digest, target = sys.argv[1:4]
if not url.startswith(("https://", "http://", "file://")):
    sys.exit("not a URL: " + url)
os.makedirs(os.path.dirname(target))
with urllib.request.urlopen(url, timeout=120) as response, open(target, "wb") as out:
    shutil.copyfileobj(response, out)
if digest:
    with open(target, "rb") as handle:
        found = hashlib.sha256(handle.read()).hexdigest()
    if found != digest:
        sys.exit("%s: sha256 %s, the index said %s" % (url, found, digest))
"""


class BuildError(Exception):
    """A step of the build failed; the message is the job's error."""


class ResolutionError(BuildError):
    """The requirements cannot be resolved together on the runtime's Python."""


def canonical(name: str) -> str:
    return runtimes.canonical_name(name)


@dataclass(frozen=True)
class Local:
    """One of the job's own packages: its file, and the wheel the layer installs from it."""

    source: Path
    requirement: str  # the path the account's resolution names it by


@dataclass
class Plan:
    """What the layer gets: pins the index has wheels for, the job's own packages as wheels (built
    in the sandbox, or as stored), and wheels built from the index's sdists."""

    pins: list[tuple[str, str]] = field(default_factory=list)  # (name, version)
    own: list[tuple[str, str, Path]] = field(default_factory=list)  # (name, version, wheel)
    from_sdists: list[tuple[str, str, Path]] = field(default_factory=list)

    @property
    def built(self) -> list[tuple[str, str, Path]]:
        """Every wheel the layer installs: what the account built is in its sandbox."""
        return [*self.own, *self.from_sdists]


class Sandbox:
    """A folder of the project's account where its packages are built, removed afterwards."""

    def __init__(self, account: trainer_user.TrainerUser | None, python: Path, packages: list[Path]):
        self.account = account
        self.python = python
        self.packages = packages
        self.base = settings.WORK_DIR / (account.project_id if account else "") / BUILDS_FOLDER
        self.root = self.base / f"build-{os.getpid()}-{os.urandom(6).hex()}"
        self.cache = self.base / CACHE_FOLDER
        self.owner = (account.uid, account.gid) if account else (os.geteuid(), os.getegid())
        self.locals: list[Local] = []

    def __enter__(self) -> Sandbox:
        """The folder with copies of the job's packages, made as the console (the account cannot
        even enter it yet), then handed over whole."""
        self.base.mkdir(parents=True, exist_ok=True, mode=0o700)
        for folder in ("in", "tmp", "wheels", "sdists"):
            (self.root / folder).mkdir(parents=True, mode=0o700)
        for index, package in enumerate(self.packages):
            copy = self.root / "in" / str(index) / package.name
            copy.parent.mkdir(mode=0o700)
            shutil.copyfile(package, copy)
            self.locals.append(Local(source=package, requirement=str(copy)))
        self._own_cache()
        if self.account is not None:
            self.account.hand_over(self.root)
        return self

    def __exit__(self, *exc) -> None:
        shutil.rmtree(self.root, ignore_errors=True)  # fd-based: a link inside is removed, not followed

    def _own_cache(self) -> None:
        """The account's uv cache: kept between its builds, started again if another owns it (a
        project's account changed with its database). Under a lock: two builds of one project at once
        (two queued jobs prepared ahead) would otherwise see each other's cache half made, still the
        console's, and remove it under the other's build."""
        with open(self.base / ".cache.lock", "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            try:
                owner = self.cache.lstat().st_uid
            except FileNotFoundError:
                owner = None
            if owner is not None and owner != self.owner[0]:
                shutil.rmtree(self.cache, ignore_errors=True)
                owner = None
            if owner is None:
                self.cache.mkdir(mode=0o700)
                if self.account is not None:
                    self.account.hand_over(self.cache)

    # --- running as the account ----------------------------------------------------------------

    def environment(self) -> dict[str, str]:
        """What a build step sees: the index settings uv needs, its own home, temp and cache."""
        keep = {k: v for k, v in pythons.tool_env().items() if k not in ("HOME", "XDG_CACHE_HOME", "XDG_DATA_HOME")}
        env = {
            **keep,
            "HOME": str(self.root),
            "TMPDIR": str(self.root / "tmp"),
            "UV_CACHE_DIR": str(self.cache),
            "UV_PYTHON_DOWNLOADS": "never",
            "PYTHONDONTWRITEBYTECODE": "1",
        }
        if self.account is not None:
            env.update(self.account.environment(self.root))
        return env

    def run(self, command: list[str], *, what: str) -> str:
        """Run a step in the sandbox as the account; its output (the last 64 KB), or BuildError."""
        user = self.account.reaper_option() if self.account else []
        grace = settings.STOP_GRACE_SECONDS
        process = subprocess.Popen(
            replicas.reaped(command, grace, user),
            cwd=self.root,
            env=self.environment(),
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
        output, finished = _read_bounded(process, settings.BUILD_MAX_SECONDS)
        if not finished:
            _stop(process, grace)
            raise BuildError(f"{what} took longer than {settings.BUILD_MAX_SECONDS:g} s (AICONSOLE_BUILD_MAX_SECONDS).")
        if process.returncode != 0:
            raise BuildError(f"{what} failed:\n{_tail(output.strip(), 60)}")
        return output

    def uv(self, args: list[str], *, what: str) -> str:
        return self.run([trainer_user.reachable_tool(pythons.uv_binary()), *args], what=what)

    def write(self, name: str, text: str) -> Path:
        """A file the console gives the build (a requirements list), owned by the account."""
        path = self.root / name
        beneath.write_file(settings.WORK_DIR, path, text.encode(), owner=self.owner, mode=0o600)
        return path

    def read(self, name: str, limit: int) -> str:
        """A file the build wrote, at most ``limit`` bytes."""
        with os.fdopen(self._open_own(self.root / name), "rb") as handle:
            data = handle.read(limit + 1)
        if len(data) > limit:
            raise BuildError(f"The build's {name} is larger than {limit} bytes.")
        return data.decode("utf-8", errors="strict")

    def _open_own(self, path: Path) -> int:
        """A file of the sandbox, opened for reading through no link and without waiting (a FIFO in
        its place would hold the console): a regular file the account owns, or BuildError."""
        with beneath.folder(settings.WORK_DIR, path.parent) as parent:
            descriptor = os.open(path.name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=parent)
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode) or info.st_uid != self.owner[0]:
            os.close(descriptor)
            raise BuildError(f"{path.name} is not a file the build wrote.")
        return descriptor

    # --- the steps -----------------------------------------------------------------------------

    def build_sdists(self) -> list[Local]:
        """Each of the job's sdists built into a wheel; its wheels as they are."""
        built = []
        for index, local in enumerate(self.locals):
            if local.source.name.endswith(".whl"):
                built.append(local)
                continue
            out = f"wheels/local-{index}"
            self.uv(
                ["build", "--quiet", "--wheel", "--python", str(self.python), "-o", out, local.requirement],
                what=f"Building {local.source.name}",
            )
            built.append(Local(source=local.source, requirement=str(self.root / self._only_wheel(out))))
        return built

    def resolve(self, requirements: list[str], preferred: dict[str, str]) -> dict:
        """The lock of ``requirements`` on the runtime's Python, ``preferred`` versions kept where
        allowed: resolved as requirements (where uv prefers what the output file holds), then
        written as pylock.toml, which says which distributions the index has wheels for."""
        self.write("requirements.in", "".join(f"{line}\n" for line in requirements))
        self.write("resolved.txt", "".join(f"{name}=={version}\n" for name, version in sorted(preferred.items())))
        compile_ = ["pip", "compile", "--quiet", "--no-header", "--no-annotate", "--python", str(self.python)]
        try:
            self.uv([*compile_, "requirements.in", "-o", "resolved.txt"], what="Resolving the requirements")
        except BuildError as error:
            raise ResolutionError(str(error)) from None
        self.uv([*compile_, "--format", "pylock.toml", "resolved.txt", "-o", "pylock.toml"], what="Locking them")
        try:
            return tomllib.loads(self.read("pylock.toml", LOCK_MAX_BYTES))
        except (tomllib.TOMLDecodeError, UnicodeDecodeError) as error:
            raise BuildError(f"The resolution wrote a lock the console cannot read: {error}") from None

    def check(self, requirement: str) -> str | None:
        """uv's reason why one requirement cannot be resolved on the runtime's Python, or None."""
        name = f"one-{os.urandom(4).hex()}.in"
        self.write(name, requirement + "\n")
        try:
            self.uv(["pip", "compile", "--quiet", "--no-header", "--python", str(self.python), name], what=requirement)
        except BuildError as error:
            return str(error)
        return None

    def build_from_index(self, sdists: list[tuple[str, str, str, str]]) -> list[tuple[str, str, Path]]:
        """Download each (name, version, url, sha256) sdist and build it into a wheel, as the account."""
        built = []
        for index, (name, version, url, digest) in enumerate(sdists):
            filename = unquote(os.path.basename(urlparse(url).path))
            if filename in ("", ".", "..") or not filename.endswith((".tar.gz", ".zip")):
                filename = f"{name}-{version}.tar.gz"
            target = f"sdists/{index}/{filename}"
            fetch = [str(self.python), "-I", "-S", "-c", _FETCH, url, digest, target]
            self.run(fetch, what=f"Downloading {name} {version}")
            out = f"wheels/index-{index}"
            self.uv(
                ["build", "--quiet", "--wheel", "--python", str(self.python), "-o", out, target],
                what=f"Building {name} {version} from its source distribution",
            )
            built.append((name, version, self.root / self._only_wheel(out)))
        return built

    def _only_wheel(self, folder: str) -> str:
        with beneath.folder(settings.WORK_DIR, self.root / folder) as descriptor:
            wheels = [entry.name for entry in os.scandir(descriptor) if entry.name.endswith(".whl")]
        if len(wheels) != 1:
            raise BuildError(f"The build wrote {len(wheels)} wheels where one was expected.")
        return f"{folder}/{wheels[0]}"

    def take_wheel(self, wheel: Path, into: Path, name: str, version: str) -> Path:
        """Copy a wheel the account built to the console's private folder ``into``: a regular file
        of the account's, reached through no link, whose name is the distribution expected."""
        wheel_name, wheel_version = wheel_identity(wheel.name)
        if canonical(wheel_name) != canonical(name) or _normal(wheel_version) != _normal(version):
            raise BuildError(f"The build of {name} {version} wrote {wheel.name}, another distribution.")
        with os.fdopen(self._open_own(wheel), "rb") as source:
            if os.fstat(source.fileno()).st_size > settings.MAX_PACKAGE_BYTES:
                raise BuildError(f"{wheel.name} is larger than AICONSOLE_MAX_PACKAGE_BYTES.")
            target = into / wheel.name
            with open(target, "xb") as out:
                shutil.copyfileobj(source, out, length=1024 * 1024)
        return target

    def plan(self, lock: dict, locals_: list[Local]) -> tuple[Plan, list[tuple[str, str, str, str]]]:
        """The lock's distributions sorted into index pins, the job's own packages and the sdists
        still to build; every name and version checked, nothing but the job's packages by path."""
        by_path = {os.path.normpath(self.root / local.requirement): local for local in locals_}
        plan, sdists = Plan(), []
        packages = lock.get("packages", [])
        if not isinstance(packages, list) or len(packages) > WHEELS_MAX:
            raise BuildError("The resolution's lock lists no packages, or too many.")
        for entry in packages:
            name, version = _identity(entry)
            archive = entry.get("archive") or {}
            if archive:
                local = by_path.get(os.path.normpath(self.root / str(archive.get("path", ""))))
                if local is None:
                    raise BuildError(f"The resolution named {name} by a path that is not one of the job's packages.")
                plan.own.append((name, version, Path(local.requirement)))
            elif entry.get("wheels"):
                plan.pins.append((name, version))
            elif isinstance(entry.get("sdist"), dict) and entry["sdist"].get("url"):
                digest = str((entry["sdist"].get("hashes") or {}).get("sha256", ""))
                sdists.append((name, version, str(entry["sdist"]["url"]), digest))
            else:
                raise BuildError(f"The resolution gives no way to install {name} {version}.")
        return plan, sdists


def _identity(entry) -> tuple[str, str]:
    if not isinstance(entry, dict):
        raise BuildError("The resolution's lock holds an entry that is not a package.")
    name, version = str(entry.get("name", "")), str(entry.get("version", ""))
    if not _NAME.match(name) or not _VERSION.match(version):
        raise BuildError(f"The resolution's lock names a package the console refuses: {name[:80]!r} {version[:40]!r}")
    return name, version


def wheel_identity(filename: str) -> tuple[str, str]:
    parts = filename[: -len(".whl")].split("-")
    if not filename.endswith(".whl") or len(parts) not in (5, 6):
        raise BuildError(f"{filename} is not a wheel's name.")
    return parts[0], parts[1]


def _normal(version: str) -> str:
    return version.lower().replace("_", "-")


def _read_bounded(process: subprocess.Popen, seconds: float) -> tuple[str, bool]:
    """The last ``OUTPUT_TAIL_BYTES`` of what ``process`` prints, and whether it ended in time: a
    build may print without end, and the console keeps only the tail."""
    assert process.stdout is not None  # started with stdout=PIPE
    tail: deque[bytes] = deque()
    kept = 0
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        deadline = time.monotonic() + seconds
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return b"".join(tail).decode(errors="replace"), False
            if not selector.select(timeout=min(remaining, 1.0)):
                continue
            chunk = os.read(process.stdout.fileno(), 65536)
            if not chunk:
                break
            tail.append(chunk)
            kept += len(chunk)
            while kept - len(tail[0]) >= OUTPUT_TAIL_BYTES:
                kept -= len(tail.popleft())
    process.stdout.close()
    try:
        process.wait(timeout=max(deadline - time.monotonic(), 1.0))
    except subprocess.TimeoutExpired:
        return b"".join(tail).decode(errors="replace"), False
    return b"".join(tail).decode(errors="replace")[-OUTPUT_TAIL_BYTES:], True


def _stop(process: subprocess.Popen, grace: float) -> None:
    """SIGTERM the step's reaper (it stops every descendant), SIGKILL its group after the grace."""
    try:
        os.killpg(process.pid, signal.SIGTERM)
        process.wait(timeout=grace + replicas.REAPER_MARGIN_SECONDS)
    except (ProcessLookupError, subprocess.TimeoutExpired):
        pass
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass
    process.wait()


def _tail(text: str, lines: int) -> str:
    return "\n".join(text.splitlines()[-lines:])
