"""Scaled mode end to end: ``aiconsole web`` and ``aiconsole worker`` processes on the real
PostgreSQL and Redis of this machine, driven through the REST API as a user would.

Two workers with different capacities (one with two GPUs) in one region, plus one in another
region; real trainer packages whose replicas talk to each other over the addresses in TF_CONFIG,
checkpoint into the job dir, and print what they were given. A worker is SIGKILLed mid-job and
its replica must come back elsewhere, resume from its checkpoint, and leave one clean log.

Without PostgreSQL or Redis these tests skip, except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from bench.support.cluster import ROOT, TERMINAL, TRAINER, Cluster, alive, cluster_env
from bench.support.packages import build_package
from bench.support.waiting import wait_for
from tests.cluster.harness import scratch_services

psycopg = pytest.importorskip("psycopg")
redis = pytest.importorskip("redis")

pytestmark = pytest.mark.executor  # real workers run real trainers: not the fast lane

LEASE_SECONDS = 3.0


@pytest.fixture(scope="module")
def services():
    with scratch_services() as urls:
        yield urls


@pytest.fixture(scope="module")
def cluster(services, tmp_path_factory):
    database_url, redis_url = services
    data_dir = tmp_path_factory.mktemp("scaled")
    env = cluster_env(
        data_dir,
        database_url,
        redis_url,
        AICONSOLE_WORKER_HEARTBEAT_SECONDS="0.5",
        AICONSOLE_WORKER_LEASE_SECONDS=str(LEASE_SECONDS),
    )
    instance = Cluster(env, data_dir, database_url)
    try:
        instance.start_web()
        done = instance.cli("token", "create", "admin")
        assert done.returncode == 0, done.stderr
        instance.token = done.stdout.strip()
        instance.start_worker("big", "--region", "us-central1", "--capacity", "cpus=8,memory=32")
        instance.start_worker(
            "gpu", "--region", "us-central1", "--capacity", "cpus=8,memory=32", "--accelerators", "nvidia-tesla-t4=2"
        )
        instance.start_worker("europe", "--region", "europe-west4", "--capacity", "cpus=4,memory=16")
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="module")
def package(cluster):
    folder = cluster.data_dir / "storage" / "packages" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    return build_package(folder, {"trainer/__init__.py": "", "trainer/task.py": textwrap.dedent(TRAINER)})


def _custom(workers: int, worker_type="n1-standard-4", master_type="n1-standard-4", **extra) -> dict:
    return {
        "scaleTier": "CUSTOM",
        "masterType": master_type,
        "workerType": worker_type,
        "workerCount": str(workers),
        **extra,
    }


def test_gang_spans_workers_and_replicas_reach_each_other(cluster, package):
    """12 CPUs of replicas: more than either us-central1 worker has (8 each), so the gang spans both."""
    cluster.submit("gang", package, **_custom(2))
    job = cluster.wait_state("gang", TERMINAL)
    assert job["state"] == "SUCCEEDED", cluster.log_text("gang")
    replicas = cluster.replicas("gang")
    assert {r["worker_pid"] for r in replicas} == {cluster.workers["big"].pid, cluster.workers["gpu"].pid}
    text = cluster.log_text("gang")
    assert "master heard: hello from worker 0" in text and "master heard: hello from worker 1" in text
    ports = [r["port"] for r in replicas]
    assert len(set(ports)) == 3 and all(20000 <= port <= 29999 for port in ports)


def test_each_gpu_replica_gets_its_own_device(cluster, package):
    accelerator = {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}}
    cluster.submit(
        "gpus", package, args=["--mode", "none"], **_custom(1, masterConfig=accelerator, workerConfig=accelerator)
    )
    assert cluster.wait_state("gpus", TERMINAL)["state"] == "SUCCEEDED", cluster.log_text("gpus")
    replicas = cluster.replicas("gpus")
    assert {r["worker_pid"] for r in replicas} == {cluster.workers["gpu"].pid}
    assert sorted(r["devices"] for r in replicas) == ["0", "1"]
    text = cluster.log_text("gpus")
    assert "replica chief 0 cuda=" in text and "replica worker 0 cuda=" in text
    seen = sorted(line.split("cuda=")[1].split()[0] for line in text.splitlines() if "cuda=" in line)
    assert seen == ["0", "1"]


def test_replica_without_gpu_sees_none(cluster, package):
    cluster.submit("cpu_only", package, args=["--mode", "none"], **_custom(0, master_type="n1-standard-8"))
    assert cluster.wait_state("cpu_only", TERMINAL)["state"] == "SUCCEEDED"
    assert "replica chief 0 cuda= host=" in cluster.log_text("cpu_only")


def test_job_no_worker_could_ever_run_is_explained_and_does_not_block(cluster, package):
    cluster.submit("tpu", package, scaleTier="BASIC_TPU")
    cluster.submit("after_tpu", package, args=["--mode", "none"])
    assert cluster.wait_state("after_tpu", TERMINAL)["state"] == "SUCCEEDED"
    assert cluster.job("tpu")["state"] == "QUEUED"
    reason = cluster.sql("SELECT wait_reason FROM jobs_job WHERE job_id = 'tpu'")[0][0]
    assert "No worker in us-central1 can ever run worker-replica-0" in reason and "TPU_V2" in reason
    assert reason in cluster.log_text("tpu")
    cluster.api("POST", "/v1/projects/default-project/jobs/tpu:cancel", {})
    assert cluster.job("tpu")["state"] == "CANCELLED"


def test_region_decides_where_a_job_runs(cluster, package):
    cluster.submit("in_europe", package, args=["--mode", "none"], region="europe-west4")
    assert cluster.wait_state("in_europe", TERMINAL)["state"] == "SUCCEEDED"
    assert {r["worker_pid"] for r in cluster.replicas("in_europe")} == {cluster.workers["europe"].pid}


def test_worker_without_capacity_runs_every_tier_like_embedded_mode(cluster, package):
    """The Procfile's one-host worker (no --capacity) on a small host: machine types are labels.

    BASIC's ``standard`` stands for 4 CPUs and 15 GB, more than a 2-core host has; STANDARD_1's 8
    replicas are more than the worker's slots, so that job runs there alone.
    """
    process = cluster.start_worker("labels", "--region", "us-east1")
    [(slots, cpus)] = cluster.sql("SELECT slots, cpus FROM jobs_worker WHERE pid = %s", process.pid)
    assert slots >= 1 and cpus == (os.cpu_count() or 1)
    wait_for(
        lambda: "treats machine types as labels" in (cluster.data_dir / "labels.log").read_text(),
        10,
        0.1,
        "the labels line",
    )
    assert f"runs at most {slots} replicas at once" in (cluster.data_dir / "labels.log").read_text()
    cluster.submit("basic_on_labels", package, args=["--mode", "none"], region="us-east1")
    cluster.submit("standard_1_on_labels", package, args=["--mode", "none"], region="us-east1", scaleTier="STANDARD_1")
    for job_id in ("basic_on_labels", "standard_1_on_labels"):
        job = cluster.wait_state(job_id, TERMINAL, 180)
        assert job["state"] == "SUCCEEDED", cluster.log_text(job_id)
        assert "can ever run" not in cluster.log_text(job_id)
        assert {r["worker_pid"] for r in cluster.replicas(job_id)} == {process.pid}
    assert len(cluster.replicas("standard_1_on_labels")) == 8
    done = cluster.cli("workers")
    assert f"labels, {slots} slots" in done.stdout, done.stdout


def test_job_that_does_not_fit_waits_in_line_then_runs(cluster, package):
    """All 16 of the region's CPUs are held; the next jobs wait in line, by priority, then run."""
    cluster.submit("holder", package, args=["--mode", "hold"], **_custom(3))
    cluster.wait_state("holder", "RUNNING")
    cluster.submit("waiter", package, args=["--mode", "none"])
    cluster.submit("urgent", package, args=["--mode", "none"], scheduling={"priority": 10})
    wait_for(
        lambda: "Waiting for capacity" in cluster.sql("SELECT wait_reason FROM jobs_job WHERE job_id = 'urgent'")[0][0],
        30,
        0.1,
        "the wait reason",
    )
    assert cluster.job("urgent")["jobPosition"] == "1"
    assert cluster.job("waiter")["jobPosition"] == "2"
    cluster.submit("impatient", package, args=["--mode", "none"], scheduling={"maxWaitTime": "1800s"})
    # It has waited longer than its 30 minutes (the shortest maxWaitTime there is).
    cluster.sql("UPDATE jobs_job SET create_time = now() - interval '31 minutes' WHERE job_id = 'impatient'")
    impatient = cluster.wait_state("impatient", "CANCELLED", 30)
    assert "maximum wait time of 1800s" in impatient["errorMessage"]
    assert cluster.job("waiter")["state"] == "QUEUED"
    cluster.release("holder")
    assert cluster.wait_state("holder", TERMINAL)["state"] == "SUCCEEDED"
    urgent = cluster.wait_state("urgent", TERMINAL)
    waiter = cluster.wait_state("waiter", TERMINAL)
    assert urgent["state"] == waiter["state"] == "SUCCEEDED"
    assert urgent["startTime"] <= waiter["startTime"]


