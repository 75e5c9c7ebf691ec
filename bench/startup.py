"""How long the ``aiconsole`` command takes to start: a client command, and ``aiconsole up`` until
its sign-in page answers.

1. ``aiconsole jobs --help``: what every command a user's shell script runs pays before it does
   anything (the parser, and what building it imports).
2. ``aiconsole up`` on a data dir an earlier start set up (migrated, admin made), from the command
   to the first answer of ``/login/``: the parent, the web and worker processes it starts, and the
   first request.

With ``--other TREE`` (another checkout of the project, say the commit before a change) each run
alternates this tree's code and that tree's, so drift on a noisy machine hits both alike, and the
ratio of their medians is printed. The other tree's code is run by this virtual environment's
Python with ``PYTHONPATH`` set to that tree.

Run: ``.venv/bin/python bench/startup.py [--runs N] [--other TREE]`` (about a minute for 8 runs).
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, log_tail, say, scratch, wait_until  # noqa: E402
from jobs.executor.replicas import free_port  # noqa: E402

# The console script's own entry point, so either tree's code can be run by this interpreter.
ENTRY = "import sys; from console.cli import main; sys.exit(main())"


def command(*argv: str) -> list[str]:
    return [sys.executable, "-c", ENTRY, *argv]


def environment(tree: Path, data_dir: Path, env_dir: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"}
    env.update(PYTHONPATH=str(tree), AICONSOLE_DATA_DIR=str(data_dir), AICONSOLE_ENV_DIR=str(env_dir))
    return env


def client_start(tree: Path, env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(command("jobs", "--help"), env=env, check=True, stdout=subprocess.DEVNULL, cwd=tree)
    return time.perf_counter() - started


def answers(url: str) -> bool:
    try:
        return urllib.request.urlopen(url, timeout=10).status == 200
    except (urllib.error.URLError, OSError):
        return False


def console_start(tree: Path, env: dict[str, str], log: Path) -> float:
    port = free_port()
    started = time.perf_counter()
    with log.open("w") as output:
        process = subprocess.Popen(
            command("up", "--port", str(port)), env=env, stdout=output, stderr=subprocess.STDOUT, cwd=tree
        )
    try:
        url = f"http://127.0.0.1:{port}/login/"
        wait_until(lambda: answers(url) or process.poll() is not None, 120, "the console to answer", interval=0.02)
        if process.poll() is not None:
            raise SystemExit(f"aiconsole up ended:\n{log_tail(log)}")
        return time.perf_counter() - started
    finally:
        process.send_signal(signal.SIGINT)
        process.wait(60)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--runs", type=int, default=8, help="runs of each measure in each tree (default 8)")
    parser.add_argument("--other", type=Path, help="another checkout to alternate with, run after this one")
    add_env_dir_flag(parser)
    args = parser.parse_args()
    if args.runs < 1:
        parser.error("--runs must be at least 1")
    if args.other and not (args.other / "console" / "cli" / "__init__.py").is_file():
        parser.error(f"--other {args.other}: not a checkout of this project (it has no console/cli)")
    trees = {"this tree": ROOT, **({"other tree": args.other.resolve()} if args.other else {})}
    env_dir = env_cache(args.env_dir)
    results: dict[tuple[str, str], list[float]] = {}
    with scratch("aiconsole-bench-startup-") as folder:
        envs = {name: environment(tree, folder / name.replace(" ", "-"), env_dir) for name, tree in trees.items()}
        for name, tree in trees.items():  # the first start migrates and makes the admin: not measured
            console_start(tree, envs[name], folder / "first.log")
        for run in range(args.runs):
            for name, tree in trees.items():
                results.setdefault((name, "jobs --help"), []).append(client_start(tree, envs[name]))
                results.setdefault((name, "up"), []).append(console_start(tree, envs[name], folder / "up.log"))
            say(f"run {run + 1} of {args.runs}")
    print(f"\nmedians of {args.runs} runs, alternated")
    for measure in ("jobs --help", "up"):
        medians = {name: statistics.median(results[name, measure]) for name in trees}
        line = ", ".join(f"{name} {value * 1000:.0f} ms" for name, value in medians.items())
        if args.other:
            line += f"; this / other: {medians['this tree'] / medians['other tree']:.2f}"
        label = "aiconsole jobs --help" if measure == "jobs --help" else "aiconsole up to /login/"
        print(f"  {label}: {line}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
