"""Scaled mode under the faults an operator meets: a worker killed, stopped, frozen past its
lease, the coordinator frozen. Real ``aiconsole web`` and ``aiconsole worker`` processes on this
machine's PostgreSQL and Redis; each fault injected for real (SIGKILL, SIGTERM, SIGSTOP).

What is checked is what a user would see or suffer: the job still SUCCEEDS; after a restart every
replica's TF_CONFIG names where its peers really run (they reach each other there); no two copies
of a replica run at once (seen from the processes in /proc, not from the database); a frozen
coordinator is replaced within 10 s and stands down when it wakes; a job shows CANCELLED only
once its trainer is gone.

Without PostgreSQL or Redis these tests skip, except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import textwrap
import threading
import time
import uuid
from collections import defaultdict
from pathlib import Path

import pytest

from bench.support.cluster import TERMINAL, TRAINER, Cluster, alive, cluster_env, free_port, service_up
from bench.support.packages import build_package
from bench.support.waiting import wait_for
from tests.cluster.harness import scratch_services

redis = pytest.importorskip("redis")

pytestmark = pytest.mark.executor

LEASE_SECONDS = 3.0
COORDINATOR_LEASE_SECONDS = 4.0
WORKER_ARGS = ["--region", "us-central1", "--capacity", "cpus=8,memory=32"]


def _host_address() -> str:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))  # no packet is sent
        return probe.getsockname()[0]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with scratch_services() as (database_url, redis_url):
        data_dir = tmp_path_factory.mktemp("faults")
        env = cluster_env(
            data_dir,
            database_url,
            redis_url,
            AICONSOLE_WORKER_HEARTBEAT_SECONDS="0.5",
            AICONSOLE_WORKER_LEASE_SECONDS=str(LEASE_SECONDS),
            AICONSOLE_COORDINATOR_LEASE_SECONDS=str(COORDINATOR_LEASE_SECONDS),
        )
        instance = Cluster(env, data_dir, database_url)
        instance.address = _host_address()  # containers cannot reach the host's loopback
        try:
            instance.start_web()
            done = instance.cli("token", "create", "admin")
            assert done.returncode == 0, done.stderr
            instance.token = done.stdout.strip()
            for name in ("f1", "f2", "f3"):
                _start_worker(instance, name)
            yield instance
        finally:
            instance.stop()


def _start_worker(cluster: Cluster, name: str) -> subprocess.Popen:
    process = cluster.spawn(["worker", "--address", cluster.address, *WORKER_ARGS], name)
    cluster.workers[name] = process
    wait_for(
        lambda: cluster.sql("SELECT count(*) FROM jobs_worker WHERE pid = %s", process.pid)[0][0],
        60,
        0.1,
        f"worker {name} to register",
    )
    return process


def _replace(cluster: Cluster, name: str) -> None:
    """The worker ``name`` is gone for good: another like it, for the tests that follow."""
    cluster.workers.pop(name)
    _start_worker(cluster, f"{name}-{uuid.uuid4().hex[:4]}")


def _worker_of(cluster: Cluster, replica: dict) -> str:
    return next(name for name, process in cluster.workers.items() if process.pid == replica["worker_pid"])


@pytest.fixture(scope="module")
def package(cluster):
    folder = cluster.data_dir / "storage" / "packages" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    return build_package(folder, {"trainer/__init__.py": "", "trainer/task.py": textwrap.dedent(TRAINER)})


class Copies:
    """Watches /proc for a job's trainers (package or container: found by their job dir on the
    command line) and counts, per replica (its TF_CONFIG task), how many run at once."""

    def __init__(self, job_dir: Path):
        self.marker = str(job_dir)
        self.most: dict[str, int] = defaultdict(int)
        self.seen: dict[str, set[int]] = defaultdict(set)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def __enter__(self) -> Copies:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join(5)

    def running(self) -> dict[str, list[int]]:
        """The trainers running now, per replica; a trainer's own children (a shell forks before each
        command it runs, with its own command line until the exec) are not copies of it."""
        candidates: dict[int, tuple[str, int]] = {}
        for name in os.listdir("/proc"):
            if not name.isdigit():
                continue
            try:
                argv = Path(f"/proc/{name}/cmdline").read_bytes().split(b"\0")
                if self.marker.encode() not in argv or not _is_trainer(argv) or not alive(int(name)):
                    continue
                environ = Path(f"/proc/{name}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            tf_config = next((v[len(b"TF_CONFIG=") :] for v in environ if v.startswith(b"TF_CONFIG=")), None)
            if tf_config is not None:
                task = json.loads(tf_config)["task"]
                candidates[int(name)] = (f"{task['type']}-{task['index']}", _parent(int(name)))
        found: dict[str, list[int]] = defaultdict(list)
        for pid, (replica, parent) in candidates.items():
            if parent not in candidates:
                found[replica].append(pid)
        return found

    def _watch(self) -> None:
        while not self._stop.is_set():
            for replica, pids in self.running().items():
                self.most[replica] = max(self.most[replica], len(pids))
                self.seen[replica].update(pids)
            self._stop.wait(0.05)


def _parent(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])
    except (OSError, IndexError, ValueError):
        return 0


def _is_trainer(argv: list[bytes]) -> bool:
    """The trainer itself: not its reaper, nor the engine's client, whose command lines name it too."""
    if any(b"reaper.py" in part for part in argv):
        return False
    return b"trainer.task" in argv or (len(argv) > 1 and argv[1] == b"/trainer.sh")


