"""Google's pre-built training images, built on this machine the first time a job names one.

No registry is reachable here, so ``us-docker.pkg.dev/vertex-ai/training/pytorch-cpu.1-13:latest``
is made from its recipe (``jobs.runtimes.prebuilt``) while the job waits, with its progress in the
job's log, once per machine:

1. a Debian root, by ``mmdebstrap`` (the recipe's suite, variant and packages; the suite's python3
   with pip when the recipe says ``python = "debian"``);
2. otherwise an interpreter of the recipe's Python version found on this machine is copied into
   ``/usr/local``, with the shared libraries it needs that the root lacks;
3. the recipe's wheels from the package index (binary only) or its runtime's hash-checked lock,
   installed by uv into the image's site-packages, compiled;
4. the root is imported into the engine with Google's shape (``python`` on ``PATH``, ``WORKDIR /``,
   pip usable) and labels that record the recipe, the Python and every distribution in it, and
   tagged with the console's own name for the recipe and every name Google gave the image.

The build runs as the console, in a private scratch folder under ``DATA_DIR/prebuilt/``, from
Debian's signed archive and the index, with an environment from scratch (none of the console's
secrets reach Debian's maintainer scripts or uv); no project's code takes part. One build per recipe
at a time across processes (a file lock): a second job naming it waits and uses it.
"""

from __future__ import annotations

import fcntl
import json
import os
import re
import shutil
import subprocess
import threading
import time
from collections import deque
from collections.abc import Callable
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from jobs import runtimes
from jobs.containers import engine as engines
from jobs.containers import images as container_images
from jobs.runtimes import prebuilt as catalogue
from jobs.runtimes import pythons

FOLDER = "prebuilt"  # DATA_DIR/prebuilt/: locks and build scratch, the console's alone
LABEL = "ai-console.prebuilt"
LABEL_KEY = "ai-console.prebuilt.key"
LABEL_PYTHON = "ai-console.prebuilt.python"
LABEL_PACKAGES = "ai-console.prebuilt.packages"
DEBIAN_PYTHON = ("python3", "python3-pip", "python3-setuptools", "python3-wheel", "python-is-python3")
LIBRARY_DIRS = (
    "lib",
    "lib64",
    "usr/lib",
    "usr/lib64",
    "lib/x86_64-linux-gnu",
    "usr/lib/x86_64-linux-gnu",
    "usr/local/lib",
)
# Parts of a copied interpreter's standard library an image does not need
STDLIB_LEFT_OUT = {"site-packages", "test", "idlelib", "tkinter", "turtledemo", "ensurepip"}
OUTPUT_LINES = 40  # the last lines of a failed step, in its error
_LDD_LINE = re.compile(r"^\s*(?P<soname>\S+)\s+=>\s+(?P<path>/\S+)\s+\(0x[0-9a-f]+\)$")
_LOADER_LINE = re.compile(r"^\s*(?P<path>/\S+)\s+\(0x[0-9a-f]+\)$")

Log = Callable[..., None]


class BuildFailed(Exception):
    """The image could not be built; the message says which step and why, in the tool's words."""


@dataclass(frozen=True)
class Manifest:
    """What a built pre-built image holds, from its labels."""

    recipe: str  # "pytorch-cpu.1-13"
    python: str  # "3.11.2"
    packages: dict[str, str]  # canonical distribution name → version

    @property
    def python_minor(self) -> str:
        return ".".join(self.python.split(".")[:2])


def manifest(reference: str) -> Manifest | None:
    """The manifest of the image ``reference`` names, None when it is not a pre-built image built here."""
    engine = engines.available()
    found = engine.inspect_image(reference) if engine else None
    labels = ((found or {}).get("Config") or {}).get("Labels") or (found or {}).get("Labels") or {}
    if not labels.get(LABEL):
        return None
    try:
        packages = json.loads(labels.get(LABEL_PACKAGES) or "{}")
    except ValueError:
        packages = {}
    return Manifest(labels[LABEL], labels.get(LABEL_PYTHON, ""), packages)


