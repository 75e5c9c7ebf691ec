"""The executor for real: tiny trainer packages built here run as subprocesses."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from django.conf import settings

from bench.support.waiting import wait_for
from jobs import services
from jobs.executor import housekeeping
from jobs.models import Job, JobState, Replica, ReplicaState
from tests.helpers.jobs import log_text

pytestmark = pytest.mark.executor


def job_dir_for(name: str) -> str:
    return str(settings.STORAGE_DIR / "job-dirs" / "project-a" / name)


def test_single_replica_job_runs_to_success_with_logs_and_job_dir(run_job, package_factory):
    package = package_factory("""
        print("hello from the trainer")
        print("args:", json.dumps(sys.argv[1:]))
        job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
        with open(os.path.join(job_dir, "model.txt"), "w") as handle:
            handle.write("trained")
    """)
    job_dir = job_dir_for("single")
    job = run_job("single_replica", package, jobDir=job_dir, args=["--epochs=2"])

    assert job.state == JobState.SUCCEEDED, job.error_message
    assert Path(job_dir, "model.txt").read_text() == "trained"
    lines = list(job.log_lines.values_list("task_name", "severity", "message"))
    assert ("master-replica-0", "INFO", "hello from the trainer") in lines
    assert any(task == "service" for task, _, _ in lines)
    assert job.start_time and job.end_time and job.start_time <= job.end_time
    assert job.training_output["consumedMLUnits"] >= 0
    replica = job.replicas.get()
    assert (replica.label, replica.state, replica.exit_code) == ("master-replica-0", ReplicaState.SUCCEEDED, 0)


def test_job_dir_comes_after_user_args(run_job, package_factory):
    package = package_factory("""
        with open(sys.argv[-1] + "/argv.json", "w") as handle:
            json.dump(sys.argv[1:], handle)
    """)
    job_dir = job_dir_for("argv")
    job = run_job("argv_order", package, jobDir=job_dir, args=["output_positional", "--lr", "0.1"])

    assert job.state == JobState.SUCCEEDED, job.error_message
    argv = json.loads(Path(job_dir, "argv.json").read_text())
    assert argv == ["output_positional", "--lr", "0.1", "--job-dir", job_dir]


DISTRIBUTED_TASK = """
    tf_config = json.loads(os.environ["TF_CONFIG"])
    cluster_spec = json.loads(os.environ["CLUSTER_SPEC"])
    task = tf_config["task"]
    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    name = f"{task['type']}-{task['index']}"
    with open(os.path.join(job_dir, name + ".json"), "w") as handle:
        json.dump({"tf_config": tf_config, "cluster_spec": cluster_spec,
                   "job_id": os.environ.get("CLOUD_ML_JOB_ID"), "cwd": os.getcwd(),
                   "tmpdir": os.environ.get("TMPDIR")}, handle)
    print(f"{name} is up", flush=True)
    if task["type"] == "ps":
        while True:  # parameter servers never exit on their own
            time.sleep(1)
    if task["type"] == "chief":
        deadline = time.time() + 60
        expected = ["worker-0", "worker-1", "ps-0"]
        while not all(os.path.exists(os.path.join(job_dir, n + ".json")) for n in expected):
            if time.time() > deadline:
                sys.exit("the cluster never came up")
            time.sleep(0.05)
        print("chief saw the whole cluster")
