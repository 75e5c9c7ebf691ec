"""The official Vertex AI SDK (google-cloud-aiplatform), unchanged, against a live console whose
executor runs the trainers for real.

The only changes a user makes are the endpoint, the REST transport and a token credential:
``aiplatform.init(project=…, location="us-central1", api_endpoint=URL, api_transport="rest",
credentials=Credentials(token=TOKEN))``. Packages and output directories are paths in the
project's storage area (a user would name gs:// ones).

The SDK is imported by the fixture, not here: importing it takes 1.7 s, which every test worker
paid to collect this file even where its tests are not run (the fast lane runs no executor test).
"""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from aiconsole.tokens import create_token
from bench.support.images import make_image
from bench.support.waiting import wait_for
from jobs.models import Job, JobState, LogLine, VertexJob
from tests.helpers.images import require_engine
from tests.helpers.vertex import TF_IMAGE

pytestmark = [pytest.mark.executor, pytest.mark.django_db(transaction=True)]

PRINTER = """
print("ARGV=" + json.dumps(sys.argv[1:]))
for key in ("AIP_MODEL_DIR", "AIP_CHECKPOINT_DIR", "AIP_TENSORBOARD_LOG_DIR", "CLOUD_ML_JOB_ID", "MODE"):
    print(key + "=" + os.environ.get(key, ""))
print("CLUSTER_SPEC=" + os.environ["CLUSTER_SPEC"])
print("TF_CONFIG=" + os.environ["TF_CONFIG"])
with open(os.path.join(os.environ["AIP_MODEL_DIR"], "model.txt"), "w") as model:
    model.write("trained")
"""

TUNED = """
import argparse
import hypertune

parser = argparse.ArgumentParser()  # strict: an unexpected --job-dir would fail the trial
parser.add_argument("--lr", type=float, required=True)
parser.add_argument("--optimizer", required=True)
parser.add_argument("--momentum", type=float)
args = parser.parse_args()
assert (args.momentum is not None) == (args.optimizer == "sgd"), sys.argv
reporter = hypertune.HyperTune()
for step in (1, 2, 3):
    # the best report is step 2's: BEST_MEASUREMENT (the SDK's default) makes it the final one
    value = args.lr * (2 if step == 2 else 1)
    reporter.report_hyperparameter_tuning_metric(
        hyperparameter_metric_tag="accuracy", metric_value=value, global_step=step
    )
print("TRIAL=" + os.environ["CLOUD_ML_TRIAL_ID"] + " MODEL=" + os.environ["AIP_MODEL_DIR"])
"""

SLEEPER = """
print("started", flush=True)
time.sleep(120)
"""


@pytest.fixture
def vertex_sdk(live_server, admin, project, executor):
    """The SDK pointed at the live console as a user points it: REST, the endpoint, a token."""
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    _, raw = create_token(admin)
    aiplatform.init(
        project="project-a",
        location="us-central1",
        api_endpoint=live_server.url,
        api_transport="rest",
        credentials=Credentials(token=raw),
        staging_bucket="gs://unused-staging",  # the SDK wants one; base_output_dir is given
    )
    return aiplatform


@pytest.fixture
def output_dir(tmp_path):
    folder = settings.STORAGE_DIR / "outputs" / "project-a" / tmp_path.name
    folder.parent.mkdir(parents=True, exist_ok=True)
    return folder


def pool(package, *, image: str = TF_IMAGE, replicas: int = 1, **spec) -> dict:
    return {
        "machine_spec": {"machine_type": "n1-standard-4"},
        "replica_count": replicas,
        "python_package_spec": {
            "executor_image_uri": image,
            "package_uris": [str(package)],
            "python_module": "trainer.task",
            **spec,
        },
    }


def log_of(job: Job, task: str = "master-replica-0") -> list[str]:
    return list(LogLine.objects.filter(job=job, task_name=task).order_by("pk").values_list("message", flat=True))


