"""Built-in algorithms on a generated 100,000-row CSV: how long each phase takes, and peak memory.

Each algorithm runs as the executor runs it (``python -m algorithms.<name>`` in the environment
of the runtime built-in jobs run on, ``current``), directly, so the numbers are the algorithm's own;
the executor's overhead around any trainer is measured by ``bench/run.py``. The data analysis
page's report of the same file is timed in this process.

Run: ``.venv/bin/python bench/builtin.py [--rows 100000] [--repeats 3]`` (a few minutes).
"""

from __future__ import annotations

import argparse
import json
import os
import random
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402

RUNS = {
    "boosted_trees": ["--preprocess", "--model_type=classification", "--num_boost_round=50", "--max_depth=6"],
    "linear_learner": ["--preprocess", "--model_type=classification", "--max_steps=2000", "--batch_size=200"],
}
PHASES = {
    "prepare": r"Reading and preparing the data took ([\d.]+) s",
    "train": r"Training took ([\d.]+) s",
    "evaluate": r"Evaluation took ([\d.]+) s",
}


def write_csv(path: Path, rows: int) -> None:
    """target, 6 numeric features (2% missing), 2 categorical ones (3 and 40 values), a row id."""
    rng = random.Random(3)
    colours, cities = ["red", "green", "blue"], [f"city{i}" for i in range(40)]
    with open(path, "w") as handle:
        for index in range(rows):
            xs = [rng.gauss(0, 1) for _ in range(6)]
            colour, city = rng.choice(colours), rng.choice(cities)
            score = xs[0] + 0.5 * xs[1] - xs[2] * xs[3] + (colour == "red") + (int(city[4:]) % 5 == 0)
            label = int(score + rng.gauss(0, 0.5) > 0.8)
            cells = ["" if rng.random() < 0.02 else f"{x:.5f}" for x in xs]
            handle.write(",".join([str(label), *cells, colour, city, str(index)]) + "\n")


def run_algorithm(python: Path, name: str, data: Path, out: Path) -> dict:
    started = time.monotonic()
    before = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    result = subprocess.run(
        [str(python), "-m", f"algorithms.{name}", f"--training_data_path={data}", *RUNS[name], "--job-dir", str(out)],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        cwd=tempfile.gettempdir(),
        timeout=1800,
    )
    wall = time.monotonic() - started
    if result.returncode != 0:
        sys.exit(f"{name} failed:\n{result.stderr[-3000:]}")
    phases = {phase: float(re.search(pattern, result.stdout).group(1)) for phase, pattern in PHASES.items()}
    evaluation = json.loads((out / "artifacts" / "evaluation.json").read_text())
    peak = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss
    return {"wall": wall, **phases, "peak_mb": max(peak, before) / 1024, "test": evaluation["test"]}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=int, default=100_000)
    parser.add_argument("--repeats", type=int, default=3)
    add_env_dir_flag(parser)
    options = parser.parse_args()
    with scratch("aiconsole-bench-builtin-") as work:
        os.environ["AICONSOLE_DATA_DIR"] = str(work / "data")
        os.environ["AICONSOLE_ENV_DIR"] = str(env_cache(options.env_dir))
        measure(options, work)


def measure(options, work: Path) -> None:
    import django

    from aiconsole import datadir

    datadir.prepare()
    django.setup()
    from algorithms import analysis
    from algorithms.table import read_path
    from jobs import runtimes
    from jobs.executor import environments

    # Built-in jobs run on the extension runtime, on the console's Python (jobs/builtin/algorithm.py).
    say(
        f"runtime {runtimes.CURRENT}'s environment in {os.environ['AICONSOLE_ENV_DIR']} (a first run builds it: "
        "minutes)"
    )
    python = environments.runtime_environment(runtimes.CURRENT, print).python
    data = work / "data.csv"
    write_csv(data, options.rows)
    print(f"{options.rows} rows, {data.stat().st_size / 1e6:.1f} MB, {os.cpu_count()} CPUs")
    for name in RUNS:
        say(f"{name}, {options.repeats} runs")
        runs = [run_algorithm(python, name, data, work / f"{name}-{i}") for i in range(options.repeats)]
        med = {key: statistics.median(r[key] for r in runs) for key in ("wall", *PHASES)}
        print(
            f"{name}: wall {med['wall']:.2f} s (prepare {med['prepare']:.2f}, train {med['train']:.2f}, "
            f"evaluate {med['evaluate']:.2f}); median of {len(runs)}; peak RSS (largest run so far) "
            f"{runs[-1]['peak_mb']:.0f} MB; test {json.dumps({k: round(v, 4) for k, v in runs[0]['test'].items()})}"
        )
    timings = []
    for _ in range(options.repeats):
        started = time.monotonic()
        report = analysis.report(read_path(str(data)))
        timings.append(time.monotonic() - started)
    print(
        f"data analysis report: {statistics.median(timings):.2f} s (median of {len(timings)}), "
        f"{len(report['warnings'])} warnings"
    )


if __name__ == "__main__":
    main()
