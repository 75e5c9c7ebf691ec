"""Vertex AI's models, endpoints and online prediction over the registry: the wire shapes and
refusals over REST, real models served by the runtime's framework servers, and the Vertex SDK
itself, unchanged (``Model.upload`` → ``deploy`` → ``Endpoint.predict``), against a live console."""

from __future__ import annotations

import json

import pytest

from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from bench.support.waiting import wait_for
from models_registry.models import Model, Version, VersionState

BASE = "/v1/projects/project-a/locations/us-central1"
SKLEARN = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest"
XGBOOST = "us-docker.pkg.dev/vertex-ai/prediction/xgboost-cpu.1-7:latest"
ENUMS = "?%24alt=json%3Benum-encoding%3Dint"


@pytest.fixture
def api(client, admin):
    _, raw = create_token(admin)

    def call(method: str, path: str, body=None, user=None):
        token = raw if user is None else create_token(user)[1]
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
        if body is not None:
            kwargs.update(data=json.dumps(body), content_type="application/json")
        response = getattr(client, method.lower())(path, **kwargs)
        return response.status_code, (response.json() if response.content else None)

    return call


def _upload(api, artifacts: str, image: str = SKLEARN, name: str = "census", **extra) -> dict:
    model = {"displayName": name, "artifactUri": artifacts, "containerSpec": {"imageUri": image}}
    model.update(extra.pop("model", {}))
    status, operation = api("POST", f"{BASE}/models:upload{ENUMS}", {"model": model, **extra})
    assert status == 200, operation
    return operation


def _finished(api, operation: dict) -> dict:
    def done():
        _, polled = api("GET", f"/v1/{operation['name']}")
        return polled if polled["done"] else None

    return wait_for(done, 120, message=f"operation {operation['name']} to finish")


def test_an_upload_ends_with_the_model_once_its_version_serves(serving, api, trained, project):
    operation = _upload(api, trained["sklearn"], model={"labels": {"team": "ml"}, "versionDescription": "first"})
    assert operation["metadata"]["@type"].endswith("UploadModelOperationMetadata")
    finished = _finished(api, operation)
    assert "error" not in finished, finished
    response = finished["response"]
    assert response["@type"].endswith("UploadModelResponse") and response["modelVersionId"] == "1"
    model_id = response["model"].rsplit("/", 1)[1]

    # The same model v1 sees, with the same roles: a registry model with a READY version.
    registered = Model.objects.get(vertex_id=model_id)
    assert registered.name == "census" and registered.default_version.state == VersionState.READY
    assert registered.default_version.framework == "SCIKIT_LEARN"
    status, v1 = api("GET", "/v1/projects/project-a/models/census")
    assert status == 200 and v1["defaultVersion"]["state"] == "READY"

    status, got = api("GET", f"/v1/{response['model']}{ENUMS}")
    assert status == 200, got
    assert got["displayName"] == "census" and got["versionId"] == "1" and got["versionAliases"] == ["default"]
    assert got["containerSpec"]["imageUri"] == SKLEARN and got["artifactUri"] == trained["sklearn"]
    assert got["labels"] == {"team": "ml"} and got["versionDescription"] == "first"
    assert got["supportedDeploymentResourcesTypes"] == ["DEDICATED_RESOURCES"]

    # A second version of the same model, with an alias: addressed by number and by alias.
    second = _finished(
        api,
        _upload(api, trained["linear"], parentModel=response["model"], model={"versionAliases": ["challenger"]}),
    )
    assert second["response"]["modelVersionId"] == "2"
    assert api("GET", f"/v1/{response['model']}@2")[1]["versionAliases"] == ["challenger"]
    assert api("GET", f"/v1/{response['model']}@challenger")[1]["versionId"] == "2"
    assert api("GET", f"/v1/{response['model']}")[1]["versionId"] == "1"  # the default stays
    _, versions = api("GET", f"/v1/{response['model']}:listVersions")
    assert [m["versionId"] for m in versions["models"]] == ["2", "1"]
    _, listed = api("GET", f'{BASE}/models?filter=display_name="census"')
    assert [m["name"] for m in listed["models"]] == [response["model"]]
    assert api("GET", f'{BASE}/models?filter=labels.team="other"')[1] == {}
    assert AuditEntry.objects.filter(method_name="google.cloud.aiplatform.v1.ModelService.UploadModel").count() == 2


