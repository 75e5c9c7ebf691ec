"""The console's submit forms go through the services REST uses: the same authorization, package
inspection and audit entries, whether a job arrives from a form or over the API."""

from __future__ import annotations

import json

from django.core.files.uploadedfile import SimpleUploadedFile
from django.urls import reverse

from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from bench.support.packages import build_package
from jobs.models import Job
from tests.helpers.jobs import PACKAGE, body

SUBMIT_URL = "/projects/project-a/jobs/new/"
CREATE_JOB = "google.cloud.ml.v1.JobService.CreateJob"
UPLOAD_PACKAGE = "aiconsole.PackageService.UploadPackage"
COMPARED = (
    "principal",
    "service_name",
    "method_name",
    "resource_name",
    "permission",
    "granted",
    "status_code",
    "status_message",
    "project_id",
    "request",
    "response",
)


def form_data(**overrides) -> dict:
    data = {
        "job_id": "form_job",
        "package_uris": "",
        "python_module": "trainer.task",
        "args": "",
        "region": "us-central1",
        "runtime_version": "2.11",
        "python_version": "3.7",
        "scale_tier": "BASIC",
        "job_dir": "",
        "labels": "",
        "max_running_time": "",
        "max_wait_time": "",
        "priority": "",
    }
    return {**data, **overrides}


def audited(method: str) -> list[dict]:
    return [
        {name: getattr(entry, name) for name in COMPARED}
        for entry in AuditEntry.objects.filter(method_name=method).order_by("id")
    ]


def rest_upload(client, user, name: str, content: bytes):
    _, raw = create_token(user)
    return client.post(
        f"/upload/v1/projects/project-a/packages?name={name}",
        content,
        content_type="application/octet-stream",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )


