"""The model registry's REST paths in the OpenAPI document (aiconsole/openapi.py puts it together):
projects.models and their versions, online prediction, long-running operations, models' IAM
policies."""

from __future__ import annotations

from aiconsole.openapi import (
    PAGING,
    STRING,
    Description,
    error_responses,
    iam_paths,
    json_body,
    operation,
    path_params,
    query,
    ref,
)

SCHEMAS = {
    "PredictRequest": {
        "type": "object",
        "required": ["instances"],
        "properties": {"instances": {"type": "array", "items": {}}, "signature_name": STRING},
    },
    "PredictResponse": {
        "type": "object",
        "required": ["predictions"],
        "properties": {"predictions": {"type": "array", "items": {}}},
    },
    "PredictionError": {"type": "object", "required": ["error"], "properties": {"error": STRING}},
}
MODEL_PATH = "/v1/projects/{projectsId}/models/{modelsId}"
VERSION_PATH = MODEL_PATH + "/versions/{versionsId}"
_CHANGES = (400, 401, 403, 404, 409, 413)


def _predict_operation(operation_id: str, summary: str) -> dict:
    errors = error_responses(401, 403, 404, 413)
    errors["400"] = {
        "description": "Invalid request, or the model could not predict the instances",
        **json_body({"oneOf": [ref("Error"), ref("PredictionError")]}),
    }
    errors["503"] = {"description": "The version's serving process could not answer", **json_body(ref("Error"))}
    return {
        "operationId": operation_id,
        "summary": summary,
        "requestBody": {"required": True, **json_body(ref("PredictRequest"))},
        "responses": {
            "200": {"description": "One prediction per instance, in order", **json_body(ref("PredictResponse"))},
            **errors,
        },
    }


PATHS = {
    "/v1/projects/{projectsId}/operations": {
        "parameters": path_params("projectsId"),
        "get": operation(
            "ml.projects.operations.list",
            "Long-running operations.",
            ref("ListOperationsResponse"),
            parameters=[*PAGING, query("filter", STRING)],
        ),
    },
    "/v1/projects/{projectsId}/operations/{operationsId}": {
        "parameters": path_params("projectsId", "operationsId"),
        "get": operation("ml.projects.operations.get", "One operation.", ref("Operation")),
    },
    "/v1/projects/{projectsId}/operations/{operationsId}:cancel": {
        "parameters": path_params("projectsId", "operationsId"),
        "post": operation("ml.projects.operations.cancel", "Requests cancellation.", ref("Empty")),
    },
    "/v1/projects/{projectsId}/models": {
        "parameters": path_params("projectsId"),
        "get": operation(
            "ml.projects.models.list",
            "Lists the models in the project.",
            ref("ListModelsResponse"),
            parameters=[
                *PAGING,
                query("filter", {"type": "string", "maxLength": 2000}, "e.g. name:census* AND labels.team=ml"),
            ],
        ),
        "post": operation(
            "ml.projects.models.create",
            "Creates a model.",
            ref("Model"),
            codes=_CHANGES,
            body=json_body(ref("Model")),
        ),
    },
    MODEL_PATH: {
        "parameters": path_params("projectsId", "modelsId"),
        "get": operation("ml.projects.models.get", "Describes a model.", ref("Model")),
        "patch": operation(
            "ml.projects.models.patch",
            "Updates a model's description, labels or default version.",
            ref("Operation"),
            codes=_CHANGES,
            body=json_body(ref("Model")),
            parameters=[query("updateMask", STRING, "description, labels, defaultVersion.name")],
        ),
        "delete": operation("ml.projects.models.delete", "Deletes a model without versions.", ref("Operation")),
    },
    MODEL_PATH + "/versions": {
        "parameters": path_params("projectsId", "modelsId"),
        "get": operation(
            "ml.projects.models.versions.list",
            "Lists a model's versions.",
            ref("ListVersionsResponse"),
            parameters=[*PAGING, query("filter", STRING)],
        ),
        "post": operation(
            "ml.projects.models.versions.create",
            "Creates a version (a long-running operation).",
            ref("Operation"),
            codes=_CHANGES,
            body=json_body(ref("Version")),
        ),
    },
    VERSION_PATH: {
        "parameters": path_params("projectsId", "modelsId", "versionsId"),
        "get": operation("ml.projects.models.versions.get", "Describes a version.", ref("Version")),
        "patch": operation(
            "ml.projects.models.versions.patch",
            "Updates a version.",
            ref("Operation"),
            codes=_CHANGES,
            body=json_body(ref("Version")),
            parameters=[
                query(
                    "updateMask",
                    STRING,
                    "description, labels, requestLoggingConfig, autoScaling.minNodes, manualScaling.nodes",
                )
            ],
        ),
        "delete": operation("ml.projects.models.versions.delete", "Deletes a version.", ref("Operation")),
    },
    VERSION_PATH + ":setDefault": {
        "parameters": path_params("projectsId", "modelsId", "versionsId"),
        "post": operation(
            "ml.projects.models.versions.setDefault",
            "Makes a READY version the default.",
            ref("Version"),
            codes=(400, 401, 403, 404, 413),
            body=json_body({"type": "object"}),
        ),
    },
    MODEL_PATH + ":predict": {
        "parameters": path_params("projectsId", "modelsId"),
        "post": _predict_operation("ml.projects.predict", "Online prediction with the model's default version."),
    },
    VERSION_PATH + ":predict": {
        "parameters": path_params("projectsId", "modelsId", "versionsId"),
        "post": _predict_operation("ml.projects.predict.version", "Online prediction with one version."),
    },
}
PATHS.update(iam_paths(MODEL_PATH, path_params("projectsId", "modelsId"), "projects.models"))


DESCRIPTION = Description(PATHS, SCHEMAS)
