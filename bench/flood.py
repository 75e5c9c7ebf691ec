"""Is the console still quick while a trainer floods its log? Against a real ``aiconsole up``.

1. Submit → first log line on a WebSocket (``bench/logs.py``'s measurement, fewer runs).
2. Log flood: ``jobs.get`` through the REST API with a bearer token at a fixed open-loop rate
   (each request is due at its own time whether or not the previous one answered, and its
   latency counts from when it was due), first quiet, then while a trainer prints flat out, and
   again, alternating. The p99 of each flood phase against the quiet phases is the figure of
   merit (goal: at most 3×). Phases alternate because these small machines are noisy.

Run: ``.venv/bin/python bench/flood.py`` (about 4 minutes; ``--help`` for rates and lengths).
"""

from __future__ import annotations

import argparse
import asyncio
import http.client
import json
import statistics
import sys
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402
from bench.logs import FIRST_LINE_TASK, Session, bench_first_line, submit  # noqa: E402
from bench.run import PROJECT, Console, percentile  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

# Prints flat out until the bench leaves a "stop" file in the job dir (checked every 50,000 lines).
FLOOD_TASK = """\
import os, sys
job_dir = sys.argv[-1]
stop = os.path.join(job_dir, "stop")
write, n = sys.stdout.write, 0
while True:
    for _ in range(50_000):
        write(f"flood line {n} with some payload to make it a realistic length: loss=0.123456\\n")
        n += 1
    if os.path.exists(stop):
        break
print("flood done", n, flush=True)
"""