def ensure(reference: str, log: Log, check_cancel: Callable[[], None] = lambda: None) -> bool:
    """Make sure the pre-built image ``reference`` names is in the engine's store under that name,
    building it when this machine has not yet; False when ``reference`` is no pre-built image this
    machine builds (nothing to do). Raises BuildFailed."""
    recipe = catalogue.recipe_for(reference)
    if recipe is None:
        return False
    engine = engines.available()
    if engine is None:
        raise BuildFailed(f"{reference} is built on this machine, which has no container engine.")
    if _built(engine, recipe) is None:
        with _locked(recipe, log):
            if _built(engine, recipe) is None:
                build(engine, recipe, log, check_cancel)
    _name(engine, recipe, reference, log)
    return True


def inventory() -> list[dict]:
    """Every pre-built image this machine builds, and whether (and how large) it is built."""
    engine = engines.available()
    rows = []
    for recipe in catalogue.catalogue().values():
        found = engine.inspect_image(recipe.local_name) if engine else None
        made = manifest(recipe.local_name) if found else None
        rows.append(
            {
                "image": recipe.name,
                "built": found is not None,
                "sizeBytes": int((found or {}).get("Size") or 0),
                "python": made.python if made else (recipe.python if recipe.python != "debian" else ""),
                "frameworks": _frameworks(made.packages) if made else "",
                "source": recipe.source,
                "names": recipe.names,
            }
        )
    return rows


def needs_building(reference: str) -> bool:
    """Whether ``reference`` is a pre-built image this machine builds and has not built yet."""
    recipe = catalogue.recipe_for(reference)
    engine = engines.available() if recipe else None
    return recipe is not None and engine is not None and _built(engine, recipe) is None


def _built(engine: engines.Engine, recipe: catalogue.Recipe) -> str | None:
    found = engine.inspect_image(recipe.local_name)
    return found.get("Id") if found else None


@contextmanager
def _locked(recipe: catalogue.Recipe, log: Log):
    folder = _folder()
    with open(folder / f"{recipe.name}.lock", "a") as handle:
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            log(f"Another job is building {recipe.name} on this machine; waiting for it.")
            fcntl.flock(handle, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(handle, fcntl.LOCK_UN)


def _folder() -> Path:
    folder = settings.DATA_DIR / FOLDER
    folder.mkdir(mode=0o700, parents=True, exist_ok=True)
    return folder


def _name(engine: engines.Engine, recipe: catalogue.Recipe, reference: str, log: Log) -> None:
    """Give the built image every name Google used for it, and the one the job asked by."""
    wanted = [*recipe.names, container_images.tagged(reference)]
    image_id = _built(engine, recipe)
    assert image_id is not None
    missing = [name for name in dict.fromkeys(wanted) if (engine.inspect_image(name) or {}).get("Id") != image_id]
    if missing:
        refused = container_images.name_host_image(engine, image_id, missing)
        for name in refused:
            log(
                f"{name} is a project's upload here; the image built for it is not given that name.", severity="WARNING"
            )


def build(engine: engines.Engine, recipe: catalogue.Recipe, log: Log, check_cancel: Callable[[], None]) -> str:
    """Build ``recipe``'s image from nothing; its id. Everything but the image is removed after."""
    started = time.monotonic()
    deadline = started + settings.PREBUILT_BUILD_MAX_SECONDS
    log(
        f"Building Google's pre-built image {recipe.name} on this machine from {recipe.source}; this happens "
        "once, and later jobs naming it start at once."
    )
    scratch = _folder() / f"build-{recipe.name}-{os.urandom(6).hex()}"
    scratch.mkdir(mode=0o700)
    step = _Steps(log, check_cancel, deadline)
    try:
        root = scratch / "root"
        _debian_root(recipe, root, step)
        if recipe.python == "debian":
            python = _debian_python(root)
            site = root / "usr" / "local" / "lib" / f"python{python}" / "dist-packages"
        else:
            python = recipe.python
            _copy_interpreter(python, root, step)
            site = root / "usr" / "local" / "lib" / f"python{python}" / "site-packages"
        site.mkdir(parents=True, exist_ok=True)
        _wheels(recipe, python, site, step)
        _shape(root, python, site)
        full_python = _python_version(root, python)
        packages = installed(root, python)
        log(f"{recipe.name} holds Python {full_python} and {_frameworks(packages)}; importing it into {engine.name}.")
        image_id = _import(engine, recipe, root, full_python, packages, step)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)
    container_images.forget()
    log(f"Built {recipe.name} in {time.monotonic() - started:.0f} s ({_size(engine, image_id) / 1e6:.0f} MB).")
    return image_id


