"""Benchmarks of scaled mode: latency beside embedded mode, recovery from a lost worker, and chaos.

Everything runs on this host against the local PostgreSQL and Redis: ``aiconsole web`` and two
``aiconsole worker`` processes on a scratch database, and, side by side, an embedded
``aiconsole up``.

1. Submit → first trainer line, environment already built, alternating embedded and scaled runs
   so drift hits both alike. The client notes the time just before POSTing; the trainer's first
   statement notes its own (same clock: one host).
2. Worker kill → replica running again: a checkpointing trainer runs; the worker holding it is
   SIGKILLed; the time until the replica's new start has a live process (lease 6 s, the default).
3. Faults, each injected for real per round, the time until the work runs again, and the seconds
   during which two live copies of one replica existed (sampled from /proc every 20 ms; target 0):
   a worker frozen (SIGSTOP) past its lease (when its trainer stopped itself, when it ran again
   elsewhere), a worker stopped with SIGTERM, a gang of three replicas over two workers whose
   worker holding a non-master replica is SIGKILLed (until all three reached each other again at
   their new TF_CONFIG addresses), and the coordinator frozen (until another process leads).
4. Chaos: for a bounded number of rounds, jobs run while trainers, workers and the web process
   are SIGKILLed at random (killed processes are started again). A sampler scans /proc all along
   for two live processes of one replica. At the end: every job in exactly one terminal state
   (and never seen leaving one), no two live copies of a replica, no gap or repeat in any log
   sequence.

Run: ``.venv/bin/python bench/scaled.py [--latency-runs N] [--kills N] [--fault-rounds N]
[--chaos-rounds N]`` (about 10 minutes; it needs PostgreSQL and Redis on 127.0.0.1, as the scaled-mode tests do).
"""

from __future__ import annotations

import argparse
import os
import random
import signal
import statistics
import sys
import threading
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402
from bench.run import LATENCY_TASK, Console, percentile  # noqa: E402
from bench.support.cluster import (  # noqa: E402
    SERVER,
    TERMINAL,
    TRAINER,
    Cluster,
    alive,
    cluster_env,
    drop_database,
    scratch_database,
    service_up,
)
from bench.support.packages import build_package  # noqa: E402
from bench.support.waiting import wait_for  # noqa: E402

WORKER_ARGS = ["--region", "us-central1", "--capacity", "cpus=16,memory=64"]


def replica_processes() -> dict[str, list[int]]:
    """Live processes per AICONSOLE_REPLICA id, from every process's environment."""
    found: dict[str, list[int]] = {}
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            environ = (proc / "environ").read_bytes()
            state = (proc / "stat").read_text().split(") ")[1].split()[0]
        except (OSError, IndexError):
            continue
        if state == "Z":
            continue
        for item in environ.split(b"\0"):
            if item.startswith(b"AICONSOLE_REPLICA="):
                found.setdefault(item.split(b"=", 1)[1].decode(), []).append(int(proc.name))
    return found


def main_pid_of_group(pids: list[int]) -> list[int]:
    """Leaders only: a trainer's own children share its AICONSOLE_REPLICA but are not copies."""
    leaders = []
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().split(") ")[1].split()
        except (OSError, IndexError):
            continue
        if int(fields[3]) == pid:  # pgrp == pid: started by a worker in its own process group
            leaders.append(pid)
    return leaders