def test_a_refused_form_submit_is_audited_like_a_refused_rest_call(client, project, viewer):
    _, raw = create_token(viewer)
    rest = client.post(
        "/v1/projects/project-a/jobs",
        json.dumps(body("by_rest")),
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    client.force_login(viewer)

    form = client.post(SUBMIT_URL, form_data(job_id="by_form", package_uris=PACKAGE))

    assert rest.status_code == form.status_code == 403
    by_rest, by_form = audited(CREATE_JOB)
    assert by_form == by_rest
    assert by_form["granted"] is False and by_form["permission"] == "ml.jobs.create"
    assert not Job.objects.exists()


def test_a_refused_form_submit_with_an_invalid_form_and_an_upload_is_refused_first(
    client, project, viewer, tmp_path, settings
):
    package = build_package(tmp_path / "pkg", {"trainer/task.py": "print('hi')\n"})
    stored_before = set((settings.STORAGE_DIR / "packages").rglob("*"))
    client.force_login(viewer)

    response = client.post(
        SUBMIT_URL,
        {**form_data(job_id="1 bad id"), "package_file": SimpleUploadedFile(package.name, package.read_bytes())},
    )

    assert response.status_code == 403
    assert [entry["granted"] for entry in audited(CREATE_JOB)] == [False]
    assert audited(UPLOAD_PACKAGE) == []
    assert set((settings.STORAGE_DIR / "packages").rglob("*")) == stored_before


def test_a_package_uploaded_in_the_form_is_inspected_and_audited_as_over_rest(client, project, admin, tmp_path):
    package = build_package(tmp_path / "pkg", {"trainer/task.py": "print('hi')\n"})
    assert rest_upload(client, admin, package.name, package.read_bytes()).status_code == 200
    client.force_login(admin)

    response = client.post(
        SUBMIT_URL,
        {**form_data(job_id="uploaded"), "package_file": SimpleUploadedFile(package.name, package.read_bytes())},
    )

    assert response.status_code == 302
    by_rest, by_form = audited(UPLOAD_PACKAGE)
    assert by_form["granted"] is True
    assert by_form["response"]["kind"] == by_rest["response"]["kind"] == "sdist"
    assert "trainer.task" in by_form["response"]["modules"]
    differ = {"response"}  # each upload lands in its own folder
    assert {k: v for k, v in by_form.items() if k not in differ} == {
        k: v for k, v in by_rest.items() if k not in differ
    }
    uri = Job.objects.get(job_id="uploaded").training_input["packageUris"][0]
    assert by_form["response"]["uri"] == uri
    assert [e["granted"] for e in audited(CREATE_JOB)] == [True]


def test_a_file_that_is_not_a_package_is_refused_at_the_field_with_its_name(client, project, admin, settings):
    stored_before = set((settings.STORAGE_DIR / "packages").rglob("*"))
    client.force_login(admin)

    response = client.post(
        SUBMIT_URL,
        {
            **form_data(job_id="not_a_package"),
            "package_file": SimpleUploadedFile("trainer-0.1.tar.gz", b"not an archive"),
        },
    )

    assert response.status_code == 200
    errors = response.context["form"].errors["package_file"]
    assert any("trainer-0.1.tar.gz" in error for error in errors), errors
    rest = rest_upload(client, admin, "trainer-0.1.tar.gz", b"not an archive")
    assert rest.status_code == 400
    assert rest.json()["error"]["message"] in errors
    assert not Job.objects.exists()
    assert set((settings.STORAGE_DIR / "packages").rglob("*")) == stored_before
    assert audited(UPLOAD_PACKAGE) == []  # refused after authorization: nothing was stored


def test_a_non_package_with_another_invalid_field_is_refused_at_the_package_field(client, project, admin):
    client.force_login(admin)

    response = client.post(
        SUBMIT_URL,
        {
            **form_data(job_id="labelled", labels="no equals sign"),
            "package_file": SimpleUploadedFile("trainer-0.1.tar.gz", b"nope"),
        },
    )

    assert response.status_code == 200
    form = response.context["form"]
    assert "key=value" in " ".join(form.errors["labels"])
    assert any("trainer-0.1.tar.gz" in error for error in form.errors["package_file"])
    assert "trainer-0.1.tar.gz" not in form.data.get("package_uris", "")


# --- built-in algorithms ------------------------------------------------------------------------


def builtin_form(**overrides) -> dict:
    return {
        "job_id": "builtin_form",
        "algorithm": "boosted_trees",
        "model_type": "classification",
        "preprocess": "on",
        "region": "us-central1",
        **overrides,
    }


def test_a_csv_uploaded_in_the_builtin_form_is_stored_through_an_audited_service(client, project, developer):
    rows = "\n".join(f"{i % 2},{i},{i * 2}" for i in range(60)) + "\n"
    client.force_login(developer)

    response = client.post(
        reverse("jobs:submit_builtin", args=["project-a"]),
        {**builtin_form(), "data_file": SimpleUploadedFile("rows.csv", rows.encode(), content_type="text/csv")},
    )

    assert response.status_code == 302, response.content.decode()[-2000:]
    (uploaded,) = audited("aiconsole.DataService.UploadDataFile")
    assert uploaded["granted"] is True and uploaded["principal"] == developer.email
    args = Job.objects.get(job_id="builtin_form").training_input["args"]
    assert f"--training_data_path={uploaded['response']['uri']}" in args


def test_a_refused_builtin_submit_is_audited_and_stores_nothing(client, project, viewer):
    client.force_login(viewer)

    response = client.post(
        reverse("jobs:submit_builtin", args=["project-a"]),
        {**builtin_form(), "data_file": SimpleUploadedFile("rows.csv", b"1,2\n", content_type="text/csv")},
    )

    assert response.status_code == 403
    (refused,) = audited(CREATE_JOB)
    assert refused["granted"] is False and refused["principal"] == viewer.email
    assert audited("aiconsole.DataService.UploadDataFile") == []


def test_a_refused_batch_prediction_form_is_audited_like_a_refused_rest_call(client, project, viewer):
    client.force_login(viewer)

    response = client.post(
        "/projects/project-a/models/batch-prediction/",
        {
            "job_id": "batch_by_form",
            "source": "__uri__",
            "uri": "gs://bucket/model/",
            "data_format": "JSON",
            "input_paths": "gs://bucket/in/*",
            "output_path": "gs://bucket/out/",
            "region": "us-central1",
        },
    )

    assert response.status_code == 403
    (refused,) = audited(CREATE_JOB)
    assert refused["granted"] is False and refused["principal"] == viewer.email
    assert not Job.objects.exists()
