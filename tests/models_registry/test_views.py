"""Console pages: the model list, a model and its versions, the prediction panel, deploy from a
job, batch prediction and sharing."""

from __future__ import annotations

import json
import re
import shutil

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from aiconsole import iam
from jobs.models import Job, JobState
from models_registry import services
from models_registry.models import Model, Version, VersionState
from tests.helpers.identity import make_user
from tests.helpers.jobs import body as training_body
from tests.helpers.models import deploy


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def census(project, admin):
    return services.create_model(project, {"name": "census", "description": "Income"}, actor=admin)


def test_the_model_list_and_the_models_link(project, admin, census):
    page = signed_in(admin).get("/projects/project-a/models/")
    html = page.content.decode()
    assert page.status_code == 200
    assert 'href="/projects/project-a/models/"' in html and "census" in html and "New model" in html


def test_a_viewer_sees_models_but_no_forms_and_an_outsider_gets_404(project, census, viewer, outsider):
    html = signed_in(viewer).get("/projects/project-a/models/").content.decode()
    assert "census" in html and "New model" not in html
    detail = signed_in(viewer).get("/projects/project-a/models/census/").content.decode()
    assert "New version" not in detail and "Try a prediction" not in detail
    assert signed_in(outsider).get("/projects/project-a/models/").status_code == 404
    assert signed_in(outsider).get("/projects/project-a/models/census/").status_code == 404
    refused = signed_in(viewer).post("/projects/project-a/models/new-model/", {"name": "sneaky"})
    assert refused.status_code == 403 and not Model.objects.filter(name="sneaky").exists()


def test_creating_a_model_and_a_version_from_the_console(project, admin):
    client = signed_in(admin)
    created = client.post("/projects/project-a/models/new-model/", {"name": "census", "region": "europe-west4"})
    assert created.status_code == 302 and created["Location"] == "/projects/project-a/models/census/"
    assert Model.objects.get(name="census").regions == ["europe-west4"]
    client.post(
        "/projects/project-a/models/census/versions/create/",
        {
            "name": "v1",
            "deployment_uri": "gs://bucket/census/",
            "runtime_version": "2.11",
            "scaling": "manual",
            "nodes": "2",
        },
    )
    version = Version.objects.get(name="v1")
    assert version.manual_scaling == {"nodes": 2} and version.state == VersionState.CREATING
    page = client.get("/projects/project-a/models/census/").content.decode()
    assert 'data-state="CREATING"' in page and 'hx-trigger="every 1s"' in page and "default" in page


def test_the_version_list_refreshes_as_a_fragment(project, admin, census):
    client = signed_in(admin)
    fragment = client.get("/projects/project-a/models/census/fragments/versions/", HTTP_HX_REQUEST="true")
    assert fragment.status_code == 200 and fragment.content.decode().lstrip().startswith('<section id="versions"')


def test_the_prediction_panel_asks_the_real_model(serving, project, admin, census, trained):
    deploy(census, "v1", trained["linear"], admin)
    client = signed_in(admin)
    page = client.get("/projects/project-a/models/census/").content.decode()
    assert "Try a prediction" in page and 'name="body"' in page
    answer = client.post(
        "/projects/project-a/models/census/predict/",
        {"body": json.dumps({"instances": trained["probe"]}), "version": ""},
        HTTP_HX_REQUEST="true",
    ).content.decode()
    assert "HTTP 200" in answer and "answered by version v1" in answer
    assert str(round(trained["expected"]["linear"][0], 3))[:5] in answer
    wrong = client.post("/projects/project-a/models/census/predict/", {"body": "{oops", "version": "v1"}).content
    assert b"HTTP 400" in wrong and b"Invalid JSON payload" in wrong


def test_make_default_and_delete_from_the_version_table(project, admin, census):
    first = services.create_version(census, {"name": "v1", "deploymentUri": "gs://bucket/m/"}, actor=admin)
    services.create_version(census, {"name": "v2", "deploymentUri": "gs://bucket/m/"}, actor=admin)
    Version.objects.update(state=VersionState.READY)
    client = signed_in(admin)
    answer = client.post("/projects/project-a/models/census/versions/v2/default/", HTTP_HX_REQUEST="true")
    assert "v2 is now the default version." in answer.content.decode()
    census.refresh_from_db()
    assert census.default_version.name == "v2"
    refused = client.post("/projects/project-a/models/census/versions/v2/delete/", HTTP_HX_REQUEST="true")
    assert "make another version the default" in refused.content.decode()
    assert first.operation_type == "CREATE_VERSION"


def test_deploying_a_finished_jobs_output(project, admin, trained, django_capture_on_commit_callbacks):
    job_dir = settings.STORAGE_DIR / "job-outputs" / "project-a" / "census_train"
    shutil.rmtree(job_dir, ignore_errors=True)
    shutil.copytree(trained["sklearn"], job_dir / "model")
    job = Job.objects.create(
        project=project,
        job_id="census_train",
        state=JobState.SUCCEEDED,
        training_input=training_body("census_train", jobDir=str(job_dir))["trainingInput"],
    )
    client = signed_in(admin)
    detail = client.get("/projects/project-a/jobs/census_train/").content.decode()
    assert "/projects/project-a/models/deploy-from-job/?job=census_train" in detail
    page = client.get("/projects/project-a/models/deploy-from-job/?job=census_train").content.decode()
    assert str(job_dir / "model") in page
    deployed = client.post(
        "/projects/project-a/models/deploy-from-job/",
        {
            "job": job.job_id,
            "model": "__new__",
            "new_model": "census",
            "version": "v1",
            "deployment_uri": str(job_dir / "model"),
            "runtime_version": "2.11",
        },
    )
    assert deployed.status_code == 302 and deployed["Location"] == "/projects/project-a/models/census/"
    version = Version.objects.get(name="v1")
    assert version.deployment_uri == str(job_dir / "model") and version.labels == {"source_job": "census_train"}