def bench_latency(embedded: Console, cluster: Cluster, runs: int) -> dict:
    modules = {"trainer/__init__.py": "", "trainer/task.py": LATENCY_TASK}
    storage = {"embedded": embedded.data_dir / "storage", "scaled": cluster.data_dir / "storage"}
    # In the project's own storage area: a project may not name another folder's files.
    packages = {
        mode: build_package(folder / "latency" / "default-project", modules) for mode, folder in storage.items()
    }
    say(
        f"submit → first trainer line, embedded and scaled alternated, {runs} runs each (the first pair builds "
        "the job's environment)"
    )
    results: dict[str, list[float]] = {"embedded": [], "scaled": []}
    for index in range(-1, runs):  # the first pair builds the job layer on both sides
        for mode in ("embedded", "scaled"):
            job_id = f"latency_{mode}_{index + 1}"
            job_dir = storage[mode] / "job-dirs" / "default-project" / job_id
            if mode == "embedded":
                submitted = time.time()
                embedded.submit(job_id, packages[mode], job_dir)
                state = embedded.wait(job_id)["state"]
            else:
                submitted = time.time()
                cluster.submit(job_id, packages[mode], args=[])
                state = cluster.wait_state(job_id, TERMINAL)["state"]
            assert state == "SUCCEEDED", (mode, job_id, state)
            if index >= 0:
                results[mode].append(float((job_dir / "first_line_at").read_text()) - submitted)
    summary: dict = {}
    for mode, values in results.items():
        summary[mode] = {
            "p50_ms": round(statistics.median(values) * 1000, 1),
            "p90_ms": round(percentile(values, 0.9) * 1000, 1),
            "runs": len(values),
        }
    summary["scaled_over_embedded_p50"] = round(summary["scaled"]["p50_ms"] / summary["embedded"]["p50_ms"], 2)
    return summary


def bench_recovery(cluster: Cluster, package: Path, kills: int) -> dict:
    seconds = []
    say(f"{kills} worker kills, each time until the replica runs again")
    for index in range(kills):
        job_id = f"recovery_{index}"
        cluster.submit(job_id, package, args=["--mode", "count", "--steps", "60"])
        wait_for(
            lambda job_id=job_id: any(m.startswith("step 3") for _, _, m in cluster.log(job_id)), 120, 0.05, "step 3"
        )
        [before] = cluster.replicas(job_id)
        victim = next(name for name, process in cluster.workers.items() if process.pid == before["worker_pid"])
        cluster.workers[victim].send_signal(signal.SIGKILL)
        killed = time.monotonic()
        cluster.workers[victim].wait(10)
        wait_for(
            lambda job_id=job_id, before=before: (
                (r := cluster.replicas(job_id)[0])["attempt"] > before["attempt"] and r["pid"] and alive(r["pid"])
            ),
            60,
            0.02,
            "the replica to run again",
        )
        seconds.append(time.monotonic() - killed)
        cluster.start_worker(f"{victim}_{index}", *WORKER_ARGS)
        assert cluster.wait_state(job_id, TERMINAL, 120)["state"] == "SUCCEEDED", cluster.log_text(job_id)
    return {
        "kills": kills,
        "p50_s": round(statistics.median(seconds), 2),
        "max_s": round(max(seconds), 2),
        "all_s": [round(s, 2) for s in seconds],
    }


class Duplicates:
    """Samples /proc every 20 ms: the seconds during which some replica had two live copies."""

    def __init__(self):
        self.seconds = 0.0
        self.seen: list[str] = []
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Duplicates:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def _sample(self) -> None:
        last = time.monotonic()
        while not self._stop.is_set():
            doubled = [
                f"replica {replica}: {leaders}"
                for replica, pids in replica_processes().items()
                if len(leaders := main_pid_of_group(pids)) > 1
            ]
            now = time.monotonic()
            if doubled:
                self.seconds += now - last
                self.seen.extend(doubled)
            last = now
            self._stop.wait(0.02)


def _running_again(cluster: Cluster, job_id: str, before: dict) -> bool:
    replica = cluster.replicas(job_id)[0]
    return replica["attempt"] > before["attempt"] and bool(replica["pid"]) and alive(replica["pid"])


def _holder(cluster: Cluster) -> str:
    rows = cluster.sql("SELECT holder FROM jobs_coordinatorlease")
    return rows[0][0] if rows else ""


