"""REST adapters: projects.models, projects.models.versions, projects.predict, projects.operations.

Thin: parse, call a service, render the v1 wire shape. ``predict`` is a plain Django view rather
than a DRF one: it is the hot path (one call per instance batch a client sends), so it reads the
body once, hands the bytes to the serving process and returns its bytes, and does the bearer /
session authentication itself with the same rules as the rest of the API.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from django.http import HttpResponse
from django.middleware.csrf import CsrfViewMiddleware
from django.views.decorators.csrf import csrf_exempt
from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import iam, iam_api, paging, tokens
from aiconsole.accounts import find_project
from aiconsole.errors import FieldViolation, InvalidArgument, ServiceError
from models_registry import conf, operations, services
from models_registry.models import Model
from models_registry.resources import model_resource, version_resource


def _body(request, what: str) -> dict:
    if not isinstance(request.data, dict):
        raise InvalidArgument(
            f"Invalid JSON payload received. Expected an object at '{what}'.",
            [FieldViolation(what, "Expected a JSON object.")],
        )
    return request.data


def _model(request, project_id: str, model: str) -> Model:
    return services.find_model(find_project(project_id, actor=request.user), model, actor=request.user)


def _page(request, queryset, kind: str, render) -> dict:
    page, next_token = paging.keyset_page(queryset, request, kind)
    body: dict = {kind: [render(item) for item in page]} if page else {}
    if next_token:
        body["nextPageToken"] = next_token
    return body


# --- models ------------------------------------------------------------------------------------------


@api_view(["GET", "POST"])
def models_collection(request, project_id):
    project = find_project(project_id, actor=request.user)
    if request.method == "POST":
        return Response(model_resource(services.create_model(project, _body(request, "model"), actor=request.user)))
    models = services.list_models(project, actor=request.user, filter_text=request.query_params.get("filter", ""))
    return Response(_page(request, models, "models", model_resource))


@api_view(["GET", "PATCH", "DELETE"])
def model_item(request, project_id, model):
    project = find_project(project_id, actor=request.user)
    if request.method == "GET":
        return Response(model_resource(services.get_model(project, model, actor=request.user)))
    found = services.find_model(project, model, actor=request.user)
    if request.method == "DELETE":
        operation = services.delete_model(found, actor=request.user)
    else:
        operation = services.update_model(
            found, _body(request, "model"), request.query_params.get("updateMask", ""), actor=request.user
        )
    return Response(operations.operation_resource(operation))


# --- versions ----------------------------------------------------------------------------------------


@api_view(["GET", "POST"])
def versions_collection(request, project_id, model):
    found = _model(request, project_id, model)
    if request.method == "POST":
        operation = services.create_version(found, _body(request, "version"), actor=request.user)
        return Response(operations.operation_resource(operation))
    versions = services.list_versions(found, actor=request.user, filter_text=request.query_params.get("filter", ""))

    def render(version):
        version.model = found
        return version_resource(version)

    return Response(_page(request, versions, "versions", render))


@api_view(["GET", "PATCH", "DELETE"])
def version_item(request, project_id, model, version):
    found = _model(request, project_id, model)
    if request.method == "GET":
        return Response(version_resource(services.get_version(found, version, actor=request.user)))
    target = services.find_version(found, version)
    if request.method == "DELETE":
        operation = services.delete_version(target, actor=request.user)
    else:
        operation = services.update_version(
            target, _body(request, "version"), request.query_params.get("updateMask", ""), actor=request.user
        )
    return Response(operations.operation_resource(operation))


@api_view(["POST"])
def version_set_default(request, project_id, model, version):
    found = _model(request, project_id, model)
    updated = services.set_default_version(services.find_version(found, version), actor=request.user)
    return Response(version_resource(updated))


# --- IAM on models -------------------------------------------------------------------------------------


@api_view(["GET", "POST"])
def model_get_iam_policy(request, project_id, model):
    return iam_api.get_iam_policy(request, _model(request, project_id, model))


@api_view(["POST"])
def model_set_iam_policy(request, project_id, model):
    return iam_api.set_iam_policy(request, _model(request, project_id, model))


@api_view(["POST"])
def model_test_iam_permissions(request, project_id, model):
    found = Model.objects.select_related("project").filter(project__project_id=project_id, name=model).first()
    return iam_api.held_permissions(request, "model", found)


# --- online prediction ------------------------------------------------------------------------------------


@dataclass
class Answer:
    """An HTTP answer independent of the framework: the Django view and the ASGI front share it."""

    status: int
    body: bytes
    headers: dict[str, str] = field(default_factory=dict)

    def django(self) -> HttpResponse:
        response = HttpResponse(self.body, status=self.status, content_type="application/json")
        for name, value in self.headers.items():
            response[name] = value
        return response


def error_answer(code: int, status: str, message: str, details: list | None = None) -> Answer:
    body = json.dumps({"error": {"code": code, "message": message, "status": status, "details": details or []}})
    headers = {"WWW-Authenticate": 'Bearer realm="aiconsole"'} if code == 401 else {}
    return Answer(code, body.encode(), headers)


UNAUTHENTICATED = (
    "Request is missing required authentication credential. Expected OAuth 2 access token, "
    "login cookie or other valid authentication credential."
)
BAD_TOKEN = (
    "Request had invalid authentication credentials. Expected OAuth 2 access token, login cookie or "
    "other valid authentication credential."
)


def caller(request):
    """(user, refusal): a bearer token as the API takes it, else the signed-in session with CSRF."""
    header = request.META.get("HTTP_AUTHORIZATION", "")
    scheme, _, raw = header.partition(" ")
    if scheme.lower() == "bearer":
        user = tokens.authenticate_bearer(raw)
        return (user, None) if user is not None else (None, error_answer(401, "UNAUTHENTICATED", BAD_TOKEN))
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return None, error_answer(401, "UNAUTHENTICATED", UNAUTHENTICATED)
    refused = CsrfViewMiddleware(lambda r: None).process_view(request, None, (), {})
    if refused is not None:
        return None, error_answer(403, "PERMISSION_DENIED", "CSRF verification failed: send the X-CSRFToken header.")
    return user, None


def too_large() -> Answer:
    return error_answer(
        413, "INVALID_ARGUMENT", f"Request payload size exceeds the limit: {conf.max_request_bytes()} bytes."
    )


def read_body(request) -> bytes | None:
    """The request body, or None when it is over the limit (checked before reading it all)."""
    limit = conf.max_request_bytes()
    try:
        declared = int(request.META.get("CONTENT_LENGTH") or 0)
    except ValueError:
        declared = 0
    if declared > limit:
        return None
    body = request.read(limit + 1)
    return None if len(body) > limit else body


def prediction_answer(user, body: bytes, project_id: str, model: str, version: str | None) -> Answer:
    """What a predict call answers, once the caller is known and the body read."""
    try:
        target_model, target_version = services.prediction_target(project_id, model, version, actor=user)
        result = services.predict(target_model, target_version, body, actor=user)
    except ServiceError as error:
        return error_answer(error.http_status, error.status, error.message, error.details())
    except iam.NotFound as error:
        return error_answer(404, "NOT_FOUND", str(error))
    except iam.PermissionDenied as error:
        return error_answer(403, "PERMISSION_DENIED", str(error))
    headers = {"X-AIConsole-Cold-Start-Ms": f"{result.cold_start_ms:.0f}"} if result.cold_start_ms is not None else {}
    return Answer(result.status, result.body, headers)


@csrf_exempt
def predict(request, project_id, model, version=None):
    """POST …/models/M:predict (the default version) and …/models/M/versions/V:predict.

    ``models_registry.asgi.PredictFront``, when mounted, answers bearer-token calls before they
    reach Django; this view answers the rest (and all of them without it)."""
    if request.method != "POST":
        return error_answer(405, "UNIMPLEMENTED", f"Method {request.method} is not allowed: use POST.").django()
    user, refusal = caller(request)
    if refusal is not None:
        return refusal.django()
    body = read_body(request)
    if body is None:
        return too_large().django()
    return prediction_answer(user, body, project_id, model, version).django()


# --- operations ----------------------------------------------------------------------------------------


@api_view(["GET"])
def operations_collection(request, project_id):
    project = find_project(project_id, actor=request.user)
    return Response(
        _page(
            request,
            operations.list_operations(project, actor=request.user),
            "operations",
            operations.operation_resource,
        )
    )


@api_view(["GET"])
def operation_item(request, project_id, operation_id):
    project = find_project(project_id, actor=request.user)
    return Response(operations.operation_resource(operations.get_operation(project, operation_id, actor=request.user)))


@api_view(["POST"])
def operation_cancel(request, project_id, operation_id):
    project = find_project(project_id, actor=request.user)
    operations.cancel_operation(project, operation_id, actor=request.user)
    return Response({})
