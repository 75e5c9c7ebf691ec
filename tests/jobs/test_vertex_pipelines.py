"""Vertex AI's custom TrainingPipelines (``projects.locations.trainingPipelines``), as the SDK's
CustomTrainingJob, CustomPythonPackageTrainingJob and CustomContainerTrainingJob create them: the
wire shapes and refusals over REST here, and the SDK itself, unchanged, against a live console
whose executor runs the pipeline's script for real."""

from __future__ import annotations

import pytest

from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from jobs.models import Job, JobState, LogLine, VertexJob
from tests.helpers.vertex import ENUMS, TF_IMAGE

BASE = "/v1/projects/project-a/locations/us-central1"
CUSTOM_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/custom_task_1.0.0.yaml"
TUNING_TASK = "gs://google-cloud-aiplatform/schema/trainingjob/definition/hyperparameter_tuning_task_1.0.0.yaml"


def _inputs(package: str = "/nowhere/trainer-0.1.tar.gz", **extra) -> dict:
    """Task inputs as the SDK writes them: a Struct from a Python dict, so snake_case keys."""
    return {
        "worker_pool_specs": [
            {
                "machine_spec": {"machine_type": "n1-standard-4", "accelerator_type": "ACCELERATOR_TYPE_UNSPECIFIED"},
                "replica_count": 1,
                "disk_spec": {"boot_disk_type": "pd-ssd", "boot_disk_size_gb": 100},
                "python_package_spec": {
                    "executor_image_uri": TF_IMAGE,
                    "python_module": "aiplatform_custom_trainer_script.task",
                    "package_uris": [package],
                    "args": ["--epochs", "2"],
                },
            }
        ],
        **extra,
    }


def _pipeline(name: str = "census-pipeline", definition: str = CUSTOM_TASK, **extra) -> dict:
    return {"displayName": name, "trainingTaskDefinition": definition, "trainingTaskInputs": _inputs(), **extra}


@pytest.fixture
def package_path(project):
    from django.conf import settings

    from bench.support.packages import build_package

    folder = settings.STORAGE_DIR / "packages" / "project-a" / "pipelines"
    return str(build_package(folder, {"trainer/__init__.py": "", "trainer/task.py": "print('hi')"}))


