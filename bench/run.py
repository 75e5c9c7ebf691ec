"""Benchmarks of the embedded executor, against a real ``aiconsole up`` on a free port.

1. Submit → first line of trainer code running, with the environment already built: the client
   notes the time just before POSTing the job; the trainer's first statement notes its own.
2. Platform overhead: the same trainer run directly (``python -m trainer.task`` in the same
   environment, output to a pipe) and through the platform, alternated pair by pair so drift
   hits both alike. Reported as ratios of medians: the trainer's own measured run time
   (what the platform costs the work) and the wall time from submit to SUCCEEDED seen by a client.

Run: ``.venv/bin/python bench/run.py [--latency-runs N] [--overhead-pairs N]`` (about 2 minutes once
the runtime is built; a first run builds it, minutes more). ``--help`` for the rest;
``--system-metrics-seconds S`` samples each replica's use of the machine every S seconds (0: not at
all; unset: the console's default); ``--sampling-pairs N`` measures what that sampling costs the
trainer instead: the same trainer on a console that samples and on one that does not, alternated.
"""

from __future__ import annotations

import argparse
import json
import os
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
from bench.support.harness import interrupt  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))
PROJECT = "default-project"

LATENCY_TASK = """\
import time; FIRST_LINE_AT = time.time()
import os, sys
with open(os.path.join(sys.argv[-1], "first_line_at"), "w") as handle:
    handle.write(repr(FIRST_LINE_AT))
"""

