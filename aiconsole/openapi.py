"""The OpenAPI 3 description of the REST API, built as plain data and served at /v1/openapi.json.

It describes the wire shapes of the original ``ml.googleapis.com/v1`` methods this server answers,
plus our extensions (package upload, log streaming, job metrics). CI fuzzes the server against it.

The v1 messages (Job and its parts, Model, Version, operations, locations, IAM policies and the
list responses) are not written here: they come from ``aiconsole.v1schema``, the one source the
validators read as well. What is here is the error envelope, online prediction's bodies and our
extensions.
"""

from __future__ import annotations

from django.http import JsonResponse

from aiconsole import v1schema

STRING = {"type": "string"}
INT64 = v1schema.INT64_SCHEMA
TIMESTAMP = {"type": "string", "format": "date-time"}
LABELS = {"type": "object", "additionalProperties": STRING}


def _ref(name: str) -> dict:
    return {"$ref": f"#/components/schemas/{name}"}


def _json(schema: dict) -> dict:
    return {"content": {"application/json": {"schema": schema}}}


def _errors(*codes: int) -> dict:
    reasons = {
        400: "Invalid argument",
        401: "Unauthenticated",
        403: "Permission denied",
        404: "Not found",
        409: "Already exists or aborted",
        413: "Payload too large",
    }
    return {str(code): {"description": reasons[code], **_json(_ref("Error"))} for code in codes}


def _operation(
    operation_id: str, summary: str, response: dict, *, codes=(400, 401, 403, 404), body=None, parameters=None
) -> dict:
    spec: dict = {
        "operationId": operation_id,
        "summary": summary,
        "responses": {"200": {"description": "OK", **_json(response)}, **_errors(*codes)},
    }
    if parameters:
        spec["parameters"] = parameters
    if body is not None:
        spec["requestBody"] = {"required": True, **body}
    return spec


def _path_params(*names: str) -> list[dict]:
    return [
        {"name": name, "in": "path", "required": True, "schema": {"type": "string", "pattern": r"^[A-Za-z0-9_-]+$"}}
        for name in names
    ]


def _query(name: str, schema: dict, description: str = "") -> dict:
    return {"name": name, "in": "query", "required": False, "schema": schema, "description": description}


PAGING = [
    _query("pageSize", {"type": "integer", "minimum": 0}, "Default 20, at most 100."),
    _query("pageToken", STRING, "nextPageToken of the previous page."),
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
    "ListRuntimeVersionsResponse": {
        "type": "object",
        "additionalProperties": False,
        "properties": {
            "runtimeVersions": {
                "type": "array",
                "items": {
                    "type": "object",
                    "properties": {
                        "runtimeVersion": STRING,
                        "tensorflowVersion": STRING,
                        "extension": {"type": "boolean"},
                        "default": {"type": "boolean"},
                        "defaultPythonVersion": STRING,
                        "frameworks": LABELS,
                        "notes": {"type": "array", "items": STRING},
                        "pythonVersions": {
                            "type": "array",
                            "items": {
                                "type": "object",
                                "properties": {
                                    "pythonVersion": STRING,
                                    "available": {"type": "boolean"},
                                    "reason": STRING,
                                },
                            },
                        },
                    },
                },
            }
        },
    },
    "MetricPoint": {
        "type": "object",
        "required": ["tag", "step", "value", "time", "trialId", "source", "run"],
        "additionalProperties": False,
        "properties": {
            "tag": STRING,
            "step": INT64,
            "value": {"type": "number"},
            "time": TIMESTAMP,
            "trialId": {"type": "string", "description": "The trial's id in a tuning job; empty otherwise."},
            "source": {"type": "string", "enum": ["hypertune", "tfevents"]},
            "run": {
                "type": "string",
                "description": "The event file's folder under the job dir (train, "
                "validation); empty for hypertune reports.",
            },
        },
    },
    "ListMetricsResponse": {
        "type": "object",
        "required": ["metrics"],
        "additionalProperties": False,
        "properties": {"metrics": {"type": "array", "items": _ref("MetricPoint")}, "nextPageToken": STRING},
    },
    "UploadResponse": {
        "type": "object",
        "required": ["uri", "name", "sizeBytes", "sha256"],
        "properties": {
            "uri": STRING,
            "name": STRING,
            "sizeBytes": INT64,
            "sha256": STRING,
            "kind": STRING,
            "modules": {"type": "array", "items": STRING},
        },
    },
    **v1schema.openapi_schemas(),
}

JOB_PATH = "/v1/projects/{projectsId}/jobs/{jobsId}"