def value(log: list[str], key: str) -> str:
    return next(line.split("=", 1)[1] for line in log if line.startswith(f"{key}="))


def engine_job(sdk_job) -> Job:
    return VertexJob.objects.get(vertex_id=sdk_job.resource_name.rsplit("/", 1)[1]).job


def state(name: str):
    """The SDK's job state of that name (``JOB_STATE_SUCCEEDED``)."""
    from google.cloud.aiplatform.compat.types import job_state

    return job_state.JobState[name]


def api_error(name: str) -> type[Exception]:
    """The exception the SDK raises for that HTTP error (``NotFound``, ``BadRequest``)."""
    from google.api_core import exceptions

    return getattr(exceptions, name)


def test_a_custom_job_runs_to_succeeded_and_its_replica_sees_aip_model_dir(vertex_sdk, package_factory, output_dir):
    package = package_factory(PRINTER)
    job = vertex_sdk.CustomJob(
        display_name="census-sdk",
        worker_pool_specs=[pool(package, args=["--epochs=1"], env=[{"name": "MODE", "value": "sdk"}])],
        base_output_dir=str(output_dir),
        labels={"team": "ml"},
    )
    job.run()

    assert job.state == state("JOB_STATE_SUCCEEDED")
    engine = engine_job(job)
    log = log_of(engine)
    assert value(log, "AIP_MODEL_DIR") == f"{output_dir}/model/"
    assert value(log, "AIP_TENSORBOARD_LOG_DIR") == f"{output_dir}/logs/"
    assert json.loads(value(log, "ARGV")) == ["--epochs=1"]  # no --job-dir, as on Vertex
    assert value(log, "MODE") == "sdk" and value(log, "CLOUD_ML_JOB_ID") == job.name
    cluster = json.loads(value(log, "CLUSTER_SPEC"))
    assert list(cluster["cluster"]) == ["workerpool0"] and cluster["task"] == {"type": "workerpool0", "index": 0}
    assert json.loads(value(log, "TF_CONFIG"))["task"]["type"] == "chief"
    assert (output_dir / "model" / "model.txt").read_text() == "trained"
    # the console says what it ran instead of Google's image, in the job's log
    assert LogLine.objects.filter(job=engine, task_name="service", message__contains="runtime version 2.11").exists()

    again = vertex_sdk.CustomJob.get(job.resource_name)
    assert again.display_name == "census-sdk" and again.labels == {"team": "ml"}
    assert again.job_spec.worker_pool_specs[0].replica_count == 1
    assert again.end_time is not None


def test_a_tuning_job_of_four_trials_returns_them_with_final_measurements(vertex_sdk, package_factory, output_dir):
    hpt = vertex_sdk.hyperparameter_tuning
    package = package_factory(TUNED)
    trial_job = vertex_sdk.CustomJob(
        display_name="tuned-trial", worker_pool_specs=[pool(package)], base_output_dir=str(output_dir)
    )
    study = vertex_sdk.HyperparameterTuningJob(
        display_name="tuned",
        custom_job=trial_job,
        metric_spec={"accuracy": "maximize"},
        parameter_spec={
            "lr": hpt.DoubleParameterSpec(min=0.01, max=0.1, scale="log"),
            "optimizer": hpt.CategoricalParameterSpec(
                values=["adam", "sgd"],
                conditional_parameter_spec={
                    "momentum": hpt.DiscreteParameterSpec(values=[0, 0.9], scale="linear", parent_values=["sgd"])
                },
            ),
        },
        max_trial_count=4,
        parallel_trial_count=2,
        search_algorithm="random",
    )
    study.run()

    assert study.state == state("JOB_STATE_SUCCEEDED")
    trials = study.trials
    assert sorted(t.id for t in trials) == ["1", "2", "3", "4"]
    for trial in trials:
        assert trial.state.name == "SUCCEEDED"
        parameters = {p.parameter_id: p.value for p in trial.parameters}
        assert ("momentum" in parameters) == (parameters["optimizer"] == "sgd")
        measurement = trial.final_measurement
        assert measurement.step_count == 2  # the best report, not the last
        assert measurement.metrics[0].metric_id == "accuracy"
        assert measurement.metrics[0].value == pytest.approx(parameters["lr"] * 2)
    engine = engine_job(study)
    assert {line.split(" MODEL=")[1] for line in log_of(engine) if line.startswith("TRIAL=")} == {
        f"{output_dir}/{n}/model/" for n in "1234"
    }