def _custom(workers: int) -> dict:
    return {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4",
        "workerType": "n1-standard-4",
        "workerCount": str(workers),
    }


def _job_dir(cluster: Cluster, job_id: str) -> Path:
    return cluster.data_dir / "storage" / "job-dirs" / "default-project" / job_id


def _reached(cluster: Cluster, job_id: str) -> list[tuple[str, str]]:
    return [(task, message) for task, _, message in cluster.log(job_id) if " reached " in message]


def test_a_gang_survives_a_killed_worker_and_every_tf_config_names_where_peers_run(cluster, package):
    """Four replicas (16 CPUs) over workers of 8: SIGKILL one that runs some of them. The others
    stop, all start again together, and each reaches every peer at its new TF_CONFIG address."""
    job_dir = _job_dir(cluster, "gang_kill")
    with Copies(job_dir) as copies:
        cluster.submit("gang_kill", package, args=["--mode", "gang"], **_custom(3))
        wait_for(lambda: len(_reached(cluster, "gang_kill")) == 4, 120, 0.1, "all four replicas to reach their peers")
        before = cluster.replicas("gang_kill")
        victim = _worker_of(cluster, next(r for r in before if r["label"] != "master-replica-0"))
        cluster.workers[victim].send_signal(signal.SIGKILL)
        cluster.workers[victim].wait(10)
        killed_at = time.monotonic()
        _replace(cluster, victim)
        wait_for(lambda: len(_reached(cluster, "gang_kill")) == 8, 120, 0.1, "the gang to start again, reach its peers")
        recovered = time.monotonic() - killed_at
        after = cluster.replicas("gang_kill")
        cluster.release("gang_kill")
        job = cluster.wait_state("gang_kill", TERMINAL, 60)
    text = cluster.log_text("gang_kill")
    assert job["state"] == "SUCCEEDED", text
    assert "replicas stop and start again together" in text and "start again together on" in text
    assert all(r["attempt"] > b["attempt"] for r, b in zip(after, before, strict=True))  # every one started again
    # Where each replica runs now, as its row says, is what every TF_CONFIG names …
    where = {r["label"]: f"{r['host']}:{r['port']}" for r in after}
    rows = cluster.sql(
        "SELECT label, launch FROM jobs_replica WHERE job_id = %s ORDER BY id", cluster.job_pk("gang_kill")
    )
    for label, launch in rows:
        cluster_of = launch["tfConfig"]["cluster"]
        named = {
            f"{kind}-replica-{i}".replace("chief", "master"): address
            for kind, addresses in cluster_of.items()
            for i, address in enumerate(addresses)
        }
        assert named == where, (label, named, where)
    # … and the trainers reached each other there, the second time round.
    second = [message for _, message in _reached(cluster, "gang_kill")[4:]]
    for message in second:
        for peer in message.split(" reached ", 1)[1].split():
            name, address = peer.split("@")
            assert where[name.replace("chief", "master").replace("-", "-replica-")] == address, message
    assert max(copies.most.values()) == 1, dict(copies.most)
    print(f"gang of 4, worker SIGKILLed: all reached each other again after {recovered:.1f} s")