def test_cancel_reaches_replicas_on_every_worker(cluster, package):
    cluster.submit("to_cancel", package, args=["--mode", "hold"], **_custom(2))
    wait_for(
        lambda: (
            all(r["state"] == "RUNNING" and r["pid"] for r in cluster.replicas("to_cancel"))
            and len(cluster.replicas("to_cancel")) == 3
        ),
        60,
        0.1,
        "all three replicas to run",
    )
    replicas = cluster.replicas("to_cancel")
    assert len({r["worker_pid"] for r in replicas}) == 2
    cluster.api("POST", "/v1/projects/default-project/jobs/to_cancel:cancel", {})
    job = cluster.wait_state("to_cancel", "CANCELLED", 30)
    assert job["errorMessage"] == "Job is cancelled by the user."
    assert {r["state"] for r in cluster.replicas("to_cancel")} == {"STOPPED"}, (
        cluster.sql(
            "SELECT label, state, stop_requested, lease_expires, now(), attempt, pid FROM jobs_replica "
            "WHERE job_id = %s",
            cluster.job_pk("to_cancel"),
        ),
        cluster.log_text("to_cancel"),
    )
    for replica in replicas:
        assert not alive(replica["pid"]), f"{replica['label']} still runs"


def test_max_running_time_is_enforced(cluster, package):
    cluster.submit("too_long", package, args=["--mode", "hold"], scheduling={"maxRunningTime": "2s"})
    job = cluster.wait_state("too_long", TERMINAL, 60)
    assert job["state"] == "CANCELLED"
    assert "maximum running time of 2s" in job["errorMessage"]


