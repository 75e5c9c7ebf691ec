"""Custom container jobs run the user's image in the real container engine (podman here).

Images are busybox roots with a shell script as entrypoint (bench/support/images.py): the script
prints what the container was given, writes to its job dir, reports hypertune metrics, traps
SIGTERM or fails, as a real trainer image would.
"""

from __future__ import annotations

import json
import os

import pytest
from django.conf import settings

from aiconsole import trainer_user
from aiconsole.errors import InvalidArgument
from bench.support.images import make_image
from bench.support.waiting import wait_for
from jobs import services
from jobs.containers import images
from jobs.executor import containers, controller
from jobs.models import TERMINAL_STATES, Job, LogLine
from tests.helpers.images import require_engine

pytestmark = [pytest.mark.executor, pytest.mark.django_db(transaction=True)]

PRINTER = """
echo "args: $*"
echo "TF_CONFIG=$TF_CONFIG"
echo "CLUSTER_SPEC=$CLUSTER_SPEC"
echo "CLOUD_ML_JOB_ID=$CLOUD_ML_JOB_ID"
echo "CLOUD_ML_TRIAL_ID=${CLOUD_ML_TRIAL_ID:-none}"
echo "whoami: $(id -u):$(id -g)"
echo "secret: ${AICONSOLE_SECRET_KEY:-absent}"
echo "to stderr" >&2
while [ $# -gt 0 ]; do
  if [ "$1" = "--job-dir" ]; then mkdir -p "$2" && echo done > "$2/output.txt"; fi
  shift
done
"""


@pytest.fixture
def engine():
    return require_engine()


def container_body(job_id: str, image: str, **training_input) -> dict:
    return {
        "jobId": job_id,
        "trainingInput": {
            "scaleTier": "BASIC",
            "region": "us-central1",
            "masterConfig": {"imageUri": image},
            **training_input,
        },
    }


def submit_and_wait(project, admin, body, timeout: float = 120) -> Job:
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, timeout, message=f"{body['jobId']} to end")
    job.refresh_from_db()
    return job


def lines(job: Job, replica: str = "master-replica-0") -> list[str]:
    return list(LogLine.objects.filter(job=job, task_name=replica).order_by("pk").values_list("message", flat=True))


def value(log: list[str], key: str) -> str:
    return next(line.split("=", 1)[1] for line in log if line.startswith(f"{key}="))


def test_a_container_job_runs_its_image_with_args_then_job_dir_as_the_projects_account(
    engine, executor, project, admin
):
    image = make_image(engine, PRINTER)
    job_dir = settings.STORAGE_DIR / "outputs" / "project-a" / "container-out"
    job_dir.parent.mkdir(parents=True, exist_ok=True)
    body = container_body("boxed", image, args=["--epochs", "3"], jobDir=str(job_dir))
    job = submit_and_wait(project, admin, body)

    assert job.state == "SUCCEEDED", job.error_message
    log = lines(job)
    assert f"args: --epochs 3 --job-dir {job_dir}" in log
    tf_config = json.loads(value(log, "TF_CONFIG"))
    assert tf_config["task"] == {"type": "master", "index": 0}  # master, not chief, by default
    assert json.loads(value(log, "CLUSTER_SPEC"))["task"]["type"] == "master"
    assert value(log, "CLOUD_ML_JOB_ID") == "boxed"
    assert "secret: absent" in log
    assert "whoami: 0:0" in log  # root inside, as the original ran images
    assert (job_dir / "output.txt").read_text() == "done\n"
    if os.geteuid() == 0:  # the project's account outside: what it wrote is the account's, not root's
        account = trainer_user.for_project(project)
        assert (os.stat(job_dir / "output.txt").st_uid, os.stat(job_dir / "output.txt").st_gid) == (
            account.uid,
            account.gid,
        )
    assert "to stderr" in lines(job)
    assert LogLine.objects.filter(job=job, task_name="master-replica-0", message="to stderr").get().stream == "stderr"


def test_a_missing_image_is_refused_at_submit_saying_how_to_bring_it(engine, project, admin):
    with pytest.raises(InvalidArgument) as refused:
        services.submit_job(project, container_body("nothing", "gcr.io/absent/trainer:v9"), actor=admin)
    message = str(refused.value)
    assert "gcr.io/absent/trainer:v9 is not on this server" in message
    assert "never pulled" in message


def test_an_image_without_its_command_fails_with_that_said(engine, executor, project, admin):
    image = make_image(engine, "echo unused\n")
    body = container_body("nocmd", image)
    body["trainingInput"]["masterConfig"]["containerCommand"] = ["/usr/bin/python3", "-m", "trainer.task"]
    job = submit_and_wait(project, admin, body)
    assert job.state == "FAILED"
    assert "command was not found in the image" in job.error_message


