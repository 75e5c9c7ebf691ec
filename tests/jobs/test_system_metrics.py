"""What each running replica uses (jobs/metrics/system.py): its CPU and memory, sampled while it
runs into the job's metrics (source ``system``, run the replica's name), served by the same REST
endpoint, and no accelerator points for a replica without GPUs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
from django.test import override_settings

from aiconsole.tokens import create_token
from bench.support.waiting import wait_for
from jobs import services
from jobs.metrics import system
from jobs.models import Job, JobState, MetricPoint
from tests.helpers.jobs import log_text
from tests.helpers.metrics import job_dir_for

HELD_BYTES = 150 * 1024 * 1024

# The trainer burns CPU while a child it started holds HELD_BYTES, until the test says go: the
# replica's use is its whole tree's.
BUSY_TASK = f"""
    import subprocess
    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    holder = subprocess.Popen([sys.executable, "-c", "import time; block = b'x' * {HELD_BYTES}; time.sleep(300)"])
    deadline = time.time() + 120
    spins = 0
    while not os.path.exists(os.path.join(job_dir, "go")) and time.time() < deadline:
        for _ in range(20000):
            spins += 1
    holder.kill()
    holder.wait()
"""


@pytest.fixture
def get_metrics(client):
    tokens: dict = {}

    def get(job, user, **params):
        if user.pk not in tokens:
            tokens[user.pk] = create_token(user)[1]
        answer = client.get(
            f"/v1/projects/{job.project.project_id}/jobs/{job.job_id}/metrics",
            {"pageSize": 10000, **params},
            HTTP_AUTHORIZATION=f"Bearer {tokens[user.pk]}",
        )
        assert answer.status_code == 200, answer.content
        return answer.json()["metrics"]

    return get


# --- pure pieces -------------------------------------------------------------------------------------


def test_a_process_tree_is_read_with_its_children_and_their_memory():
    holding = f"import time; b = b'x' * {HELD_BYTES}; print(1, flush=True); time.sleep(60)"
    child = subprocess.Popen([sys.executable, "-c", holding], stdout=subprocess.PIPE)
    try:
        child.stdout.readline()
        cpu, memory = system.tree_usage(os.getpid(), include_root=False)
        assert memory >= HELD_BYTES
        assert child.pid in system.descendants(os.getpid())
        own_cpu, own_memory = system.tree_usage(os.getpid(), include_root=True)
        assert own_memory > memory and own_cpu >= cpu
    finally:
        child.kill()
        child.wait()
    assert system.tree_usage(child.pid, include_root=True) is None  # gone: nothing is invented


def test_gpus_are_read_by_index_and_uuid_and_a_gpu_that_cannot_say_is_left_out():
    text = "0, GPU-aaa, 37, 1024\n1, GPU-bbb, [N/A], [N/A]\n"
    assert system.parse_gpus(text) == {"0": (37.0, 1024 * 1024 * 1024), "GPU-aaa": (37.0, 1024 * 1024 * 1024)}
    assert system.gpu_devices(0, None) is None  # no GPUs asked, none given: never sampled
    assert system.gpu_devices(1, "") is None  # hidden from the replica (scaled mode's none)
    assert system.gpu_devices(2, "1,3") == ["1", "3"]
    assert system.gpu_devices(1, None, ["nvidia.com/gpu=2"]) == ["2"]


def test_a_machine_type_limits_memory_to_what_it_has_and_never_past_the_host():
    cpus, memory = system.machine_limits("n1-standard-4")
    assert cpus <= (os.cpu_count() or 1)
    assert memory == min(15 * 1024**3, system.host_memory())
    assert system.machine_limits("no-such-machine") == (float(os.cpu_count() or 1), system.host_memory())


# --- real trainers -----------------------------------------------------------------------------------------


def _series(points: list[dict], tag: str) -> list[float]:
    return [p["value"] for p in points if p["tag"] == tag]


@pytest.mark.executor
@override_settings(SYSTEM_METRICS_SECONDS=0.3)
def test_a_running_replica_has_cpu_and_memory_points_that_stop_when_it_ends(
    executor, job_body, admin, project, package_factory, get_metrics
):
    job_dir = job_dir_for("busy")
    job = services.submit_job(project, job_body("busy", package_factory(BUSY_TASK), jobDir=job_dir), actor=admin)

    def busy_and_holding():
        points = get_metrics(job, admin, source="system")
        cpu, memory = _series(points, system.CPU_UTILIZATION), _series(points, system.MEMORY_USED)
        return points if cpu and max(cpu) > 0.05 and memory and max(memory) >= HELD_BYTES else None

    live = wait_for(busy_and_holding, 120, interval=0.2, message="the replica's CPU and memory while it runs")
    assert Job.objects.get(pk=job.pk).state == JobState.RUNNING
    assert {(p["source"], p["run"], p["trialId"]) for p in live} == {("system", "master-replica-0", "")}
    limits = _series(live, system.MEMORY_LIMIT)
    assert limits and min(limits) >= max(_series(live, system.MEMORY_USED))
    assert max(_series(live, system.CPU_UTILIZATION)) <= 1.5  # a share of its CPUs, not a percentage
    Path(job_dir, "go").touch()
    wait_for(lambda: Job.objects.get(pk=job.pk).is_terminal, 60, message="the job to end")
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-2000:]

    points = get_metrics(job, admin)
    tags = {p["tag"] for p in points if p["source"] == "system"}
    assert {system.CPU_UTILIZATION, system.MEMORY_USED, system.MEMORY_LIMIT} <= tags
    # No GPUs: no accelerator points; the host's network is not the replica's: none either.
    assert not tags & {system.ACCELERATOR_DUTY_CYCLE, system.ACCELERATOR_MEMORY_USED}
    assert not tags & {system.NETWORK_RECEIVED, system.NETWORK_SENT}
    ended = job.replicas.get(label="master-replica-0").end_time.timestamp()
    last = MetricPoint.objects.filter(job=job, source="system").order_by("-wall_time").first()
    assert last.wall_time <= ended + 1  # sampling stops with the replica
    assert not job.final_metrics.filter(name__startswith="system/").exists()  # no result of the job's


@pytest.mark.executor
@override_settings(SYSTEM_METRICS_SECONDS=0, METRIC_POINTS_MAX=10**6)
def test_sampling_can_be_turned_off(run_job, package_factory, get_metrics, admin):
    task = textwrap.dedent("""
        print("done")
    """)
    job = run_job("unsampled", package_factory(task))
    assert job.state == JobState.SUCCEEDED
    assert get_metrics(job, admin, source="system") == []


STUDY_TASK = f"""
    import hypertune

    x = float(next(a for a in sys.argv if a.startswith("--x=")).split("=", 1)[1])
    holder = [b"x" * {HELD_BYTES}]
    end = time.time() + 1.5
    while time.time() < end:
        pass
    hypertune.HyperTune().report_hyperparameter_tuning_metric("score", x, global_step=1)