def test_killed_worker_replica_restarts_elsewhere_and_resumes(cluster, package):
    """SIGKILL the worker that runs the master: within the lease and backoff the replica runs on
    another worker, resumes from its checkpoint, and the job succeeds with one clean log."""
    cluster.submit("survivor", package, args=["--mode", "count", "--steps", "40"])
    wait_for(lambda: any(m.startswith("step 5") for _, _, m in cluster.log("survivor")), 90, 0.1, "step 5")
    [before] = cluster.replicas("survivor")
    victim = next(name for name, process in cluster.workers.items() if process.pid == before["worker_pid"])
    cluster.workers[victim].send_signal(signal.SIGKILL)
    cluster.workers[victim].wait(10)
    killed_at = time.monotonic()
    wait_for(lambda: not alive(before["pid"]), 10, 0.05, "the trainer to die with its worker")
    wait_for(
        lambda: (
            (r := cluster.replicas("survivor")[0])["state"] == "RUNNING"
            and r["pid"]
            and r["attempt"] > before["attempt"]
        ),
        30,
        0.05,
        "the replica to run again",
    )
    back_after = time.monotonic() - killed_at
    assert back_after < 15, back_after
    job = cluster.wait_state("survivor", TERMINAL, 120)
    assert job["state"] == "SUCCEEDED", cluster.log_text("survivor")
    [after] = cluster.replicas("survivor")
    assert after["restarts"] == 1 and after["worker_pid"] != before["worker_pid"]
    lines = cluster.log("survivor")
    resumed = [m for _, _, m in lines if m.startswith("resuming from step")]
    assert len(resumed) == 1 and int(resumed[0].split()[-1]) >= 5
    assert "step 40" in [m for _, _, m in lines]
    assert "was lost with" in cluster.log_text("survivor")
    for task in {task for task, _, _ in lines}:  # no gap and no repeat in any sequence
        seqs = [seq for name, seq, _ in lines if name == task]
        assert sorted(seqs) == list(range(1, len(seqs) + 1)), task
    # The worker is gone for good: start another like it for the tests that follow.
    cluster.start_worker(victim + "-again", *_worker_args(victim))


