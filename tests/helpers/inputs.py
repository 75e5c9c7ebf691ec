"""Large inputs that tests only read (a 200 MB metric file, a million-event file): built once per
machine, beside the suite's cached Python environments, kept between runs, and copied where a test
needs them (a copy of 200 MB takes a tenth of a second; building it took seconds).

An input is named by what builds it: the builder's name, its arguments and the source of the module
that holds it, so a change to how an input is made builds it anew. Building one took longer than the
test that reads it, and every run of the suite built the same bytes again.
"""

from __future__ import annotations

import hashlib
import inspect
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

from django.conf import settings


def input_folder(destination: Path, build: Callable[..., None], *args) -> Path:
    """``destination`` holding what ``build(folder, *args)`` puts in a folder: a copy of the cached one,
    its files written now (as a trainer writes them: the console reads only event files written after
    their job was created, ``jobs.metrics.points.job_started_after``)."""
    shutil.copytree(_cached(build, *args), destination, dirs_exist_ok=True, copy_function=shutil.copy)
    return destination


def _cached(build: Callable[..., None], *args) -> Path:
    """A folder that ``build(folder, *args)`` filled, built on the first call on this machine."""
    module = inspect.getmodule(build)
    source = inspect.getsource(module) if module else ""
    key = hashlib.sha256(f"{build.__qualname__}{args!r}{source}".encode()).hexdigest()[:16]
    folder = settings.ENV_DIR.parent / "test-inputs" / f"{build.__name__}-{key}"
    if not folder.is_dir():
        folder.parent.mkdir(parents=True, exist_ok=True)
        # Built aside and renamed into place: a test worker never reads a half-written input, and
        # two workers building the same one at once both end with it.
        scratch = Path(tempfile.mkdtemp(dir=folder.parent, prefix=f".{folder.name}-"))
        try:
            build(scratch, *args)
            scratch.rename(folder)
        except OSError:
            if not folder.is_dir():
                raise
        finally:
            shutil.rmtree(scratch, ignore_errors=True)
    return folder