def test_a_frozen_workers_replica_stops_itself_before_its_replacement_starts(cluster, package):
    """SIGSTOP the worker (a partition's stand-in) for longer than the lease: its trainer stops on
    its own before the lease runs out, the replacement elsewhere resumes from the checkpoint, and at
    no moment do two copies run."""
    job_dir = _job_dir(cluster, "frozen")
    with Copies(job_dir) as copies:
        cluster.submit("frozen", package, args=["--mode", "count", "--steps", "60"])
        wait_for(lambda: any(m == "step 5" for _, _, m in cluster.log("frozen")), 90, 0.1, "step 5")
        [before] = cluster.replicas("frozen")
        victim = _worker_of(cluster, before)
        frozen = cluster.workers[victim]
        frozen.send_signal(signal.SIGSTOP)
        frozen_at = time.monotonic()
        try:
            wait_for(lambda: not alive(before["pid"]), 10, 0.02, "the frozen worker's trainer to stop itself")
            stopped_after = time.monotonic() - frozen_at
            wait_for(
                lambda: (r := cluster.replicas("frozen")[0])["state"] == "RUNNING" and r["attempt"] > before["attempt"],
                30,
                0.05,
                "the replica to run elsewhere",
            )
            moved_after = time.monotonic() - frozen_at
            time.sleep(LEASE_SECONDS)  # frozen for longer than the lease, with its replacement running
        finally:
            frozen.send_signal(signal.SIGCONT)
        job = cluster.wait_state("frozen", TERMINAL, 120)
    assert job["state"] == "SUCCEEDED", cluster.log_text("frozen")
    assert stopped_after < LEASE_SECONDS, stopped_after  # before the coordinator could presume it lost
    [(replica, pids)] = copies.seen.items()  # its master: "chief-0" in a TensorFlow 2 runtime's TF_CONFIG
    assert copies.most[replica] == 1 and len(pids) == 2, (dict(copies.most), dict(copies.seen))
    resumed = [m for _, _, m in cluster.log("frozen") if m.startswith("resuming from step")]
    assert len(resumed) == 1 and int(resumed[0].split()[-1]) >= 5
    # What the first copy printed while its worker was frozen, before it stopped itself, reaches
    # the log once the worker is back, after a note: no step of the rightful run is missing.
    wait_for(lambda: "reach the log only now" in cluster.log_text("frozen"), 30, 0.1, "the late lines")
    steps = {int(m.split()[1]) for _, _, m in cluster.log("frozen") if m.startswith("step ")}
    assert steps == set(range(1, 61)), sorted(set(range(1, 61)) - steps)
    print(f"frozen worker: its trainer stopped after {stopped_after:.1f} s, ran elsewhere after {moved_after:.1f} s")


def _container_image() -> str:
    from bench.support.images import make_image
    from tests.helpers.images import require_engine

    return make_image(
        require_engine(),
        textwrap.dedent(
            """\
            dir=""
            while [ $# -gt 0 ]; do
              if [ "$1" = "--job-dir" ]; then dir="$2"; shift; fi
              shift
            done
            mkdir -p "$dir"
            step=0
            if [ -f "$dir/checkpoint" ]; then step=$(cat "$dir/checkpoint"); fi
            echo "container starts at step $step"
            while [ "$step" -lt 80 ]; do
              sleep 0.1
              step=$((step + 1))
              echo "$step" > "$dir/checkpoint"
              echo "step $step"
            done
            """
        ),
    )


