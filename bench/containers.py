"""Custom containers beside Python packages, on one real ``aiconsole up`` with podman.

1. Submit → first line of trainer code, image present / environment built: the client notes the
   time just before POSTing the job; the trainer's first statement notes its own (a busybox
   image reads the clock with ``adjtimex``, microseconds; the package with ``time.time()``).
   Container and package jobs alternate, so drift hits both alike.
2. Cancel → CANCELLED for a 3-replica job (master and two workers, each trapping SIGTERM and
   exiting), container and package alternated.
3. A 20-trial study of 1-second trials, 4 in parallel: wall time from submit to SUCCEEDED over the
   ideal (20 × 1 s / 4 = 5 s), container and package, the package's environment built by a job
   before (the per-trial overhead is measured, not a first build).

Run: ``.venv/bin/python bench/containers.py [--latency-runs N] [--cancel-runs N]`` (about 3 minutes
once the package runtime is built). Needs podman (scripts/install-container-engine) and
busybox-static.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch, wait_until  # noqa: E402
from bench.run import PROJECT, Console, percentile  # noqa: E402
from bench.support import images  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

CONTAINER_FIRST_LINE = """\
busybox adjtimex | sed -n 's/.*time.tv_sec: *//p; s/.*time.tv_usec: *//p' | tr '\\n' ' ' > "$2/first_line_at"
"""
PACKAGE_FIRST_LINE = """\
import time; FIRST_LINE_AT = time.time()
import os, sys
with open(os.path.join(sys.argv[-1], "first_line_at"), "w") as handle:
    handle.write(repr(FIRST_LINE_AT))
"""
CONTAINER_WAITER = "trap 'exit 143' TERM\necho ready\nwhile true; do sleep 0.1; done\n"
PACKAGE_WAITER = """\
import signal, sys, time
signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))
print("ready", flush=True)
while True:
    time.sleep(0.1)
"""
CONTAINER_TRIAL = """\
sleep 1
for arg in "$@"; do case "$arg" in --x=*) x="${arg#--x=}" ;; esac; done
echo "{\\"global_step\\": \\"1\\", \\"score\\": \\"$x\\"}" >> "$CLOUD_ML_HP_METRIC_FILE"
"""
PACKAGE_TRIAL = """\
import json, os, sys, time
time.sleep(1)
x = next(a.split("=", 1)[1] for a in sys.argv if a.startswith("--x="))
os.makedirs(os.path.dirname(os.environ["CLOUD_ML_HP_METRIC_FILE"]), exist_ok=True)  # as cloudml-hypertune does
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "a") as handle:
    handle.write(json.dumps({"global_step": "1", "score": x}) + "\\n")