def test_an_upload_that_cannot_serve_is_refused_on_its_field(api, project, trained):
    status, error = api(
        "POST",
        f"{BASE}/models:upload",
        {"model": {"displayName": "x", "artifactUri": "/tmp", "containerSpec": {"imageUri": "gcr.io/me/server:1"}}},
    )
    assert status == 400
    [violation] = error["error"]["details"][0]["fieldViolations"]
    assert violation["field"] == "model.container_spec.image_uri"
    assert "cannot run here" in violation["description"] and "aiconsole images load" in violation["description"]
    status, error = api("POST", f"{BASE}/models:upload", {"model": {"containerSpec": {"imageUri": SKLEARN}}})
    fields = {v["field"] for v in error["error"]["details"][0]["fieldViolations"]}
    assert status == 400 and fields == {"model.display_name", "model.artifact_uri"}
    status, error = api(
        "POST",
        f"{BASE}/models:upload",
        {"model": {"displayName": "x", "explanationSpec": {"metadata": {"inputs": {}}}}},
    )
    assert status == 400 and "Explainable AI" in json.dumps(error)
    assert not Model.objects.exists()


def test_a_failed_upload_ends_its_operation_with_the_reason(serving, api, trained, project):
    finished = _finished(api, _upload(api, trained["broken"]))
    assert finished["error"]["code"] == 3 and "Bad model" in finished["error"]["message"]
    assert Version.objects.get().state == VersionState.FAILED  # kept, with its reason, on the model's page


def test_endpoints_split_traffic_between_deployed_versions_and_predict_as_vertex_answers(
    serving, api, trained, project, viewer, outsider
):
    project.data_access_logs = True  # predictions are Data Access entries, kept when the project asks
    project.save(update_fields=["data_access_logs"])
    first = _finished(api, _upload(api, trained["sklearn"]))["response"]["model"]
    second = _finished(api, _upload(api, trained["linear"], parentModel=first))["response"]["model"]
    status, created = api("POST", f"{BASE}/endpoints", {"displayName": "census-endpoint"})
    assert status == 200 and created["done"], created
    endpoint = created["response"]["name"]
    deploy = {
        "deployedModel": {
            "model": f"{first}@1",
            "dedicatedResources": {"machineSpec": {"machineType": "n1-standard-2"}, "minReplicaCount": 1},
        },
        "trafficSplit": {"0": 100},
    }
    status, deployed = api("POST", f"/v1/{endpoint}:deployModel", deploy)
    assert status == 200 and deployed["done"], deployed
    first_id = deployed["response"]["deployedModel"]["id"]

    status, answer = api("POST", f"/v1/{endpoint}:predict", {"instances": trained["probe"]})
    assert status == 200, answer
    assert answer["predictions"] == trained["expected"]["sklearn"]
    assert answer["deployedModelId"] == first_id and answer["model"] == first and answer["modelVersionId"] == "1"
    assert answer["modelDisplayName"] == "census"

    # Version 2 takes half the traffic: both answer over a bounded number of requests.
    half = {"deployedModel": {"model": f"{second}@2"}, "trafficSplit": {"0": 50, first_id: 50}}
    second_id = api("POST", f"/v1/{endpoint}:deployModel", half)[1]["response"]["deployedModel"]["id"]
    _, described = api("GET", f"/v1/{endpoint}")
    assert described["trafficSplit"] == {first_id: 50, second_id: 50}
    assert {d["modelVersionId"] for d in described["deployedModels"]} == {"1", "2"}
    seen = {
        api("POST", f"/v1/{endpoint}:predict", {"instances": trained["probe"]})[1]["deployedModelId"] for _ in range(40)
    }
    assert seen == {first_id, second_id}

    # Who may do what: a viewer reads but neither deploys nor predicts; an outsider sees nothing.
    assert api("GET", f"/v1/{endpoint}", user=viewer)[0] == 200
    assert api("POST", f"/v1/{endpoint}:deployModel", half, user=viewer)[0] == 403
    assert api("POST", f"/v1/{endpoint}:predict", {"instances": trained["probe"]}, user=viewer)[0] == 403
    assert api("GET", f"/v1/{endpoint}", user=outsider)[0] == 404
    assert api("POST", f"/v1/{endpoint}:predict", {"instances": []}, user=outsider)[0] == 404

    # What is deployed cannot be deleted; undeploying gives its share back.
    status, error = api("DELETE", f"/v1/{first}")
    assert status == 400 and endpoint in error["error"]["message"]
    assert api("DELETE", f"/v1/{endpoint}")[0] == 400
    status, _ = api(
        "POST", f"/v1/{endpoint}:undeployModel", {"deployedModelId": second_id, "trafficSplit": {first_id: 100}}
    )
    assert status == 200
    assert api("GET", f"/v1/{endpoint}")[1]["trafficSplit"] == {first_id: 100}
    api("POST", f"/v1/{endpoint}:undeployModel", {"deployedModelId": first_id})
    assert api("DELETE", f"/v1/{endpoint}")[1]["done"] is True
    assert api("DELETE", f"/v1/{first}")[1]["done"] is True
    assert not Model.objects.exists() and not Version.objects.exists()
    predicted = AuditEntry.objects.filter(method_name="google.cloud.aiplatform.v1.PredictionService.Predict")
    assert predicted.filter(granted=True).count() == 41 and predicted.filter(granted=False).count() == 1