"""


@pytest.mark.executor
@override_settings(SYSTEM_METRICS_SECONDS=0.3)
def test_a_studys_trials_are_sampled_each_under_its_trial_and_stay_out_of_its_results(
    client, run_job, package_factory, get_metrics, admin
):
    job = run_job(
        "sampled_study",
        package_factory(STUDY_TASK),
        hyperparameters={
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": "score",
            "algorithm": "GRID_SEARCH",
            "maxTrials": 2,
            "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [1, 2]}],
        },
    )
    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-2000:]
    sampled = get_metrics(job, admin, source="system")
    assert {(p["trialId"], p["run"]) for p in sampled} == {("1", "master-replica-0"), ("2", "master-replica-0")}
    for trial in ("1", "2"):
        memory = [p["value"] for p in sampled if p["trialId"] == trial and p["tag"] == system.MEMORY_USED]
        assert memory and max(memory) >= HELD_BYTES  # each trial's own process, while it ran

    # The study's results are the trials' own reports: no system/ column, objective untouched.
    client.force_login(admin)
    page = client.get(f"/projects/{job.project.project_id}/jobs/{job.job_id}/").content.decode()
    trials_table = client.get(f"/projects/{job.project.project_id}/jobs/{job.job_id}/fragments/trials/")
    assert "system/" not in trials_table.content.decode()
    assert 'data-tab-for="resources"' in page  # a study has its Resources tab too
    assert sorted(t.objective_value for t in job.trials.all()) == [1.0, 2.0]
    resources = client.get(f"/projects/{job.project.project_id}/jobs/{job.job_id}/resources/").content.decode()
    assert "trial 1 · master-replica-0" in resources and "trial 2 · master-replica-0" in resources


# Burns CPU for a few seconds: the container's use is read from its init's tree and its own network.
BUSY_CONTAINER = """
end=$(( $(date +%s) + 4 ))
while [ "$(date +%s)" -lt "$end" ]; do i=0; while [ $i -lt 2000 ]; do i=$((i+1)); done; done
echo busy done
"""


@pytest.mark.executor
@override_settings(SYSTEM_METRICS_SECONDS=0.3)
def test_a_container_replica_has_cpu_memory_and_network_points(executor, project, admin, get_metrics):
    from bench.support.images import make_image
    from tests.helpers.images import require_engine

    image = make_image(require_engine(), BUSY_CONTAINER)
    body = {
        "jobId": "busy_container",
        "trainingInput": {"scaleTier": "BASIC", "region": "us-central1", "masterConfig": {"imageUri": image}},
    }
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).is_terminal, 120, message="the container job to end")
    job.refresh_from_db()
    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-2000:]
    points = get_metrics(job, admin, source="system")
    assert {p["run"] for p in points} == {"master-replica-0"}
    assert max(_series(points, system.CPU_UTILIZATION)) > 0.02  # busy, on a host that may be too
    assert min(_series(points, system.MEMORY_USED)) > 0
    # Its network namespace is its own (a lone replica's), so its traffic is measurable: none here.
    assert _series(points, system.NETWORK_RECEIVED) and _series(points, system.NETWORK_SENT)
    assert not {p["tag"] for p in points} & {system.ACCELERATOR_DUTY_CYCLE, system.ACCELERATOR_MEMORY_USED}


FAKE_NVIDIA_SMI = """#!/bin/sh
# As nvidia-smi --query-gpu=index,uuid,utilization.gpu,memory.used --format=csv,noheader,nounits answers.
echo "0, GPU-0000aaaa, 87, 2048"
echo "1, GPU-1111bbbb, 3, 512"
"""


def test_a_replica_given_a_gpu_has_its_duty_cycle_and_memory_and_one_given_none_has_none(
    transactional_db, project, admin, tmp_path, monkeypatch
):
    from tests.helpers.jobs import body

    fake = tmp_path / "bin" / "nvidia-smi"
    fake.parent.mkdir()
    fake.write_text(FAKE_NVIDIA_SMI)
    fake.chmod(0o755)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    job = services.submit_job(project, body("gpus"), actor=admin)
    child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    sampler = system.Sampler()
    try:
        with override_settings(SYSTEM_METRICS_SECONDS=0.2):
            for label, gpus in (("master-replica-0", ["1"]), ("worker-replica-0", None)):
                sampler.add(job.pk, label, system.ProcessTree(lambda: child.pid, memory_limit=None), gpus=gpus)
            wait_for(
                lambda: MetricPoint.objects.filter(job=job, tag=system.CPU_UTILIZATION).count() >= 2,
                30,
                message="two readings of each replica",
            )
    finally:
        sampler.close()
        child.kill()
        child.wait()
    accelerator = MetricPoint.objects.filter(job=job, tag__startswith="system/accelerator")
    assert {(p.run, p.tag, p.value) for p in accelerator} == {
        ("master-replica-0/gpu0", system.ACCELERATOR_DUTY_CYCLE, 3.0),
        ("master-replica-0/gpu0", system.ACCELERATOR_MEMORY_USED, 512 * 1024 * 1024),
    }


@override_settings(METRIC_POINTS_MAX=5, SYSTEM_METRIC_POINTS_MAX=3)
def test_sampled_points_have_a_bound_of_their_own_and_never_crowd_out_the_trainers(transactional_db, project, admin):
    from jobs.metrics import points
    from tests.helpers.jobs import body

    job = services.submit_job(project, body("bounded"), actor=admin)

    def row(source: str, step: int) -> tuple:
        return (job.pk, "", source, "master-replica-0" if source == "system" else "", "t", step, 1.0, step)

    said: list[str] = []
    sampled = points.budget_for(job.pk, system=True)
    assert points.store_within(sampled, [row("system", n) for n in range(4)], said.append) == 3
    assert len(said) == 1 and "AICONSOLE_SYSTEM_METRIC_POINTS_MAX" in said[0]
    own = points.budget_for(job.pk)  # the trainers' points: all five still theirs
    assert points.store_within(own, [row("hypertune", n) for n in range(6)], said.append) == 5
    assert len(said) == 2 and "(AICONSOLE_METRIC_POINTS_MAX)" in said[1]
    del sampled, own  # a new runner counts what is stored, each kind apart
    assert points.budget_for(job.pk, system=True).used == 3 and points.budget_for(job.pk).used == 5
