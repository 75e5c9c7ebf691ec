"""``--package-path``: turn a trainer's source folder into an sdist, as gcloud does.

Where the sdist comes from, first match wins:

1. the folder is a project of its own (a ``setup.py``, or a ``pyproject.toml`` declaring a
   build): it is built as it is (our extension: gcloud only looks one level up);
2. the folder's parent has a ``setup.py`` (gcloud's rule): that setup.py builds it;
3. otherwise the folder is a plain package (``trainer/`` with ``__init__.py``): we write the sdist
   ourselves with a generated ``setup.py`` that finds the package and its subpackages, as
   gcloud's built-in setup.py does. Every file in the folder goes in (data files too), caches
   and hidden files do not; the archive is reproducible, so unchanged sources give the same
   digest.

A ``setup.py`` runs with the current interpreter (``setup.py sdist``, its egg-info kept out of
the user's folder); a ``pyproject.toml`` project is built with ``uv build --sdist``. The result
lands in a temporary folder the caller owns.
"""

from __future__ import annotations

import gzip
import hashlib
import importlib.util
import io
import shutil
import subprocess
import sys
import tarfile
import textwrap
import tomllib
from dataclasses import dataclass
from pathlib import Path

GENERATED_VERSION = "0.0.0"
_SKIPPED_DIRS = {"__pycache__", "build", "dist"}
_SKIPPED_SUFFIXES = (".pyc", ".pyo")


class PackagingError(Exception):
    """The folder cannot be built; the message says which folder and why."""


@dataclass(frozen=True)
class Package:
    path: Path
    size: int
    sha256: str
    how: str  # a few words on how it was built, for the progress line


def describe(path: Path, how: str) -> Package:
    digest = hashlib.sha256()
    with path.open("rb") as handle:
        for chunk in iter(lambda: handle.read(1 << 20), b""):
            digest.update(chunk)
    return Package(path, path.stat().st_size, digest.hexdigest(), how)


def build_sdist(package_path: str | Path, work_dir: Path) -> Package:
    """Build the sdist for ``--package-path`` into ``work_dir``."""
    folder = Path(package_path).expanduser().resolve()
    if not folder.is_dir():
        raise PackagingError(f"--package-path {package_path}: no such directory")
    if (folder / "setup.py").is_file():
        return _setup_py_sdist(folder, work_dir)
    if _declares_build(folder / "pyproject.toml"):
        return _pyproject_sdist(folder, work_dir)
    if (folder.parent / "setup.py").is_file():
        return _setup_py_sdist(folder.parent, work_dir)
    return generated_sdist(folder, work_dir)


def _declares_build(pyproject: Path) -> bool:
    """A pyproject.toml only for tool settings (ruff, black) does not make a project."""
    if not pyproject.is_file():
        return False
    try:
        data = tomllib.loads(pyproject.read_text())
    except (OSError, ValueError) as error:
        raise PackagingError(f"{pyproject}: not valid TOML ({error})") from None
    return "project" in data or "build-system" in data


def _only_archive(dist_dir: Path, root: Path) -> Path:
    archives = sorted(p for p in dist_dir.iterdir() if p.name.endswith((".tar.gz", ".zip")))
    if len(archives) != 1:
        raise PackagingError(f"building {root} made {len(archives)} source archives, expected one")
    return archives[0]


def _run_build(command: list[str], root: Path, what: str) -> None:
    try:
        result = subprocess.run(
            command, cwd=root, capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL
        )
    except (OSError, subprocess.TimeoutExpired) as error:
        raise PackagingError(f"{what} in {root} could not run: {error}") from None
    if result.returncode != 0:
        tail = "\n".join((result.stderr or result.stdout).strip().splitlines()[-15:])
        raise PackagingError(f"{what} in {root} failed (exit status {result.returncode}):\n{tail}")