WORK_TASK = """\
import time; STARTED = time.time()
import os, sys, json, hashlib
# CPU work with steady logging: hashing, and a progress line every few thousand rounds.
steps = int(sys.argv[sys.argv.index("--steps") + 1]) if "--steps" in sys.argv else 6_000_000
digest = b"seed"
for step in range(steps):
    digest = hashlib.sha256(digest).digest()
    if step % 600 == 0:
        print(f"step {step} digest {digest.hex()[:16]}", flush=True)
with open(os.path.join(sys.argv[-1], "timing.json"), "w") as handle:
    json.dump({"trainer_seconds": time.time() - STARTED, "python": sys.executable}, handle)
"""


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Console:
    """A real ``aiconsole up`` on a free port with its own data dir (bench/models.py's too). Its
    output goes to ``console-PORT.log`` beside the data dir, quoted when it does not start."""

    START_SECONDS = 120

    def __init__(
        self, data_dir: Path, env_dir: Path, command: list[str] | None = None, port: int | None = None, **extra: str
    ):
        self.data_dir = data_dir
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"
        }
        self.env.update(
            {
                "AICONSOLE_DATA_DIR": str(data_dir),
                "AICONSOLE_ENV_DIR": str(env_dir),
                "AICONSOLE_ADMIN_PASSWORD": "bench-password-1",
                **extra,
            }
        )
        data_dir.parent.mkdir(parents=True, exist_ok=True)
        self.log = data_dir.parent / f"console-{self.port}.log"
        say(f"starting a console on port {self.port} (data dir {data_dir}, environments in {env_dir})")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                command or [AICONSOLE, "up", "--port", str(self.port)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
            )
        try:
            wait_until(
                lambda: self._up() or self.process.poll() is not None, self.START_SECONDS, "the console to answer"
            )
        except SystemExit:
            self.stop()
            raise SystemExit(
                f"the console did not start within {self.START_SECONDS} s; its output:\n{log_tail(self.log)}"
            ) from None
        if self.process.poll() is not None:
            raise SystemExit(
                f"the console did not start (exit status {self.process.returncode}); its output:\n{log_tail(self.log)}"
            )
        self.token = subprocess.run(
            [AICONSOLE, "token", "create", "admin"],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()

    def _up(self) -> bool:
        try:
            return urllib.request.urlopen(self.url + "/login/", timeout=1).status == 200
        except OSError:
            return False

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def submit(self, job_id: str, package: Path, job_dir: Path, args: list[str] | None = None) -> None:
        """Package and job dir must lie in the project's area: ``STORAGE_DIR/<folder>/<project>/…``."""
        try:
            self.call(
                "POST",
                f"/v1/projects/{PROJECT}/jobs",
                {
                    "jobId": job_id,
                    "trainingInput": {
                        "scaleTier": "BASIC",
                        "packageUris": [str(package)],
                        "pythonModule": "trainer.task",
                        "args": args or [],
                        "region": "us-central1",
                        "runtimeVersion": "2.11",
                        "jobDir": str(job_dir),
                    },
                },
            )
        except urllib.error.HTTPError as error:
            answer = error.read()[:1000].decode(errors="replace")
            raise SystemExit(f"submitting {job_id}: HTTP {error.code} {answer}") from None

    def wait(self, job_id: str, poll: float = 0.05, timeout: float = 900) -> dict:
        """The job once SUCCEEDED (SystemExit for any other end, or none within ``timeout``: a first
        job builds the runtime, minutes on a new machine)."""
        job = wait_until(
            lambda: (
                (found := self.call("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}"))["state"]
                in {"SUCCEEDED", "FAILED", "CANCELLED"}
                and found
            ),
            timeout,
            f"job {job_id} to end",
            poll,
        )
        if job["state"] != "SUCCEEDED":
            raise SystemExit(f"{job_id} ended {job['state']}: {job.get('errorMessage')}")
        return job

    def stop(self) -> None:
        interrupt(self.process, 60)


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


def bench_latency(console: Console, storage: Path, runs: int) -> dict:
    package = build_package(storage / "latency-pkg" / PROJECT, {"trainer/task.py": LATENCY_TASK})
    say("a first job builds the job's environment (on a new machine the runtime too: minutes)")
    console.submit("latency_warmup", package, storage / "out" / PROJECT / "latency_warmup")
    console.wait("latency_warmup")
    say(f"submit → first trainer line, {runs} runs")
    samples = []
    for index in range(runs):
        job_id = f"latency_{index}"
        job_dir = storage / "out" / PROJECT / job_id
        submitted = time.time()
        console.submit(job_id, package, job_dir)
        console.wait(job_id)
        samples.append((float((job_dir / "first_line_at").read_text()) - submitted) * 1000)
    return {
        "runs": runs,
        "p50_ms": statistics.median(samples),
        "p90_ms": percentile(samples, 0.9),
        "min_ms": min(samples),
        "max_ms": max(samples),
    }


def run_direct(python: str, job_dir: Path, work_dir: Path, steps: int) -> tuple[float, float]:
    job_dir.mkdir(parents=True, exist_ok=True)
    work_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    process = subprocess.Popen(
        [python, "-m", "trainer.task", "--steps", str(steps), "--job-dir", str(job_dir)],
        cwd=work_dir,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    for _ in process.stdout:  # read the output as a terminal or a log shipper would
        pass
    if process.wait(timeout=600) != 0:
        raise SystemExit(f"the trainer run directly with {python} exited with status {process.returncode}")
    wall = time.perf_counter() - started
    return wall, json.loads((job_dir / "timing.json").read_text())["trainer_seconds"]


def run_platform(console: Console, package: Path, job_id: str, job_dir: Path, steps: int) -> tuple[float, float]:
    started = time.perf_counter()
    console.submit(job_id, package, job_dir, ["--steps", str(steps)])
    console.wait(job_id)
    wall = time.perf_counter() - started
    return wall, json.loads((job_dir / "timing.json").read_text())["trainer_seconds"]


def bench_overhead(console: Console, storage: Path, pairs: int, steps: int) -> dict:
    package = build_package(storage / "work-pkg" / PROJECT, {"trainer/task.py": WORK_TASK})
    console.submit("work_warmup", package, storage / "out" / PROJECT / "work_warmup", ["--steps", "1000"])
    console.wait("work_warmup")
    python = json.loads((storage / "out" / PROJECT / "work_warmup" / "timing.json").read_text())["python"]
    say(f"platform overhead, {pairs} alternated pairs of {steps:,} hashing steps")
    direct_wall, direct_trainer, platform_wall, platform_trainer = [], [], [], []
    for index in range(pairs):
        order = ("direct", "platform") if index % 2 == 0 else ("platform", "direct")
        for kind in order:
            if kind == "direct":
                wall, own = run_direct(
                    python, storage / "direct" / str(index), storage / "direct-cwd" / str(index), steps
                )
                direct_wall.append(wall)
                direct_trainer.append(own)
            else:
                job_id = f"work_{index}"
                wall, own = run_platform(console, package, job_id, storage / "out" / PROJECT / job_id, steps)
                platform_wall.append(wall)
                platform_trainer.append(own)
    med = statistics.median
    return {
        "pairs": pairs,
        "direct_wall_s": med(direct_wall),
        "platform_wall_s": med(platform_wall),
        "direct_trainer_s": med(direct_trainer),
        "platform_trainer_s": med(platform_trainer),
        "trainer_time_ratio": med(platform_trainer) / med(direct_trainer),
        "wall_time_ratio": med(platform_wall) / med(direct_wall),
    }


def bench_sampling(sampled: Console, unsampled: Console, pairs: int, steps: int) -> dict:
    """The trainer's own run time on a console that samples its replicas (jobs/metrics/system.py)
    and on one that does not, side by side, alternated pair by pair so the host's drift hits both."""
    consoles = {"sampled": sampled, "unsampled": unsampled}
    packages = {}
    for kind, console in consoles.items():
        storage = console.data_dir / "storage"
        packages[kind] = build_package(storage / "work-pkg" / PROJECT, {"trainer/task.py": WORK_TASK})
        console.submit(
            "sampling_warmup", packages[kind], storage / "out" / PROJECT / "sampling_warmup", ["--steps", "1000"]
        )
        console.wait("sampling_warmup")
    say(f"sampling's cost, {pairs} alternated pairs of {steps:,} hashing steps")
    own: dict[str, list[float]] = {"sampled": [], "unsampled": []}
    for index in range(pairs):
        for kind in ("sampled", "unsampled") if index % 2 == 0 else ("unsampled", "sampled"):
            console = consoles[kind]
            job_id = f"sampling_{index}"
            _, seconds = run_platform(
                console, packages[kind], job_id, console.data_dir / "storage" / "out" / PROJECT / job_id, steps
            )
            own[kind].append(seconds)
    med = statistics.median
    return {
        "pairs": pairs,
        "sampled_trainer_s": med(own["sampled"]),
        "unsampled_trainer_s": med(own["unsampled"]),
        "ratio": med(own["sampled"]) / med(own["unsampled"]),
        "pair_ratios": [a / b for a, b in zip(own["sampled"], own["unsampled"], strict=True)],
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-runs", type=int, default=20)
    parser.add_argument("--overhead-pairs", type=int, default=7)
    parser.add_argument(
        "--overhead-steps",
        type=int,
        default=6_000_000,
        help="hashing steps of the overhead trainer (about 3 s at the default)",
    )
    parser.add_argument(
        "--system-metrics-seconds",
        help="the console's AICONSOLE_SYSTEM_METRICS_SECONDS (0: no sampling of the replicas; unset: its default)",
    )
    parser.add_argument(
        "--sampling-pairs",
        type=int,
        default=0,
        help="instead of the rest: this many alternated pairs of the overhead trainer on a console that samples "
        "its replicas (every --system-metrics-seconds, or its default) and on one that does not",
    )
    parser.add_argument("--json", type=Path, help="also write the results here")
    add_env_dir_flag(parser)
    args = parser.parse_args()
    if args.latency_runs < 1 or args.overhead_pairs < 1:
        parser.error("--latency-runs and --overhead-pairs must be at least 1")
    if args.sampling_pairs:
        with scratch("aiconsole-bench-") as folder:
            every = args.system_metrics_seconds or "5"
            sampled = Console(folder / "sampled", env_cache(args.env_dir), AICONSOLE_SYSTEM_METRICS_SECONDS=every)
            unsampled = Console(folder / "unsampled", env_cache(args.env_dir), AICONSOLE_SYSTEM_METRICS_SECONDS="0")
            try:
                result = bench_sampling(sampled, unsampled, args.sampling_pairs, args.overhead_steps)
            finally:
                sampled.stop()
                unsampled.stop()
        print(f"Sampling every {every} s, {result['pairs']} alternated pairs (medians):")
        print(
            f"  trainer's own run time: unsampled {result['unsampled_trainer_s']:.3f} s, "
            f"sampled {result['sampled_trainer_s']:.3f} s, ratio {result['ratio']:.3f} (goal ≤ 1.01)"
        )
        print("  per pair: " + ", ".join(f"{ratio:.3f}" for ratio in result["pair_ratios"]))
        if args.json:
            args.json.write_text(json.dumps({"sampling": result}, indent=2))
        return
    with scratch("aiconsole-bench-") as folder:
        data_dir = folder / "data"
        sampling = (
            {}
            if args.system_metrics_seconds is None
            else {"AICONSOLE_SYSTEM_METRICS_SECONDS": args.system_metrics_seconds}
        )
        console = Console(data_dir, env_cache(args.env_dir), **sampling)
        try:
            storage = data_dir / "storage"
            latency = bench_latency(console, storage, args.latency_runs)
            overhead = bench_overhead(console, storage, args.overhead_pairs, args.overhead_steps)
        finally:
            console.stop()
    print(f"Submit → first trainer line (environment built), {latency['runs']} runs:")
    print(
        f"  p50 {latency['p50_ms']:.1f} ms   p90 {latency['p90_ms']:.1f} ms   "
        f"min {latency['min_ms']:.1f} ms   max {latency['max_ms']:.1f} ms   (goal p50 ≤ 150 ms)"
    )
    print(f"Platform overhead, {overhead['pairs']} alternated pairs (medians):")
    print(
        f"  trainer's own run time: direct {overhead['direct_trainer_s']:.3f} s, "
        f"platform {overhead['platform_trainer_s']:.3f} s, ratio {overhead['trainer_time_ratio']:.3f} "
        "(goal ≤ 1.02)"
    )
    print(
        f"  submit → SUCCEEDED seen by a client: direct {overhead['direct_wall_s']:.3f} s, "
        f"platform {overhead['platform_wall_s']:.3f} s, ratio {overhead['wall_time_ratio']:.3f}"
    )
    if args.json:
        args.json.write_text(json.dumps({"latency": latency, "overhead": overhead}, indent=2))


if __name__ == "__main__":
    main()