# --- the steps --------------------------------------------------------------------------------


class _Steps:
    """Runs a build's commands: their output in the job's log (a line in a few seconds at most),
    the job's cancellation and the build's deadline obeyed, the environment from scratch."""

    def __init__(self, log: Log, check_cancel: Callable[[], None], deadline: float):
        self.log, self.check_cancel, self.deadline = log, check_cancel, deadline

    def run(self, command: list[str], *, what: str, env: dict[str, str] | None = None, stdin=None) -> str:
        self.check_cancel()
        try:
            process = subprocess.Popen(
                command,
                stdin=stdin if stdin is not None else subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=subprocess.STDOUT,
                text=True,
                errors="replace",
                env=env if env is not None else _environment(),
                start_new_session=True,
            )
        except OSError as error:
            raise BuildFailed(f"{what} failed: {command[0]}: {error.strerror or error}") from None
        tail: deque[str] = deque(maxlen=OUTPUT_LINES)
        reader = threading.Thread(target=self._read, args=(process, tail, what), daemon=True)
        reader.start()
        try:
            while process.poll() is None:
                self.check_cancel()
                if time.monotonic() > self.deadline:
                    raise BuildFailed(
                        f"{what} did not finish within the build's {settings.PREBUILT_BUILD_MAX_SECONDS:.0f} s "
                        "(AICONSOLE_PREBUILT_BUILD_MAX_SECONDS)."
                    )
                reader.join(0.5)
        except BaseException:
            _kill(process)
            raise
        reader.join(5)
        if process.returncode != 0:
            raise BuildFailed(f"{what} failed (exit status {process.returncode}): " + " ".join(tail).strip()[-2000:])
        return "\n".join(tail)

    def _read(self, process: subprocess.Popen, tail: deque, what: str) -> None:
        shown = 0.0
        assert process.stdout is not None
        for line in process.stdout:
            line = line.rstrip()
            if not line:
                continue
            tail.append(line)
            now = time.monotonic()
            if now - shown >= 2.0:  # progress, not every line apt writes
                shown = now
                self.log(f"{what}: {line[:300]}")


def _kill(process: subprocess.Popen) -> None:
    try:
        os.killpg(process.pid, 9)
    except ProcessLookupError:
        pass
    process.wait()


def _environment() -> dict[str, str]:
    """What the build's tools see: a path, a locale, proxies and certificates to reach Debian and
    the index; none of the console's variables."""
    env = {"PATH": "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin", "LANG": "C.UTF-8"}
    env.update({key: value for key, value in pythons.tool_env().items() if key != "PATH"})
    env["DEBIAN_FRONTEND"] = "noninteractive"
    return env


def _debian_root(recipe: catalogue.Recipe, root: Path, step: _Steps) -> None:
    tool = shutil.which("mmdebstrap")
    if tool is None:
        raise BuildFailed(
            "Building Google's pre-built images needs mmdebstrap, which is not installed (apt install mmdebstrap)."
        )
    packages = list(dict.fromkeys([*recipe.debian, *(DEBIAN_PYTHON if recipe.python == "debian" else ())]))
    command = [
        tool,
        f"--variant={recipe.variant}",
        "--dpkgopt=path-exclude=/usr/share/doc/*",
        "--dpkgopt=path-exclude=/usr/share/man/*",
        "--aptopt=Acquire::Retries 3",
    ]
    if packages:
        command.append("--include=" + ",".join(packages))
    command += [recipe.suite, str(root)]
    mirror = recipe.mirror or settings.PREBUILT_DEBIAN_MIRROR
    if mirror:
        command.append(mirror)
    step.run(command, what=f"Debian {recipe.suite} ({recipe.variant})")


