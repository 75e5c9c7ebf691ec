"""Finding the interpreter of a Python version on this machine, and installing one with uv.

Where a job's Python comes from: ``AICONSOLE_PYTHONS``, the console's own interpreter, uv's
discovery, pyenv's versions, in that order; with downloads allowed, ``uv python install``. And the
environment uv itself runs with (``tool_env``): enough to reach the package index, none of the
console's secrets.
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterator
from functools import cache
from pathlib import Path

from django.conf import settings


class PythonNotFound(Exception):
    """No interpreter of a version could be found; the message says how to provide one."""


def _mapping() -> dict[str, str]:
    pairs = {}
    for item in filter(None, (part.strip() for part in settings.PYTHONS.split(","))):
        version, _, path = item.partition("=")
        pairs[version.strip()] = path.strip()
    return pairs


@cache
def interpreter_version(python: str) -> str | None:
    """``major.minor.micro`` of an interpreter, or None when it does not run."""
    try:
        result = subprocess.run(
            [python, "-I", "-c", "import sys; print('%d.%d.%d' % sys.version_info[:3])"],
            capture_output=True,
            text=True,
            timeout=30,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return result.stdout.strip() if result.returncode == 0 else None


def _matches(python: str | os.PathLike, version: str) -> bool:
    full = interpreter_version(str(python))
    return bool(full) and (full + ".").startswith(version + ".")


def uv_binary() -> str:
    from uv import find_uv_bin

    return find_uv_bin()


def tool_env() -> dict[str, str]:
    """What uv sees: enough to reach the package index, none of the console's secrets."""
    keep = (
        "PATH",
        "HOME",
        "LANG",
        "SSL_CERT_FILE",
        "SSL_CERT_DIR",
        "HTTP_PROXY",
        "HTTPS_PROXY",
        "NO_PROXY",
        "http_proxy",
        "https_proxy",
        "no_proxy",
        "XDG_CACHE_HOME",
        "XDG_DATA_HOME",
        "PYENV_ROOT",
    )
    env = {name: os.environ[name] for name in keep if name in os.environ}
    env.update({name: value for name, value in os.environ.items() if name.startswith("UV_")})
    env["UV_NO_PROGRESS"] = "1"
    return env


def _uv_find(version: str) -> str | None:
    env = {**tool_env(), "UV_PYTHON_DOWNLOADS": "never"}
    try:
        result = subprocess.run(
            [uv_binary(), "python", "find", "--system", version], capture_output=True, text=True, env=env, timeout=30
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    found = result.stdout.strip()
    return found if result.returncode == 0 and found else None


def _pyenv_roots() -> list[Path]:
    roots = [os.environ.get("PYENV_ROOT"), str(Path.home() / ".pyenv")]
    try:
        result = subprocess.run(["pyenv", "root"], capture_output=True, text=True, timeout=10)
        if result.returncode == 0:
            roots.insert(0, result.stdout.strip())
    except (OSError, subprocess.TimeoutExpired):
        pass
    return [Path(root) for root in dict.fromkeys(filter(None, roots))]


def _pyenv_find(version: str) -> str | None:
    for root in _pyenv_roots():
        candidates = sorted(
            (root / "versions").glob(f"{version}.*/bin/python{version}"),
            key=lambda path: [int(p) for p in re.findall(r"\d+", path.parent.parent.name)],
            reverse=True,
        )
        for candidate in candidates:
            if _matches(candidate, version):
                return str(candidate)
    return None


def where_to_look(version: str) -> Iterator[tuple[str, str | None]]:
    """Each place an interpreter of ``version`` is looked for, in order, and what it gave; lazily,
    so a caller that stops at the first one found runs no later look-up."""
    mapped = _mapping().get(version)
    yield "AICONSOLE_PYTHONS", mapped if mapped and _matches(mapped, version) else None
    yield "the console's interpreter", sys.executable if _matches(sys.executable, version) else None
    yield "uv python find", _uv_find(version)
    yield "pyenv", _pyenv_find(version)


_found: dict[str, str] = {}


def find_python(version: str) -> str | None:
    """An interpreter of ``version`` ("3.7") on this machine, or None; found ones are remembered."""
    known = _found.get(version)
    if known and Path(known).exists():
        return known
    mapped = _mapping().get(version)
    if mapped and not _matches(mapped, version):
        raise PythonNotFound(
            f"AICONSOLE_PYTHONS maps Python {version} to {mapped}, which is not a working Python {version} interpreter."
        )
    for _, path in where_to_look(version):
        if path:
            _found[version] = path
            return path
    return None


def downloads_allowed() -> bool:
    return settings.PYTHON_DOWNLOADS == "automatic"


def install_python(version: str, log) -> str:
    """``uv python install VERSION`` with its progress in ``log``; the interpreter's path."""
    log(f"No Python {version} interpreter on this machine; installing one with uv (this happens once).")
    process = subprocess.Popen(
        [uv_binary(), "python", "install", version],
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
        env={**tool_env(), "UV_NO_PROGRESS": "0"},
    )
    output = []
    for line in process.stdout:
        line = line.rstrip()
        if line:
            output.append(line)
            log(line)
    if process.wait() != 0:
        raise PythonNotFound(
            f"Installing Python {version} with uv failed: {' '.join(output[-3:])} {how_to_provide(version)}"
        )
    found = _uv_find(version)
    if not found:
        raise PythonNotFound(f"uv installed Python {version} but cannot find it. {how_to_provide(version)}")
    _found[version] = found
    return found


def how_to_provide(version: str) -> str:
    return (
        f"Install Python {version} (for example `uv python install {version}` or "
        f"`pyenv install {version}`), or name one with AICONSOLE_PYTHONS={version}=/path/to/python{version}."
    )