def test_duplicate_delivery_starts_a_replica_once(cluster, package):
    """A redelivered start message (visibility timeout, retry) finds the replica claimed."""
    cluster.submit("once", package, args=["--mode", "hold"])
    wait_for(lambda: (rows := cluster.replicas("once")) and rows[0]["pid"], 60, 0.1, "the replica to start")
    [replica] = cluster.replicas("once")
    replica_pk = cluster.sql("SELECT id FROM jobs_replica WHERE job_id = %s", cluster.job_pk("once"))[0][0]
    queues = [row[0] for row in cluster.sql("SELECT name FROM jobs_worker WHERE stopped = false")]
    code = "import console.celery\nfrom jobs.cluster import tasks\n" + "".join(
        f"tasks.send_start_replica('aiconsole.worker.{name}', {replica_pk}, {replica['attempt']})\n" for name in queues
    )
    _python(cluster, code)
    cluster.release("once")
    assert cluster.wait_state("once", TERMINAL)["state"] == "SUCCEEDED"
    started = [m for _, _, m in cluster.log("once") if m.startswith("Started master-replica-0")]
    assert len(started) == 1, started


def test_tuning_job_runs_whole_on_one_worker(cluster, package):
    tuning_trainer = textwrap.dedent("""
        import argparse, hypertune
        parser = argparse.ArgumentParser()
        parser.add_argument("--x", type=float)
        parser.add_argument("--job-dir")
        args = parser.parse_args()
        hypertune.HyperTune().report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag="score", metric_value=-(args.x - 2) ** 2, global_step=1)
        print("x =", args.x)
    """)
    folder = cluster.data_dir / "storage" / "tuning-package" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    tuning_package = build_package(folder, {"trainer/__init__.py": "", "trainer/task.py": tuning_trainer})
    cluster.submit(
        "study",
        tuning_package,
        hyperparameters={
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": "score",
            "maxTrials": 3,
            "maxParallelTrials": 2,
            "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 4}],
        },
    )
    job = cluster.wait_state("study", TERMINAL, 180)
    assert job["state"] == "SUCCEEDED", cluster.log_text("study")
    assert job["trainingOutput"]["completedTrialCount"] == "3"
    assert len({r["worker_pid"] for r in cluster.replicas("study")}) == 1


def test_a_plain_jobs_metrics_are_collected_on_the_worker_that_runs_its_master(cluster):
    reporting_trainer = textwrap.dedent("""
        import hypertune
        reporter = hypertune.HyperTune()
        for step, accuracy in enumerate((0.5, 0.7, 0.9), start=1):
            reporter.report_hyperparameter_tuning_metric(
                hyperparameter_metric_tag="accuracy", metric_value=accuracy, global_step=step)
    """)
    folder = cluster.data_dir / "storage" / "reporting-package" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    package = build_package(folder, {"trainer/__init__.py": "", "trainer/task.py": reporting_trainer})
    cluster.submit("reported", package, **_custom(1))
    job = cluster.wait_state("reported", TERMINAL, 180)
    assert job["state"] == "SUCCEEDED", cluster.log_text("reported")

    points = cluster.api("GET", "/v1/projects/default-project/jobs/reported/metrics")["metrics"]
    assert [(p["tag"], p["step"], p["value"], p["source"]) for p in points if p["source"] != "system"] == [
        ("accuracy", "1", 0.5, "hypertune"),
        ("accuracy", "2", 0.7, "hypertune"),
        ("accuracy", "3", 0.9, "hypertune"),
    ]
    # Each worker samples the replicas it runs, whichever it is: the master's and the worker's.
    sampled = [p for p in points if p["source"] == "system"]
    assert {p["run"] for p in sampled} == {"master-replica-0", "worker-replica-0"}
    assert {p["tag"] for p in sampled} >= {"system/memory_bytes_used", "system/memory_bytes_limit"}


