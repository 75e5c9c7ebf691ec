"""The OpenAPI 3 description of the REST API: the pieces every app describes its paths with, the
core's own paths, and the document put together from each app's ``Description`` (console/urls.py
serves it at /v1/openapi.json). CI fuzzes the server against it.

It describes the wire shapes of the original ``ml.googleapis.com/v1`` methods this server answers,
plus our extensions. The v1 messages (Job and its parts, Model, Version, operations, locations, IAM
policies and the list responses) are not written here: they come from ``aiconsole.v1schema``, the
one source the validators read as well. Here: the error envelope and the shared helpers; each app
describes its own paths and extensions beside its REST adapters (``jobs/api/openapi.py``,
``models_registry/openapi.py``).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.http import JsonResponse

from aiconsole import v1schema

STRING = {"type": "string"}
INT64 = v1schema.INT64_SCHEMA
TIMESTAMP = {"type": "string", "format": "date-time"}
LABELS = {"type": "object", "additionalProperties": STRING}


def ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def json_body(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


def error_responses(*codes: int) -> dict:
    reasons = {
        400: "Invalid argument",
        401: "Unauthenticated",
        403: "Permission denied",
        404: "Not found",
        409: "Already exists or aborted",
        413: "Payload too large",
    }
    return {str(code): {"description": reasons[code], **json_body(ref("Error"))} for code in codes}


def operation(
    operation_id: str, summary: str, response: dict, *, codes=(400, 401, 403, 404), body=None, parameters=None
) -> dict:
    spec: dict = {
        "operationId": operation_id,
        "summary": summary,
        "responses": {"200": {"description": "OK", **json_body(response)}, **error_responses(*codes)},
    }
    if parameters:
        spec["parameters"] = parameters
    if body is not None:
        spec["requestBody"] = {"required": True, **body}
    return spec


def path_params(*names: str) -> list[dict]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"}}
        for name in names
    ]


def query(name: str, schema: dict, description: str = "") -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


PAGING = [
    query("pageSize", {"type": "integer", "minimum": 0}, "Default 20, at most 100."),
    query("pageToken", STRING, "nextPageToken of the previous page."),
]

SCHEMAS = {
    "Error": {
        "type": "object",
        "required": ["error"],
        "properties": {
            "error": {
                "type": "object",
                "required": ["code", "message", "status"],
                "properties": {
                    "code": {"type": "integer"},
                    "message": STRING,
                    "status": STRING,
                    "details": {"type": "array", "items": {"type": "object"}},
                },
            }
        },
    },
    "Empty": {"type": "object", "additionalProperties": False},
    **v1schema.openapi_schemas(),
}


def iam_paths(base: str, params: list[dict], noun: str) -> dict:
    """getIamPolicy, setIamPolicy and testIamPermissions on one kind of resource."""
    version = query("options.requestedPolicyVersion", {"type": "integer"}, "0, 1 or 3")
    return {
        base + ":getIamPolicy": {
            "parameters": params,
            "get": operation(
                f"ml.{noun}.getIamPolicy", "The access control policy.", ref("Policy"), parameters=[version]
            ),
        },
        base + ":setIamPolicy": {
            "parameters": params,
            "post": operation(
                f"ml.{noun}.setIamPolicy",
                "Replaces the access control policy.",
                ref("Policy"),
                codes=(400, 401, 403, 404, 409, 413),
                body=json_body(ref("SetIamPolicyRequest")),
            ),
        },
        base + ":testIamPermissions": {
            "parameters": params,
            "post": operation(
                f"ml.{noun}.testIamPermissions",
                "The subset of the given permissions the caller holds.",
                ref("TestIamPermissionsResponse"),
                codes=(400, 401, 404, 413),
                body=json_body(ref("TestIamPermissionsRequest")),
            ),
        },
    }


@dataclass(frozen=True)
class Description:
    """An app's part of the document: its paths and the schemas they name."""

    paths: dict
    schemas: dict = field(default_factory=dict)


# The core's own REST paths: a project's IAM policy (aiconsole/iam_api.py).
CORE = Description(iam_paths("/v1/projects/{projectsId}", path_params("projectsId"), "projects"), SCHEMAS)


def build_document(*descriptions: Description) -> dict:
    """The whole document from the apps' descriptions (the core's first)."""
    paths: dict = {}
    schemas: dict = {}
    for description in (CORE, *descriptions):
        paths.update(description.paths)
        schemas.update(description.schemas)
    return {
        "openapi": "3.0.3",
        "info": {
            "title": "AI Console: AI Platform Training & Prediction API (ml v1)",
            "version": "v1",
            "description": "Wire-compatible with ml.googleapis.com/v1 for the methods listed; "
            "extensions are marked as ours. Authenticate with `Authorization: Bearer <token>` "
            "(`aiconsole token create USER`).",
        },
        "servers": [{"url": "/"}],
        "security": [{"bearer": []}],
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}, "schemas": schemas},
        "paths": paths,
    }


def document_view(*descriptions: Description):
    """The view serving the document: public, like Google's discovery documents (it describes the
    API, it reveals no data)."""
    document = build_document(*descriptions)

    def openapi_document(request):
        return JsonResponse(document, json_dumps_params={"indent": 1})

    return openapi_document
