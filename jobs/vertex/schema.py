"""The Vertex AI v1 wire schema of CustomJob, HyperparameterTuningJob and TrainingPipeline, and reading
a body against it.

Written from ``google.cloud.aiplatform.v1``'s protos (``tests/jobs/test_vertex_schema.py`` compares
it with the descriptors the ``google-cloud-aiplatform`` SDK ships, so a renamed or retyped field
fails CI). What the SDK sends over REST (``$alt=json;enum-encoding=int``), and what this module
reads, is proto3 JSON:

- **enums as integers** (``"goal": 2``), though names are accepted too, as any proto3 parser does;
- **zero values dropped**: an absent ``minValue`` is 0, an absent enum its ``…_UNSPECIFIED``;
- **int64 as strings** (``"replicaCount": "1"``), numbers accepted too; int32 as numbers.

``parse`` returns the canonical copy the rest of ``jobs.vertex`` works on: camelCase names, enums
by name, int64 as strings, int32 as ints, durations as ``"<seconds>s"``, output-only fields
dropped. ``encode`` writes a resource back with enums as numbers when the caller asked for
``enum-encoding=int``. Pure data and functions: no database, no Django.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass

from aiconsole.errors import Violations, clipped
from jobs.validation.schema import as_double, as_int

TYPES = ("string", "bool", "int32", "int64", "double", "duration", "timestamp", "enum", "message", "map", "object")
_SHOWN_CHARS = 200


@dataclass(frozen=True)
class Field:
    """One field of a message; ``ref`` names its enum or message. ``unsupported``: the reason a
    value other than the field's zero value is refused here (the field is Vertex's, not ours)."""

    type: str
    ref: str = ""
    repeated: bool = False
    output_only: bool = False
    unsupported: str = ""
    max_chars: int | None = 1024

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"Unknown field type {self.type!r}")


S, B, I32, I64, D = Field("string"), Field("bool"), Field("int32"), Field("int64"), Field("double")
STRINGS = Field("string", repeated=True, max_chars=4096)
DURATION = Field("duration")
MAP = Field("map")


def _out(type_: str, ref: str = "", **options) -> Field:
    return Field(type_, ref, output_only=True, **options)


def _msg(name: str, **options) -> Field:
    return Field("message", name, **options)


def _enum(name: str, **options) -> Field:
    return Field("enum", name, **options)


def _no(type_: str, reason: str, **options) -> Field:
    return Field(type_, unsupported=reason, **options)


ENUMS: dict[str, dict[str, int]] = {
    "JobState": {
        "JOB_STATE_UNSPECIFIED": 0,
        "JOB_STATE_QUEUED": 1,
        "JOB_STATE_PENDING": 2,
        "JOB_STATE_RUNNING": 3,
        "JOB_STATE_SUCCEEDED": 4,
        "JOB_STATE_FAILED": 5,
        "JOB_STATE_CANCELLING": 6,
        "JOB_STATE_CANCELLED": 7,
        "JOB_STATE_PAUSED": 8,
        "JOB_STATE_EXPIRED": 9,
        "JOB_STATE_UPDATING": 10,
        "JOB_STATE_PARTIALLY_SUCCEEDED": 11,
    },
    "PipelineState": {
        "PIPELINE_STATE_UNSPECIFIED": 0,
        "PIPELINE_STATE_QUEUED": 1,
        "PIPELINE_STATE_PENDING": 2,
        "PIPELINE_STATE_RUNNING": 3,
        "PIPELINE_STATE_SUCCEEDED": 4,
        "PIPELINE_STATE_FAILED": 5,
        "PIPELINE_STATE_CANCELLING": 6,
        "PIPELINE_STATE_CANCELLED": 7,
        "PIPELINE_STATE_PAUSED": 8,
    },
    "AcceleratorType": {
        "ACCELERATOR_TYPE_UNSPECIFIED": 0,
        "NVIDIA_TESLA_K80": 1,
        "NVIDIA_TESLA_P100": 2,
        "NVIDIA_TESLA_V100": 3,
        "NVIDIA_TESLA_P4": 4,
        "NVIDIA_TESLA_T4": 5,
        "TPU_V2": 6,
        "TPU_V3": 7,
        "NVIDIA_TESLA_A100": 8,
        "NVIDIA_A100_80GB": 9,
        "TPU_V4_POD": 10,
        "NVIDIA_L4": 11,
        "TPU_V5_LITEPOD": 12,
        "NVIDIA_H100_80GB": 13,
        "NVIDIA_H100_MEGA_80GB": 14,
        "NVIDIA_H200_141GB": 15,
        "NVIDIA_B200": 16,
        "NVIDIA_GB200": 17,
        "NVIDIA_RTX_PRO_6000": 18,
    },
    "Scheduling.Strategy": {
        "STRATEGY_UNSPECIFIED": 0,
        "ON_DEMAND": 1,
        "LOW_COST": 2,
        "STANDARD": 3,
        "SPOT": 4,
        "FLEX_START": 6,
    },
    "StudySpec.Algorithm": {"ALGORITHM_UNSPECIFIED": 0, "GRID_SEARCH": 2, "RANDOM_SEARCH": 3},
    "StudySpec.ObservationNoise": {"OBSERVATION_NOISE_UNSPECIFIED": 0, "LOW": 1, "HIGH": 2},
    "StudySpec.MeasurementSelectionType": {
        "MEASUREMENT_SELECTION_TYPE_UNSPECIFIED": 0,
        "LAST_MEASUREMENT": 1,
        "BEST_MEASUREMENT": 2,
    },
    "StudySpec.MetricSpec.GoalType": {"GOAL_TYPE_UNSPECIFIED": 0, "MAXIMIZE": 1, "MINIMIZE": 2},
    "StudySpec.ParameterSpec.ScaleType": {
        "SCALE_TYPE_UNSPECIFIED": 0,
        "UNIT_LINEAR_SCALE": 1,
        "UNIT_LOG_SCALE": 2,
        "UNIT_REVERSE_LOG_SCALE": 3,
    },
    "Trial.State": {
        "STATE_UNSPECIFIED": 0,
        "REQUESTED": 1,
        "ACTIVE": 2,
        "STOPPING": 3,
        "SUCCEEDED": 4,
        "INFEASIBLE": 5,
    },
}

_NO_PERSISTENT = "persistent resources are a Vertex AI feature this server does not have; leave it unset."
_NO_NETWORK_RANGES = "this server has no VPC peering; leave it unset."
_NO_EXPERIMENTS = (
    "Vertex AI Experiments are not served here; the job's metrics and TensorBoard are on its page in the console."
)
_NO_MOUNTS = "this server mounts no NFS or Lustre shares; use packageUris and baseOutputDirectory paths instead."
_NO_PARTITIONS = "this server has no GPU partitions, TPU topologies or reservations; leave it unset."
_NO_STOPPING = (
    "this server stops trials early by the median rule only: use medianAutomatedStoppingSpec "
    "(Optuna's MedianPruner, as for v1 tuning jobs)."
)

_NO_DATASETS = (
    "Vertex AI managed datasets are not served here: give the training script its data by path or gs:// URI "
    "in its args (the pipeline runs its custom job with no dataset split)."
)
_NO_MODEL_UPLOAD = (
    "uploading the trained model from a pipeline is not served here yet: leave out the serving container "
    "(model_serving_container_image_uri), and the model stays in baseOutputDirectory's model/ folder."
)

MESSAGES: dict[str, dict[str, Field]] = {
    "TrainingPipeline": {
        "name": _out("string"),
        "displayName": S,
        "inputDataConfig": _no("object", _NO_DATASETS),
        "trainingTaskDefinition": S,
        "trainingTaskInputs": Field("object", max_chars=None),
        "trainingTaskMetadata": _out("object"),
        "modelToUpload": _no("object", _NO_MODEL_UPLOAD),
        "modelId": _no("string", _NO_MODEL_UPLOAD),
        "parentModel": _no("string", _NO_MODEL_UPLOAD),
        "state": _out("enum", "PipelineState"),
        "error": _out("object"),
        "createTime": _out("timestamp"),
        "startTime": _out("timestamp"),
        "endTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "labels": MAP,
        "encryptionSpec": _msg("EncryptionSpec"),
    },
    "CustomJob": {
        "name": _out("string"),
        "displayName": S,
        "jobSpec": _msg("CustomJobSpec"),
        "state": _out("enum", "JobState"),
        "createTime": _out("timestamp"),
        "startTime": _out("timestamp"),
        "endTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "error": _out("object"),
        "labels": MAP,
        "encryptionSpec": _msg("EncryptionSpec"),
        "webAccessUris": _out("map"),
        "satisfiesPzs": _out("bool"),
        "satisfiesPzi": _out("bool"),
    },
    "CustomJobSpec": {
        "persistentResourceId": _no("string", _NO_PERSISTENT),
        "workerPoolSpecs": _msg("WorkerPoolSpec", repeated=True),
        "scheduling": _msg("Scheduling"),
        "serviceAccount": S,
        "network": S,
        "reservedIpRanges": _no("string", _NO_NETWORK_RANGES, repeated=True),
        "pscInterfaceConfig": _no("object", _NO_NETWORK_RANGES),
        "baseOutputDirectory": _msg("GcsDestination"),
        "protectedArtifactLocationId": _no("string", "artifacts stay where baseOutputDirectory says; leave it unset."),
        "tensorboard": S,
        "enableWebAccess": B,
        "enableDashboardAccess": B,
        "experiment": _no("string", _NO_EXPERIMENTS),
        "experimentRun": _no("string", _NO_EXPERIMENTS),
        "models": _no("string", "Model Garden models are not served here; leave it unset.", repeated=True),
    },
    "WorkerPoolSpec": {
        "containerSpec": _msg("ContainerSpec"),
        "pythonPackageSpec": _msg("PythonPackageSpec"),
        "machineSpec": _msg("MachineSpec"),
        "replicaCount": I64,
        "nfsMounts": _no("object", _NO_MOUNTS, repeated=True),
        "lustreMounts": _no("object", _NO_MOUNTS, repeated=True),
        "diskSpec": _msg("DiskSpec"),
    },
    "ContainerSpec": {
        "imageUri": S,
        "command": STRINGS,
        "args": STRINGS,
        "env": _msg("EnvVar", repeated=True),
    },
    "PythonPackageSpec": {
        "executorImageUri": S,
        "packageUris": Field("string", repeated=True, max_chars=2048),
        "pythonModule": S,
        "args": STRINGS,
        "env": _msg("EnvVar", repeated=True),
    },
    "EnvVar": {"name": S, "value": Field("string", max_chars=32768)},
    "MachineSpec": {
        "machineType": S,
        "acceleratorType": _enum("AcceleratorType"),
        "acceleratorCount": I32,
        "gpuPartitionSize": _no("string", _NO_PARTITIONS),
        "tpuTopology": _no("string", _NO_PARTITIONS),
        "reservationAffinity": _no("object", _NO_PARTITIONS),
    },
    "DiskSpec": {"bootDiskType": S, "bootDiskSizeGb": I32},
    "Scheduling": {
        "timeout": DURATION,
        "restartJobOnWorkerRestart": B,
        "strategy": _enum("Scheduling.Strategy"),
        "disableRetries": B,
        "maxWaitDuration": DURATION,
    },
    "GcsDestination": {"outputUriPrefix": Field("string", max_chars=2048)},
    "EncryptionSpec": {"kmsKeyName": S},
    "HyperparameterTuningJob": {
        "name": _out("string"),
        "displayName": S,
        "studySpec": _msg("StudySpec"),
        "maxTrialCount": I32,
        "parallelTrialCount": I32,
        "maxFailedTrialCount": I32,
        "trialJobSpec": _msg("CustomJobSpec"),
        "trials": _out("object", repeated=True),
        "state": _out("enum", "JobState"),
        "createTime": _out("timestamp"),
        "startTime": _out("timestamp"),
        "endTime": _out("timestamp"),
        "updateTime": _out("timestamp"),
        "error": _out("object"),
        "labels": MAP,
        "encryptionSpec": _msg("EncryptionSpec"),
        "satisfiesPzs": _out("bool"),
        "satisfiesPzi": _out("bool"),
    },
    "StudySpec": {
        "decayCurveStoppingSpec": _no("object", _NO_STOPPING),
        "medianAutomatedStoppingSpec": _msg("MedianAutomatedStoppingSpec"),
        "convexAutomatedStoppingSpec": _no("object", _NO_STOPPING),
        "metrics": _msg("MetricSpec", repeated=True),
        "parameters": _msg("ParameterSpec", repeated=True),
        "algorithm": _enum("StudySpec.Algorithm"),
        "observationNoise": _enum("StudySpec.ObservationNoise"),
        "measurementSelectionType": _enum("StudySpec.MeasurementSelectionType"),
        "studyStoppingConfig": _no(
            "object", "a study here stops at maxTrialCount or maxFailedTrialCount; leave studyStoppingConfig unset."
        ),
    },
    "MedianAutomatedStoppingSpec": {"useElapsedDuration": B},
    "MetricSpec": {
        "metricId": S,
        "goal": _enum("StudySpec.MetricSpec.GoalType"),
        "safetyConfig": _no("object", "safety metrics are a Vertex AI Vizier feature; leave safetyConfig unset."),
    },
    "ParameterSpec": {
        "doubleValueSpec": _msg("DoubleValueSpec"),
        "integerValueSpec": _msg("IntegerValueSpec"),
        "categoricalValueSpec": _msg("CategoricalValueSpec"),
        "discreteValueSpec": _msg("DiscreteValueSpec"),
        "parameterId": S,
        "scaleType": _enum("StudySpec.ParameterSpec.ScaleType"),
        "conditionalParameterSpecs": _msg("ConditionalParameterSpec", repeated=True),
    },
    # defaultValue is read and kept, and, as on Vertex (whose tuning jobs ignore it), not used.
    "DoubleValueSpec": {"minValue": D, "maxValue": D, "defaultValue": D},
    "IntegerValueSpec": {"minValue": I64, "maxValue": I64, "defaultValue": I64},
    "CategoricalValueSpec": {"values": STRINGS, "defaultValue": S},
    "DiscreteValueSpec": {"values": Field("double", repeated=True), "defaultValue": D},
    "ConditionalParameterSpec": {
        "parentDiscreteValues": _msg("DiscreteValueCondition"),
        "parentIntValues": _msg("IntValueCondition"),
        "parentCategoricalValues": _msg("CategoricalValueCondition"),
        "parameterSpec": _msg("ParameterSpec"),
    },
    "DiscreteValueCondition": {"values": Field("double", repeated=True)},
    "IntValueCondition": {"values": Field("int64", repeated=True)},
    "CategoricalValueCondition": {"values": STRINGS},
}

_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_DURATION_RE = re.compile(r"^-?\d+(\.\d{1,9})?s$")
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")
_SKIP = object()


def snake(name: str) -> str:
    """A JSON (camelCase) field name as its proto field name, which field paths use."""
    return re.sub(r"([A-Z])", r"_\1", name).lower()


def enum_number(enum: str, name: str) -> int:
    return ENUMS[enum][name]


def enum_name(enum: str, value: object) -> str | None:
    """The value's name, given as a name or as a number; None when it is neither."""
    values = ENUMS[enum]
    if isinstance(value, str) and value in values:
        return value
    number = as_int(value)
    if number is None:
        return None
    return next((name for name, n in values.items() if n == number), None)