def test_workers_command_lists_workers(cluster):
    done = cluster.cli("workers")
    assert done.returncode == 0, done.stderr
    assert "us-central1" in done.stdout and "europe-west4" in done.stdout
    assert "2 x NVIDIA_TESLA_T4" in done.stdout and "live" in done.stdout
    [said] = [line for line in done.stdout.splitlines() if line.startswith("Coordinator: ")]
    assert said.startswith(("Coordinator: worker ", "Coordinator: the web process on ")), said


@pytest.mark.skipif(os.geteuid() != 0, reason="Celery warns only about workers run as root")
def test_a_worker_run_as_root_says_why_instead_of_celerys_warning(cluster):
    log = (cluster.data_dir / "big.log").read_text()
    assert "it accepts JSON messages only (never pickle)" in log
    assert "SecurityWarning" not in log and "superuser privileges" not in log


def test_coordinator_moves_when_the_web_process_dies(cluster, package):
    """Kill the process that coordinates (the web process, first in): a worker takes over, and
    a job submitted to a restarted web process runs."""
    web = cluster.processes[0]
    web.send_signal(signal.SIGKILL)
    web.wait(10)
    cluster.processes[0] = cluster.start_web()
    cluster.submit("after_web", package, args=["--mode", "none"])
    assert cluster.wait_state("after_web", TERMINAL, 60)["state"] == "SUCCEEDED"


def _worker_args(name: str) -> list[str]:
    return {
        "big": ["--region", "us-central1", "--capacity", "cpus=8,memory=32"],
        "gpu": ["--region", "us-central1", "--capacity", "cpus=8,memory=32", "--accelerators", "nvidia-tesla-t4=2"],
    }[name]


def _python(cluster: Cluster, source: str) -> str:
    code = "import django\ndjango.setup()\n" + source
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**cluster.env, "DJANGO_SETTINGS_MODULE": "console.settings"},
        cwd=ROOT,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_worker_refuses_bad_arguments(cluster):
    done = cluster.cli("worker", "--region", "us-central1", "--accelerators", "nvidia-tesla-z9=2")
    assert done.returncode == 2 and "--accelerators: unknown accelerator 'nvidia-tesla-z9'" in done.stderr
    done = cluster.cli("worker", "--region", "mars-north1")
    assert done.returncode == 2 and "--region: unknown region 'mars-north1'" in done.stderr
    done = cluster.cli("worker", "--region", "us-central1", "--capacity", "cpus=lots")
    assert done.returncode == 2 and "--capacity: cpus must be a number, got 'lots'" in done.stderr


def test_bad_package_fails_the_job_with_embedded_modes_message(cluster, package):
    cluster.submit("no_module", package, pythonModule="trainer.missing")
    job = cluster.wait_state("no_module", TERMINAL)
    assert job["state"] == "FAILED"
    assert "trainer.missing" in job["errorMessage"], job["errorMessage"]
    assert {r["state"] for r in cluster.replicas("no_module")} <= {"FAILED", "STOPPED"}


# --- custom containers --------------------------------------------------------------------------------

CONTAINER_GANG = """
address=$(echo "$TF_CONFIG" | sed 's/.*"master": \\["\\([^"]*\\)"\\].*/\\1/')
case "$TF_CONFIG" in
  *'"task": {"type": "master"'*)
    echo "master listens on ${address##*:}"
    for i in 1 2 3 4 5 6 7 8 9 10; do
      line=$(echo ack | nc -l -p "${address##*:}")
      if [ -n "$line" ]; then echo "$line"; exit 0; fi
      echo "a connection with nothing in it: listening again" >&2
    done
    exit 1 ;;
  *)
    # Done only when the master answers: a connection that reached something else (nothing
    # listening yet, a port not yet forwarded) is tried again, and says so.
    for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
      reply=$(echo "hello from a worker container" | TIMEOUT 5 nc -w 2 "${address%:*}" "${address##*:}")
      if [ "$reply" = ack ]; then exit 0; fi
      echo "no answer from the master at $address (${reply:-nothing}): trying again" >&2
      sleep 0.5
    done
    echo "could not reach the master at $address" >&2; exit 1 ;;
esac
"""


def _host_address() -> str:
    import socket

    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("10.255.255.255", 1))  # no packet is sent
        return probe.getsockname()[0]