def test_bad_predict_bodies_and_unserved_methods_say_so(serving, api, trained, project):
    first = _finished(api, _upload(api, trained["sklearn"]))["response"]["model"]
    endpoint = api("POST", f"{BASE}/endpoints", {"displayName": "e"})[1]["response"]["name"]
    status, error = api("POST", f"/v1/{endpoint}:predict", {"instances": trained["probe"]})
    assert status == 400 and "no deployed model" in error["error"]["message"]
    deployed = api(
        "POST", f"/v1/{endpoint}:deployModel", {"deployedModel": {"model": first}, "trafficSplit": {"0": 100}}
    )
    deployed_id = deployed[1]["response"]["deployedModel"]["id"]
    lopsided = {"deployedModel": {"model": first}, "trafficSplit": {"0": 150, deployed_id: -50}}
    status, error = api("POST", f"/v1/{endpoint}:deployModel", lopsided)
    assert status == 400 and "percentages from 0 to 100" in error["error"]["message"]
    status, error = api("POST", f"/v1/{endpoint}:predict", {"rows": []})
    assert status == 400 and error["error"]["details"][0]["fieldViolations"][0]["field"] == "instances"
    status, error = api("POST", f"/v1/{endpoint}:predict", {"instances": [["not", "numbers"]]})
    assert status == 400 and error["error"]["status"] in ("FAILED_PRECONDITION", "INVALID_ARGUMENT")
    status, error = api("POST", f"/v1/{endpoint}:deployModel", {"deployedModel": {"model": f"{BASE}/models/404"}})
    assert status == 400 and "does not exist" in json.dumps(error)
    status, error = api("POST", f"/v1/{first}:export", {})
    assert status == 501 and "models.export" in error["error"]["message"]


# --- the SDK, unchanged, against a live console ------------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_the_sdk_uploads_deploys_and_predicts_unchanged(serving, live_server, admin, project, trained, gcs_emulator):
    """A notebook's serving cells as written for Vertex AI: ``Model.upload`` from a local folder
    (the SDK stages it in the bucket), ``deploy``, ``predict``, then the clean-up cells."""
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    gcs_emulator.make_bucket("serving-staging")
    aiplatform.init(
        project="project-a",
        location="us-central1",
        api_endpoint=live_server.url,
        api_transport="rest",
        credentials=Credentials(token=create_token(admin)[1]),
        staging_bucket="gs://serving-staging",
    )
    model = aiplatform.Model.upload(
        display_name="census-sdk", artifact_uri=trained["sklearn"], serving_container_image_uri=SKLEARN
    )
    assert model.version_id == "1" and model.uri.startswith("gs://serving-staging/")
    assert Version.objects.get(model__vertex_id=model.name).state == VersionState.READY

    endpoint = model.deploy(machine_type="n1-standard-4", min_replica_count=1)
    assert endpoint.display_name == "census-sdk_endpoint"
    prediction = endpoint.predict(instances=trained["probe"])
    assert prediction.predictions == trained["expected"]["sklearn"]
    assert prediction.model_resource_name == model.resource_name and prediction.model_version_id == "1"
    assert [m.id for m in endpoint.list_models()] == [prediction.deployed_model_id]
    assert [e.resource_name for e in aiplatform.Endpoint.list()] == [endpoint.resource_name]
    assert [m.resource_name for m in aiplatform.Model.list(filter='display_name="census-sdk"')] == [model.resource_name]

    endpoint.undeploy_all()
    endpoint.delete()
    model.delete()
    assert not Model.objects.exists()


