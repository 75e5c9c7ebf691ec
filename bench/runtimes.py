"""How long each runtime version takes to build, cold and warm, and its size on disk.

For each runtime (CPU build, its default Python) the environment is built twice into throw-away
folders, side by side: cold, with an empty uv cache (every wheel downloaded), then warm, from
the cache the cold build filled (what a second worker, a rebuild or a CI rerun sees). Both go
through ``environments.runtime_environment``, as a job's PREPARING does.

Run: ``.venv/bin/python bench/runtimes.py [--runtimes 2.11,1.15] [--warm-only]`` (a cold build of every
runtime downloads gigabytes: allow an hour; ``--runtimes 2.11 --warm-only``, a minute).
"""

from __future__ import annotations

import argparse
import atexit
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
if "AICONSOLE_DATA_DIR" not in os.environ:  # a throw-away one, removed when the run ends
    os.environ["AICONSOLE_DATA_DIR"] = tempfile.mkdtemp(prefix="aiconsole-bench-runtimes-")
    atexit.register(shutil.rmtree, os.environ["AICONSOLE_DATA_DIR"], ignore_errors=True)
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402

from aiconsole import datadir  # noqa: E402
from bench.common import say, scratch  # noqa: E402

datadir.prepare()
django.setup()

from django.conf import settings  # noqa: E402

from jobs import runtimes  # noqa: E402
from jobs.executor import environments  # noqa: E402


def build(name: str, env_dir: Path, cache: Path | None) -> tuple[float, int, dict]:
    settings.ENV_DIR = env_dir
    if cache is not None:
        os.environ["UV_CACHE_DIR"] = str(cache)
    else:
        os.environ.pop("UV_CACHE_DIR", None)
    started = time.perf_counter()
    environment = environments.runtime_environment(name, lambda line: None)
    seconds = time.perf_counter() - started
    return seconds, environments.size_on_disk(environment.path), environment.frozen()


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--runtimes", default=",".join(runtimes.RUNTIMES))
    parser.add_argument("--warm-only", action="store_true", help="skip the cold build (no empty uv cache)")
    args = parser.parse_args()
    print(f"{'runtime':8} {'python':7} {'cold s':>7} {'warm s':>7} {'warm/cold':>9} {'size':>8}  frameworks")
    ratios = []
    for name in args.runtimes.split(","):
        runtime = runtimes.RUNTIMES[name]
        # As root, trainers run as other accounts, which must read the interpreter copied there.
        with scratch("aiconsole-bench-runtime-") as folder:
            cold = None
            if not args.warm_only:
                say(f"{name}: cold build, every wheel downloaded into an empty uv cache")
                cold, _, _ = build(name, folder / "cold", folder / "uv-cache")
                shutil.rmtree(folder / "cold")
            say(f"{name}: warm build, from {'that' if cold is not None else 'the usual'} uv cache")
            warm, size, frozen = build(name, folder / "warm", folder / "uv-cache" if cold is not None else None)
        frameworks = ", ".join(f"{label} {version}" for label, version in runtimes.framework_versions(frozen).items())
        ratio = warm / cold if cold else None
        if ratio:
            ratios.append(ratio)
        print(
            f"{name:8} {runtimes.default_python(runtime):7} {cold or 0:7.1f} {warm:7.1f} "
            f"{(f'{ratio:.2f}' if ratio else '-'):>9} {size / 1e9:6.2f} GB  {frameworks}",
            flush=True,
        )
    if ratios:
        print(f"median warm/cold: {statistics.median(ratios):.2f}")


if __name__ == "__main__":
    main()