"""


def test_distributed_job_gets_tf_config_and_master_decides(run_job, package_factory):
    package = package_factory(DISTRIBUTED_TASK)
    job_dir = job_dir_for("distributed")
    job = run_job(
        "distributed",
        package,
        jobDir=job_dir,
        scaleTier="CUSTOM",
        masterType="n1-highcpu-16",
        workerType="n1-highcpu-16",
        workerCount="2",
        parameterServerType="n1-highmem-8",
        parameterServerCount="1",
    )

    assert job.state == JobState.SUCCEEDED, job.error_message
    chief = json.loads(Path(job_dir, "chief-0.json").read_text())
    worker = json.loads(Path(job_dir, "worker-1.json").read_text())
    cluster = chief["tf_config"]["cluster"]
    assert set(cluster) == {"chief", "worker", "ps"}  # runtime 2.11 says chief
    assert len(cluster["chief"]) == 1 and len(cluster["worker"]) == 2 and len(cluster["ps"]) == 1
    assert worker["tf_config"]["cluster"] == cluster
    assert worker["tf_config"]["task"] == {"type": "worker", "index": 1}
    assert chief["tf_config"]["environment"] == "cloud"
    assert chief["tf_config"]["job"]["workerCount"] == "2"
    assert set(chief["cluster_spec"]["cluster"]) == {"master", "worker", "ps"}
    assert chief["job_id"] == "distributed"
    # Every replica has its own working directory and TMPDIR.
    dirs = {
        json.loads(Path(job_dir, f"{n}.json").read_text())["cwd"] for n in ("chief-0", "worker-0", "worker-1", "ps-0")
    }
    assert len(dirs) == 4
    # The parameter server was stopped once the chief finished.
    states = dict(job.replicas.values_list("label", "state"))
    assert states["master-replica-0"] == ReplicaState.SUCCEEDED
    assert states["ps-replica-0"] == ReplicaState.STOPPED
    ps = job.replicas.get(label="ps-replica-0")
    assert not _alive(ps.pid)


def test_runtime_1_15_names_the_master_in_tf_config(run_job, package_factory):
    package = package_factory("""
        print(os.environ["TF_CONFIG"])
        assert json.loads(os.environ["TF_CONFIG"])["task"]["type"] == "master"
    """)
    job = run_job("tf1_master", package, runtimeVersion="1.15")
    assert job.state == JobState.SUCCEEDED, job.error_message
    assert '"master"' in log_text(job)


def test_failure_message_has_the_original_form_and_the_traceback(run_job, package_factory):
    package = package_factory("""
        print("about to fail")
        raise ValueError("the learning rate is negative")
    """)
    job = run_job("failing", package)

    assert job.state == JobState.FAILED
    assert job.error_message.startswith("The replica master 0 exited with a non-zero status of 1. \nTraceback")
    assert "ValueError: the learning rate is negative" in job.error_message
    assert job.replicas.get().state == ReplicaState.FAILED


def test_a_trainer_killed_by_sigkill_fails_saying_so_as_the_kernels_oom_killer_leaves_it(run_job, package_factory):
    package = package_factory("""
        import signal
        print("using too much memory", flush=True)
        os.kill(os.getpid(), signal.SIGKILL)
    """)
    job = run_job("killed", package)

    assert job.state == JobState.FAILED
    assert job.error_message.startswith("The replica master 0 exited with a non-zero status of 9(SIGKILL).")
    assert "Traceback" not in log_text(job)  # the reaper passed the signal on, and said nothing of its own


def test_worker_failure_fails_the_job_and_stops_the_others(run_job, package_factory):
    package = package_factory("""
        task = json.loads(os.environ["TF_CONFIG"])["task"]
        if task["type"] == "worker":
            sys.exit(3)
        time.sleep(60)
    """)
    job = run_job(
        "worker_fails",
        package,
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount="1",
    )
    assert job.state == JobState.FAILED
    assert job.error_message.startswith("The replica worker 0 exited with a non-zero status of 3.")
    assert job.replicas.get(label="master-replica-0").state == ReplicaState.STOPPED


def test_cancel_mid_run_stops_the_process_group(executor, package_factory, job_body, admin, project):
    package = package_factory("""
        import subprocess
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"])
        print("child", child.pid, flush=True)
        time.sleep(600)
    """)
    job = services.submit_job(project, job_body("cancel_me", package), actor=admin)
    line = wait_for(
        lambda: job.log_lines.filter(message__startswith="child ").first(), 120, message="the trainer to start"
    )
    child_pid = int(line.message.split()[1])
    master_pid = Replica.objects.get(job=job).pid

    services.cancel_job(Job.objects.get(pk=job.pk), actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.CANCELLED, 30, message="the cancel")

    job.refresh_from_db()
    assert job.error_message == "Job is cancelled by the user."
    wait_for(lambda: not _alive(master_pid) and not _alive(child_pid), 10, message="the processes to exit")


ESCAPING_CHILD = """
    import subprocess
    escaped = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(600)"], start_new_session=True)
    print("escaped", escaped.pid, flush=True)