@pytest.mark.executor
@pytest.mark.django_db(transaction=True)
def test_the_sdks_batch_predict_runs_on_the_engine_and_writes_vertex_files(
    serving, executor, live_server, client, admin, project, trained, gcs_emulator
):
    """``model.batch_predict`` (sync) as a notebook calls it, then reading ``iter_outputs()``."""
    from google.cloud import aiplatform
    from google.oauth2.credentials import Credentials

    from jobs.models import Job, JobState

    gcs_emulator.make_bucket("batch-data")
    lines = "".join(json.dumps(instance) + "\n" for instance in trained["probe"])
    source = gcs_emulator.upload("batch-data", "input/instances.jsonl", lines.encode())
    aiplatform.init(
        project="project-a",
        location="us-central1",
        api_endpoint=live_server.url,
        api_transport="rest",
        credentials=Credentials(token=create_token(admin)[1]),
    )
    model = aiplatform.Model.upload(
        display_name="batch-model", artifact_uri=trained["sklearn"], serving_container_image_uri=SKLEARN
    )
    job = model.batch_predict(
        job_display_name="nightly-scores",
        gcs_source=source,
        gcs_destination_prefix="gs://batch-data/output",
        instances_format="jsonl",
        machine_type="n1-standard-2",
        starting_replica_count=1,
        max_replica_count=1,
        sync=True,
    )
    assert job.state.name == "JOB_STATE_SUCCEEDED"
    assert job.output_info.gcs_output_directory.startswith("gs://batch-data/output/prediction-batch-model-")
    assert job.completion_stats.successful_count == len(trained["probe"])
    outputs = {blob.name.rsplit("/", 1)[1]: blob for blob in job.iter_outputs()}
    assert "predictions_00001.jsonl" in outputs
    rows = [json.loads(line) for line in outputs["predictions_00001.jsonl"].download_as_text().splitlines()]
    assert [row["prediction"] for row in rows] == trained["expected"]["sklearn"]
    assert [row["instance"] for row in rows] == trained["probe"]
    engine = Job.objects.get(vertex__vertex_id=job.name)
    assert engine.state == JobState.SUCCEEDED and engine.prediction_input["versionName"].endswith("/versions/v1")
    assert [j.resource_name for j in aiplatform.BatchPredictionJob.list()] == [job.resource_name]
    client.force_login(admin)  # the console's page names it as Vertex does, with its REST body
    page = client.get(f"/projects/project-a/jobs/{engine.job_id}/").content.decode()
    assert "Vertex AI BatchPredictionJob" in page and job.resource_name in page


def test_a_batch_prediction_job_is_refused_on_its_fields(api, project):
    body = {
        "displayName": "scores",
        "model": f"{BASE}/models/123".removeprefix("/v1/"),
        "inputConfig": {"instancesFormat": "bigquery", "bigquerySource": {"inputUri": "bq://p.d.t"}},
        "outputConfig": {"predictionsFormat": "jsonl"},
    }
    status, error = api("POST", f"{BASE}/batchPredictionJobs", body)
    assert status == 400
    fields = {v["field"] for v in error["error"]["details"][0]["fieldViolations"]}
    assert "batch_prediction_job.input_config.bigquery_source" in fields
    body["inputConfig"] = {"instancesFormat": "csv", "gcsSource": {"uris": ["gs://b/in.csv"]}}
    status, error = api("POST", f"{BASE}/batchPredictionJobs", body)
    fields = {v["field"] for v in error["error"]["details"][0]["fieldViolations"]}
    assert fields == {
        "batch_prediction_job.model",
        "batch_prediction_job.input_config.instances_format",
        "batch_prediction_job.output_config.gcs_destination.output_uri_prefix",
    }


