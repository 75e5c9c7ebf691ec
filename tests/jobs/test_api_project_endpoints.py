"""The project-level v1 endpoints: getConfig, locations, operations and package uploads."""

from __future__ import annotations

from bench.support.packages import build_package
from models_registry.models import Operation


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
    Operation.objects.create(
        project=project,
        operation_id="create_m_v1-1",
        operation_type="CREATE_VERSION",
        model_name="projects/project-a/models/m",
    )
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
    status, body = api(
        "POST",
        f"/upload/v1/projects/project-a/packages?name={package.name}",
        package.read_bytes(),
        content_type="application/octet-stream",
    )
    assert status == 200, body
    assert body["uri"].startswith(str(settings.STORAGE_DIR)) and body["name"] == "trainer-0.1.tar.gz"
    assert "trainer.task" in body["modules"] and body["sizeBytes"] == str(package.stat().st_size)


def test_upload_of_something_that_is_not_a_package_is_refused_and_not_kept(api, project, settings):
    before = set((settings.STORAGE_DIR / "packages").rglob("*"))
    status, body = api(
        "POST",
        "/upload/v1/projects/project-a/packages?name=trainer-0.1.tar.gz",
        b"not an archive",
        content_type="application/octet-stream",
    )
    assert status == 400 and "trainer-0.1.tar.gz" in body["error"]["message"]
    assert set((settings.STORAGE_DIR / "packages").rglob("*")) == before