"""


def test_a_descendant_that_leaves_the_session_does_not_outlive_a_finished_job(run_job, package_factory):
    job = run_job("escapes_then_ends", package_factory(ESCAPING_CHILD))

    assert job.state == JobState.SUCCEEDED, job.error_message
    pid = int(job.log_lines.get(message__startswith="escaped ").message.split()[1])
    wait_for(lambda: not _alive(pid), 20, message="the escaped grandchild to be stopped")


def test_a_descendant_that_leaves_the_session_does_not_outlive_a_cancel(
    executor, package_factory, job_body, admin, project
):
    package = package_factory(ESCAPING_CHILD + "    time.sleep(600)\n")
    job = services.submit_job(project, job_body("escapes_then_cancelled", package), actor=admin)
    line = wait_for(
        lambda: job.log_lines.filter(message__startswith="escaped ").first(), 120, message="the trainer to start"
    )
    services.cancel_job(Job.objects.get(pk=job.pk), actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.CANCELLED, 30, message="the cancel")
    wait_for(lambda: not _alive(int(line.message.split()[1])), 20, message="the escaped grandchild to be stopped")


def test_trainer_environment_holds_none_of_the_console_secrets(run_job, package_factory, monkeypatch):
    monkeypatch.setenv("AICONSOLE_DATABASE_URL", "postgres://console:hunter2@db/aiconsole")
    monkeypatch.setenv("AICONSOLE_REDIS_URL", "redis://:hunter2@redis:6379/0")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "hunter2")
    package = package_factory("""
        with open(sys.argv[-1] + "/env.json", "w") as handle:
            json.dump(dict(os.environ), handle)
    """)
    job_dir = job_dir_for("env")
    job = run_job("secret_check", package, jobDir=job_dir)

    assert job.state == JobState.SUCCEEDED, job.error_message
    environment = json.loads(Path(job_dir, "env.json").read_text())
    leaked = {
        k: v
        for k, v in environment.items()
        if "hunter2" in v or settings.SECRET_KEY in v or (k.startswith("AICONSOLE_") and k != "AICONSOLE_REPLICA")
    }
    assert leaked == {}
    assert "DJANGO_SETTINGS_MODULE" not in environment
    assert environment["CLOUD_ML_JOB_ID"] == "secret_check"
    assert environment["TMPDIR"].endswith("master-replica-0/tmp")


def test_trainer_dependencies_install_into_the_job_layer_only(run_job, package_factory):
    package = package_factory(
        """
        import numpy, tabulate
        print("numpy from", numpy.__file__)
        print("tabulate from", tabulate.__file__)
    """,
        requires=["tabulate", "numpy"],
    )
    job = run_job("layered", package)

    assert job.state == JobState.SUCCEEDED, job.error_message
    text = log_text(job)
    numpy_path = next(line for line in text.splitlines() if line.startswith("numpy from"))
    tabulate_path = next(line for line in text.splitlines() if line.startswith("tabulate from"))
    assert "/runtime-2.11-" in numpy_path  # the runtime's numpy, not a second copy
    assert "/job-" in tabulate_path  # what the runtime lacks goes into the job's own layer
    assert "Installed what the runtime lacks: tabulate " in text


def test_two_jobs_with_the_same_package_name_run_their_own_code(run_job, package_factory):
    first = package_factory('print("I am version one")')
    second = package_factory('print("I am version two")')
    assert "I am version one" in log_text(run_job("same_name_1", first))
    assert "I am version two" in log_text(run_job("same_name_2", second))


def test_install_failure_fails_the_job_in_preparing_with_the_reason(run_job, package_factory):
    package = package_factory('print("never runs")', requires=["aiconsole-no-such-package-anywhere==9.9.9"])
    job = run_job("bad_requirement", package)

    assert job.state == JobState.FAILED
    assert job.error_message.startswith("Failed to install the trainer packages.")
    assert "aiconsole-no-such-package-anywhere" in job.error_message
    assert job.start_time is None  # it never reached RUNNING
    assert not job.replicas.exists()


def test_package_without_the_module_is_rejected_before_anything_runs(run_job, package_factory):
    package = package_factory("", modules={"other/main.py": "print('hi')"})
    job = run_job("missing_module", package)
    assert job.state == JobState.FAILED
    assert "trainer.task" in job.error_message and "not found" in job.error_message
    assert not job.replicas.exists()


def test_not_an_archive_is_rejected_before_anything_runs(run_job):
    fake = settings.STORAGE_DIR / "test-packages" / "project-a" / "fake-0.1.tar.gz"
    fake.parent.mkdir(parents=True, exist_ok=True)
    fake.write_bytes(b"this is not a tarball at all")
    job = run_job("not_an_archive", fake)
    assert job.state == JobState.FAILED
    assert "fake-0.1.tar.gz" in job.error_message
    assert not job.replicas.exists()


def test_binary_junk_and_huge_lines_do_not_break_the_log_pipeline(run_job, package_factory):
    package = package_factory("""
        sys.stdout.buffer.write(b"junk: \\xff\\xfe\\x00\\x80 end\\n")
        sys.stdout.buffer.write(b"x" * (10 * 1024 * 1024) + b"\\n")
        for i in range(5):
            sys.stdout.write(f"\\rprogress {i * 25}%")
        sys.stdout.write("\\n")
        print("still alive")
    """)
    job = run_job("noisy", package)

    assert job.state == JobState.SUCCEEDED, job.error_message
    messages = list(job.log_lines.filter(task_name="master-replica-0").values_list("message", flat=True))
    assert any(m.startswith("junk: \ufffd") for m in messages)
    long_line = next(m for m in messages if m.startswith("xxxx"))
    assert len(long_line) < settings.LOG_LINE_MAX_BYTES + 100 and "line cut" in long_line
    assert "progress 100%" in messages and "progress 25%" not in messages
    assert messages[-1] == "still alive"


def test_queued_job_cancelled_before_it_starts(project, admin, job_body, package_factory, db):
    # No executor running: the job waits in line, and a cancel takes it straight to CANCELLED.
    job = services.submit_job(project, job_body("waiting", package_factory("pass")), actor=admin)
    assert job.state == JobState.QUEUED and job.job_position() == 1
    services.cancel_job(job, actor=admin)
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED and job.error_message == "Job is cancelled by the user."


def test_restarted_console_reconciles_a_job_left_running(transactional_db, project, admin, package_factory, job_body):
    """A job RUNNING when the console died is restarted; its orphaned process is stopped."""
    import subprocess
    import sys

    from jobs.executor import controller

    package = package_factory('print("second life")')
    job = services.submit_job(project, job_body("orphaned", package), actor=admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, runner="gone:1:abc")
    replica = Replica.objects.create(
        job=job,
        task_type="master",
        task_index=0,
        label="master-replica-0",
        machine_type="standard",
        state=ReplicaState.RUNNING,
    )
    orphan = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(600)"],
        env={**os.environ, "AICONSOLE_REPLICA": str(replica.pk)},
        start_new_session=True,
    )
    Replica.objects.filter(pk=replica.pk).update(pid=orphan.pid)

    controller.start()
    try:
        wait_for(lambda: orphan.poll() is not None, 10, message="the orphan to be stopped")
        wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED, 120, message="the rerun")
    finally:
        controller.stop()
    job.refresh_from_db()
    assert job.restarts == 1
    assert "second life" in log_text(job)
    assert "The console stopped while this job was running" in log_text(job)


def _alive(pid: int | None) -> bool:
    if not pid:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    # A zombie still has a pid: count it as gone.
    try:
        with open(f"/proc/{pid}/stat") as handle:
            return handle.read().split()[2] != "Z"
    except OSError:
        return False


def test_max_running_time_cancels_a_job_that_runs_too_long(run_job, package_factory):
    package = package_factory("""
        print("working", flush=True)
        time.sleep(600)
    """)
    job = run_job("too_long", package, scheduling={"maxRunningTime": "2s"})
    assert job.state == JobState.CANCELLED
    assert "maximum running time of 2s" in job.error_message
    assert job.replicas.get().state == ReplicaState.STOPPED


def test_max_wait_time_cancels_a_job_that_waited_too_long(executor, project, admin, job_body, package_factory):
    from datetime import timedelta

    from django.utils import timezone

    executor.stop()  # nothing admits the job; only the wait limit applies
    job = services.submit_job(
        project, job_body("waited", package_factory("pass"), scheduling={"maxWaitTime": "1800s"}), actor=admin
    )
    Job.objects.filter(pk=job.pk).update(create_time=timezone.now() - timedelta(seconds=1801))
    housekeeping.expire_waiting()
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert "maximum wait time of 1800s" in job.error_message


def test_package_from_cloud_storage_runs(run_job, package_factory, gcs_emulator):
    package = package_factory('print("fetched from gs://")')
    gcs_emulator.make_bucket("trainer-bucket")
    uri = gcs_emulator.upload("trainer-bucket", "packages/trainer-0.1.tar.gz", package.read_bytes())
    job = run_job("from_gcs", uri)
    assert job.state == JobState.SUCCEEDED, job.error_message
    assert "fetched from gs://" in log_text(job)


def test_missing_cloud_storage_package_fails_in_preparing(run_job, gcs_emulator):
    gcs_emulator.make_bucket("trainer-bucket")
    job = run_job("gcs_missing", "gs://trainer-bucket/packages/nope-0.1.tar.gz")
    assert job.state == JobState.FAILED
    assert "gs://trainer-bucket/packages/nope-0.1.tar.gz does not exist" in job.error_message
    assert not job.replicas.exists()