class Getter:
    """Open-loop ``jobs.get`` at ``rate`` per second; each worker thread keeps one connection."""

    def __init__(self, console: Console, job_id: str, threads: int = 8):
        self.console, self.path = console, f"/v1/projects/{PROJECT}/jobs/{job_id}"
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(threads)

    def _get(self, due: float) -> float:
        for attempt in (1, 2):  # a kept-alive connection the server closed while idle: reconnect once
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = self.local.connection = http.client.HTTPConnection(
                    "127.0.0.1", self.console.port, timeout=30
                )
            try:
                connection.request("GET", self.path, headers={"Authorization": f"Bearer {self.console.token}"})
                response = connection.getresponse()
                response.read()
                break
            except (OSError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
                if attempt == 2:
                    raise
        if response.status != 200:
            raise RuntimeError(f"jobs.get answered {response.status}")
        return (time.perf_counter() - due) * 1000

    def run(self, rate: float, seconds: float) -> list[float]:
        start, futures = time.perf_counter() + 0.05, []
        for index in range(int(rate * seconds)):
            due = start + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(self.pool.submit(self._get, due))
        return [future.result() for future in futures]


def _summary(samples: list[float]) -> dict:
    return {
        "n": len(samples),
        "p50_ms": statistics.median(samples),
        "p99_ms": percentile(samples, 0.99),
        "max_ms": max(samples),
    }


def _state(console: Console, job_id: str) -> str:
    return console.call("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}")["state"]


def _wait_state(console: Console, job_id: str, states: set[str], timeout: float = 300) -> str:
    deadline = time.monotonic() + timeout
    while (state := _state(console, job_id)) not in states:
        if time.monotonic() > deadline:
            raise SystemExit(f"{job_id} is still {state}")
        time.sleep(0.1)
    return state


def bench_flood(console: Console, storage: Path, target: str, rate: float, seconds: float, rounds: int) -> dict:
    package = build_package(storage / "flood-pkg" / PROJECT, {"trainer/task.py": FLOOD_TASK})
    getter = Getter(console, target)
    getter.run(rate, 2)  # warm connections and caches
    quiet, flood, ratios = [], [], []
    for index in range(rounds):
        say(f"round {index + 1} of {rounds}: {seconds:.0f} s quiet, then {seconds:.0f} s of flood")
        calm = getter.run(rate, seconds)
        job_id = f"flood_{index}"
        job_dir = submit(console, job_id, package, storage)
        _wait_state(console, job_id, {"RUNNING"})
        time.sleep(1)  # the trainer is printing by now
        loud = getter.run(rate, seconds)
        (job_dir / "stop").write_text("")
        _wait_state(console, job_id, {"SUCCEEDED", "FAILED", "CANCELLED"})
        quiet.append(_summary(calm))
        flood.append(_summary(loud))
        ratios.append(flood[-1]["p99_ms"] / quiet[-1]["p99_ms"])
        print(
            f"  round {index + 1}: quiet p50 {quiet[-1]['p50_ms']:.1f} p99 {quiet[-1]['p99_ms']:.1f} ms;  "
            f"flood p50 {flood[-1]['p50_ms']:.1f} p99 {flood[-1]['p99_ms']:.1f} ms;  ratio {ratios[-1]:.2f}",
            flush=True,
        )
    # One slow quiet phase (another process's burst) flatters its round's ratio: also each flood
    # p99 against the median quiet p99 of the run.
    quiet_p99 = statistics.median(phase["p99_ms"] for phase in quiet)
    steady = [phase["p99_ms"] / quiet_p99 for phase in flood]
    return {
        "rate": rate,
        "seconds": seconds,
        "rounds": rounds,
        "quiet": quiet,
        "flood": flood,
        "ratios": ratios,
        "median_ratio": statistics.median(ratios),
        "median_quiet_p99_ms": quiet_p99,
        "ratios_to_median_quiet": steady,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-runs", type=int, default=15)
    parser.add_argument("--rate", type=float, default=50, help="jobs.get requests per second")
    parser.add_argument("--seconds", type=float, default=15, help="length of each quiet and flood phase")
    parser.add_argument("--rounds", type=int, default=3, help="quiet/flood alternations")
    parser.add_argument("--json", type=Path, help="also write the results here")
    add_env_dir_flag(parser)
    args = parser.parse_args()
    with open("/proc/loadavg") as handle:
        load_before = handle.read().split()[:3]
    results: dict = {"load_before": load_before}
    with scratch("aiconsole-bench-flood-") as folder:
        data_dir = folder / "data"
        console = Console(data_dir, env_cache(args.env_dir))
        try:
            storage = data_dir / "storage"
            if args.latency_runs:
                session = Session(console)
                results["first_line"] = asyncio.run(bench_first_line(console, session, storage, args.latency_runs))
                first = results["first_line"]
                print(
                    f"Submit → first log line on a WebSocket, {first['runs']} runs: p50 {first['p50_ms']:.0f} ms  "
                    f"p90 {first['p90_ms']:.0f} ms  max {first['max_ms']:.0f} ms (goal p50 ≤ 300 ms)",
                    flush=True,
                )
                target = "first_warmup"
            else:
                package = build_package(storage / "first-pkg" / PROJECT, {"trainer/task.py": FIRST_LINE_TASK})
                submit(console, "first_warmup", package, storage)
                console.wait("first_warmup")
                target = "first_warmup"
            print(
                f"jobs.get at {args.rate:.0f} req/s, open loop, {args.seconds:.0f} s quiet then "
                f"{args.seconds:.0f} s while a trainer prints flat out, {args.rounds} rounds:",
                flush=True,
            )
            results["flood"] = bench_flood(console, storage, target, args.rate, args.seconds, args.rounds)
        finally:
            console.stop()
    with open("/proc/loadavg") as handle:
        results["load_after"] = handle.read().split()[:3]
    flood = results["flood"]
    print(
        f"p99 flood/quiet ratio: median {flood['median_ratio']:.2f} (rounds: "
        f"{', '.join(f'{r:.2f}' for r in flood['ratios'])}; goal ≤ 3); against the median quiet p99 "
        f"({flood['median_quiet_p99_ms']:.1f} ms): {', '.join(f'{r:.2f}' for r in flood['ratios_to_median_quiet'])}"
        f";  load average before "
        f"{' '.join(load_before)}, after {' '.join(results['load_after'])}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
