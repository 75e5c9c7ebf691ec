"""The ml v1 wire schema this server speaks, written once.

Messages and fields are named exactly as in Google's ``ml v1`` discovery document
(``GoogleCloudMlV1__Job``, ``trainingInput``, ...). Three things are derived from this module and
nothing else: the JSON reader of Job bodies (``jobs.validation``), the type check of Model and Version
bodies (``models_registry.spec``) and the OpenAPI document (``aiconsole.openapi``).
``tests/aiconsole/test_v1schema_drift.py`` compares it with the discovery document that
google-api-python-client ships, so a renamed or retyped field fails CI.

Where this server knowingly differs, the source says so: ``Field.unsupported`` (accepted by the
schema, refused by the service with that reason), ``Field.ours`` (an extension absent from the
discovery document) and ``Message.not_supported`` (discovery fields left out on purpose).

This module is pure data and imports no app, so the core ``aiconsole`` package can own it.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from aiconsole import protojson
from aiconsole.protojson import Field, proto_name

PREFIX = "GoogleCloudMlV1__"
URI_CHARS = 2048  # a gs:// object name is at most 1024 bytes; a local path at most 4096
ARG_CHARS = 4096


@dataclass(frozen=True)
class Message:
    """A message's fields by JSON name, in the order the wire and the OpenAPI document list them."""

    fields: dict[str, Field]
    # Fields of the discovery message deliberately not declared here, with the reason.
    not_supported: dict[str, str] = field(default_factory=dict)


S, B, I32, I64, D = Field("string"), Field("bool"), Field("int32"), Field("int64"), Field("double")
DURATION = Field("duration")
STRINGS = Field("string", repeated=True)
LABELS = Field("map")


def _out(type_: str, ref: str = "", **options) -> Field:
    return Field(type_, ref, output_only=True, **options)


def _msg(name: str, **options) -> Field:
    return Field("message", PREFIX + name, **options)


def _enum(name: str, **options) -> Field:
    return Field("enum", name, **options)