def test_a_failing_container_fails_the_job_with_its_exit_status_and_last_lines(engine, executor, project, admin):
    image = make_image(engine, 'echo "Traceback (most recent call last):" >&2; echo "ValueError: bad lr" >&2; exit 3\n')
    job = submit_and_wait(project, admin, container_body("fails", image))
    assert job.state == "FAILED"
    assert "The replica master 0 exited with a non-zero status of 3." in job.error_message
    assert "ValueError: bad lr" in job.error_message


def test_the_image_checked_for_a_job_is_the_one_that_runs_even_if_its_name_moves(
    engine, executor, project, admin, monkeypatch
):
    monkeypatch.setattr(images, "RESOLVED_SECONDS", 600.0)  # however slow this machine is between the two
    checked = make_image(engine, 'echo "I am the checked image"\n')
    other = make_image(engine, 'echo "I am another image"\n')
    name = "localhost/aic-test/moving:v1"
    engine.call("tag", checked, name)
    controller.stop()  # the job waits in the queue while its name is given to another image
    job = services.submit_job(project, container_body("moved_name", name), actor=admin)
    engine.call("tag", other, name)
    try:
        controller.start()
        wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 120, message="moved_name to end")
    finally:
        engine.call("rmi", name)
    job.refresh_from_db()
    assert job.state == "SUCCEEDED", job.error_message
    assert "I am the checked image" in lines(job)


def test_leftover_containers_of_this_console_are_removed_by_a_sweep(engine, project):
    from jobs.executor import containers

    image = make_image(engine, "sleep 30\n")
    name = f"aic-{containers.console_label()}-r999999"
    engine.call("run", "--detach", "--name", name, *containers.owner_labels(), "--pull=never", image)
    other = "aic-someone-else-r1"
    engine.call("run", "--detach", "--name", other, "--label", "ai-console.console=elsewhere", "--pull=never", image)
    try:
        assert containers.sweep() >= 1
        assert engine.inspect_image(image) is not None
        running = engine.call("ps", "--all", "--format", "{{.Names}}").split()
        assert name not in running
        assert other in running  # another console's container is not ours to remove
    finally:
        engine.call("rm", "--force", "--ignore", name, other)


DISTRIBUTED = """
echo "TF_CONFIG=$TF_CONFIG"
echo "CLUSTER_SPEC=$CLUSTER_SPEC"
case "$TF_CONFIG" in
  *'"task": {"type": "chief"'*|*'"task": {"type": "master"'*) sleep 1 ;;
esac
"""


def test_master_workers_and_a_parameter_server_each_run_in_a_container_of_one_pod(engine, executor, project, admin):
    image = make_image(engine, DISTRIBUTED)
    body = container_body(
        "boxed_cluster",
        image,
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount="2",
        parameterServerType="n1-standard-4",
        parameterServerCount="1",
        useChiefInTfConfig=True,
    )
    job = submit_and_wait(project, admin, body)
    assert job.state == "SUCCEEDED", job.error_message

    master = json.loads(value(lines(job), "TF_CONFIG"))
    assert master["task"] == {"type": "chief", "index": 0}  # useChiefInTfConfig
    assert sorted(master["cluster"]) == ["chief", "ps", "worker"]
    assert len(master["cluster"]["worker"]) == 2
    worker = json.loads(value(lines(job, "worker-replica-1"), "TF_CONFIG"))
    assert worker["task"] == {"type": "worker", "index": 1}
    assert worker["cluster"] == master["cluster"]
    spec = json.loads(value(lines(job, "ps-replica-0"), "CLUSTER_SPEC"))
    assert spec["task"] == {"type": "ps", "index": 0}
    assert "master" in spec["cluster"]  # CLUSTER_SPEC always says master
    assert sorted(job.replicas.values_list("label", flat=True)) == [
        "master-replica-0",
        "ps-replica-0",
        "worker-replica-0",
        "worker-replica-1",
    ]


PEERS = """
case "$TF_CONFIG" in
  *'"type": "master"'*) echo "listening"; printf 'hello worker\\n' | nc -l -p 34567 || true ;;
  *) for i in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do
       if reply=$(nc 127.0.0.1 34567 </dev/null 2>/dev/null) && [ -n "$reply" ]; then echo "got: $reply"; exit 0; fi
       sleep 0.5
     done; echo "no master" >&2; exit 1 ;;
esac
"""


def test_replicas_of_one_job_reach_each_other_on_the_pods_loopback(engine, executor, project, admin):
    image = make_image(engine, PEERS.replace("nc ", "/bin/busybox nc "))
    body = container_body(
        "boxed_peers",
        image,
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount="1",
    )
    job = submit_and_wait(project, admin, body)
    assert "got: hello worker" in lines(job, "worker-replica-0"), lines(job, "worker-replica-0")
    assert job.state == "SUCCEEDED", job.error_message


