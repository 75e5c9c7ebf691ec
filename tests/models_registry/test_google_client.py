"""The official google-api-python-client, unchanged, for models, versions, operations and predict."""

from __future__ import annotations

import time

import pytest
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from aiconsole.tokens import create_token


@pytest.fixture
def ml(live_server, admin, serving):
    _, raw = create_token(admin)
    return discovery.build(
        "ml",
        "v1",
        credentials=Credentials(token=raw),
        cache_discovery=False,
        client_options={"api_endpoint": live_server.url},
    )


def wait(ml, operation: dict) -> dict:
    deadline = time.monotonic() + 120
    while not operation.get("done"):
        assert time.monotonic() < deadline, operation
        time.sleep(0.05)
        operation = ml.projects().operations().get(name=operation["name"]).execute()
    return operation


@pytest.mark.slow
def test_models_versions_and_predictions_through_the_google_client(ml, project, trained):
    models = ml.projects().models()
    created = models.create(parent="projects/project-a", body={"name": "census", "regions": ["us-central1"]}).execute()
    assert created["name"] == "projects/project-a/models/census" and created["etag"]
    assert models.get(name="projects/project-a/models/census").execute()["regions"] == ["us-central1"]
    assert [m["name"] for m in models.list(parent="projects/project-a").execute()["models"]] == [created["name"]]

    versions = models.versions()
    operation = versions.create(
        parent=created["name"],
        body={
            "name": "v1",
            "deploymentUri": trained["sklearn"],
            "runtimeVersion": "2.11",
            "pythonVersion": "3.7",
            "framework": "SCIKIT_LEARN",
        },
    ).execute()
    assert operation["name"].startswith("projects/project-a/operations/create_census_v1-")
    assert operation["metadata"]["operationType"] == "CREATE_VERSION"
    done = wait(ml, operation)
    assert done["response"]["state"] == "READY" and done["response"]["isDefault"]

    answer = ml.projects().predict(name=created["name"], body={"instances": trained["probe"]}).execute()
    assert answer == {"predictions": trained["expected"]["sklearn"]}
    by_version = (
        ml.projects().predict(name=f"{created['name']}/versions/v1", body={"instances": trained["probe"][:1]}).execute()
    )
    assert by_version["predictions"] == trained["expected"]["sklearn"][:1]

    wait(
        ml, versions.create(parent=created["name"], body={"name": "v2", "deploymentUri": trained["xgboost"]}).execute()
    )
    listed = versions.list(parent=created["name"]).execute()["versions"]
    assert {v["name"].rsplit("/", 1)[1]: v["state"] for v in listed} == {"v1": "READY", "v2": "READY"}
    default = versions.setDefault(name=f"{created['name']}/versions/v2", body={}).execute()
    assert default["isDefault"] is True
    assert models.get(name=created["name"]).execute()["defaultVersion"]["name"].endswith("/v2")

    with pytest.raises(HttpError) as refused:
        versions.delete(name=f"{created['name']}/versions/v2").execute()
    assert refused.value.resp.status == 400 and "default version" in refused.value.reason
    assert wait(ml, versions.delete(name=f"{created['name']}/versions/v1").execute())["done"]
    assert wait(ml, versions.delete(name=f"{created['name']}/versions/v2").execute())["done"]
    assert wait(ml, models.delete(name=created["name"]).execute())["done"]
    assert models.list(parent="projects/project-a").execute() == {}


def test_prediction_errors_reach_the_google_client_as_http_errors(ml, project, admin, trained):
    from models_registry import services
    from tests.helpers.models import deploy

    deploy(services.create_model(project, {"name": "census"}, actor=admin), "v1", trained["linear"], admin)
    with pytest.raises(HttpError) as failed:
        ml.projects().predict(name="projects/project-a/models/census", body={"instances": [[1, 2]]}).execute()
    assert failed.value.resp.status == 400 and b"Prediction failed" in failed.value.content
    with pytest.raises(HttpError) as missing:
        ml.projects().predict(name="projects/project-a/models/nope", body={"instances": [[1]]}).execute()
    assert missing.value.resp.status == 404


def test_model_iam_policies_through_the_google_client(ml, project, admin, trained):
    from tests.helpers.identity import make_user

    models = ml.projects().models()
    models.create(parent="projects/project-a", body={"name": "shared"}).execute()
    policy = models.getIamPolicy(resource="projects/project-a/models/shared").execute()
    assert policy["bindings"] == [{"role": "roles/ml.modelOwner", "members": ["user:alice_admin"]}]
    make_user("uma_user")
    policy["bindings"].append({"role": "roles/ml.modelUser", "members": ["user:uma_user"]})
    changed = models.setIamPolicy(resource="projects/project-a/models/shared", body={"policy": policy}).execute()
    assert {b["role"] for b in changed["bindings"]} == {"roles/ml.modelOwner", "roles/ml.modelUser"}
    held = models.testIamPermissions(
        resource="projects/project-a/models/shared",
        body={"permissions": ["ml.models.predict", "ml.versions.delete", "ml.models.setIamPolicy"]},
    ).execute()
    assert set(held["permissions"]) == {"ml.models.predict", "ml.versions.delete", "ml.models.setIamPolicy"}
    with pytest.raises(HttpError) as refused:
        models.setIamPolicy(
            resource="projects/project-a/models/shared",
            body={"policy": {"bindings": [{"role": "roles/ml.admin", "members": ["user:uma_user"]}]}},
        ).execute()
    assert refused.value.resp.status == 400