# Enum values, keyed by proto enum name (the name the JSON front end's errors use).
ENUMS: dict[str, tuple[str, ...]] = {
    "TrainingInput.ScaleTier": ("BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU", "CUSTOM"),
    "AcceleratorType": (
        "ACCELERATOR_TYPE_UNSPECIFIED",
        "NVIDIA_TESLA_K80",
        "NVIDIA_TESLA_P100",
        "NVIDIA_TESLA_V100",
        "NVIDIA_TESLA_P4",
        "NVIDIA_TESLA_T4",
        "NVIDIA_TESLA_A100",
        "TPU_V2",
        "TPU_V3",
        "TPU_V2_POD",
        "TPU_V3_POD",
        "TPU_V4_POD",
    ),
    "HyperparameterSpec.GoalType": ("GOAL_TYPE_UNSPECIFIED", "MAXIMIZE", "MINIMIZE"),
    "HyperparameterSpec.Algorithm": ("ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"),
    "ParameterSpec.ParameterType": ("PARAMETER_TYPE_UNSPECIFIED", "DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE"),
    "ParameterSpec.ScaleType": ("NONE", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"),
    "PredictionInput.DataFormat": ("DATA_FORMAT_UNSPECIFIED", "JSON", "TEXT", "TF_RECORD", "TF_RECORD_GZIP", "CSV"),
    "Job.State": (
        "STATE_UNSPECIFIED",
        "QUEUED",
        "PREPARING",
        "RUNNING",
        "SUCCEEDED",
        "FAILED",
        "CANCELLING",
        "CANCELLED",
    ),
    "Version.State": ("UNKNOWN", "READY", "CREATING", "FAILED", "DELETING", "UPDATING"),
    "Version.Framework": ("FRAMEWORK_UNSPECIFIED", "TENSORFLOW", "SCIKIT_LEARN", "XGBOOST"),
    "MetricSpec.MetricName": ("METRIC_NAME_UNSPECIFIED", "CPU_USAGE", "GPU_DUTY_CYCLE"),
    "Capability.Type": ("TYPE_UNSPECIFIED", "TRAINING", "BATCH_PREDICTION", "ONLINE_PREDICTION"),
}

_REPLICA = _msg("ReplicaConfig")
_TOKEN = Field("string", max_chars=None)  # a page token we wrote; never read from a body
_CRP_REASON = (
    "Custom prediction routines (packageUris, predictionClass) are not supported on this server; "
    "deploy a scikit-learn, XGBoost or TensorFlow model."
)

MESSAGES: dict[str, Message] = {
    # --- training and batch prediction jobs (jobs.validation) -----------------------------------------------
    PREFIX + "Job": Message(
        {
            "jobId": S,
            "labels": LABELS,
            "trainingInput": _msg("TrainingInput"),
            "predictionInput": _msg("PredictionInput"),
            "state": _out("enum", "Job.State"),
            "errorMessage": _out("string", max_chars=None),
            "createTime": _out("timestamp"),
            "startTime": _out("timestamp"),
            "endTime": _out("timestamp"),
            "trainingOutput": _msg("TrainingOutput", output_only=True),
            "predictionOutput": _msg("PredictionOutput", output_only=True),
            # The discovery document does not call etag output only; a create ignores it all the same.
            "etag": _out("bytes"),
            "jobPosition": _out("int64"),
        }
    ),
    PREFIX + "TrainingInput": Message(
        {
            "scaleTier": _enum("TrainingInput.ScaleTier"),
            "masterType": S,
            "masterConfig": _REPLICA,
            "workerType": S,
            "workerConfig": _REPLICA,
            "parameterServerType": S,
            "parameterServerConfig": _REPLICA,
            "evaluatorType": S,
            "evaluatorConfig": _REPLICA,
            "workerCount": I64,
            "parameterServerCount": I64,
            "evaluatorCount": I64,
            # packageUris keeps its count (100) in the service rules, with the original's wording.
            "packageUris": Field("string", repeated=True, max_chars=URI_CHARS),
            "pythonModule": Field("string", max_chars=256),
            "args": Field("string", repeated=True, max_chars=ARG_CHARS, max_items=256),
            "hyperparameters": _msg("HyperparameterSpec"),
            "region": S,
            "jobDir": Field("string", max_chars=URI_CHARS),
            "runtimeVersion": S,
            "pythonVersion": S,
            "scheduling": _msg("Scheduling"),
            "network": S,
            "serviceAccount": S,
            "encryptionConfig": _msg("EncryptionConfig"),
            "enableWebAccess": B,
            "useChiefInTfConfig": B,
        }
    ),
    PREFIX + "ReplicaConfig": Message(
        {
            "acceleratorConfig": _msg("AcceleratorConfig"),
            "imageUri": Field("string", max_chars=URI_CHARS),
            "containerCommand": Field("string", repeated=True, max_chars=ARG_CHARS, max_items=256),
            "containerArgs": Field("string", repeated=True, max_chars=ARG_CHARS, max_items=256),
            "tpuTfVersion": S,
            "diskConfig": _msg("DiskConfig"),
        }
    ),
    PREFIX + "AcceleratorConfig": Message({"count": I64, "type": _enum("AcceleratorType")}),
    PREFIX + "DiskConfig": Message({"bootDiskSizeGb": I32, "bootDiskType": S}),
    PREFIX + "Scheduling": Message({"maxRunningTime": DURATION, "maxWaitTime": DURATION, "priority": I32}),
    PREFIX + "EncryptionConfig": Message({"kmsKeyName": S}),
    PREFIX + "HyperparameterSpec": Message(
        {
            "goal": _enum("HyperparameterSpec.GoalType"),
            "params": _msg("ParameterSpec", repeated=True, max_items=100),
            "maxTrials": I32,
            "maxParallelTrials": I32,
            "maxFailedTrials": I32,
            "hyperparameterMetricTag": Field("string", max_chars=256),
            "enableTrialEarlyStopping": B,
            "resumePreviousJobId": S,
            "algorithm": _enum("HyperparameterSpec.Algorithm"),
        }
    ),
    PREFIX + "ParameterSpec": Message(
        {
            "parameterName": Field("string", max_chars=256),
            "type": _enum("ParameterSpec.ParameterType"),
            "minValue": D,
            "maxValue": D,
            "categoricalValues": Field("string", repeated=True, max_chars=256, max_items=1000),
            # discreteValues keeps its count (1000) in the service rules, with the original's wording.
            "discreteValues": Field("double", repeated=True),
            "scaleType": _enum("ParameterSpec.ScaleType"),
        }
    ),
    PREFIX + "PredictionInput": Message(
        {
            "modelName": S,
            "versionName": S,
            "uri": Field("string", max_chars=URI_CHARS),
            "dataFormat": _enum("PredictionInput.DataFormat"),
            "outputDataFormat": _enum("PredictionInput.DataFormat"),
            "inputPaths": Field("string", repeated=True, max_chars=URI_CHARS, max_items=100),
            "outputPath": Field("string", max_chars=URI_CHARS),
            "maxWorkerCount": I64,
            "region": S,
            "runtimeVersion": S,
            "batchSize": I64,
            "signatureName": S,
        }
    ),
    PREFIX + "ListJobsResponse": Message({"jobs": _msg("Job", repeated=True), "nextPageToken": _TOKEN}),
    # --- models and versions (models_registry.spec) ------------------------------------------------------
    PREFIX + "Model": Message(
        {
            "name": S,
            "description": Field("string", max_chars=8192),
            "regions": Field("string", repeated=True, max_items=100),
            "onlinePredictionLogging": B,
            "onlinePredictionConsoleLogging": B,
            "labels": LABELS,
            "etag": Field("bytes"),
            "defaultVersion": _msg("Version"),
        }
    ),
    PREFIX + "Version": Message(
        {
            "name": S,
            "description": Field("string", max_chars=8192),
            "labels": LABELS,
            "etag": Field("bytes"),
            "deploymentUri": Field("string", max_chars=URI_CHARS),
            "runtimeVersion": S,
            "pythonVersion": S,
            "framework": _enum("Version.Framework"),
            "machineType": S,
            "acceleratorConfig": _msg(
                "AcceleratorConfig", unsupported="Accelerators are not available for online prediction on this server."
            ),
            "autoScaling": _msg("AutoScaling"),
            "manualScaling": _msg("ManualScaling"),
            "packageUris": Field("string", repeated=True, max_items=100, unsupported=_CRP_REASON),
            "predictionClass": Field("string", unsupported=_CRP_REASON),
            "container": _msg("ContainerSpec", unsupported="Custom containers are not supported on this server."),
            "routes": _msg(
                "RouteMap", unsupported="Custom containers (and their routes) are not supported on this server."
            ),
            "serviceAccount": S,
            "explanationConfig": _msg(
                "ExplanationConfig", unsupported="Explanations are not supported on this server."
            ),
            "requestLoggingConfig": _msg("RequestLoggingConfig"),
            # Output only: accepted and ignored, as the original did. errorMessage has no length bound
            # so that a version read back (with a long error) can be sent again.
            "state": _out("enum", "Version.State"),
            "errorMessage": _out("string", max_chars=None),
            "isDefault": _out("bool"),
            "createTime": _out("timestamp"),
            "lastUseTime": _out("timestamp"),
            "lastMigrationModelId": _out("string"),
            "lastMigrationTime": _out("timestamp"),
        }
    ),
    PREFIX + "AutoScaling": Message(
        {
            "minNodes": I32,
            "maxNodes": I32,
            "metrics": _msg("MetricSpec", repeated=True),
        }
    ),
    PREFIX + "ManualScaling": Message({"nodes": I32}),
    PREFIX + "MetricSpec": Message({"name": _enum("MetricSpec.MetricName"), "target": I32}),
    PREFIX + "RequestLoggingConfig": Message({"samplingPercentage": D, "bigqueryTableName": S}),
    PREFIX + "ListModelsResponse": Message({"models": _msg("Model", repeated=True), "nextPageToken": _TOKEN}),
    PREFIX + "ListVersionsResponse": Message({"versions": _msg("Version", repeated=True), "nextPageToken": _TOKEN}),
    # --- projects, locations, operations and IAM (answers, and IAM request bodies) ---------------------------
    PREFIX + "GetConfigResponse": Message(
        {
            "serviceAccount": S,
            "serviceAccountProject": I64,
            "config": _msg("Config"),
        }
    ),
    PREFIX + "Config": Message({"tpuServiceAccount": S}),
    PREFIX + "Location": Message({"name": S, "capabilities": _msg("Capability", repeated=True)}),
    PREFIX + "Capability": Message(
        {
            "type": _enum("Capability.Type"),
            "availableAccelerators": _enum("AcceleratorType", repeated=True),
        }
    ),
    PREFIX + "ListLocationsResponse": Message({"locations": _msg("Location", repeated=True), "nextPageToken": _TOKEN}),
    "GoogleLongrunning__Operation": Message(
        {
            "name": S,
            "metadata": Field("object"),
            "done": B,
            "error": Field("message", "GoogleRpc__Status"),
            "response": Field("object"),
        }
    ),
    "GoogleLongrunning__ListOperationsResponse": Message(
        {"operations": Field("message", "GoogleLongrunning__Operation", repeated=True), "nextPageToken": _TOKEN},
        not_supported={"unreachable": "Every operation lives in this server's one database; none is ever unreachable."},
    ),
    "GoogleIamV1__Policy": Message(
        {
            "version": I32,
            "etag": Field("bytes"),
            "bindings": Field("message", "GoogleIamV1__Binding", repeated=True),
            "auditConfigs": Field("message", "GoogleIamV1__AuditConfig", repeated=True),
        }
    ),
    "GoogleIamV1__Binding": Message(
        {
            "role": S,
            "members": STRINGS,
            "condition": Field("message", "GoogleType__Expr"),
        }
    ),
    "GoogleIamV1__SetIamPolicyRequest": Message(
        {
            "policy": Field("message", "GoogleIamV1__Policy"),
            "updateMask": Field("fieldmask"),
        }
    ),
    "GoogleIamV1__TestIamPermissionsRequest": Message({"permissions": STRINGS}),
    "GoogleIamV1__TestIamPermissionsResponse": Message({"permissions": STRINGS}),
}


def message(name: str) -> Message:
    """A message by discovery id or by proto name (``Job`` or ``GoogleCloudMlV1__Job``)."""
    return MESSAGES[name if name.startswith(PREFIX) else PREFIX + name]


# What the one reader of request bodies needs of this schema (``jobs.validation`` reads Job bodies with it).
READER = protojson.Schema("google.cloud.ml.v1", lambda name: message(name).fields, ENUMS)


# --- OpenAPI -------------------------------------------------------------------------------------------

INT64_SCHEMA = {"type": "string", "pattern": r"^-?\d+$", "description": "int64, as a JSON string"}
_SCALAR_SCHEMAS = {
    "string": {"type": "string"},
    "bytes": {"type": "string"},
    "timestamp": {"type": "string", "format": "date-time"},
    "duration": {"type": "string", "pattern": r"^-?\d+(\.\d{1,9})?s$", "description": "Duration in seconds: 3600s"},
    "int64": INT64_SCHEMA,
    "int32": {"type": "integer"},
    "double": {"type": "number"},
    "bool": {"type": "boolean"},
    "fieldmask": {"type": "string", "description": "Comma-separated field paths"},
    "map": {"type": "object", "additionalProperties": {"type": "string"}},
    "object": {"type": "object"},
}


def _single_schema(spec: Field) -> dict:
    if spec.type == "message":
        if spec.ref in MESSAGES:
            return {"$ref": f"#/components/schemas/{proto_name(spec.ref)}"}
        return {"type": "object"}  # a message this server does not describe field by field
    if spec.type == "enum":
        return {"type": "string", "enum": list(ENUMS[spec.ref])}
    schema = dict(_SCALAR_SCHEMAS[spec.type])
    if spec.type == "string" and spec.max_chars is not None and not spec.output_only:
        schema["maxLength"] = spec.max_chars
    return schema


def field_schema(spec: Field) -> dict:
    """The OpenAPI schema of one field's value."""
    single = _single_schema(spec)
    if not spec.repeated:
        return single
    schema = {"type": "array", "items": single}
    if spec.max_items is not None:
        schema["maxItems"] = spec.max_items
    return schema


def openapi_schemas() -> dict[str, dict]:
    """Every message as an OpenAPI component schema, named by its proto name (``Job``)."""
    return {
        proto_name(name): {
            "type": "object",
            "additionalProperties": False,
            "properties": {key: field_schema(spec) for key, spec in msg.fields.items()},
        }
        for name, msg in MESSAGES.items()
    }