LISTENER = """
echo "LISTENING"
for _ in 1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20; do /bin/busybox nc -l -p 7777 -e /bin/echo hello; done
"""

KNOCKER = """
if /bin/busybox nc -w 3 "$1" 7777 </dev/null | grep -q hello; then echo "knock: answered"
else echo "knock: unanswered"; fi
"""


def _address_of(engine, job: Job) -> str:
    name = containers.container_name(job.replicas.get().pk)
    networks = json.loads(engine.call("inspect", "--format", "{{json .NetworkSettings.Networks}}", name))
    return next(iter(networks.values()))["IPAddress"]


def test_a_projects_containers_cannot_reach_another_projects(engine, executor, project, admin, other_project, outsider):
    """Distributed training servers have no authentication: another project's container must not
    even connect to them. A container of the same project still may."""
    body = container_body("listener", make_image(engine, LISTENER))
    listener = services.submit_job(other_project, body, actor=outsider)
    try:
        wait_for(lambda: "LISTENING" in lines(listener), 60, message="the other project's server to listen")
        address = _address_of(engine, listener)
        knocker = make_image(engine, KNOCKER)
        theirs = submit_and_wait(project, admin, container_body("knock_across", knocker, args=[address]))
        ours = submit_and_wait(other_project, outsider, container_body("knock_within", knocker, args=[address]))
    finally:
        services.cancel_job(Job.objects.get(pk=listener.pk), actor=outsider)

    assert "knock: unanswered" in lines(theirs), lines(theirs)
    assert "knock: answered" in lines(ours), lines(ours)


USERNS = """
if /bin/busybox unshare -U -r /bin/busybox id >/dev/null 2>&1; then echo "user namespace: made"
else echo "user namespace: refused"; fi
( echo "a child process: started" )
"""


def test_a_container_cannot_create_a_user_namespace_unless_allowed(engine, executor, project, admin):
    job = submit_and_wait(project, admin, container_body("no_userns", make_image(engine, USERNS)))
    assert lines(job) == ["user namespace: refused", "a child process: started"], lines(job)


TUNED = """
for arg in "$@"; do case "$arg" in --x=*) x="${arg#--x=}" ;; esac; done
line="{\\"global_step\\": \\"1\\", \\"$CLOUD_ML_HP_METRIC_TAG\\": \\"$x\\", \\"timestamp\\": 1700000000.0}"
echo "$line" >> "$CLOUD_ML_HP_METRIC_FILE"
echo "trial $CLOUD_ML_TRIAL_ID x=$x args: $*"
"""


def test_a_container_study_runs_trials_with_their_flags_and_reads_their_hypertune_reports(
    engine, executor, project, admin
):
    image = make_image(engine, TUNED)
    job_dir = settings.STORAGE_DIR / "outputs" / "project-a" / "boxed-study"
    job_dir.parent.mkdir(parents=True, exist_ok=True)
    body = container_body(
        "boxed_study",
        image,
        jobDir=str(job_dir),
        hyperparameters={
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": "score",
            "maxTrials": 2,
            "maxParallelTrials": 2,
            "params": [{"parameterName": "x", "type": "DISCRETE", "discreteValues": [1, 2]}],
        },
    )
    job = submit_and_wait(project, admin, body)
    assert job.state == "SUCCEEDED", job.error_message
    trials = job.training_output["trials"]
    assert len(trials) == 2
    for trial in trials:
        x = trial["hyperparameters"]["x"]
        assert float(trial["finalMetric"]["objectiveValue"]) == float(x)
        said = [line for line in lines(job) if line.startswith(f"trial {trial['trialId']} ")]
        assert said == [f"trial {trial['trialId']} x={x} args: --x={x} --job-dir {job_dir}/{trial['trialId']}"]


def test_cancelling_a_container_job_stops_its_containers_and_removes_them(engine, executor, project, admin):
    from jobs.executor import containers

    image = make_image(engine, "trap 'echo got SIGTERM; exit 143' TERM\necho ready\nwhile true; do sleep 0.2; done\n")
    body = container_body(
        "boxed_cancel",
        image,
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount="2",
    )
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: sum(1 for _ in LogLine.objects.filter(job=job, message="ready")) == 3, 60, message="3 replicas up")
    services.cancel_job(job, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 60, message="the cancel")
    job.refresh_from_db()
    assert job.state == "CANCELLED"
    assert "got SIGTERM" in lines(job)
    label = f"label={containers.LABEL_JOB}={job.pk}"
    wait_for(lambda: engine.call("ps", "--all", "--quiet", "--filter", label).split() == [], 30, message="removal")
    wait_for(
        lambda: engine.call("pod", "ps", "--quiet", "--filter", label).split() == [], 30, message="the pod's removal"
    )