def _iam_paths(base: str, params: list[dict], noun: str) -> dict:
    """getIamPolicy, setIamPolicy and testIamPermissions on one kind of resource."""
    version = _query("options.requestedPolicyVersion", {"type": "integer"}, "0, 1 or 3")
    return {
        base + ":getIamPolicy": {
            "parameters": params,
            "get": _operation(
                f"ml.{noun}.getIamPolicy", "The access control policy.", _ref("Policy"), parameters=[version]
            ),
        },
        base + ":setIamPolicy": {
            "parameters": params,
            "post": _operation(
                f"ml.{noun}.setIamPolicy",
                "Replaces the access control policy.",
                _ref("Policy"),
                codes=(400, 401, 403, 404, 409, 413),
                body=_json(_ref("SetIamPolicyRequest")),
            ),
        },
        base + ":testIamPermissions": {
            "parameters": params,
            "post": _operation(
                f"ml.{noun}.testIamPermissions",
                "The subset of the given permissions the caller holds.",
                _ref("TestIamPermissionsResponse"),
                codes=(400, 401, 404, 413),
                body=_json(_ref("TestIamPermissionsRequest")),
            ),
        },
    }


PATHS = {
    "/v1/projects/{projectsId}/jobs": {
        "parameters": _path_params("projectsId"),
        "get": _operation(
            "ml.projects.jobs.list",
            "Lists the jobs in the project.",
            _ref("ListJobsResponse"),
            parameters=[
                *PAGING,
                _query("filter", {"type": "string", "maxLength": 2000}, "e.g. jobId:census* AND state:FAILED"),
            ],
        ),
        "post": _operation(
            "ml.projects.jobs.create",
            "Creates a training job.",
            _ref("Job"),
            codes=(400, 401, 403, 404, 409, 413),
            body=_json(_ref("Job")),
        ),
    },
    JOB_PATH: {
        "parameters": _path_params("projectsId", "jobsId"),
        "get": _operation("ml.projects.jobs.get", "Describes a job.", _ref("Job")),
        "patch": _operation(
            "ml.projects.jobs.patch",
            "Updates a job's labels.",
            _ref("Job"),
            codes=(400, 401, 403, 404, 409, 413),
            body=_json(_ref("Job")),
            parameters=[_query("updateMask", STRING, "labels and/or etag")],
        ),
    },
    JOB_PATH + ":cancel": {
        "parameters": _path_params("projectsId", "jobsId"),
        "post": _operation(
            "ml.projects.jobs.cancel", "Cancels a running job.", _ref("Empty"), body=_json({"type": "object"})
        ),
    },
    JOB_PATH + "/metrics": {
        "parameters": _path_params("projectsId", "jobsId"),
        "get": _operation(
            "aiconsole.jobs.metrics.list",
            "Our extension: the job's metric points (cloudml-hypertune reports and TensorFlow "
            "summary scalars under its job dir), in the order they were recorded. Needs ml.jobs.get.",
            _ref("ListMetricsResponse"),
            parameters=[
                _query("tag", STRING, "Only this metric tag."),
                _query("trialId", STRING, "Only this trial of a tuning job."),
                _query("pageSize", {"type": "integer", "minimum": 0}, "Default 1,000, at most 10,000."),
                _query("pageToken", STRING, "nextPageToken of the previous page."),
            ],
        ),
    },
    "/v1/projects/{projectsId}:getConfig": {
        "parameters": _path_params("projectsId"),
        "get": _operation(
            "ml.projects.getConfig", "The service account the project's jobs run as.", _ref("GetConfigResponse")
        ),
    },
    "/v1/projects/{projectsId}/locations": {
        "parameters": _path_params("projectsId"),
        "get": _operation(
            "ml.projects.locations.list",
            "Regions and their capabilities.",
            _ref("ListLocationsResponse"),
            parameters=PAGING,
        ),
    },
    "/v1/projects/{projectsId}/runtimeVersions": {
        "parameters": _path_params("projectsId"),
        "get": _operation(
            "ml.projects.runtimeVersions.list",
            "Extension: the runtime versions, their Pythons and "
            "frameworks, and whether this installation can run each pair now.",
            _ref("ListRuntimeVersionsResponse"),
        ),
    },
    "/v1/projects/{projectsId}/locations/{locationsId}": {
        "parameters": _path_params("projectsId", "locationsId"),
        "get": _operation("ml.projects.locations.get", "One region.", _ref("Location")),
    },
    "/v1/projects/{projectsId}/operations": {
        "parameters": _path_params("projectsId"),
        "get": _operation(
            "ml.projects.operations.list",
            "Long-running operations.",
            _ref("ListOperationsResponse"),
            parameters=[*PAGING, _query("filter", STRING)],
        ),
    },
    "/v1/projects/{projectsId}/operations/{operationsId}": {
        "parameters": _path_params("projectsId", "operationsId"),
        "get": _operation("ml.projects.operations.get", "One operation.", _ref("Operation")),
    },
    "/v1/projects/{projectsId}/operations/{operationsId}:cancel": {
        "parameters": _path_params("projectsId", "operationsId"),
        "post": _operation("ml.projects.operations.cancel", "Requests cancellation.", _ref("Empty")),
    },
    "/upload/v1/projects/{projectsId}/packages": {
        "parameters": _path_params("projectsId"),
        "post": {
            **_operation(
                "aiconsole.packages.upload",
                "Our extension: upload a trainer package (sdist or wheel) as the raw body.",
                _ref("UploadResponse"),
                codes=(400, 401, 403, 404, 413),
                parameters=[_query("name", STRING, "The file name, e.g. trainer-0.1.tar.gz")],
            ),
            "requestBody": {
                "required": True,
                "content": {"application/octet-stream": {"schema": {"type": "string", "format": "binary"}}},
            },
        },
    },
}


