"""Every benchmark still loads, and runs on this machine as its README line says, as root too: a
short run of each (seconds, not the minutes a measurement takes on a quiet machine) ends with its
report, so a helper that moved or a wait that never ends breaks the suite, not the next person
who measures."""

import os
import pwd
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent

# Each script's module-level code (its imports, its constants) without its ``main()``.
LOAD_ALL = """
import runpy, sys
for path in sys.argv[1:]:
    runpy.run_path(path, run_name="loaded_by_the_test_suite")
    print("loaded", path, flush=True)
"""


@pytest.mark.slow
def test_every_benchmark_script_loads():
    scripts = sorted(str(path) for path in (ROOT / "bench").glob("*.py") if path.name != "__init__.py")
    assert len(scripts) >= 10
    result = subprocess.run(
        [sys.executable, "-c", LOAD_ALL, *scripts], cwd=ROOT, capture_output=True, text=True, timeout=300
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.count("loaded ") == len(scripts)


# --- a short run of each, as the README runs them -------------------------------------------------

# Each benchmark at its smallest: seconds, not minutes, yet every phase and every wait is passed
# through once. The line expected last says the run reached its report.
SHORT_RUNS = {
    "run.py": (
        ["--latency-runs", "2", "--overhead-pairs", "1", "--overhead-steps", "20000"],
        "submit → SUCCEEDED seen by a client",
    ),
    "flood.py": (["--latency-runs", "1", "--rate", "5", "--seconds", "1", "--rounds", "1"], "p99 flood/quiet ratio"),
    "logs.py": (
        [
            "--latency-runs",
            "1",
            "--viewers",
            "2",
            "--fanout-seconds",
            "1",
            "--ingest-rates",
            "1000",
            "--ingest-seconds",
            "1",
            "--flat-lines",
            "2000",
            "--ingest-pairs",
            "1",
            "--big-log-lines",
            "1000",
        ],
        "socket: backlog after",
    ),
    "api_list.py": (["--jobs", "300", "--seconds", "1"], "(goal p99 ≤ 50 ms)"),
    "metrics.py": (["--points", "400", "--rounds", "1"], "ratio all at 1,000 a page"),
    "fronts_cpu.py": (["{scratch}", "--jobs", "200", "--requests", "50"], "predict, no version"),
    "models.py": (
        ["--seconds", "1", "--rate", "20", "--clients", "1", "--cold-runs", "1", "--only", "as_shipped"],
        '"serving_alone_linear"',
    ),
    "builtin.py": (["--rows", "400", "--repeats", "1"], "data analysis report"),
    "runtimes.py": (["--runtimes", "2.11", "--warm-only"], "TensorFlow 2.11"),
    "imports.py": (["--runs", "1"], "compiled / without"),
    "tuning.py": (
        [
            "--seeds",
            "1",
            "--branin-budget",
            "5",
            "--hartmann-budget",
            "5",
            "--parallel",
            "1",
            "--latency-calls",
            "2",
            "--page-trials",
            "10",
            "--page-repeats",
            "1",
        ],
        "trial table fragment",
    ),
    "tensorboard.py": (["--rounds", "1", "--steps", "10"], "a small data request"),
    "outputs.py": (["--files", "300", "--csv-mb", "1", "--repeats", "1"], "csv preview, 1 MB / 1 KB"),
    "containers.py": (["--latency-runs", "1", "--cancel-runs", "1", "--no-study"], "container / package p50"),
    "vertex.py": (["--rounds", "1"], "ratio SDK at 50 ms / v1"),
    "vertex_predict.py": (["--rounds", "1", "--requests", "10"], "ratios of p50 to v1"),
    "admission.py": (["--projects", "3", "--queued", "60", "--repeats", "1"], "ratio fair / first come"),
    # Builds Google's PyTorch image from Debian's packages: its one short run is the real one.
    "prebuilt.py": ([], "second / first"),
    "scaled.py": (
        ["--latency-runs", "1", "--kills", "0", "--fault-rounds", "1", "--chaos-rounds", "0"],
        "duplicate_seconds",
    ),
    "pages.py": (
        [
            "--jobs",
            "30",
            "--log-lines",
            "200",
            "--study-trials",
            "12",
            "--study-charts",
            "1",
            "--repeats",
            "1",
            "--compare-jobs",
            "2",
            "--compare-points",
            "20",
            "--baseline",  # this checkout as its own baseline: the second console and its copied study
            "{root}",
        ],
        "ratio this checkout / baseline",
    ),
    "screenshots.py": (["--out", "{scratch}"], "tuning-study-phone-dark.png"),
    "webshell.py": (["--keys", "20", "--rounds", "1"], "ratio console / direct pty"),
    "startup.py": (["--runs", "1", "--other", "{root}"], "aiconsole up to /login/"),
    "abuse.py": (
        [
            "--seconds",
            "1",
            "--rate",
            "5",
            "--reports",
            "1000",
            "--scalars",
            "1000",
            "--csv-mb",
            "1",
            "--sockets",
            "5",
            "--slow",
            "5",
            "--client-timeout",
            "2",
            "--tensorboards",
            "1",
        ],
        "p99 under abuse / quiet p99",
    ),
}
# Where the environment is already built: the suite's own cache (aiconsole/testing.py), given as
# --env-dir; what takes minutes on a new machine is the same build the suite makes first.
NO_ENV_DIR = {
    "admission.py",
    "fronts_cpu.py",
    "runtimes.py",
    "tuning.py",
    "api_list.py",
    "metrics.py",
    "pages.py",
    "outputs.py",
}
NEEDS_CHROMIUM = {"pages.py", "screenshots.py"}
# Seconds each may take; most take under a minute. Building an image from nothing downloads and
# unpacks some 1.4 GB of Debian packages.
TIMEOUTS = {"prebuilt.py": 1200}


def test_every_benchmark_has_a_short_run():
    scripts = {path.name for path in (ROOT / "bench").glob("*.py")} - {"__init__.py", "common.py"}
    assert scripts == set(SHORT_RUNS)


def _services_for(name: str) -> None:
    """Skip (fail in CI) when what a benchmark needs beyond this checkout is missing, as its tests do."""
    if name in NEEDS_CHROMIUM:
        from bench.support import harness

        if harness.ensure_chromium() is None:
            if harness.in_ci():
                pytest.fail("CI runs the benchmarks: /usr/bin/chromium is missing and could not be installed")
            pytest.skip("no /usr/bin/chromium (scripts/install-chromium needs root or sudo)")
    if name in {"containers.py", "prebuilt.py"}:
        from tests.helpers.images import require_engine  # Django's settings: only this benchmark needs them

        require_engine()
    if name == "scaled.py":
        from bench.support.cluster import service_up

        for service, port in (("PostgreSQL", 5432), ("Redis", 6379)):
            problem = service_up("127.0.0.1", port)
            if problem is not None:
                if os.environ.get("CI") == "true":
                    pytest.fail(f"CI runs scaled mode: no {service} at 127.0.0.1:{port}: {problem}")
                pytest.skip(f"no {service} at 127.0.0.1:{port}: {problem}")


@pytest.mark.executor
@pytest.mark.parametrize("name", sorted(SHORT_RUNS))
def test_a_short_run_of_each_benchmark_ends_with_its_report(name, tmp_path_factory):
    """As the README runs them, from a shell of their own (none of the suite's settings), as root
    too: then the console they start runs trainers as another account, which must reach their data."""
    _services_for(name)
    scratch = tmp_path_factory.mktemp(f"bench-{name.removesuffix('.py')}")
    argv, last_words = SHORT_RUNS[name]
    argv = [arg.replace("{scratch}", str(scratch)).replace("{root}", str(ROOT)) for arg in argv]
    if name not in NO_ENV_DIR:
        argv += ["--env-dir", os.environ["AICONSOLE_ENV_DIR"]]
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"}
    accounts_before = set(_accounts_of_removed_data_dirs())
    timeout = TIMEOUTS.get(name, 400)
    if name == "runtimes.py":  # builds into throw-away folders from the uv cache the suite filled
        env["AICONSOLE_ENV_DIR"] = os.environ["AICONSOLE_ENV_DIR"]
    try:
        # A login shell's umask, not the suite's private one (aiconsole/testing.py).
        result = subprocess.run(
            [sys.executable, str(ROOT / "bench" / name), *argv],
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=timeout,
            umask=0o022,
        )
    except subprocess.TimeoutExpired as error:
        pytest.fail(f"bench/{name} ran past {timeout} s; its output so far:\n{(error.stdout or b'')[-3000:]!r}")
    assert result.returncode == 0, f"bench/{name} failed:\n{result.stdout[-2000:]}\n{result.stderr[-4000:]}"
    assert last_words in result.stdout, result.stdout[-3000:]
    # As root its consoles ran trainers as accounts made on this host: none is left behind for a
    # data dir the benchmark has removed (the host may hold others', from runs killed before).
    assert sorted(set(_accounts_of_removed_data_dirs()) - accounts_before) == []


def _accounts_of_removed_data_dirs() -> list[str]:
    left = []
    for entry in pwd.getpwall():
        made = re.fullmatch(r"AI Console [0-9a-f]{10} projects/\S+ (.*)", entry.pw_gecos)
        if made and not Path(made[1]).exists():
            left.append(f"{entry.pw_name} ({made[1]})")
    return left