def bench_faults(cluster: Cluster, package: Path, rounds: int) -> dict:
    """Each fault once per round (see the module's docstring); seconds from the fault."""
    lease = 6.0  # the default AICONSOLE_WORKER_LEASE_SECONDS, which these workers run with
    seconds: dict[str, list[float]] = {
        "frozen worker: its trainer stopped itself": [],
        "frozen worker: replica running elsewhere": [],
        "worker stopped (SIGTERM): replica running elsewhere": [],
        "gang of 3, a worker killed: all reached each other again": [],
        "coordinator frozen: another leads": [],
    }
    say(f"faults: {rounds} rounds of a frozen worker, a stopped worker, a killed gang worker, a frozen coordinator")
    with Duplicates() as duplicates:
        for index in range(rounds):
            job_id = f"frozen_{index}"
            cluster.submit(job_id, package, args=["--mode", "count", "--steps", "100"])
            wait_for(lambda j=job_id: any(m == "step 3" for *_, m in cluster.log(j)), 120, 0.05, "step 3")
            [before] = cluster.replicas(job_id)
            worker = next(p for p in cluster.workers.values() if p.pid == before["worker_pid"])
            worker.send_signal(signal.SIGSTOP)
            fault = time.monotonic()
            try:
                wait_for(lambda b=before: not alive(b["pid"]), 30, 0.02, "the frozen worker's trainer to stop")
                seconds["frozen worker: its trainer stopped itself"].append(time.monotonic() - fault)
                wait_for(lambda j=job_id, b=before: _running_again(cluster, j, b), 60, 0.02, "the replica elsewhere")
                seconds["frozen worker: replica running elsewhere"].append(time.monotonic() - fault)
                time.sleep(max(0.0, fault + lease + 2 - time.monotonic()))  # frozen past its lease
            finally:
                worker.send_signal(signal.SIGCONT)
            assert cluster.wait_state(job_id, TERMINAL, 120)["state"] == "SUCCEEDED", cluster.log_text(job_id)

            job_id = f"stopped_{index}"
            cluster.submit(job_id, package, args=["--mode", "count", "--steps", "60"])
            wait_for(lambda j=job_id: any(m == "step 3" for *_, m in cluster.log(j)), 120, 0.05, "step 3")
            [before] = cluster.replicas(job_id)
            name = next(n for n, p in cluster.workers.items() if p.pid == before["worker_pid"])
            cluster.workers[name].send_signal(signal.SIGTERM)
            fault = time.monotonic()
            wait_for(lambda j=job_id, b=before: _running_again(cluster, j, b), 60, 0.02, "the replica elsewhere")
            seconds["worker stopped (SIGTERM): replica running elsewhere"].append(time.monotonic() - fault)
            cluster.workers.pop(name).wait(30)
            cluster.start_worker(f"{name}-s{index}", *WORKER_ARGS)
            assert cluster.wait_state(job_id, TERMINAL, 120)["state"] == "SUCCEEDED", cluster.log_text(job_id)

            job_id = f"gang_{index}"
            gang = {"scaleTier": "CUSTOM", "masterType": "n1-standard-8", "workerType": "n1-standard-8"}
            cluster.submit(job_id, package, args=["--mode", "gang"], workerCount="2", **gang)

            def reached(j: str = job_id) -> int:
                return sum(" reached " in m for *_, m in cluster.log(j))

            try:
                wait_for(lambda: reached() == 3, 120, 0.05, "the gang to reach each other")
            except AssertionError as error:
                said = f"{error}; its state and log:\n{cluster.job(job_id)}\n{cluster.log_text(job_id)}"
                raise SystemExit(said) from None
            replicas = cluster.replicas(job_id)
            victim = next(r for r in replicas if not r["label"].startswith("master"))
            name = next(n for n, p in cluster.workers.items() if p.pid == victim["worker_pid"])
            cluster.workers[name].send_signal(signal.SIGKILL)
            fault = time.monotonic()
            cluster.workers.pop(name).wait(10)
            cluster.start_worker(f"{name}-k{index}", *WORKER_ARGS)  # 24 CPUs: one worker of 16 cannot hold it
            wait_for(lambda: reached() == 6, 120, 0.05, "the gang to start again together")
            seconds["gang of 3, a worker killed: all reached each other again"].append(time.monotonic() - fault)
            cluster.release(job_id)
            assert cluster.wait_state(job_id, TERMINAL, 120)["state"] == "SUCCEEDED", cluster.log_text(job_id)

            holder = _holder(cluster)
            pid = int(holder.split(":")[2])
            frozen = next(p for p in [*cluster.processes] if p.pid == pid)
            frozen.send_signal(signal.SIGSTOP)
            fault = time.monotonic()
            try:
                wait_for(lambda h=holder: _holder(cluster) not in ("", h), 60, 0.02, "another coordinator")
                seconds["coordinator frozen: another leads"].append(time.monotonic() - fault)
            finally:
                frozen.send_signal(signal.SIGCONT)
    return {
        "rounds": rounds,
        **{what: {"p50_s": round(statistics.median(v), 2), "max_s": round(max(v), 2)} for what, v in seconds.items()},
        "duplicate_seconds": round(duplicates.seconds, 3),
        "duplicates_seen": duplicates.seen[:5],
    }


