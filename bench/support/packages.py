"""Real trainer packages (sdists and wheels) built on the fly, for the tests and the benchmarks."""

from __future__ import annotations

import io
import tarfile
import textwrap
import zipfile
from pathlib import Path

TASK_HEADER = "import json, os, sys, time\n"


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def build_package(
    directory: Path,
    modules: dict[str, str],
    *,
    name: str = "trainer",
    version: str = "0.1",
    requires: list[str] | None = None,
    kind: str = "sdist",
) -> Path:
    """Write a real sdist or wheel of a tiny trainer package; ``modules`` maps paths to source."""
    directory.mkdir(parents=True, exist_ok=True)
    requires = requires or []
    files = {path: textwrap.dedent(source) for path, source in modules.items()}
    for path in list(files):
        package_init = str(Path(path).parent / "__init__.py")
        if "/" in path and package_init not in files:
            files[package_init] = ""
    if kind == "wheel":
        target = directory / f"{name}-{version}-py3-none-any.whl"
        dist_info = f"{name}-{version}.dist-info"
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
            f"Requires-Dist: {r}\n" for r in requires
        )
        with zipfile.ZipFile(target, "w") as wheel:
            for path, source in files.items():
                wheel.writestr(path, source)
            wheel.writestr(f"{dist_info}/METADATA", metadata)
            wheel.writestr(
                f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
            )
            wheel.writestr(f"{dist_info}/RECORD", "")
        return target
    target = directory / f"{name}-{version}.tar.gz"
    top = f"{name}-{version}"
    packages = sorted({str(Path(p).parent).replace("/", ".") for p in files if "/" in p})
    setup_py = (
        f"from setuptools import setup\nsetup(name={name!r}, version={version!r}, "
        f"packages={packages!r}, install_requires={requires!r})\n"
    )
    pkg_info = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires
    )
    with tarfile.open(target, "w:gz") as tar:
        _tar_add(tar, f"{top}/PKG-INFO", pkg_info.encode())
        _tar_add(tar, f"{top}/setup.py", setup_py.encode())
        for path, source in files.items():
            _tar_add(tar, f"{top}/{path}", source.encode())
    return target