def test_a_container_gang_spans_workers_with_an_engine_and_its_replicas_reach_each_other(cluster):
    """Two workers at the host's own address (containers cannot reach the host's loopback), 4 CPUs
    each: the master and its worker (4 CPUs each) land on both, each in a container of its own
    network namespace, with its port published on its worker's address."""
    from bench.support.images import make_image
    from tests.helpers.images import require_engine

    engine = require_engine()
    script = CONTAINER_GANG.replace("nc ", "/bin/busybox nc ").replace("sed ", "/bin/busybox sed ")
    image = make_image(engine, script.replace("TIMEOUT ", "/bin/busybox timeout "))
    address = _host_address()
    for name in ("asia-a", "asia-b"):
        process = cluster.spawn(
            ["worker", "--address", address, "--region", "asia-east1", "--capacity", "cpus=4,memory=16"], name
        )
        cluster.workers[name] = process
        wait_for(
            lambda process=process: cluster.sql(
                "SELECT count(*) FROM jobs_worker WHERE pid = %s AND containers", process.pid
            )[0][0],
            60,
            0.1,
            f"worker {name} to register with its container engine",
        )
    body = {
        "jobId": "boxed_gang",
        "trainingInput": {
            "region": "asia-east1",
            "masterConfig": {"imageUri": image},
            **_custom(1),
        },
    }
    cluster.api("POST", "/v1/projects/default-project/jobs", body)
    try:
        job = cluster.wait_state("boxed_gang", TERMINAL, timeout=120)
    except AssertionError as error:
        raise AssertionError(f"{error}; its log:\n{cluster.log_text('boxed_gang')}") from None
    text = cluster.log_text("boxed_gang")
    assert job["state"] == "SUCCEEDED", text
    assert "master-replica-0: hello from a worker container" in text, text
    replicas = cluster.replicas("boxed_gang")
    assert {r["worker_pid"] for r in replicas} == {cluster.workers["asia-a"].pid, cluster.workers["asia-b"].pid}
    assert all(r["host"] == address for r in replicas)


VERTEX_TRAINER = """
import json, os, sys
spec = json.loads(os.environ["CLUSTER_SPEC"])
argv, model = json.dumps(sys.argv[1:]), os.environ["AIP_MODEL_DIR"]
print("vertex", spec["task"]["type"], "argv=" + argv, "model=" + model, flush=True)
"""


def test_a_vertex_custom_job_spans_workers_and_its_replicas_get_vertexs_variables(cluster):
    folder = cluster.data_dir / "storage" / "vertex-package" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    package = build_package(folder, {"trainer/__init__.py": "", "trainer/task.py": VERTEX_TRAINER})
    base = cluster.data_dir / "storage" / "job-dirs" / "default-project" / "vertex-gang"

    def pool() -> dict:  # n1-standard-8: two of them are more than one worker's 8 CPUs
        return {
            "machineSpec": {"machineType": "n1-standard-8"},
            "replicaCount": "1",
            "pythonPackageSpec": {
                "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
                "packageUris": [str(package)],
                "pythonModule": "trainer.task",
                "args": ["--epochs=1"],
            },
        }

    created = cluster.api(
        "POST",
        "/v1/projects/default-project/locations/us-central1/customJobs",
        {
            "displayName": "vertex-gang",
            "jobSpec": {"workerPoolSpecs": [pool(), pool()], "baseOutputDirectory": {"outputUriPrefix": str(base)}},
        },
    )
    vertex_id = created["name"].rsplit("/", 1)[1]
    job_id = cluster.sql(
        "SELECT j.job_id FROM jobs_job j JOIN jobs_vertexjob v ON v.job_id = j.id WHERE v.vertex_id = %s", vertex_id
    )[0][0]
    job = cluster.wait_state(job_id, TERMINAL, 180)
    assert job["state"] == "SUCCEEDED", cluster.log_text(job_id)
    text = cluster.log_text(job_id)
    model = f"{base.resolve()}/model/"
    assert f'vertex workerpool0 argv=["--epochs=1"] model={model}' in text  # no --job-dir, as on Vertex
    assert f'vertex workerpool1 argv=["--epochs=1"] model={model}' in text
    assert len({r["worker_pid"] for r in cluster.replicas(job_id)}) == 2
    assert (base / "model").is_dir()