# A serving container of the user's own, as Vertex runs one: it answers AIP_HEALTH_ROUTE and
# AIP_PREDICT_ROUTE on AIP_HTTP_PORT, with the model read from AIP_STORAGE_URI's mount.
SERVER = r"""
mkdir -p /tmp/www/cgi-bin
model_dir="$(echo "$AIP_STORAGE_URI" | sed 's|^gs://|/gcs/|')"
printf '#!/bin/sh\nprintf "Content-Type: application/json\\r\\n\\r\\n{}"\n' > /tmp/www/cgi-bin/health
{
  echo '#!/bin/sh'
  echo 'body=$(head -c "$CONTENT_LENGTH")'
  echo "model=\$(cat $model_dir/model.txt)"
  echo "me=$(id -u)"
  echo 'printf "Content-Type: application/json\r\n\r\n"'
  echo 'printf "{\"predictions\": [\"%s as %s\"], \"asked\": %s}" "$model" "$me" "$body"'
} > /tmp/www/cgi-bin/predict
chmod +x /tmp/www/cgi-bin/health /tmp/www/cgi-bin/predict
echo "serving on $AIP_HTTP_PORT, predict at $AIP_PREDICT_ROUTE, mode $AIP_MODE"
exec httpd -f -p "$AIP_HTTP_PORT" -h /tmp/www
"""
SERVER_APPLETS = ("httpd", "head", "chmod", "sed", "cat", "id")


def _serving_image(engine) -> str:
    import hashlib

    from bench.support import images

    name = "localhost/aic-test/serving:" + hashlib.sha256(SERVER.encode()).hexdigest()[:12]
    if engine.inspect_image(name) is None:
        archive = images.root_archive(SERVER, applets=tuple(dict.fromkeys((*images.APPLETS, *SERVER_APPLETS))))
        engine.call("import", "--change", 'ENTRYPOINT ["/trainer.sh"]', "-", name, input=archive)
    return name


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_a_serving_container_of_ones_own_serves_an_endpoint_under_vertexs_contract(serving, api, project, tmp_path):
    from django.conf import settings

    from tests.helpers.images import require_engine

    name = _serving_image(require_engine())
    artifacts = settings.STORAGE_DIR / "models" / "project-a" / tmp_path.name
    artifacts.mkdir(parents=True)
    (artifacts / "model.txt").write_text("custom-model")
    container = {
        "imageUri": name,
        "predictRoute": "/cgi-bin/predict",
        "healthRoute": "/cgi-bin/health",
        "ports": [{"containerPort": 8085}],
        "env": [{"name": "GREETING", "value": "hello"}],
    }
    finished = _finished(api, _upload(api, str(artifacts), image=name, model={"containerSpec": container}))
    assert "error" not in finished, finished
    model = finished["response"]["model"]
    endpoint = api("POST", f"{BASE}/endpoints", {"displayName": "own"})[1]["response"]["name"]
    api("POST", f"/v1/{endpoint}:deployModel", {"deployedModel": {"model": model}, "trafficSplit": {"0": 100}})
    status, answer = api("POST", f"/v1/{endpoint}:predict", {"instances": [[1, 2]]})
    assert status == 200, answer
    assert answer["predictions"] == ["custom-model as 0"]  # root inside, the project's account outside
    assert answer["modelVersionId"] == "1"
    engine = require_engine()
    [serving_container] = engine.call(
        "ps", "--filter", "label=ai-console.serving", "--format", "{{.Names}}"
    ).split()  # fmt: skip
    log_config = engine.call("inspect", "--format", "{{json .HostConfig.LogConfig}}", serving_container)
    assert json.loads(log_config)["Size"] == "10MB"  # what it prints is kept to its last 10 MB
    batch = {
        "displayName": "b",
        "model": model,
        "inputConfig": {"instancesFormat": "jsonl", "gcsSource": {"uris": ["gs://b/in.jsonl"]}},
        "outputConfig": {"predictionsFormat": "jsonl", "gcsDestination": {"outputUriPrefix": "gs://b/out"}},
    }
    status, error = api("POST", f"{BASE}/batchPredictionJobs", batch)
    assert status == 400 and "served by its own container" in error["error"]["message"]

    # A container that never becomes healthy fails its upload with its own last words.
    broken = dict(container, healthRoute="/cgi-bin/missing", deploymentTimeout="3s")
    failed = _finished(api, _upload(api, str(artifacts), image=name, model={"containerSpec": broken}))
    assert "did not answer /cgi-bin/missing" in failed["error"]["message"]
    assert "serving on 8085, predict at /cgi-bin/predict, mode PREDICTION" in failed["error"]["message"]

    # An image the engine does not have is refused at upload, saying how to bring it.
    missing = {"displayName": "x", "containerSpec": {"imageUri": "gcr.io/me/nope:1"}}
    status, error = api("POST", f"{BASE}/models:upload", {"model": missing})
    assert status == 400 and "never pulled here" in error["error"]["message"]