def _setup_py_sdist(root: Path, work_dir: Path) -> Package:
    if importlib.util.find_spec("setuptools") is None:
        raise PackagingError(
            f"{root / 'setup.py'} needs setuptools, which is not installed for "
            f"{sys.executable}; install it or build the sdist yourself and pass --packages"
        )
    egg_base = work_dir / "egg-info"
    dist_dir = work_dir / "dist"
    egg_base.mkdir(parents=True, exist_ok=True)
    dist_dir.mkdir(parents=True, exist_ok=True)
    _run_build(
        [
            sys.executable,
            "setup.py",
            "-q",
            "egg_info",
            "--egg-base",
            str(egg_base),
            "sdist",
            "--dist-dir",
            str(dist_dir),
        ],
        root,
        "python setup.py sdist",
    )
    return describe(_only_archive(dist_dir, root), f"setup.py sdist in {root}")


def _pyproject_sdist(root: Path, work_dir: Path) -> Package:
    from uv import find_uv_bin

    dist_dir = work_dir / "dist"
    dist_dir.mkdir(parents=True, exist_ok=True)
    before = _egg_info_dirs(root)
    try:
        _run_build(
            [find_uv_bin(), "build", "--sdist", "--quiet", "--out-dir", str(dist_dir), str(root)],
            root,
            "uv build --sdist",
        )
    finally:
        # setuptools writes NAME.egg-info into the source tree; leave the user's folder as it was.
        for leftover in _egg_info_dirs(root) - before:
            shutil.rmtree(leftover, ignore_errors=True)
    return describe(_only_archive(dist_dir, root), f"uv build --sdist in {root}")


def _egg_info_dirs(root: Path) -> set[Path]:
    return {p for pattern in ("*.egg-info", "src/*.egg-info") for p in root.glob(pattern) if p.is_dir()}


def _source_files(folder: Path) -> list[Path]:
    found = []
    for path in sorted(folder.rglob("*")):
        relative = path.relative_to(folder)
        if any(part.startswith(".") or part in _SKIPPED_DIRS or part.endswith(".egg-info") for part in relative.parts):
            continue
        if path.is_file() and not path.name.endswith(_SKIPPED_SUFFIXES):
            found.append(path)
    return found


def _generated_setup(name: str) -> str:
    return textwrap.dedent(f"""\
        # Generated by 'aiconsole jobs submit training --package-path' for the package {name!r}.
        from setuptools import find_packages, setup

        setup(
            name={name!r},
            version={GENERATED_VERSION!r},
            packages=find_packages(include=[{name!r}, {name + ".*"!r}]),
            include_package_data=True,
        )
        """)


def _add(tar: tarfile.TarFile, name: str, data: bytes, mtime: int) -> None:
    info = tarfile.TarInfo(name)
    info.size, info.mode, info.mtime = len(data), 0o644, mtime
    tar.addfile(info, io.BytesIO(data))


def generated_sdist(folder: Path, work_dir: Path) -> Package:
    """An sdist of a plain package folder, with a generated setup.py (gcloud's fallback)."""
    name = folder.name
    if not name.isidentifier():
        raise PackagingError(f"--package-path {folder}: {name!r} is not a valid Python package name")
    if not (folder / "__init__.py").is_file():
        raise PackagingError(
            f"--package-path {folder} is not a Python package: it has no __init__.py "
            "(add an empty one, or put a setup.py in its parent folder)"
        )
    top = f"{name}-{GENERATED_VERSION}"
    pkg_info = f"Metadata-Version: 2.1\nName: {name}\nVersion: {GENERATED_VERSION}\n"
    work_dir.mkdir(parents=True, exist_ok=True)
    target = work_dir / f"{top}.tar.gz"
    with (
        target.open("wb") as raw,
        gzip.GzipFile(filename="", mode="wb", fileobj=raw, mtime=0) as zipped,
        tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as tar,
    ):
        _add(tar, f"{top}/PKG-INFO", pkg_info.encode(), 0)
        _add(tar, f"{top}/setup.py", _generated_setup(name).encode(), 0)
        _add(tar, f"{top}/MANIFEST.in", f"graft {name}\n".encode(), 0)
        for path in _source_files(folder):
            _add(
                tar, f"{top}/{name}/{path.relative_to(folder).as_posix()}", path.read_bytes(), int(path.stat().st_mtime)
            )
    return describe(target, f"generated setup.py for package {name!r}")