def _debian_python(root: Path) -> str:
    """The suite's python3 version, ``3.11``, from the link Debian ships."""
    target = os.readlink(root / "usr" / "bin" / "python3") if (root / "usr" / "bin" / "python3").is_symlink() else ""
    match = re.fullmatch(r"python(\d+\.\d+)", Path(target).name)
    if not match:
        raise BuildFailed('The Debian root has no python3 (recipe python = "debian").')
    return match[1]


def _copy_interpreter(version: str, root: Path, step: _Steps) -> None:
    """An interpreter of ``version`` from this machine into ``/usr/local``: its standard library
    (no site-packages, no tests), its shared libraries, and those the root lacks."""
    prefix = _copyable_prefix(version, step)
    library = prefix / "lib" / f"python{version}"
    binary = prefix / "bin" / f"python{version}"
    step.log(f"Copying Python {version} from {prefix} into the image.")
    local = root / "usr" / "local"
    (local / "bin").mkdir(parents=True, exist_ok=True)
    shutil.copy2(binary, local / "bin" / f"python{version}")
    for name in ("python3", "python"):
        (local / "bin" / name).unlink(missing_ok=True)
        (local / "bin" / name).symlink_to(f"python{version}")
    (local / "lib").mkdir(parents=True, exist_ok=True)
    for shared in (prefix / "lib").glob("libpython*.so*"):
        if shared.is_symlink():
            (local / "lib" / shared.name).symlink_to(os.readlink(shared))
        else:
            shutil.copy2(shared, local / "lib" / shared.name)

    def left_out(folder: str, names: list[str]) -> list[str]:
        top = Path(folder) == library
        return [name for name in names if top and name in STDLIB_LEFT_OUT]

    shutil.copytree(library, local / "lib" / f"python{version}", symlinks=True, ignore=left_out)
    if (prefix / "include").is_dir():
        shutil.copytree(prefix / "include", local / "include", symlinks=True, dirs_exist_ok=True)
    modules = [binary, *(m for m in (library / "lib-dynload").glob("*.so") if not m.name.startswith("_tkinter"))]
    _copy_missing_libraries(modules, prefix, root, step)


def _copyable_prefix(version: str, step: _Steps) -> Path:
    """The installation folder of an interpreter of ``version`` on this machine that holds it whole
    (pyenv's, uv's, a ``--prefix`` build; never the system's ``/usr``), installed with uv if none."""
    seen = []
    for _, interpreter in pythons.where_to_look(version):
        if interpreter is None:
            continue
        prefix = _prefix_of(interpreter)
        seen.append(f"{interpreter} (in {prefix})")
        if _whole(prefix, version):
            return prefix
    if pythons.downloads_allowed():
        prefix = _prefix_of(pythons.install_python(version, step.log))
        if _whole(prefix, version):
            return prefix
    found = f" Found only {', '.join(seen)}, installed among the system's files." if seen else ""
    raise BuildFailed(
        f"Building this image needs a Python {version} installed in a folder of its own, to copy into it.{found} "
        + pythons.how_to_provide(version)
    )


def _prefix_of(interpreter: str) -> Path:
    result = subprocess.run(
        [interpreter, "-I", "-c", "import sys; print(sys.base_prefix)"], capture_output=True, text=True, timeout=60
    )
    return Path(result.stdout.strip() or "/")


def _whole(prefix: Path, version: str) -> bool:
    if str(prefix) in ("/", "/usr", "/usr/local"):
        return False
    return (prefix / "lib" / f"python{version}" / "os.py").is_file() and (prefix / "bin" / f"python{version}").is_file()


def _copy_missing_libraries(binaries: list[Path], prefix: Path, root: Path, step: _Steps) -> None:
    needed: dict[str, Path] = {}
    for binary in binaries:
        result = subprocess.run(["ldd", str(binary)], capture_output=True, text=True, timeout=60, env=_environment())
        for line in result.stdout.splitlines():
            match = _LDD_LINE.match(line) or _LOADER_LINE.match(line)
            if match:
                path = Path(match["path"])
                needed.setdefault(match.groupdict().get("soname") or path.name, path)
    copied = []
    for soname, path in sorted(needed.items()):
        if path.is_relative_to(prefix) or _has_library(root, soname):
            continue
        target = root / path.relative_to("/")
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(path.resolve(), target)
        copied.append(soname)
    if copied:
        step.log(f"Copied the libraries the image lacked from this machine: {', '.join(copied)}.")
    conf = root / "etc" / "ld.so.conf.d"
    conf.mkdir(parents=True, exist_ok=True)
    (conf / "ai-console-python.conf").write_text("/usr/local/lib\n")
    if not (root / "etc" / "ld.so.conf").exists():
        (root / "etc" / "ld.so.conf").write_text("include /etc/ld.so.conf.d/*.conf\n")
    ldconfig = shutil.which("ldconfig") or "/sbin/ldconfig"
    step.run([ldconfig, "-r", str(root)], what="Indexing the image's libraries")