def _containers_of(cluster: Cluster, replica_pk: int) -> list[str]:
    env = {**os.environ, "CONTAINERS_CONF": str(cluster.data_dir / "containers" / "containers.conf")}
    done = subprocess.run(
        ["podman", "ps", "--format", "{{.Names}}"], env=env, capture_output=True, text=True, timeout=60
    )
    return [name for name in done.stdout.split() if f"-r{replica_pk}-a" in name]


def test_a_container_job_outlives_its_worker_killed_then_stopped(cluster):
    """A container replica whose worker is SIGKILLed: its container is stopped with it and it starts
    again elsewhere under a name of its own; then that worker is stopped with SIGTERM, and it moves
    again. The job resumes from its checkpoint each time and SUCCEEDS."""
    image = _container_image()
    job_dir = _job_dir(cluster, "boxed")
    body = {
        "jobId": "boxed",
        "trainingInput": {
            "region": "us-central1",
            "scaleTier": "BASIC",
            "masterConfig": {"imageUri": image},
            "jobDir": str(job_dir),
        },
    }
    with Copies(job_dir) as copies:
        cluster.api("POST", "/v1/projects/default-project/jobs", body)
        replica_pk = None
        for number, how in enumerate((signal.SIGKILL, signal.SIGTERM), start=1):
            step = 5 + 15 * (number - 1)
            wait_for(lambda s=step: f"step {s}" in [m for *_, m in cluster.log("boxed")], 120, 0.1, f"step {step}")
            [before] = cluster.replicas("boxed")
            replica_pk = cluster.sql("SELECT id FROM jobs_replica WHERE job_id = %s", cluster.job_pk("boxed"))[0][0]
            old = f"-r{replica_pk}-a{before['attempt']}"  # one container per start, named for it
            assert [name[-len(old) :] for name in _containers_of(cluster, replica_pk)] == [old]
            victim = _worker_of(cluster, before)
            cluster.workers[victim].send_signal(how)
            cluster.workers[victim].wait(30)
            wait_for(
                lambda old=old, pk=replica_pk: not any(name.endswith(old) for name in _containers_of(cluster, pk)),
                20,
                0.1,
                f"the old container to stop after {how.name}",
            )
            _replace(cluster, victim)
            wait_for(
                lambda before=before: (
                    (r := cluster.replicas("boxed")[0])["state"] == "RUNNING"
                    and r["attempt"] > before["attempt"]
                    and r["pid"]
                ),
                60,
                0.1,
                f"the replica to run again after {how.name}",
            )
        job = cluster.wait_state("boxed", TERMINAL, 120)
    text = cluster.log_text("boxed")
    assert job["state"] == "SUCCEEDED", text
    assert "(no heartbeat for" in text and "(which was stopped)" in text  # SIGKILL, then SIGTERM
    starts = [m for _, _, m in cluster.log("boxed") if m.startswith("container starts at step")]
    assert len(starts) == 3 and starts[0] == "container starts at step 0" and int(starts[2].split()[-1]) >= 20, starts
    [(replica, pids)] = copies.seen.items()
    assert copies.most[replica] == 1 and len(pids) == 3, (dict(copies.most), dict(copies.seen))
    assert _containers_of(cluster, replica_pk) == []
    # What each start's container was given (its mount points) is released: by the worker stopped
    # with SIGTERM as it left, and for the one SIGKILLed by a live worker on the same host.
    staged = cluster.data_dir / "staged"
    wait_for(
        lambda: not [p for p in staged.glob(f"*-r{replica_pk}-a*")],
        30,
        0.2,
        "the containers' mount points to be released",
    )