def test_an_unfinished_job_cannot_be_deployed(project, admin):
    Job.objects.create(
        project=project,
        job_id="running",
        state=JobState.RUNNING,
        training_input=training_body("running")["trainingInput"],
    )
    page = signed_in(admin).get("/projects/project-a/models/deploy-from-job/?job=running").content.decode()
    assert "only a job that SUCCEEDED can be deployed" in page


def test_the_batch_prediction_form_submits_a_job(project, admin, census, trained):
    client = signed_in(admin)
    assert client.get("/projects/project-a/models/batch-prediction/").status_code == 200
    folder = settings.STORAGE_DIR / "batch-form" / "project-a"
    folder.mkdir(parents=True, exist_ok=True)
    submitted = client.post(
        "/projects/project-a/models/batch-prediction/",
        {
            "job_id": "score_1",
            "source": "census",
            "input_paths": str(folder / "*.json"),
            "data_format": "JSON",
            "output_path": str(folder / "out"),
            "region": "us-central1",
            "batch_size": "8",
            "max_worker_count": "1",
        },
    )
    assert submitted.status_code == 302 and submitted["Location"] == "/projects/project-a/jobs/score_1/"
    job = Job.objects.get(job_id="score_1")
    assert job.prediction_input["modelName"] == "projects/project-a/models/census"
    assert job.prediction_input["batchSize"] == "8"
    detail = client.get("/projects/project-a/jobs/score_1/").content.decode()
    assert 'id="prediction"' in detail and "Full predictionInput" in detail  # its own input, on its page
    assert "Training input" not in detail and "master-replica-0" not in detail
    # Its own section first, as every kind's results are (a study's trials, a training job's metrics).
    assert re.findall(r'data-tab-for="([a-z-]+)"', detail) == ["prediction", "logs", "replicas", "outputs"]
    moved = client.get("/projects/project-a/models/batch-prediction/score_1/")
    assert moved.status_code == 302 and moved["Location"] == "/projects/project-a/jobs/score_1/#prediction"
    invalid = client.post(
        "/projects/project-a/models/batch-prediction/",
        {
            "job_id": "score_2",
            "source": "census",
            "input_paths": "/etc/*.conf",
            "data_format": "JSON",
            "output_path": str(folder / "out"),
            "region": "us-central1",
        },
    )
    assert invalid.status_code == 200 and "not inside a storage root" in invalid.content.decode()


def test_sharing_a_model_with_a_model_user(project, admin, census):
    make_user("uma")
    client = signed_in(admin)
    page = client.get("/projects/project-a/models/census/sharing/").content.decode()
    assert "AI Platform Model Owner" in page and "AI Platform Model User" in page
    client.post("/projects/project-a/models/census/sharing/add/", {"member": "uma", "role": "roles/ml.modelUser"})
    uma = get_user_model().objects.get(username="uma")
    assert "roles/ml.modelUser" in iam.roles_of(uma, Model.objects.get(name="census"))


def test_the_batch_form_suggests_an_id_and_a_folder_of_its_own(project, admin, census):
    client = signed_in(admin)
    page = client.get("/projects/project-a/models/batch-prediction/")
    job_id = page.context["job_id"]
    assert re.fullmatch(r"batch_\d{8}_\d{6}", job_id)
    base = settings.STORAGE_DIR / "predictions" / "project-a"
    assert f'value="{base / job_id}"' in page.content.decode()
    folder = settings.STORAGE_DIR / "batch-form" / "project-a"
    folder.mkdir(parents=True, exist_ok=True)
    for new_id in ("own_1", "own_2"):  # no output path given: each job its own folder
        answer = client.post(
            "/projects/project-a/models/batch-prediction/",
            {
                "job_id": new_id,
                "source": "census",
                "input_paths": str(folder / "*.json"),
                "data_format": "JSON",
                "output_path": "",
                "region": "us-central1",
            },
        )
        assert answer.status_code == 302
        assert Job.objects.get(job_id=new_id).prediction_input["outputPath"] == str(base / new_id)


def test_a_refused_batch_job_lists_its_errors_linked_to_the_inputs(project, admin, census):
    answer = signed_in(admin).post(
        "/projects/project-a/models/batch-prediction/",
        {
            "job_id": "bad_1",
            "source": "census",
            "input_paths": "/etc/*.conf",
            "data_format": "JSON",
            "output_path": "",
            "region": "us-central1",
        },
    )
    html = answer.content.decode()
    assert answer.status_code == 200 and "data-error-summary" in html
    assert 'href="#batch-inputs"' in html and "not inside a storage root" in html
    assert 'value="bad_1"' in html
