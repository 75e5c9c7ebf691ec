"""The rest of the v1 surface: patch, filter, getConfig, locations, operations, uploads, 404s."""

from __future__ import annotations

import json

import pytest

from aiconsole.tokens import create_token
from jobs.models import Job
from models_registry.models import Operation
from tests.helpers.jobs import build_package, submit


@pytest.fixture
def api(client, admin):
    _, raw = create_token(admin)

    def call(method: str, path: str, body=None, **extra):
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}", **extra}
        if body is not None:
            kwargs.update(data=json.dumps(body) if not isinstance(body, bytes) else body,
                          content_type=extra.pop("content_type", "application/json"))
        response = getattr(client, method.lower())(path, **kwargs)
        return response.status_code, (response.json() if response.content else None)

    return call


def test_patch_changes_labels_and_the_etag(api, project, admin):
    job = submit(project, "labelled", admin)
    status, body = api("PATCH", "/v1/projects/project-a/jobs/labelled?updateMask=labels",
                       {"labels": {"team": "ml"}})
    assert status == 200 and body["labels"] == {"team": "ml"}
    assert body["etag"] != job.etag
    assert Job.objects.get(pk=job.pk).labels == {"team": "ml"}


def test_patch_with_a_stale_etag_is_aborted(api, project, admin):
    job = submit(project, "stale", admin)
    api("PATCH", "/v1/projects/project-a/jobs/stale?updateMask=labels", {"labels": {"a": "1"}})
    status, body = api("PATCH", "/v1/projects/project-a/jobs/stale?updateMask=labels,etag",
                       {"labels": {"a": "2"}, "etag": job.etag})
    assert status == 409 and body["error"]["status"] == "ABORTED"
    assert Job.objects.get(pk=job.pk).labels == {"a": "1"}


@pytest.mark.parametrize("mask, labels, field", [
    ("", {"a": "1"}, "update_mask"),
    ("trainingInput", {"a": "1"}, "update_mask"),
    ("labels", {"Bad Key": "1"}, "job.labels"),
])
def test_patch_rejects_what_cannot_change(api, project, admin, mask, labels, field):
    submit(project, "fixed", admin)
    status, body = api("PATCH", f"/v1/projects/project-a/jobs/fixed?updateMask={mask}", {"labels": labels})
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["details"][0]["fieldViolations"][0]["field"].startswith(field)


def test_viewer_cannot_patch(client, project, admin, viewer):
    submit(project, "mine", admin)
    _, raw = create_token(viewer)
    response = client.patch("/v1/projects/project-a/jobs/mine?updateMask=labels", data='{"labels": {}}',
                            content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 403


def test_list_filter_is_applied_and_a_bad_filter_is_an_invalid_argument(api, project, admin):
    for job_id in ("census_1", "census_2", "rnn_1"):
        submit(project, job_id, admin)
    status, body = api("GET", "/v1/projects/project-a/jobs?filter=jobId:census*")
    assert status == 200 and [j["jobId"] for j in body["jobs"]] == ["census_2", "census_1"]
    status, body = api("GET", "/v1/projects/project-a/jobs?filter=owner:me")
    assert status == 400 and "unknown field 'owner'" in body["error"]["message"]


def test_a_tampered_page_token_is_rejected(api, project, admin):
    status, body = api("GET", "/v1/projects/project-a/jobs?pageToken=am9iOjE")
    assert status == 400 and body["error"]["message"] == "The page token is not valid."


def test_get_config_names_the_service_account(api, project):
    status, body = api("GET", "/v1/projects/project-a:getConfig")
    number = project.project_number
    assert status == 200
    assert body["serviceAccount"] == f"service-{number}@cloud-ml.google.com.iam.gserviceaccount.com"
    assert body["serviceAccountProject"] == str(number)


def test_locations_list_pages_through_every_region_and_get_shows_capabilities(api, project):
    names, token = [], ""
    while True:
        status, body = api("GET", f"/v1/projects/project-a/locations?pageSize=5&pageToken={token}")
        assert status == 200
        names += [loc["name"] for loc in body["locations"]]
        token = body.get("nextPageToken")
        if not token:
            break
    assert len(names) == 13 and "projects/project-a/locations/us-central1" in names
    status, body = api("GET", "/v1/projects/project-a/locations/us-central1")
    types = {c["type"] for c in body["capabilities"]}
    assert status == 200 and "TRAINING" in types
    assert api("GET", "/v1/projects/project-a/locations/mars-north1")[0] == 404


def test_operations_get_list_and_cancel(api, project):
    Operation.objects.create(project=project, operation_id="create_m_v1-1", operation_type="CREATE_VERSION",
                             model_name="projects/project-a/models/m")
    status, body = api("GET", "/v1/projects/project-a/operations")
    assert status == 200 and body["operations"][0]["name"] == "projects/project-a/operations/create_m_v1-1"
    assert "done" not in body["operations"][0]
    assert api("POST", "/v1/projects/project-a/operations/create_m_v1-1:cancel", {})[1] == {}
    status, body = api("GET", "/v1/projects/project-a/operations/create_m_v1-1")
    assert body["metadata"]["isCancellationRequested"] is True
    assert api("GET", "/v1/projects/project-a/operations/nope")[0] == 404


def test_empty_operations_list_is_an_empty_object(api, project):
    assert api("GET", "/v1/projects/project-a/operations") == (200, {})


def test_upload_stores_a_checked_package_to_submit_with(api, project, tmp_path, settings):
    package = build_package(tmp_path / "pkg", {"trainer/task.py": "print('hi')"})
    status, body = api("POST", f"/upload/v1/projects/project-a/packages?name={package.name}",
                       package.read_bytes(), content_type="application/octet-stream")
    assert status == 200, body
    assert body["uri"].startswith(str(settings.STORAGE_DIR)) and body["name"] == "trainer-0.1.tar.gz"
    assert "trainer.task" in body["modules"] and body["sizeBytes"] == str(package.stat().st_size)


def test_upload_of_something_that_is_not_a_package_is_refused_and_not_kept(api, project, settings):
    before = set((settings.STORAGE_DIR / "packages").rglob("*"))
    status, body = api("POST", "/upload/v1/projects/project-a/packages?name=trainer-0.1.tar.gz",
                       b"not an archive", content_type="application/octet-stream")
    assert status == 400 and "trainer-0.1.tar.gz" in body["error"]["message"]
    assert set((settings.STORAGE_DIR / "packages").rglob("*")) == before


def test_unknown_api_paths_answer_in_the_error_envelope(api):
    status, body = api("GET", "/v1/projects/project-a/widgets")
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"


def test_malformed_json_is_an_invalid_argument(api, project):
    status, body = api("POST", "/v1/projects/project-a/jobs", b"{not json", content_type="application/json")
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["message"].startswith("Invalid JSON payload received.")


def test_an_oversized_body_is_refused_and_creates_nothing(api, project, settings):
    padding = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    status, body = api("POST", "/v1/projects/project-a/jobs", {"jobId": "huge", "labels": {"a": padding}})
    assert status == 413 and body["error"]["message"] == "Request payload size exceeds the limit."
    assert not Job.objects.exists()


def test_a_post_to_an_unknown_api_path_gets_the_json_404_not_a_csrf_page(client, project, admin):
    _, raw = create_token(admin)
    response = client.post("/v1/projects/project-a/jobs/a%3Ab:setIamPolicy", data="{}",
                           content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 404 and response.json()["error"]["status"] == "NOT_FOUND"