def _shown(value: object) -> str:
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def _type_name(spec: Field) -> str:
    if spec.type in ("enum", "message"):
        return f"type.googleapis.com/google.cloud.aiplatform.v1.{spec.ref}"
    return {
        "string": "TYPE_STRING",
        "bool": "TYPE_BOOL",
        "int32": "TYPE_INT32",
        "int64": "TYPE_INT64",
        "double": "TYPE_DOUBLE",
        "duration": "type.googleapis.com/google.protobuf.Duration",
        "timestamp": "type.googleapis.com/google.protobuf.Timestamp",
        "map": "map<string, string>",
        "object": "type.googleapis.com/google.protobuf.Struct",
    }[spec.type]


def _invalid(errors: Violations, path: str, spec: Field, value: object) -> object:
    errors.add(path, f"Invalid value at '{path}' ({_type_name(spec)}), {_shown(value)}")
    return _SKIP


def parse(value: object, message: str, path: str, errors: Violations) -> dict:
    """Read one JSON object against a Vertex message into its canonical copy. Unknown names, wrong
    types and bad enum values are violations, as Google's JSON front end reports them."""
    if not isinstance(value, dict):
        _invalid(errors, path, Field("message", message), value)
        return {}
    fields = MESSAGES[message]
    by_proto_name = {snake(name): name for name in fields}
    out: dict = {}
    for key, raw in value.items():
        name = key if key in fields else by_proto_name.get(str(key))
        if name is None:
            errors.add(
                path, f"Invalid JSON payload received. Unknown name \"{clipped(key)}\" at '{path}': Cannot find field."
            )
            continue
        if name in out:
            errors.add(path, f"Invalid JSON payload received. Duplicate field \"{key}\" at '{path}'.")
            continue
        spec = fields[name]
        if raw is None or spec.output_only:
            continue  # null is unset; output-only fields are ignored on input, as Vertex does
        field_path = f"{path}.{snake(name)}"
        parsed = _parse_field(raw, spec, field_path, errors)
        if parsed is _SKIP or _is_zero(parsed, spec):
            continue  # a zero value is the same as leaving the field out
        if spec.unsupported:
            errors.add(field_path, f"{name}: {spec.unsupported}")
            continue
        out[name] = parsed
    return {name: out[name] for name in fields if name in out}


