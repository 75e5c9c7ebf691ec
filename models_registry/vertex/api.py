"""Vertex AI's REST paths for models, endpoints and prediction (``/v1/projects/P/locations/L/
models…``, ``…/endpoints…``): thin adapters over ``models_registry.vertex.services``, errors in
Google's envelope, enums as numbers when the caller asks (``$alt=json;enum-encoding=int``)."""

from __future__ import annotations

import json

from django.views.decorators.csrf import csrf_exempt
from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts, iam, paging
from aiconsole.errors import FieldViolation, InvalidArgument, ServiceError
from jobs.vertex import schema
from models_registry import api as registry_api
from models_registry.vertex import resources, services


def _enum_ints(request) -> bool:
    return "enum-encoding=int" in request.query_params.get("$alt", "")


def _body(request, field: str) -> dict:
    if not isinstance(request.data, dict):
        raise InvalidArgument(
            f"Invalid JSON payload received. Expected an object at '{field}'.",
            [FieldViolation(field, "Expected a JSON object.")],
        )
    return request.data


def _model(request, resource: dict) -> Response:
    return Response(schema.encode(resource, "Model", enum_ints=_enum_ints(request)))


@api_view(["POST"])
def models_upload(request, project_id, location):
    project = accounts.find_project(project_id, actor=request.user)
    return Response(
        services.upload_model(project, location, _body(request, "upload_model_request"), actor=request.user)
    )


@api_view(["GET"])
def models_collection(request, project_id, location):
    project = accounts.find_project(project_id, actor=request.user)
    models = services.list_models(
        project, location, actor=request.user, filter_text=request.query_params.get("filter", "")
    )
    page, next_token = paging.keyset_page(models, request, f"vertex-models-{location}")
    body: dict = {}
    if page:
        enum_ints = _enum_ints(request)
        body["models"] = [
            schema.encode(resources.model_resource(_with_model(m), location), "Model", enum_ints=enum_ints)
            for m in page
        ]
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)


def _with_model(model):
    version = model.default_version
    version.model = model
    return version


@api_view(["GET", "DELETE"])
def model_item(request, project_id, location, model_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "DELETE":
        return Response(services.delete_model(project, location, model_id, actor=request.user))
    return _model(request, services.get_model(project, location, model_id, actor=request.user))


@api_view(["GET"])
def model_versions(request, project_id, location, model_id):
    project = accounts.find_project(project_id, actor=request.user)
    enum_ints = _enum_ints(request)
    listed = services.list_versions(project, location, model_id, actor=request.user)
    page, next_token = paging.list_page(listed, request, f"vertex-versions-{model_id}")
    body: dict = {"models": [schema.encode(m, "Model", enum_ints=enum_ints) for m in page]} if page else {}
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)


@api_view(["GET", "POST"])
def endpoints_collection(request, project_id, location):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "POST":
        endpoint_id = request.query_params.get("endpointId", "")
        given = _body(request, "endpoint")
        return Response(services.create_endpoint(project, location, given, actor=request.user, endpoint_id=endpoint_id))
    endpoints = services.list_endpoints(
        project, location, actor=request.user, filter_text=request.query_params.get("filter", "")
    )
    page, next_token = paging.keyset_page(endpoints, request, f"vertex-endpoints-{location}")
    body: dict = {"endpoints": [resources.endpoint_resource(e) for e in page]} if page else {}
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)


@api_view(["GET", "DELETE"])
def endpoint_item(request, project_id, location, endpoint_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "DELETE":
        return Response(services.delete_endpoint(project, location, endpoint_id, actor=request.user))
    return Response(services.get_endpoint(project, location, endpoint_id, actor=request.user))


@api_view(["POST"])
def endpoint_deploy(request, project_id, location, endpoint_id):
    project = accounts.find_project(project_id, actor=request.user)
    body = _body(request, "deploy_model_request")
    return Response(services.deploy_model(project, location, endpoint_id, body, actor=request.user))


@api_view(["POST"])
def endpoint_undeploy(request, project_id, location, endpoint_id):
    project = accounts.find_project(project_id, actor=request.user)
    body = _body(request, "undeploy_model_request")
    return Response(services.undeploy_model(project, location, endpoint_id, body, actor=request.user))


@csrf_exempt
def endpoint_predict(request, project_id, location, endpoint_id, raw=False):
    """POST …/endpoints/E:predict and :rawPredict, for a session or a bearer token (a bearer call
    is answered earlier, by ``models_registry.asgi.PredictFront``, when it is mounted)."""
    if request.method != "POST":
        return registry_api.error_answer(
            405, "UNIMPLEMENTED", f"Method {request.method} is not allowed: use POST."
        ).django()
    user, refusal = registry_api.caller(request)
    if refusal is not None:
        return refusal.django()
    body = registry_api.read_body(request)
    if body is None:
        return registry_api.too_large().django()
    return endpoint_answer(user, body, project_id, location, endpoint_id, raw=raw).django()


def endpoint_answer(user, body: bytes, project_id: str, location: str, endpoint_id: str, *, raw: bool = False):
    """What a predict call answers once the caller is known and the body read: the predictions
    with the deployed model that made them (in the body for predict, in headers for both)."""
    try:
        result, deployed = services.predict(project_id, location, endpoint_id, body, actor=user, raw=raw)
    except ServiceError as error:
        return registry_api.error_answer(error.http_status, error.status, error.message, error.details())
    except iam.NotFound as error:
        return registry_api.error_answer(404, "NOT_FOUND", str(error))
    except iam.PermissionDenied as error:
        return registry_api.error_answer(403, "PERMISSION_DENIED", str(error))
    described = resources.deployed_model_resource(deployed)
    if result.status != 200:
        message = json.loads(result.body).get("error", "The model could not answer.")
        return registry_api.error_answer(400, "FAILED_PRECONDITION", str(message))
    payload = result.body
    if not raw:
        answer = json.loads(result.body)
        payload = json.dumps(
            {
                "predictions": answer.get("predictions", []),
                "deployedModelId": deployed.deployed_id,
                "model": described["model"],
                "modelDisplayName": described["displayName"],
                "modelVersionId": described["modelVersionId"],
            }
        ).encode()
    headers = {
        "X-Vertex-AI-Endpoint-Id": endpoint_id,
        "X-Vertex-AI-Deployed-Model-Id": deployed.deployed_id,
        "X-Vertex-AI-Model": described["model"],
        "X-Vertex-AI-Model-Display-Name": described["displayName"],
        "X-Vertex-AI-Model-Version-Id": described["modelVersionId"],
    }
    return registry_api.Answer(200, payload, headers)