"""
STUDY = {
    "goal": "MAXIMIZE",
    "hyperparameterMetricTag": "score",
    "maxTrials": 20,
    "maxParallelTrials": 4,
    "algorithm": "RANDOM_SEARCH",
    "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}],
}


class Bench:
    def __init__(self, console: Console, storage: Path, data_dir: Path):
        self.console = console
        self.storage = storage
        self.engine_env = {**os.environ, "CONTAINERS_CONF": str(data_dir / "containers" / "containers.conf")}
        self.packages: dict[str, Path] = {}
        self.counter = 0

    def image(self, script: str) -> str:
        name = f"localhost/aic-bench/busybox:{abs(hash(script)) % 10**10}"
        subprocess.run(
            ["podman", "import", "--change", 'ENTRYPOINT ["/trainer.sh"]', "-", name],
            input=images.root_archive(script, applets=(*images.APPLETS, "adjtimex", "sed", "tr")),
            env=self.engine_env,
            check=True,
            capture_output=True,
        )
        return name

    def package(self, name: str, source: str) -> Path:
        if name not in self.packages:
            folder = self.storage / "packages" / PROJECT / name
            self.packages[name] = build_package(folder, {"trainer/task.py": source})
        return self.packages[name]

    def job_dir(self) -> Path:
        self.counter += 1
        path = self.storage / "outputs" / PROJECT / f"run-{self.counter}"
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def submit(self, job_id: str, training_input: dict) -> None:
        self.console.call(
            "POST",
            f"/v1/projects/{PROJECT}/jobs",
            {"jobId": job_id, "trainingInput": {"region": "us-central1", **training_input}},
        )

    @staticmethod
    def container_input(image: str, **extra) -> dict:
        return {"scaleTier": "BASIC", "masterConfig": {"imageUri": image}, **extra}

    def package_input(self, name: str, source: str, **extra) -> dict:
        return {
            "scaleTier": "BASIC",
            "packageUris": [str(self.package(name, source))],
            "pythonModule": "trainer.task",
            "runtimeVersion": "2.11",
            **extra,
        }


def first_line_at(job_dir: Path) -> float:
    text = (job_dir / "first_line_at").read_text().split()
    return float(text[0]) if len(text) == 1 else int(text[0]) + int(text[1]) / 1e6


def bench_latency(bench: Bench, runs: int) -> dict:
    image = bench.image(CONTAINER_FIRST_LINE)
    samples: dict[str, list[float]] = {"container": [], "package": []}
    say("a first package job builds its environment (minutes on a new machine)")
    warm = bench.job_dir()
    bench.submit("warm_package", bench.package_input("first", PACKAGE_FIRST_LINE, jobDir=str(warm)))
    bench.console.wait("warm_package")
    say(f"submit → first trainer line, {runs} runs each, alternated")
    for run in range(runs):
        for kind in ("container", "package"):
            job_dir = bench.job_dir()
            job_id = f"first_{kind}_{run}"
            if kind == "container":
                training_input = bench.container_input(image, jobDir=str(job_dir))
            else:
                training_input = bench.package_input("first", PACKAGE_FIRST_LINE, jobDir=str(job_dir))
            submitted = time.time()
            bench.submit(job_id, training_input)
            bench.console.wait(job_id)
            samples[kind].append((first_line_at(job_dir) - submitted) * 1000)
    return samples


def bench_cancel(bench: Bench, runs: int) -> dict:
    image = bench.image(CONTAINER_WAITER)
    three = {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": "2"}
    samples: dict[str, list[float]] = {"container": [], "package": []}
    say(f"cancel → CANCELLED, 3 replicas, {runs} runs each, alternated")
    for run in range(runs):
        for kind in ("container", "package"):
            job_id = f"cancel_{kind}_{run}"
            if kind == "container":
                training_input = bench.container_input(image, **three)
            else:
                training_input = bench.package_input("waiter", PACKAGE_WAITER, **three)
            bench.submit(job_id, training_input)
            path = f"/v1/projects/{PROJECT}/jobs/{job_id}"
            wait_until(lambda job_id=job_id: ready_count(bench, job_id) >= 3, 120, f"{job_id}'s 3 replicas to start")
            asked = time.monotonic()
            bench.console.call("POST", f"{path}:cancel", {})
            wait_until(
                lambda path=path: bench.console.call("GET", path)["state"] == "CANCELLED",
                120,
                f"{job_id} cancelled",
                0.02,
            )
            samples[kind].append((time.monotonic() - asked) * 1000)
    return samples


def ready_count(bench: Bench, job_id: str) -> int:
    found = bench.console.call("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}/logs?pageSize=1000")
    return sum(1 for entry in found["entries"] if entry["message"] == "ready")


def bench_study(bench: Bench) -> dict:
    """The study's wall time over its ideal: what running trials costs beyond the trials (the
    package's environment is built by a first job, as a study after a first try finds it)."""
    image = bench.image(CONTAINER_TRIAL)
    warm = bench.package_input("trial", PACKAGE_TRIAL, jobDir=str(bench.job_dir()), args=["--x=0.5"])
    bench.submit("study_warm_up", warm)
    bench.console.wait("study_warm_up", poll=0.1)
    walls = {}
    for kind in ("container", "package"):
        job_id = f"study_{kind}"
        job_dir = bench.job_dir()
        if kind == "container":
            training_input = bench.container_input(image, jobDir=str(job_dir), hyperparameters=STUDY)
        else:
            training_input = bench.package_input("trial", PACKAGE_TRIAL, jobDir=str(job_dir), hyperparameters=STUDY)
        say(f"a 20-trial {kind} study, 4 in parallel")
        started = time.monotonic()
        bench.submit(job_id, training_input)
        bench.console.wait(job_id, poll=0.1)
        walls[kind] = time.monotonic() - started
    return walls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-runs", type=int, default=10)
    parser.add_argument("--cancel-runs", type=int, default=5)
    parser.add_argument("--no-study", action="store_true", help="skip the 20-trial studies")
    add_env_dir_flag(parser)
    options = parser.parse_args()
    with scratch("aiconsole-bench-containers-") as folder:
        data_dir = folder / "data"
        console = Console(data_dir, env_cache(options.env_dir), AICONSOLE_MAX_REPLICAS="16")
        try:
            storage = data_dir / "storage"
            bench = Bench(console, storage, data_dir)
            latency = bench_latency(bench, options.latency_runs)
            cancel = bench_cancel(bench, options.cancel_runs)
            study = {} if options.no_study else bench_study(bench)
        finally:
            console.stop()
    print()
    print(f"Submit → first trainer line, {options.latency_runs} runs each (ms):")
    for kind, values in latency.items():
        print(f"  {kind:9}  p50 {statistics.median(values):7.1f}   p90 {percentile(values, 0.9):7.1f}")
    ratio = statistics.median(latency["container"]) / statistics.median(latency["package"])
    print(f"  container / package p50: {ratio:.2f}")
    print(f"Cancel → CANCELLED, 3 replicas, {options.cancel_runs} runs each (ms):")
    for kind, values in cancel.items():
        print(f"  {kind:9}  p50 {statistics.median(values):7.1f}   max {max(values):7.1f}")
    if study:
        print("20-trial study of 1 s trials, 4 in parallel (ideal 5.0 s):")
        for kind, wall in study.items():
            print(f"  {kind:9}  {wall:6.1f} s   {wall / 5.0:.2f}× the ideal")


if __name__ == "__main__":
    main()