def _is_zero(value: object, spec: Field) -> bool:
    if spec.type == "enum":
        return ENUMS[spec.ref].get(value) == 0 if isinstance(value, str) else False
    if spec.type == "message":
        return False  # a message given, even empty, is set (proto3 keeps its presence)
    if isinstance(value, bool):
        return value is False
    return value in ("", [], {}, "0", 0, "0s")


def _parse_field(value: object, spec: Field, path: str, errors: Violations) -> object:
    if not spec.repeated:
        return _parse_single(value, spec, path, errors)
    if not isinstance(value, list):
        return _invalid(errors, path, spec, value)
    items = [_parse_single(item, spec, f"{path}[{i}]", errors) for i, item in enumerate(value)]
    return [item for item in items if item is not _SKIP]


def _parse_single(value: object, spec: Field, path: str, errors: Violations) -> object:
    kind = spec.type
    if kind == "message":
        return parse(value, spec.ref, path, errors)
    if kind == "object":
        return value if isinstance(value, dict) else _invalid(errors, path, spec, value)
    if kind == "map":
        if not isinstance(value, dict) or not all(isinstance(v, str) for v in value.values()):
            return _invalid(errors, path, spec, value)
        return {str(k): v for k, v in value.items()}
    if kind == "enum":
        name = enum_name(spec.ref, value)
        return _invalid(errors, path, spec, value) if name is None else name
    if kind in ("string", "duration", "timestamp"):
        if not isinstance(value, str):
            return _invalid(errors, path, spec, value)
        if kind == "duration" and not _DURATION_RE.match(value):
            return _invalid(errors, path, spec, value)
        if kind == "timestamp" and not _TIMESTAMP_RE.match(value):
            return _invalid(errors, path, spec, value)
        if spec.max_chars is not None and len(value) > spec.max_chars:
            errors.add(path, f"{path} is too long: at most {spec.max_chars} characters; got {len(value)}.")
            return _SKIP
        return value
    if kind == "bool":
        if isinstance(value, bool):
            return value
        return _invalid(errors, path, spec, value)
    if kind == "double":
        number = as_double(value)
        return _invalid(errors, path, spec, value) if number is None else number
    number = as_int(value)
    low, high = _INT_RANGES[kind]
    if number is None or not low <= number <= high:
        return _invalid(errors, path, spec, value)
    return str(number) if kind == "int64" else number