def test_a_containers_output_is_kept_once_every_line_in_order_none_in_the_engines_storage(
    engine, executor, project, admin
):
    """What a replica prints reaches the console's log straight from the container, not through a
    second copy the engine would keep (and never bound) under its own storage."""
    image = make_image(
        engine,
        'i=0; while [ $i -lt 3000 ]; do echo "line $i"; i=$((i+1)); done\n'
        'echo "all printed"\nwhile true; do sleep 0.2; done\n',
    )
    job = services.submit_job(project, container_body("boxed_once", image), actor=admin)
    wait_for(lambda: LogLine.objects.filter(job=job, message="all printed").exists(), 60, message="every line")
    label = f"label={containers.LABEL_JOB}={job.pk}"
    [name] = engine.call("ps", "--filter", label, "--format", "{{.Names}}").split()
    log_path = engine.call("inspect", "--format", "{{.HostConfig.LogConfig.Path}}", name).strip()
    kept = os.path.getsize(log_path) if log_path and os.path.exists(log_path) else 0
    services.cancel_job(job, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 60, message="the cancel")
    assert lines(job)[:3001] == [f"line {i}" for i in range(3000)] + ["all printed"]
    assert kept == 0, f"the engine kept {kept} bytes of the replica's output in {log_path}"


def test_the_machine_types_cpus_and_memory_are_the_containers_limits(engine, executor, project, admin):
    if not engine.limits:
        pytest.skip("this host does not enforce container resource limits")
    image = make_image(
        engine,
        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || cat /sys/fs/cgroup/memory.max\n"
        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || cat /sys/fs/cgroup/cpu.max\n",
    )
    body = container_body("boxed_limits", image, scaleTier="CUSTOM", masterType="n1-standard-4")
    job = submit_and_wait(project, admin, body)
    assert job.state == "SUCCEEDED", job.error_message
    log = lines(job)
    assert str(int(15 * 1024) * 1024 * 1024) in log  # n1-standard-4: 15 GB
    cpus = min(4, os.cpu_count())
    assert any(line.split()[0] == str(cpus * 100000) for line in log if line and line.split()[0].isdigit())


def test_a_container_sees_neither_the_data_dir_nor_the_hosts_loopback_services(engine, executor, project, admin):
    secret = settings.DATA_DIR / "secret_key"  # what a console started without AICONSOLE_SECRET_KEY keeps
    if not secret.exists():
        secret.write_text("host-only-secret")
    image = make_image(
        engine,
        f'ls -a {settings.DATA_DIR} | grep -v "^\\.*$" | while read name; do echo "data dir has: $name"; done\n'
        f'cat {settings.DATA_DIR}/secret_key 2>/dev/null || echo "secret key: absent"\n'
        'if /bin/busybox nc -w 2 127.0.0.1 5432 </dev/null >/dev/null 2>&1; then echo "postgres: reachable"; '
        'else echo "postgres: unreachable"; fi\n'
        "grep CapEff /proc/self/status\n",
    )
    job = submit_and_wait(project, admin, container_body("boxed_isolated", image))
    log = lines(job)
    seen = {line.removeprefix("data dir has: ") for line in log if line.startswith("data dir has: ")}
    assert seen <= {settings.WORK_DIR.relative_to(settings.DATA_DIR).parts[0]}  # only the way to its own folder
    assert "secret key: absent" in log
    assert "postgres: unreachable" in log
    assert "CapEff:\t0000000000000000" in log


def test_lone_replicas_start_in_pods_made_ahead_which_go_with_their_job_and_the_console(
    engine, executor, project, admin
):
    """A pod's network costs a lone replica's start about a fifth of a second, so the console keeps
    one made ahead per project network: the next job's replica takes it and removes it when done,
    and a console that stops leaves none behind."""
    image = make_image(engine, PRINTER)
    console = f"label={containers.LABEL_CONSOLE}={containers.console_label()}"

    def spares() -> set[str]:
        names = engine.call("pod", "ps", "--filter", console, "--format", "{{.Name}}").split()
        return {name for name in names if "-spare-" in name}

    first = submit_and_wait(project, admin, container_body("ahead_first", image))
    assert first.state == "SUCCEEDED", first.error_message
    wait_for(lambda: len(containers.SPARE_PODS.ready()) == 1, 60, message="a pod made ahead for the next replica")
    [ready] = containers.SPARE_PODS.ready()
    assert spares() == {ready}

    second = submit_and_wait(project, admin, container_body("ahead_second", image))
    assert second.state == "SUCCEEDED", second.error_message
    assert "whoami: 0:0" in lines(second)  # root inside, the project's account outside, as in a pod of its own
    wait_for(lambda: ready not in spares(), 30, message="the pod the second job took to go with it")
    wait_for(lambda: len(spares()) == 1, 60, message="the next pod made ahead")

    controller.stop()
    assert spares() == set(), "a console that stops removes the pods it made ahead"
