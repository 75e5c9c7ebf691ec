"""The REST surface in the v1 wire format: names, empty lists, paging, operations, IAM, errors."""

from __future__ import annotations

import json

import pytest
from django.test import Client

from models_registry import services
from models_registry.models import Operation, Version
from tests.helpers.identity import bearer, make_user

BASE = "/v1/projects/project-a"


@pytest.fixture
def api(admin):
    return Client(**bearer(admin))


def post(client, path, body=None, **extra):
    return client.post(
        BASE + path, json.dumps(body if body is not None else {}), content_type="application/json", **extra
    )


def test_an_empty_model_list_is_an_empty_object(api, project):
    assert api.get(BASE + "/models").json() == {}


def test_create_get_and_list_models_with_paging(api, project):
    for index in range(25):
        assert post(api, "/models", {"name": f"m{index:02d}"}).status_code == 200
    first = api.get(BASE + "/models", {"pageSize": 10}).json()
    assert len(first["models"]) == 10 and first["models"][0]["name"] == "projects/project-a/models/m24"
    second = api.get(BASE + "/models", {"pageSize": 10, "pageToken": first["nextPageToken"]}).json()
    assert second["models"][0]["name"] == "projects/project-a/models/m14"
    assert api.get(BASE + "/models/m03").json()["name"] == "projects/project-a/models/m03"
    assert api.get(BASE + "/models", {"filter": "name:m0*"}).json()["models"][-1]["name"].endswith("/m00")


def test_duplicate_and_invalid_models_get_google_errors(api, project):
    post(api, "/models", {"name": "census"})
    duplicate = post(api, "/models", {"name": "census"})
    assert duplicate.status_code == 409 and duplicate.json()["error"]["status"] == "ALREADY_EXISTS"
    invalid = post(api, "/models", {"name": "bad-name"})
    assert invalid.status_code == 400
    assert invalid.json()["error"]["details"][0]["fieldViolations"][0]["field"] == "model.name"
    assert api.get(BASE + "/models/nope").status_code == 404


def test_versions_are_created_through_operations(api, project, admin):
    post(api, "/models", {"name": "census"})
    operation = post(api, "/models/census/versions", {"name": "v1", "deploymentUri": "gs://bucket/census/"}).json()
    assert operation["metadata"]["version"]["state"] == "CREATING" and "done" not in operation
    fetched = api.get("/v1/" + operation["name"]).json()
    assert fetched["name"] == operation["name"]
    version = api.get(BASE + "/models/census/versions/v1").json()
    assert version["name"] == "projects/project-a/models/census/versions/v1"
    assert version["state"] == "CREATING" and version["isDefault"] is True
    assert api.get(BASE + "/models/census").json()["defaultVersion"]["name"].endswith("/versions/v1")
    listed = api.get(BASE + "/operations").json()["operations"]
    assert [o["name"] for o in listed] == [operation["name"]]
    cancelled = post(api, "/operations/" + operation["name"].rsplit("/", 1)[1] + ":cancel")
    assert cancelled.status_code == 200 and cancelled.json() == {}
    assert Operation.objects.get().cancellation_requested


def test_patch_and_delete_answer_with_operations(api, project, admin):
    post(api, "/models", {"name": "census"})
    patched = api.patch(
        BASE + "/models/census?updateMask=description",
        json.dumps({"description": "d"}),
        content_type="application/json",
    ).json()
    assert patched["done"] and patched["response"]["description"] == "d"
    assert patched["metadata"]["operationType"] == "UPDATE_MODEL"
    deleted = api.delete(BASE + "/models/census").json()
    assert deleted["done"] and deleted["response"] == {"@type": "type.googleapis.com/google.protobuf.Empty"}


def test_predicting_without_a_default_version(api, project):
    post(api, "/models", {"name": "census"})
    refused = post(api, "/models/census:predict", {"instances": [[1]]})
    assert refused.status_code == 400 and refused.json()["error"]["status"] == "FAILED_PRECONDITION"
    assert post(api, "/models/nope:predict", {"instances": [[1]]}).status_code == 404
    assert post(api, "/models/census/versions/v9:predict", {"instances": [[1]]}).status_code == 404
    assert api.get(BASE + "/models/census:predict").status_code == 405


def test_the_console_session_may_predict_with_its_csrf_token(project, admin):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)
    post(Client(**bearer(admin)), "/models", {"name": "census"})
    refused = post(client, "/models/census:predict", {"instances": [[1]]})
    assert refused.status_code == 403 and "CSRF" in refused.json()["error"]["message"]


def test_model_iam_endpoints(api, project, admin, outsider):
    post(api, "/models", {"name": "census"})
    policy = api.get(BASE + "/models/census:getIamPolicy").json()
    assert policy["bindings"][0]["role"] == "roles/ml.modelOwner"
    make_user("uma")
    body = {"policy": {"bindings": [{"role": "roles/ml.modelUser", "members": ["user:uma"]}], "etag": policy["etag"]}}
    assert post(api, "/models/census:setIamPolicy", body).json()["bindings"][0]["members"] == ["user:uma"]
    stale = post(api, "/models/census:setIamPolicy", body)
    assert stale.status_code == 409
    missing = post(api, "/models/nope:testIamPermissions", {"permissions": ["ml.models.get"]})
    assert missing.status_code == 200 and missing.json() == {}
    outside = Client(**bearer(outsider))
    assert outside.get(BASE + "/models/census:getIamPolicy").status_code == 404


def test_a_developer_cannot_create_versions_but_may_read_them(project, admin, developer):
    post(Client(**bearer(admin)), "/models", {"name": "census"})
    services.create_version(
        services.find_model(project, "census", actor=admin),
        {"name": "v1", "deploymentUri": "gs://bucket/m/"},
        actor=admin,
    )
    client = Client(**bearer(developer))
    refused = post(client, "/models/census/versions", {"name": "v2", "deploymentUri": "gs://bucket/m/"})
    assert refused.status_code == 403 and refused.json()["error"]["status"] == "PERMISSION_DENIED"
    assert client.get(BASE + "/models/census/versions").json()["versions"][0]["name"].endswith("/v1")
    assert Version.objects.count() == 1