def encode(resource: object, message: str, *, enum_ints: bool) -> object:
    """A canonical resource for the wire: enums as numbers when ``enum_ints`` (the caller sent
    ``$alt=json;enum-encoding=int``), as names otherwise. Fields the schema does not know (a
    trial's, an error's) pass unchanged unless ``EXTRA_ENUMS`` names them."""
    if not enum_ints or not isinstance(resource, dict):
        return resource
    fields = MESSAGES.get(message, {})
    out = {}
    for name, value in resource.items():
        spec = fields.get(name)
        enum = spec.ref if spec is not None and spec.type == "enum" else EXTRA_ENUMS.get((message, name))
        if enum:
            out[name] = ENUMS[enum].get(value, value) if isinstance(value, str) else value
        elif spec is not None and spec.type == "message":
            if spec.repeated:
                out[name] = [encode(item, spec.ref, enum_ints=True) for item in value]
            else:
                out[name] = encode(value, spec.ref, enum_ints=True)
        elif (message, name) in EXTRA_MESSAGES:
            out[name] = [encode(item, EXTRA_MESSAGES[(message, name)], enum_ints=True) for item in value]
        else:
            out[name] = value
    return out


# Output-only parts the schema keeps as plain objects, and the enums inside them.
EXTRA_MESSAGES = {("HyperparameterTuningJob", "trials"): "Trial"}
EXTRA_ENUMS = {("Trial", "state"): "Trial.State"}