def test_list_with_a_filter_finds_the_console_jobs(vertex_sdk, package_factory, output_dir):
    package = package_factory("print('hello')\n")
    for name in ("alpha", "beta"):
        vertex_sdk.CustomJob(
            display_name=name, worker_pool_specs=[pool(package)], base_output_dir=str(output_dir)
        ).submit()
    found = vertex_sdk.CustomJob.list(filter='display_name="beta"')
    assert [job.display_name for job in found] == ["beta"]
    assert {job.display_name for job in vertex_sdk.CustomJob.list()} == {"alpha", "beta"}


def test_cancel_stops_a_running_job_and_delete_removes_it(vertex_sdk, package_factory, output_dir):
    package = package_factory(SLEEPER)
    job = vertex_sdk.CustomJob(
        display_name="sleepy", worker_pool_specs=[pool(package)], base_output_dir=str(output_dir)
    )
    job.submit()
    engine = engine_job(job)
    wait_for(lambda: "started" in log_of(engine), 120, message="the trainer to start")
    job.cancel()
    with pytest.raises(RuntimeError, match="Job is cancelled by the user"):
        job.wait_for_completion()
    assert job.state == state("JOB_STATE_CANCELLED")
    assert Job.objects.get(pk=engine.pk).state == JobState.CANCELLED

    job.delete()
    assert not Job.objects.filter(pk=engine.pk).exists()
    with pytest.raises(api_error("NotFound")):
        vertex_sdk.CustomJob.get(job.resource_name)


def test_a_refused_executor_image_is_the_sdks_exception_with_the_consoles_message(vertex_sdk, package_factory):
    package = package_factory("print('never')\n")
    torch = "us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.1-13.py310:latest"
    job = vertex_sdk.CustomJob(
        display_name="torch", worker_pool_specs=[pool(package, image=torch)], base_output_dir="gs://bucket/out"
    )
    with pytest.raises(api_error("BadRequest")) as refused:
        job.run()
    message = str(refused.value)
    assert "worker_pool_specs[0].python_package_spec.executor_image_uri" in message
    assert "pytorch-gpu" in message and "sklearn-cpu.0-20" in message
    assert not Job.objects.exists()


CONTAINER = """
echo "args: $*"
echo "AIP_MODEL_DIR=$AIP_MODEL_DIR"
echo "CLUSTER_SPEC=$CLUSTER_SPEC"
echo "GREETING=$GREETING"
echo boxed > "${AIP_MODEL_DIR}model.txt"
"""


def test_a_container_spec_job_runs_its_image(vertex_sdk, output_dir):
    engine = require_engine()
    image = make_image(engine, CONTAINER)
    job = vertex_sdk.CustomJob(
        display_name="boxed",
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "container_spec": {
                    "image_uri": image,
                    "args": ["--epochs", "2"],
                    "env": [{"name": "GREETING", "value": "hi"}],
                },
            }
        ],
        base_output_dir=str(output_dir),
    )
    job.run()

    assert job.state == state("JOB_STATE_SUCCEEDED")
    log = log_of(engine_job(job))
    assert "args: --epochs 2" in log  # the container's args, no --job-dir
    assert value(log, "AIP_MODEL_DIR") == f"{output_dir}/model/" and value(log, "GREETING") == "hi"
    assert json.loads(value(log, "CLUSTER_SPEC"))["task"]["type"] == "workerpool0"
    assert (output_dir / "model" / "model.txt").read_text() == "boxed\n"