def bench_chaos(cluster: Cluster, package: Path, rounds: int, seed: int) -> dict:
    rng = random.Random(seed)
    duplicates: list[str] = []
    left_terminal: list[str] = []
    seen_terminal: dict[str, str] = {}
    stop = threading.Event()
    jobs: list[str] = []

    def sample() -> None:
        while not stop.is_set():
            for replica, pids in replica_processes().items():
                leaders = main_pid_of_group(pids)
                if len(leaders) > 1:
                    duplicates.append(f"replica {replica}: processes {leaders}")
            for job_id, state in cluster.sql("SELECT job_id, state FROM jobs_job WHERE job_id LIKE 'chaos_%%'"):
                if job_id in seen_terminal and state != seen_terminal[job_id]:
                    left_terminal.append(f"{job_id}: {seen_terminal[job_id]} -> {state}")
                if state in TERMINAL:
                    seen_terminal[job_id] = state
            stop.wait(0.1)

    sampler = threading.Thread(target=sample, daemon=True)
    sampler.start()
    kills = {"trainer": 0, "worker": 0, "web": 0}
    trainer_killed: set[str] = set()
    targets = (list(kills) * rounds)[:rounds]  # each kind of failure, in a random order
    rng.shuffle(targets)
    say(f"chaos: {rounds} rounds, a trainer, a worker or the web process killed in each")
    for round_number, target in enumerate(targets):
        for index in range(2):
            job_id = f"chaos_{round_number}_{index}"
            extra = (
                {
                    "scaleTier": "CUSTOM",
                    "masterType": "n1-standard-4",
                    "workerType": "n1-standard-4",
                    "workerCount": "1",
                }
                if index
                else {}
            )
            cluster.submit(job_id, package, args=["--mode", "count", "--steps", str(rng.randint(20, 50))], **extra)
            jobs.append(job_id)
        time.sleep(rng.uniform(0.5, 2.5))  # let them get going before something breaks (chaos, not a wait)
        kills[target] += 1
        if target == "trainer":
            running = cluster.sql(
                "SELECT r.pid, j.job_id FROM jobs_replica r JOIN jobs_job j ON j.id = r.job_id "
                "WHERE r.state = 'RUNNING' AND r.pid IS NOT NULL"
            )
            if running:
                pid, job_id = rng.choice(running)
                try:
                    os.kill(pid, signal.SIGKILL)
                    trainer_killed.add(job_id)
                except ProcessLookupError:
                    pass
        elif target == "worker":
            name = rng.choice(sorted(cluster.workers))
            process = cluster.workers.pop(name)
            process.send_signal(signal.SIGKILL)
            process.wait(10)
            cluster.start_worker(f"w{round_number}", *WORKER_ARGS)
        else:
            web = cluster.processes[0]
            web.send_signal(signal.SIGKILL)
            web.wait(10)
            cluster.processes[0] = cluster.start_web()
    for job_id in jobs:
        cluster.wait_state(job_id, TERMINAL, 300)
    stop.set()
    sampler.join()
    gaps = []
    for job_id in jobs:
        lines = cluster.log(job_id)
        for task in {task for task, _, _ in lines}:
            seqs = sorted(seq for name, seq, _ in lines if name == task)
            if seqs != list(range(1, len(seqs) + 1)):
                gaps.append(f"{job_id} {task}")
    states = [cluster.job(job_id)["state"] for job_id in jobs]
    for job_id, state in zip(jobs, states, strict=True):
        if state == "FAILED" and job_id not in trainer_killed:  # what the invariant is about: say why
            say(f"{job_id} FAILED with no trainer of it killed; its log:\n{cluster.log_text(job_id)[-4000:]}")
    return {
        "rounds": rounds,
        "jobs": len(jobs),
        "kills": kills,
        "outcomes": {state: states.count(state) for state in sorted(set(states))},
        "failed_without_a_killed_trainer": [
            job_id
            for job_id, state in zip(jobs, states, strict=True)
            if state == "FAILED" and job_id not in trainer_killed
        ],
        "every_job_terminal": all(state in TERMINAL for state in states),
        "terminal_state_changed": left_terminal,
        "duplicate_live_replicas": duplicates,
        "log_sequence_gaps": gaps,
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency-runs", type=int, default=15)
    parser.add_argument("--kills", type=int, default=5)
    parser.add_argument("--fault-rounds", type=int, default=3)
    parser.add_argument("--chaos-rounds", type=int, default=8)
    parser.add_argument("--seed", type=int, default=7)
    add_env_dir_flag(parser)
    args = parser.parse_args()
    missing = [
        f"{what} at {where} ({why})"
        for what, where, why in (
            ("PostgreSQL", SERVER, service_up("127.0.0.1", 5432)),
            ("Redis", "redis://127.0.0.1:6379", service_up("127.0.0.1", 6379)),
        )
        if why
    ]
    if missing:
        raise SystemExit("scaled mode needs a local PostgreSQL and Redis; not reachable: " + "; ".join(missing))
    with scratch("aiconsole-bench-scaled-") as work:  # as root, the workers' trainers must reach the data dirs
        measure(args, work, env_cache(args.env_dir))


def measure(args, work: Path, env_dir: Path) -> None:
    database_url, admin = scratch_database()
    redis_url = "redis://127.0.0.1:6379/14"
    redis.Redis.from_url(redis_url).flushdb()
    cluster = Cluster(
        cluster_env(work / "scaled", database_url, redis_url, AICONSOLE_ENV_DIR=str(env_dir)),
        work / "scaled",
        database_url,
    )
    (work / "scaled").mkdir()
    embedded = Console(work / "embedded", env_dir)
    try:
        say("starting aiconsole web and two workers on a scratch database")
        cluster.start_web()
        cluster.token = cluster.cli("token", "create", "admin").stdout.strip()
        cluster.start_worker("a", *WORKER_ARGS)
        cluster.start_worker("b", *WORKER_ARGS)
        storage = work / "scaled" / "storage"
        package = build_package(
            storage / "packages" / "default-project", {"trainer/__init__.py": "", "trainer/task.py": TRAINER}
        )
        results = {"latency": bench_latency(embedded, cluster, args.latency_runs)}
        print("latency", results["latency"], flush=True)
        if args.kills:
            results["recovery"] = bench_recovery(cluster, package, args.kills)
            print("recovery", results["recovery"], flush=True)
        if args.fault_rounds:
            results["faults"] = bench_faults(cluster, package, args.fault_rounds)
            print("faults", results["faults"], flush=True)
        if args.chaos_rounds:
            results["chaos"] = bench_chaos(cluster, package, args.chaos_rounds, args.seed)
            print("chaos", results["chaos"], flush=True)
    finally:
        cluster.stop()
        embedded.stop()
        redis.Redis.from_url(redis_url).flushdb()
        drop_database(database_url, admin)


if __name__ == "__main__":
    main()
