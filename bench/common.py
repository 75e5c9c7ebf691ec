"""What every benchmark needs to run on a new machine, as root or as a user, and end in bounded time.

- ``scratch(prefix)``: a throw-away folder for data dirs that trainers can reach. As root a console
  runs its trainers as unprivileged accounts, which must traverse every folder down to the data
  dir; ``tempfile``'s folders are private, and so is root's home.
- ``env_cache(flag)``: where the Python environments are kept between runs: ``--env-dir`` when
  given (the test suite passes its own cache), else ``/var/cache/aiconsole/bench-envs`` as root
  (reachable by the trainers) and ``~/.cache/aiconsole/bench-envs`` as a user.
- ``wait_until(...)``: every wait has a timeout and a message naming what did not happen.
- ``say(...)``: progress on stdout as it happens, so a long phase is never silent.
"""

from __future__ import annotations

import argparse
import os
import shutil
import stat
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from bench.support.waiting import wait_for

SYSTEM_CACHE = Path("/var/cache/aiconsole")
STARTED = time.monotonic()

# Python puts a script's own folder first on the path, where bench/tensorboard.py would hide the
# tensorboard package from everything the script imports after this module (jobs.metrics.tfevents, ...).
_BENCH = Path(__file__).resolve().parent
sys.path[:] = [entry for entry in sys.path if Path(entry or ".").resolve() != _BENCH]


def say(message: str) -> None:
    """A progress line, with the seconds since the benchmark started."""
    print(f"[{time.monotonic() - STARTED:6.1f} s] {message}", flush=True)


def add_env_dir_flag(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--env-dir",
        type=Path,
        metavar="DIR",
        help="where Python environments are built and kept between runs (default: "
        f"{SYSTEM_CACHE}/bench-envs as root, ~/.cache/aiconsole/bench-envs otherwise); "
        "a first run builds the runtime there, which takes minutes",
    )


_CACHES_USED: set[Path] = set()  # where this run's consoles built environments (scratch's clean-up)


def env_cache(chosen: Path | None = None) -> Path:
    _CACHES_USED.add(cache := _env_cache(chosen))
    return cache


def _env_cache(chosen: Path | None) -> Path:
    if chosen is not None:
        return chosen.resolve()
    if os.geteuid() == 0:
        SYSTEM_CACHE.mkdir(parents=True, exist_ok=True)
        SYSTEM_CACHE.chmod(0o755)  # the trainer accounts reach the environments through it
        return SYSTEM_CACHE / "bench-envs"
    return Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "aiconsole" / "bench-envs"


def _closed_to_others(folder: Path) -> Path | None:
    """The first folder from / down to ``folder`` that others may not traverse."""
    for part in [*reversed(folder.parents), folder]:
        if not part.stat().st_mode & stat.S_IXOTH:
            return part
    return None


@contextmanager
def scratch(prefix: str) -> Iterator[Path]:
    """A temporary folder (removed afterwards) that others may traverse but not list. As root, the
    trainer accounts its consoles made go with it, and the job environments built for them in the
    environment caches the run used (``env_cache``, and ``AICONSOLE_ENV_DIR`` where set): a
    benchmark leaves no account behind on the host."""
    folder = Path(tempfile.mkdtemp(prefix=prefix)).resolve()
    try:
        folder.chmod(0o711)
        blocked = _closed_to_others(folder) if os.geteuid() == 0 else None
        if blocked is not None:
            raise SystemExit(
                f"{blocked} lets only its owner in, and as root the console runs trainers as "
                f"another account that must reach {folder}: set TMPDIR to a folder others may "
                "traverse (e.g. TMPDIR=/var/tmp)"
            )
        yield folder
    finally:
        shutil.rmtree(folder, ignore_errors=True)
        if os.geteuid() == 0:
            from aiconsole import trainer_user

            caches = {
                *_CACHES_USED,
                *([Path(os.environ["AICONSOLE_ENV_DIR"])] if os.environ.get("AICONSOLE_ENV_DIR") else []),
            }
            trainer_user.remove_accounts([folder], sorted(caches))


def wait_until(predicate: Callable[[], object], timeout: float, what: str, interval: float = 0.1) -> object:
    """``wait_for``, ending the benchmark (SystemExit naming ``what``) after ``timeout``."""
    try:
        return wait_for(predicate, timeout, interval, what)
    except AssertionError:
        raise SystemExit(f"gave up after {timeout:.0f} s waiting for {what}") from None


def log_tail(path: Path, lines: int = 40) -> str:
    try:
        return "\n".join(path.read_text(errors="replace").splitlines()[-lines:])
    except OSError:
        return "(no log)"
