"""Projects are isolated in storage: every local path a request names must lie in the caller's
project's area (<STORAGE_DIR>/<folder>/<project>/…) or in a root an admin declared shared."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from django.conf import settings
from django.test import Client
from django.urls import reverse

from aiconsole import storage
from aiconsole.errors import InvalidArgument
from bench.support.packages import build_package
from jobs import services as job_services
from jobs.executor import preparing
from jobs.models import Job, JobState
from models_registry import services as model_services
from tests.helpers.identity import bearer
from tests.helpers.jobs import body as training_body

DENIED = "Permission denied: projects/project-a cannot use"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def area(project_id: str, folder: str, *parts: str) -> Path:
    path = settings.STORAGE_DIR.joinpath(folder, project_id, *parts)
    shutil.rmtree(path, ignore_errors=True)
    return path


def rest_post(user, path: str, body: dict):
    return Client(**bearer(user)).post(
        f"/v1/projects/project-a{path}", json.dumps(body), content_type="application/json"
    )


def violations(response) -> list[dict]:
    assert response.status_code == 400, response.content
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT"
    return error["details"][0]["fieldViolations"]


# --- the rule itself -------------------------------------------------------------------------------


def test_a_path_must_lie_in_the_projects_area_or_a_shared_root(tmp_path):
    storage_dir, shared = tmp_path / "storage", tmp_path / "shared"
    roots = [storage_dir, shared]
    own = storage_dir / "datasets" / "project-a" / "x.csv"
    assert storage.resolve_local_path(str(own), roots=roots, project="project-a", must_exist=False) == own
    assert storage.resolve_local_path(str(shared / "x.csv"), roots=roots, project="project-a", must_exist=False)
    for other in (
        storage_dir / "datasets" / "project-b" / "x.csv",
        storage_dir / "datasets",
        storage_dir / "x.csv",
        storage_dir / "datasets" / "project-a" / ".." / "project-b",
    ):
        with pytest.raises(storage.StoragePermissionError, match=DENIED):
            storage.resolve_local_path(str(other), roots=roots, project="project-a", must_exist=False)


def test_a_link_into_another_projects_area_is_refused_and_existence_is_never_revealed(tmp_path):
    storage_dir = tmp_path / "storage"
    secret = storage_dir / "job-dirs" / "project-b" / "secret.csv"
    secret.parent.mkdir(parents=True)
    secret.write_text("a,b\n")
    link = storage_dir / "job-dirs" / "project-a" / "link.csv"
    link.parent.mkdir(parents=True)
    link.symlink_to(secret)
    messages = []
    for uri in (str(link), str(secret), str(secret.with_name("missing.csv"))):
        with pytest.raises(storage.StoragePermissionError) as refused:
            storage.resolve_local_path(uri, roots=[storage_dir], project="project-a")
        messages.append(str(refused.value).replace(uri, "<uri>"))
    assert len(set(messages)) == 1 and "does not exist" not in messages[0]


# --- the entry points ---------------------------------------------------------------------------------


def test_the_data_analysis_page_cannot_read_another_projects_csv(project, other_project, developer):
    data = area("project-b", "job-dirs", "their_job") / "train.csv"
    data.parent.mkdir(parents=True)
    data.write_text("label,x\n" + "".join(f"{i % 2},{i}\n" for i in range(50)))
    url = reverse("jobs:data_analysis", args=[project.project_id])
    page = signed_in(developer).get(url, {"path": str(data)}).content.decode()
    assert 'id="id_path_errors"' in page and DENIED in page and "<figure" not in page
    own = area("project-a", "job-dirs", "my_job") / "train.csv"
    own.parent.mkdir(parents=True)
    shutil.copyfile(data, own)
    page = signed_in(developer).get(url, {"path": str(own), "compare": str(data)}).content.decode()
    assert DENIED in page and "<figure" not in page
    page = signed_in(developer).get(url, {"path": str(own)}).content.decode()
    assert 'id="id_path_errors"' not in page and "<figure" in page  # its own file is analysed


def test_another_projects_model_folder_cannot_be_deployed_as_a_version(project, other_project, admin):
    folder = area("project-b", "models-in", "census")
    folder.mkdir(parents=True)
    (folder / "model.joblib").write_bytes(b"their model")
    assert rest_post(admin, "/models", {"name": "census"}).status_code == 200
    refused = violations(
        rest_post(
            admin, "/models/census/versions", {"name": "v1", "deploymentUri": str(folder), "runtimeVersion": "2.11"}
        )
    )
    assert refused[0]["field"] == "version.deployment_uri" and DENIED in refused[0]["description"]
    assert not model_services.Version.objects.exists()


def test_another_projects_package_cannot_be_run(project, other_project, admin, tmp_path):
    package = build_package(area("project-b", "packages", "abc"), {"trainer/task.py": "print('theirs')\n"})
    request = training_body("stolen", packageUris=[str(package)])
    with pytest.raises(InvalidArgument) as refused:
        job_services.submit_job(project, request, actor=admin)
    assert refused.value.violations[0].field == "job.training_input.package_uris[0]"
    assert DENIED in refused.value.violations[0].description
    # A job stored before the rule is refused at run time too.
    with pytest.raises(preparing.PrepareError, match=DENIED):
        preparing.fetch_packages(request["trainingInput"], tmp_path / "packages", project=project)


def test_a_job_dir_cannot_point_into_another_projects_area(project, other_project, admin):
    job_dir = area("project-b", "job-dirs", "theirs")
    with pytest.raises(InvalidArgument) as refused:
        job_services.submit_job(project, training_body("intruder", jobDir=str(job_dir)), actor=admin)
    assert refused.value.violations[0].field == "job.training_input.job_dir"
    assert DENIED in refused.value.violations[0].description
    with pytest.raises(preparing.PrepareError, match=DENIED):
        preparing.prepare_job_dir({"jobDir": str(job_dir)}, project=project)
    assert not job_dir.exists()
    own = area("project-a", "job-dirs", "mine")
    assert job_services.submit_job(project, training_body("mine", jobDir=str(own)), actor=admin)


def test_a_batch_output_path_cannot_point_into_another_projects_area(project, other_project, admin):
    own_model = area("project-a", "models-in", "census")
    theirs = area("project-b", "batch-out", "scores")
    mine = area("project-a", "batch-in", "scores")
    refused = violations(
        rest_post(
            admin,
            "/jobs",
            {
                "jobId": "batch_1",
                "predictionInput": {
                    "dataFormat": "JSON",
                    "region": "us-central1",
                    "uri": str(own_model),
                    "runtimeVersion": "2.11",
                    "inputPaths": [str(mine / "*.json")],
                    "outputPath": str(theirs),
                },
            },
        )
    )
    assert [v["field"] for v in refused] == ["job.prediction_input.output_path"]
    assert DENIED in refused[0]["description"]
    assert not Job.objects.exists()


def test_the_deploy_page_of_a_job_dir_at_the_storage_root_lists_no_other_projects_folders(
    project, other_project, admin
):
    theirs = area("project-b", "job-dirs", "secret_model")
    theirs.mkdir(parents=True)
    (theirs / "model.joblib").write_bytes(b"their model")
    mine = area("project-a", "job-dirs", "my_model")
    mine.mkdir(parents=True)
    (mine / "model.joblib").write_bytes(b"my model")
    Job.objects.create(
        project=project,
        job_id="rooted",
        state=JobState.SUCCEEDED,
        training_input=training_body("rooted", jobDir=str(settings.STORAGE_DIR))["trainingInput"],
    )
    page = signed_in(admin).get("/projects/project-a/models/deploy-from-job/?job=rooted").content.decode()
    assert str(theirs) not in page and "project-b" not in page
    own = Job.objects.create(
        project=project,
        job_id="own",
        state=JobState.SUCCEEDED,
        training_input=training_body("own", jobDir=str(mine.parent))["trainingInput"],
    )
    page = signed_in(admin).get(f"/projects/project-a/models/deploy-from-job/?job={own.job_id}").content.decode()
    assert str(mine) in page


def test_a_shared_root_is_open_to_every_project(project, admin, settings, tmp_path):
    shared = (tmp_path / "shared").resolve()
    settings.STORAGE_ROOTS = [settings.STORAGE_DIR, shared]
    package = build_package(shared / "pkgs", {"trainer/task.py": "print('shared')\n"})
    job = job_services.submit_job(
        project, training_body("shared_pkg", packageUris=[str(package)], jobDir=str(shared / "out")), actor=admin
    )
    assert job.training_input["packageUris"] == [str(package)]