def _holder(cluster: Cluster) -> tuple[str, int]:
    [(holder, epoch)] = cluster.sql("SELECT holder, epoch FROM jobs_coordinatorlease")
    return holder, epoch


def test_a_frozen_coordinator_is_replaced_within_seconds_and_stands_down_when_it_wakes(cluster, package):
    web_port = free_port()
    second_web = cluster.spawn(["web", "--port", str(web_port)], "web-2")
    wait_for(lambda: service_up("127.0.0.1", web_port) is None, 60, 0.1, "a second web process to listen")
    first_base = cluster.base
    holder, epoch = _holder(cluster)
    pid = int(holder.split(":")[2])
    coordinator = next(p for p in [*cluster.processes] if p.pid == pid)
    if coordinator is cluster.processes[0]:
        cluster.base = f"http://127.0.0.1:{web_port}"  # the API through the web process that is not frozen
    coordinator.send_signal(signal.SIGSTOP)
    frozen_at = time.monotonic()
    try:
        wait_for(lambda: _holder(cluster)[0] != holder, 15, 0.05, "another process to take the coordinator lease")
        replaced_after = time.monotonic() - frozen_at
        cluster.submit("while_frozen", package, args=["--mode", "none"])
        assert cluster.wait_state("while_frozen", TERMINAL, 60)["state"] == "SUCCEEDED"
    finally:
        coordinator.send_signal(signal.SIGCONT)
    new_holder, new_epoch = _holder(cluster)
    assert new_epoch > epoch
    logs = {cluster.processes[0]: "web.log", second_web: "web-2.log"}
    logs.update({process: f"{name}.log" for name, process in cluster.workers.items()})
    log = cluster.data_dir / logs[coordinator]
    wait_for(lambda: "lost the coordinator lease" in log.read_text(), 15, 0.1, "the woken coordinator to stand down")
    assert _holder(cluster)[0] == new_holder  # it did not take the lease back
    cluster.submit("after_thaw", package, args=["--mode", "none"])
    assert cluster.wait_state("after_thaw", TERMINAL, 60)["state"] == "SUCCEEDED"
    cluster.base = first_base
    second_web.send_signal(signal.SIGTERM)
    second_web.wait(30)
    assert replaced_after < 10, replaced_after
    print(f"frozen coordinator replaced after {replaced_after:.1f} s")


def test_a_job_shows_cancelled_only_once_its_trainer_is_gone(cluster, package):
    """Cancel a job whose worker is frozen: it stays CANCELLING while the trainer runs, and shows
    CANCELLED once the trainer stopped itself at its lease's deadline."""
    cluster.submit("cancel_frozen", package, args=["--mode", "hold"])
    wait_for(lambda: (rows := cluster.replicas("cancel_frozen")) and rows[0]["pid"], 60, 0.1, "the trainer to start")
    [replica] = cluster.replicas("cancel_frozen")
    worker = cluster.workers[_worker_of(cluster, replica)]
    worker.send_signal(signal.SIGSTOP)
    try:
        cluster.api("POST", "/v1/projects/default-project/jobs/cancel_frozen:cancel", {})
        deadline = time.monotonic() + 30
        while alive(replica["pid"]):
            assert cluster.job("cancel_frozen")["state"] != "CANCELLED", "CANCELLED while its trainer still runs"
            assert time.monotonic() < deadline, "the trainer never stopped"
            time.sleep(0.05)
        try:  # the replica's lease runs out and the coordinator records it stopped: seconds, 60 on a loaded machine
            job = cluster.wait_state("cancel_frozen", TERMINAL, 60)
        except AssertionError as error:  # what the job and its replica said, for whoever reads the failure
            rows, said = cluster.replicas("cancel_frozen"), cluster.log_text("cancel_frozen")[-3000:]
            raise AssertionError(f"{error}; replicas {rows}; log:\n{said}") from None
    finally:
        worker.send_signal(signal.SIGCONT)
    assert job["state"] == "CANCELLED"