PATHS.update(_iam_paths(JOB_PATH, _path_params("projectsId", "jobsId"), "projects.jobs"))
PATHS.update(_iam_paths("/v1/projects/{projectsId}", _path_params("projectsId"), "projects"))


# --- models, versions and online prediction (models_registry) ----------------------------------------

SCHEMAS.update(
    {
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
)
MODEL_PATH = "/v1/projects/{projectsId}/models/{modelsId}"
VERSION_PATH = MODEL_PATH + "/versions/{versionsId}"
_CHANGES = (400, 401, 403, 404, 409, 413)


def _predict_operation(operation_id: str, summary: str) -> dict:
    errors = _errors(401, 403, 404, 413)
    errors["400"] = {
        "description": "Invalid request, or the model could not predict the instances",
        **_json({"oneOf": [_ref("Error"), _ref("PredictionError")]}),
    }
    errors["503"] = {"description": "The version's serving process could not answer", **_json(_ref("Error"))}
    return {
        "operationId": operation_id,
        "summary": summary,
        "requestBody": {"required": True, **_json(_ref("PredictRequest"))},
        "responses": {
            "200": {"description": "One prediction per instance, in order", **_json(_ref("PredictResponse"))},
            **errors,
        },
    }


PATHS.update(
    {
        "/v1/projects/{projectsId}/models": {
            "parameters": _path_params("projectsId"),
            "get": _operation(
                "ml.projects.models.list",
                "Lists the models in the project.",
                _ref("ListModelsResponse"),
                parameters=[
                    *PAGING,
                    _query("filter", {"type": "string", "maxLength": 2000}, "e.g. name:census* AND labels.team=ml"),
                ],
            ),
            "post": _operation(
                "ml.projects.models.create",
                "Creates a model.",
                _ref("Model"),
                codes=_CHANGES,
                body=_json(_ref("Model")),
            ),
        },
        MODEL_PATH: {
            "parameters": _path_params("projectsId", "modelsId"),
            "get": _operation("ml.projects.models.get", "Describes a model.", _ref("Model")),
            "patch": _operation(
                "ml.projects.models.patch",
                "Updates a model's description, labels or default version.",
                _ref("Operation"),
                codes=_CHANGES,
                body=_json(_ref("Model")),
                parameters=[_query("updateMask", STRING, "description, labels, defaultVersion.name")],
            ),
            "delete": _operation("ml.projects.models.delete", "Deletes a model without versions.", _ref("Operation")),
        },
        MODEL_PATH + "/versions": {
            "parameters": _path_params("projectsId", "modelsId"),
            "get": _operation(
                "ml.projects.models.versions.list",
                "Lists a model's versions.",
                _ref("ListVersionsResponse"),
                parameters=[*PAGING, _query("filter", STRING)],
            ),
            "post": _operation(
                "ml.projects.models.versions.create",
                "Creates a version (a long-running operation).",
                _ref("Operation"),
                codes=_CHANGES,
                body=_json(_ref("Version")),
            ),
        },
        VERSION_PATH: {
            "parameters": _path_params("projectsId", "modelsId", "versionsId"),
            "get": _operation("ml.projects.models.versions.get", "Describes a version.", _ref("Version")),
            "patch": _operation(
                "ml.projects.models.versions.patch",
                "Updates a version.",
                _ref("Operation"),
                codes=_CHANGES,
                body=_json(_ref("Version")),
                parameters=[
                    _query(
                        "updateMask",
                        STRING,
                        "description, labels, requestLoggingConfig, autoScaling.minNodes, manualScaling.nodes",
                    )
                ],
            ),
            "delete": _operation("ml.projects.models.versions.delete", "Deletes a version.", _ref("Operation")),
        },
        VERSION_PATH + ":setDefault": {
            "parameters": _path_params("projectsId", "modelsId", "versionsId"),
            "post": _operation(
                "ml.projects.models.versions.setDefault",
                "Makes a READY version the default.",
                _ref("Version"),
                codes=(400, 401, 403, 404, 413),
                body=_json({"type": "object"}),
            ),
        },
        MODEL_PATH + ":predict": {
            "parameters": _path_params("projectsId", "modelsId"),
            "post": _predict_operation("ml.projects.predict", "Online prediction with the model's default version."),
        },
        VERSION_PATH + ":predict": {
            "parameters": _path_params("projectsId", "modelsId", "versionsId"),
            "post": _predict_operation("ml.projects.predict.version", "Online prediction with one version."),
        },
    }
)
PATHS.update(_iam_paths(MODEL_PATH, _path_params("projectsId", "modelsId"), "projects.models"))


def build_document() -> dict:
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
        "components": {"securitySchemes": {"bearer": {"type": "http", "scheme": "bearer"}}, "schemas": SCHEMAS},
        "paths": PATHS,
    }


def openapi_document(request):
    """Public, like Google's discovery documents: it describes the API, it reveals no data."""
    return JsonResponse(build_document(), json_dumps_params={"indent": 1})