def test_a_custom_pipeline_is_one_engine_job_answered_as_a_training_pipeline(api, project, package_path):
    body = _pipeline(trainingTaskInputs=_inputs(package_path), labels={"team": "ml"})
    status, created = api("POST", f"{BASE}/trainingPipelines{ENUMS}", body)
    assert status == 200, created
    assert created["name"].startswith("projects/project-a/locations/us-central1/trainingPipelines/")
    assert created["state"] == 1  # PIPELINE_STATE_QUEUED as a number, as the SDK asked
    assert created["trainingTaskDefinition"] == CUSTOM_TASK
    assert created["trainingTaskInputs"]["worker_pool_specs"][0]["replica_count"] == 1  # echoed as given
    assert "trainingTaskMetadata" not in created  # no backing job before it starts
    vertex = VertexJob.objects.get(vertex_id=created["name"].rsplit("/", 1)[1])
    job = vertex.job
    assert job.job_id.startswith("census_pipeline_") and job.labels == {"team": "ml"}
    ti = job.training_input
    assert ti["pythonModule"] == "aiplatform_custom_trainer_script.task" and ti["packageUris"] == [package_path]
    assert ti["args"] == ["--epochs", "2"]
    entry = AuditEntry.objects.get(method_name="google.cloud.aiplatform.v1.PipelineService.CreateTrainingPipeline")
    assert entry.resource_name == "projects/project-a/locations/us-central1"  # a create names its parent

    # Once it runs, its job is its backing CustomJob, which customJobs/<id> answers too.
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, start_time=job.create_time)
    _, running = api("GET", f"/v1/{created['name']}")
    assert running["state"] == "PIPELINE_STATE_RUNNING"
    backing = running["trainingTaskMetadata"]["backingCustomJob"]
    assert backing == created["name"].replace("trainingPipelines", "customJobs")
    status, custom = api("GET", f"/v1/{backing}")
    assert status == 200 and custom["name"] == backing and custom["state"] == "JOB_STATE_RUNNING"
    assert custom["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"


def test_list_filters_pipelines_by_their_own_states_and_names(api, project, package_path):
    for name in ("alpha", "beta"):
        api("POST", f"{BASE}/trainingPipelines", _pipeline(name, trainingTaskInputs=_inputs(package_path)))
    api("POST", f"{BASE}/customJobs", {"displayName": "not-a-pipeline", "jobSpec": _inputs(package_path)})
    status, listed = api("GET", f"{BASE}/trainingPipelines")
    assert status == 200 and sorted(p["displayName"] for p in listed["trainingPipelines"]) == ["alpha", "beta"]
    _, queued = api("GET", f'{BASE}/trainingPipelines?filter=state="PIPELINE_STATE_QUEUED" AND display_name="beta"')
    assert [p["displayName"] for p in queued["trainingPipelines"]] == ["beta"]
    _, none = api("GET", f'{BASE}/trainingPipelines?filter=state="PIPELINE_STATE_SUCCEEDED"')
    assert none == {}


def test_cancel_then_delete_a_pipeline(api, project, package_path):
    _, created = api("POST", f"{BASE}/trainingPipelines", _pipeline(trainingTaskInputs=_inputs(package_path)))
    status, error = api("DELETE", f"/v1/{created['name']}")
    assert status == 400 and "PIPELINE_STATE_QUEUED" in error["error"]["message"]
    assert api("POST", f"/v1/{created['name']}:cancel", {}) == (200, {})
    _, cancelled = api("GET", f"/v1/{created['name']}{ENUMS}")
    assert cancelled["state"] == 7 and cancelled["error"]["code"] == 1
    status, operation = api("DELETE", f"/v1/{created['name']}")
    assert status == 200 and operation["done"] is True
    assert api("GET", f"/v1/{created['name']}")[0] == 404


def test_what_a_pipeline_cannot_do_here_is_refused_on_its_field(api, project, package_path):
    status, error = api(
        "POST",
        f"{BASE}/trainingPipelines",
        _pipeline(definition="gs://google-cloud-aiplatform/schema/trainingjob/definition/automl_tabular_1.0.0.yaml"),
    )
    assert status == 400
    [violation] = error["error"]["details"][0]["fieldViolations"]
    assert violation["field"] == "training_pipeline.training_task_definition"
    assert "custom training pipelines only" in violation["description"] and "AutoML" in violation["description"]

    status, error = api("POST", f"{BASE}/trainingPipelines", _pipeline(inputDataConfig={"datasetId": "123"}))
    assert status == 400 and "managed datasets are not served here" in error["error"]["message"]

    # A model to upload must be one this console serves, and have somewhere to be read from.
    status, error = api(
        "POST",
        f"{BASE}/trainingPipelines",
        _pipeline(
            trainingTaskInputs=_inputs(package_path),
            modelToUpload={"displayName": "m", "containerSpec": {}},
        ),
    )
    assert status == 400
    fields = {v["field"] for v in error["error"]["details"][0]["fieldViolations"]}
    assert fields == {
        "training_pipeline.model_to_upload.container_spec.image_uri",
        "training_pipeline.training_task_inputs.base_output_directory",
    }
    assert "sklearn-cpu" in error["error"]["message"] or "sklearn-cpu" in str(error)

    # A problem inside the task inputs is named where the pipeline has it.
    inputs = _inputs(package_path)
    inputs["worker_pool_specs"][0]["machine_spec"]["machine_type"] = "n9-imaginary-4"
    status, error = api("POST", f"{BASE}/trainingPipelines", _pipeline(trainingTaskInputs=inputs))
    assert status == 400, error
    fields = [v["field"] for v in error["error"]["details"][0]["fieldViolations"]]
    assert any(f.startswith("training_pipeline.training_task_inputs.worker_pool_specs[0]") for f in fields), fields
    assert not Job.objects.exists()


def test_a_tuning_task_pipeline_runs_as_a_study(api, project, package_path):
    inputs = {
        "study_spec": {
            "metrics": [{"metric_id": "accuracy", "goal": "MAXIMIZE"}],
            "parameters": [{"parameter_id": "lr", "double_value_spec": {"min_value": 0.001, "max_value": 0.1}}],
        },
        "trial_job_spec": _inputs(package_path),
        "max_trial_count": 4,
        "parallel_trial_count": 2,
    }
    status, created = api(
        "POST", f"{BASE}/trainingPipelines", _pipeline("tuned", TUNING_TASK, trainingTaskInputs=inputs)
    )
    assert status == 200, created
    job = VertexJob.objects.get(vertex_id=created["name"].rsplit("/", 1)[1]).job
    hyper = job.training_input["hyperparameters"]
    assert hyper["maxTrials"] == 4 and hyper["hyperparameterMetricTag"] == "accuracy"


def test_a_viewer_reads_pipelines_but_cannot_create_one(client, api, project, viewer, package_path):
    _, created = api("POST", f"{BASE}/trainingPipelines", _pipeline(trainingTaskInputs=_inputs(package_path)))
    _, raw = create_token(viewer)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    assert client.get(f"/v1/{created['name']}", **auth).status_code == 200
    refused = client.post(f"{BASE}/trainingPipelines", data=_pipeline(), content_type="application/json", **auth)
    assert refused.status_code == 403


@pytest.fixture
def as_user(client):
    """``call(user, method, path)`` with the user's bearer token."""

    def call(user, method: str, path: str):
        _, raw = create_token(user)
        response = getattr(client, method.lower())(path, HTTP_AUTHORIZATION=f"Bearer {raw}")
        return response.status_code, (response.json() if response.content else None)

    return call


def test_what_this_console_does_not_serve_of_vertex_says_so_in_googles_envelope(as_user, api, project, outsider):
    status, error = api("GET", f"{BASE}/datasets")
    assert status == 501 and error["error"]["status"] == "UNIMPLEMENTED"
    assert "datasets are not served by this console" in error["error"]["message"]
    assert "trainingPipelines" in error["error"]["message"] and "endpoints" in error["error"]["message"]
    status, error = api("POST", f"{BASE}/models/123:export", {})
    assert status == 501 and "models.export" in error["error"]["message"]
    assert api("GET", f"{BASE}/customJobs/not-a-number")[0] == 404  # a served collection: just not found
    assert as_user(outsider, "GET", f"{BASE}/datasets")[0] == 404  # nothing said to someone outside


def test_the_sdks_console_link_opens_the_jobs_page_for_whoever_may_read_it(
    client, api, admin, project, outsider, package_path
):
    _, created = api("POST", f"{BASE}/trainingPipelines", _pipeline(trainingTaskInputs=_inputs(package_path)))
    number = created["name"].rsplit("/", 1)[1]
    job = VertexJob.objects.get(vertex_id=number).job
    client.force_login(admin)
    response = client.get(f"/agent-platform/locations/us-central1/training/{number}?project=project-a")
    assert response.status_code == 302 and response["Location"] == f"/projects/project-a/jobs/{job.job_id}/"
    assert client.get(f"/vertex-ai/locations/us-central1/training/{number}").status_code == 302
    client.force_login(outsider)
    assert client.get(f"/agent-platform/locations/us-central1/training/{number}").status_code == 404


# --- the SDK, unchanged, against a live console ------------------------------------------------------

SCRIPT = """
import argparse, os
parser = argparse.ArgumentParser()
parser.add_argument("--epochs", type=int)
args = parser.parse_args()
print("pipeline script ran", args.epochs, "epochs")
with open(os.path.join(os.environ["AIP_MODEL_DIR"], "model.txt"), "w") as model:
    model.write("trained")
"""


@pytest.fixture
def sdk(live_server, admin, project, executor, gcs_emulator):
    """The SDK as a notebook points it at the console: REST, the endpoint, a token, a staging bucket."""
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    gcs_emulator.make_bucket("pipeline-staging")
    _, raw = create_token(admin)
    aiplatform.init(
        project="project-a",
        location="us-central1",
        api_endpoint=live_server.url,
        api_transport="rest",
        credentials=Credentials(token=raw),
        staging_bucket="gs://pipeline-staging",
    )
    return aiplatform


@pytest.fixture
def output(tmp_path):
    from django.conf import settings

    folder = settings.STORAGE_DIR / "outputs" / "project-a" / tmp_path.name
    folder.parent.mkdir(parents=True, exist_ok=True)
    return folder


def _succeeded(job) -> Job:
    from google.cloud.aiplatform.compat.types import pipeline_state

    assert job.state == pipeline_state.PipelineState.PIPELINE_STATE_SUCCEEDED
    engine = VertexJob.objects.get(vertex_id=job.resource_name.rsplit("/", 1)[1]).job
    assert engine.state == JobState.SUCCEEDED
    return engine


def _log(job: Job) -> list[str]:
    return list(LogLine.objects.filter(job=job, task_name="master-replica-0").values_list("message", flat=True))


@pytest.mark.executor
@pytest.mark.django_db(transaction=True)
def test_the_sdks_custom_training_job_runs_a_local_script_through_a_pipeline(sdk, output, tmp_path):
    aiplatform = sdk
    script = tmp_path / "train.py"
    script.write_text(SCRIPT)
    job = aiplatform.CustomTrainingJob(display_name="sdk-pipeline", script_path=str(script), container_uri=TF_IMAGE)
    model = job.run(args=["--epochs", "3"], replica_count=1, machine_type="n1-standard-4", base_output_dir=str(output))
    assert model is None  # no serving container: nothing to upload, as on Vertex
    engine = _succeeded(job)
    assert engine.job_id.startswith("sdk_pipeline_")
    assert "pipeline script ran 3 epochs" in _log(engine)
    assert (output / "model" / "model.txt").read_text() == "trained"
    listed = aiplatform.CustomTrainingJob.list(filter='display_name="sdk-pipeline"')
    assert [j.resource_name for j in listed] == [job.resource_name]


TRAIN_AND_SAVE = """
import os
import joblib
from sklearn.linear_model import LogisticRegression

model = LogisticRegression().fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
joblib.dump(model, os.path.join(os.environ["AIP_MODEL_DIR"], "model.joblib"))
print("saved the model")
"""


@pytest.mark.executor
@pytest.mark.django_db(transaction=True)
def test_a_pipeline_with_a_serving_container_returns_the_model_it_trained(sdk, output, tmp_path, serving):
    """``run()`` returns an ``aiplatform.Model``: the pipeline uploaded what its script saved in
    ``AIP_MODEL_DIR``, which then deploys and predicts like any model."""
    from models_registry.models import Model

    script = tmp_path / "train.py"
    script.write_text(TRAIN_AND_SAVE)
    job = sdk.CustomTrainingJob(
        display_name="sdk-trained",
        script_path=str(script),
        container_uri=TF_IMAGE,
        model_serving_container_image_uri="us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest",
    )
    model = job.run(replica_count=1, base_output_dir=str(output), model_display_name="trained-here")
    assert model is not None and model.display_name == "trained-here" and model.version_id == "1"
    engine = _succeeded(job)
    assert "saved the model" in _log(engine)
    registered = Model.objects.get(vertex_id=model.name)
    assert registered.default_version.training_pipeline == job.resource_name
    assert model.uri == str(output / "model")
    endpoint = model.deploy(machine_type="n1-standard-2")
    assert endpoint.predict(instances=[[0.0], [3.0]]).predictions == [0, 1]
    endpoint.undeploy_all()


@pytest.mark.executor
@pytest.mark.django_db(transaction=True)
def test_the_sdks_python_package_training_job_runs_a_package_from_cloud_storage(sdk, output, gcs_emulator):
    from bench.support.packages import build_package

    local = build_package(output.parent / "built", {"trainer/__init__.py": "", "trainer/task.py": SCRIPT})
    uri = gcs_emulator.upload("pipeline-staging", "packages/trainer-0.1.tar.gz", local.read_bytes())
    job = sdk.CustomPythonPackageTrainingJob(
        display_name="sdk-package",
        python_package_gcs_uri=uri,
        python_module_name="trainer.task",
        container_uri=TF_IMAGE,
    )
    assert job.run(args=["--epochs", "4"], replica_count=1, base_output_dir=str(output)) is None
    assert "pipeline script ran 4 epochs" in _log(_succeeded(job))
    assert (output / "model" / "model.txt").read_text() == "trained"


@pytest.mark.executor
@pytest.mark.django_db(transaction=True)
def test_the_sdks_container_training_job_runs_its_image(sdk, output):
    from bench.support.images import make_image
    from tests.helpers.images import require_engine

    image = make_image(require_engine(), 'echo "container pipeline: $*"\necho boxed > "$AIP_MODEL_DIR/model.txt"\n')
    job = sdk.CustomContainerTrainingJob(display_name="sdk-container", container_uri=image)
    assert job.run(args=["--epochs", "5"], replica_count=1, base_output_dir=str(output)) is None
    assert "container pipeline: --epochs 5" in _log(_succeeded(job))
    assert (output / "model" / "model.txt").read_text() == "boxed\n"