def _has_library(root: Path, soname: str) -> bool:
    return any((root / folder / soname).exists() for folder in LIBRARY_DIRS)


def _wheels(recipe: catalogue.Recipe, python: str, site: Path, step: _Steps) -> None:
    """The recipe's distributions into the image's site-packages, with uv, for the image's Python
    (an interpreter of the same version on this machine tells uv the platform; none of the wheels'
    code runs)."""
    interpreter = pythons.find_python(python)
    if interpreter is None:
        raise BuildFailed(
            f"Installing {recipe.name}'s packages needs a Python {python} interpreter on this machine. "
            + pythons.how_to_provide(python)
        )
    uv = [pythons.uv_binary(), "pip", "install", "--target", str(site), "--python", interpreter, "--compile-bytecode"]
    extras = list(recipe.python_tools) if recipe.python != "debian" else []
    if recipe.lock:
        step.run(
            [*uv, "--require-hashes", "--no-deps", "-r", recipe.lock],
            what=f"Installing runtime version {recipe.runtime}'s packages",
        )
    requirements = [*extras, *recipe.pip]
    if requirements:
        step.run([*uv, "--only-binary", ":all:", *requirements], what="Installing " + ", ".join(recipe.pip or extras))


def _shape(root: Path, python: str, site: Path) -> None:
    """As Google's images are: ``python`` and ``pip`` usable as they come (no PEP 668 refusal), the
    installed distributions' scripts on ``PATH``."""
    for marker in root.glob("usr/lib/python3*/EXTERNALLY-MANAGED"):
        marker.unlink()
    bin_dir = root / "usr" / "local" / "bin"
    bin_dir.mkdir(parents=True, exist_ok=True)
    if (site / "bin").is_dir():  # uv's --target puts scripts beside the packages
        for script in (site / "bin").iterdir():
            if not (bin_dir / script.name).exists():
                script.rename(bin_dir / script.name)
        shutil.rmtree(site / "bin")
    for name in ("python", "python3"):
        link = bin_dir / name
        if not link.exists() and not link.is_symlink():
            link.symlink_to(
                f"/usr/bin/python{python}" if (root / "usr" / "bin" / f"python{python}").exists() else f"python{python}"
            )
    scripts = [path for path in bin_dir.iterdir() if path.is_file() and not path.is_symlink()]
    for script in scripts:  # uv wrote this machine's interpreter into the scripts it installed
        with open(script, "rb") as handle:
            first = handle.readline()
        if first.startswith(b"#!") and b"python" in first:
            script.write_bytes(b"#!/usr/bin/env python" + python.encode() + b"\n" + script.read_bytes()[len(first) :])


def _python_version(root: Path, python: str) -> str:
    """The full version of the image's Python: Debian's package's, or the copied interpreter's."""
    status = root / "var" / "lib" / "dpkg" / "status"
    if status.is_file():
        match = re.search(
            rf"^Package: python{re.escape(python)}-minimal\n(?:[^\n]+\n)*?Version: (\d+\.\d+\.\d+)",
            status.read_text(errors="replace"),
            re.MULTILINE,
        )
        if match:
            return match[1]
    interpreter = pythons.find_python(python)
    return (pythons.interpreter_version(interpreter) if interpreter else None) or python


