"""How long a trainer's imports take in a fresh interpreter, as the account trainers run as: from a
runtime environment as the console builds it now (its modules compiled when installed) against
the same libraries without their bytecode, as environments were built before.

As root, trainers run as their project's account (aiconsole.trainer_user), which may read the
shared environment but not write it: a module without bytecode there was compiled from its source
by every replica, serving process and TensorBoard that imported it, and the result thrown away.
The second case reproduces that: a folder holding the environment's files without their
``__pycache__`` folders (hard links, or copies on another file system), which the account may
read and not write. Each measure starts the runtime's interpreter as that account, as a replica
starts, and imports one set of modules: the serving preload (NumPy, SciPy, scikit-learn, XGBoost)
and TensorFlow. The two cases alternate, run by run; the ratio of their medians is printed.

Run: ``.venv/bin/python bench/imports.py [--runs 5] [--runtime 2.11]`` (about a minute once the
runtime is built; its first build, into ``--env-dir``, takes minutes).
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402

SETS = {
    "serving preload": "numpy, scipy, joblib, sklearn, sklearn.linear_model, sklearn.tree, sklearn.ensemble, xgboost",
    "tensorflow": "tensorflow",
}


def without_bytecode(site: Path, target: Path) -> None:
    """``site``'s files under ``target`` without any ``__pycache__``: read-only folders, so nothing
    the interpreter compiles is kept, as in an environment its account cannot write."""
    for folder, names, files in os.walk(site):
        names[:] = [name for name in names if name != "__pycache__"]
        destination = target / Path(folder).relative_to(site)
        destination.mkdir(parents=True, exist_ok=True)
        for name in files:
            if name.endswith(".pyc"):
                continue
            try:
                os.link(Path(folder) / name, destination / name)
            except OSError:
                shutil.copy2(Path(folder) / name, destination / name)
    for folder, _, _ in os.walk(target):
        os.chmod(folder, 0o555)


def import_seconds(python: Path, site: Path, modules: str, run_as: dict) -> float:
    """A fresh interpreter that adds ``site`` and imports ``modules``, start to exit."""
    code = f"import site; site.addsitedir({str(site)!r}); import {modules}"
    env = {"PATH": os.defpath, "TF_CPP_MIN_LOG_LEVEL": "3", "HOME": "/nonexistent"}
    started = time.perf_counter()
    subprocess.run([str(python), "-I", "-S", "-c", code], env=env, check=True, capture_output=True, **run_as)
    return time.perf_counter() - started


def measure(python: Path, cases: dict[str, Path], run_as: dict, runs: int) -> dict[tuple[str, str], list[float]]:
    seconds: dict[tuple[str, str], list[float]] = {}
    for run in range(runs):
        for label, modules in SETS.items():
            for case, site in cases.items():
                seconds.setdefault((label, case), []).append(import_seconds(python, site, modules, run_as))
        say(f"run {run + 1} of {runs}")
    return seconds


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=5, help="imports of each set in each case (default 5)")
    parser.add_argument("--runtime", default="2.11", help="the runtime version whose environment is used")
    add_env_dir_flag(parser)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    with scratch("aiconsole-bench-imports-") as folder:
        os.environ["AICONSOLE_DATA_DIR"] = str(folder / "data")
        os.environ["AICONSOLE_ENV_DIR"] = str(env_cache(args.env_dir))
        os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
        import django

        from aiconsole import datadir

        datadir.prepare()
        django.setup()
        from django.core.management import call_command

        from aiconsole import trainer_user
        from aiconsole.models import Project
        from jobs.executor import environments

        call_command("migrate", verbosity=0, interactive=False)
        say(f"the runtime {args.runtime} environment (built once per machine, in {os.environ['AICONSOLE_ENV_DIR']})")
        runtime = environments.runtime_environment(args.runtime, say)
        account = trainer_user.for_project(Project.objects.create(project_id="bench-imports"))
        run_as = account.popen_options() if account is not None else {}
        who = f"as {account.name}" if account is not None else "as this user"
        bare = folder / "without-bytecode"
        try:
            without_bytecode(runtime.site_packages(), bare)
            cases = {"compiled": runtime.site_packages(), "no bytecode": bare}
            seconds = measure(runtime.python, cases, run_as, args.runs)
        finally:
            for path, _, _ in os.walk(bare):
                os.chmod(path, 0o755)  # removable again with the scratch folder
        print(f"\nmedians of {args.runs} runs, alternated, {who}, runtime {args.runtime}")
        for label in SETS:
            compiled = statistics.median(seconds[label, "compiled"])
            bare_median = statistics.median(seconds[label, "no bytecode"])
            print(
                f"  {label}: compiled {compiled * 1000:.0f} ms, without bytecode {bare_median * 1000:.0f} ms; "
                f"compiled / without: {compiled / bare_median:.2f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