def installed(root: Path, python: str) -> dict[str, str]:
    """Every distribution in the image's Python: ``{canonical name: version}``. Debian's packages
    sometimes record a version their metadata does not (python3-torch 1.13.1's says
    ``1.13.0a0+gitunknown``, python3-mpmath's ``0.0.0``): the Debian package's own upstream version
    is taken for those, so that a requirement ``torch>=1.13`` is seen satisfied, as it is."""
    local = root / "usr" / "local" / "lib" / f"python{python}"
    debian = root / "usr" / "lib" / "python3" / "dist-packages"
    found = runtimes.distributions([local / "site-packages", local / "dist-packages"])
    packaged = runtimes.distributions([debian])
    if packaged:
        owners, versions = _debian_owners(root, debian), _debian_versions(root)
        for name, version in packaged.items():
            upstream = versions.get(owners.get(name, ""), "")
            if not _RELEASE.match(version) or version == "0.0.0":
                version = upstream if _RELEASE.match(upstream) else version
            found.setdefault(name, version)
    return dict(sorted(found.items()))


_RELEASE = re.compile(r"^\d+(?:\.\d+)*$")


def _debian_versions(root: Path) -> dict[str, str]:
    """Each installed Debian package's upstream version (``1.13.1`` of ``1.13.1+dfsg-4``)."""
    status = root / "var" / "lib" / "dpkg" / "status"
    versions = {}
    text = status.read_text(errors="replace") if status.is_file() else ""
    for stanza in text.split("\n\n"):
        fields = dict(line.split(": ", 1) for line in stanza.splitlines() if ": " in line and not line.startswith(" "))
        if fields.get("Package") and fields.get("Version"):
            version = fields["Version"].split(":", 1)[-1]  # no epoch
            versions[fields["Package"]] = re.split(r"[+~-]", version, maxsplit=1)[0]
    return versions


def _debian_owners(root: Path, site: Path) -> dict[str, str]:
    """Which Debian package installed each distribution's metadata in ``site``."""
    owners: dict[str, str] = {}
    inside = "/" + str(site.relative_to(root)) + "/"
    for listing in (root / "var" / "lib" / "dpkg" / "info").glob("*.list"):
        package = listing.stem.split(":", 1)[0]
        for line in listing.read_text(errors="replace").splitlines():
            if (
                line.startswith(inside)
                and line.endswith((".egg-info", ".dist-info"))
                and line.count("/") == inside.count("/")
            ):
                name = Path(line).name.rsplit(".", 1)[0].split("-", 1)[0]
                owners.setdefault(runtimes.canonical_name(name), package)
    return owners


def _frameworks(packages: dict[str, str]) -> str:
    shown = [
        f"{name} {packages[name]}"
        for name in ("torch", "torchvision", "tensorflow", "tensorflow-cpu", "scikit-learn", "xgboost")
        if name in packages
    ]
    return ", ".join(shown) or f"{len(packages)} distribution{'s' if len(packages) != 1 else ''}"


def _import(
    engine: engines.Engine, recipe: catalogue.Recipe, root: Path, python: str, packages: dict[str, str], step: _Steps
) -> str:
    changes = [
        "ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        "ENV LANG=C.UTF-8",
        "WORKDIR /",
        'CMD ["python"]',
        f"LABEL {LABEL}={recipe.name}",
        f"LABEL {LABEL_KEY}={recipe.key}",
        f"LABEL {LABEL_PYTHON}={python}",
        f"LABEL {LABEL_PACKAGES}={json.dumps(packages, separators=(',', ':'))}",
    ]
    tar = subprocess.Popen(
        ["tar", "--numeric-owner", "--xattrs", "-C", str(root), "-cf", "-", "."],
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        env=_environment(),
    )
    try:
        options = [option for change in changes for option in ("--change", change)]
        output = step.run(
            engine.command("import", *options, "-", recipe.local_name),
            what=f"Importing {recipe.name}",
            env=engine.environment(),
            stdin=tar.stdout,
        )
    finally:
        if tar.stdout is not None:
            tar.stdout.close()
        tar.wait()
    image_id = _built(engine, recipe)
    if image_id is None:
        raise BuildFailed(f"Importing {recipe.name} left no image: {output[-500:]}")
    return image_id


def _size(engine: engines.Engine, image_id: str) -> int:
    return int((engine.inspect_image(image_id) or {}).get("Size") or 0)
