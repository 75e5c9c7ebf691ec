"""Validation of a v1 Job body (`projects.jobs.create`), following the original service.

Validation runs in two phases, like the original: first the JSON is read against the proto
schema (unknown names, wrong JSON types, bad enum values), and if that fails nothing else is
checked, because the real front end rejects such a payload before the service sees it. Then the
service rules run and every violation is collected, not just the first.

The schema itself (field names, types, enum values, length limits) is `aiconsole.v1schema`,
the one source the OpenAPI document and the Model/Version checks are derived from too.

Field paths are proto snake_case paths prefixed with `job.`, as in real error details;
descriptions name fields by their JSON (camelCase) names, as users write them.

The result is a normalised copy in wire format: camelCase keys, int64 values as strings, int32
values as ints, whole doubles as ints, output-only fields dropped. Defaults are not filled in;
the catalogue and executor apply them.
"""

from __future__ import annotations

import json
import math
import re

from aiconsole import v1schema
from aiconsole.errors import FieldViolation, Violations
from aiconsole.v1schema import Field
from jobs.catalogue import (
    ACCELERATORS,
    CLOUD_TPU,
    COMPUTE_ENGINE,
    DEFAULT_RUNTIME_VERSION,
    LEGACY,
    MACHINE_TYPES,
    REGIONS,
    RUNTIME_VERSIONS,
    SCALE_TIERS,
    TPU,
)

# Parse errors come from the JSON front end, which reports the description alone.
_VERBATIM_PREFIXES = ("Invalid JSON payload received.", "Invalid value at ")


class SpecError(Exception):
    """A Job body was rejected; `violations` lists every problem found."""

    def __init__(self, violations: list[FieldViolation]):
        self.violations = list(violations)
        super().__init__(self.message)

    @property
    def message(self) -> str:
        """The error message of the API response, one line per violation."""
        return "\n".join(_render(v) for v in self.violations)


def _render(violation: FieldViolation) -> str:
    if violation.description.startswith(_VERBATIM_PREFIXES):
        return violation.description
    return f"Field: {violation.field} Error: {violation.description}"


_Errors = Violations  # the one collector (aiconsole.errors), under the name the rules below use

# ---------------------------------------------------------------------------------------------
# Reading JSON against the schema (aiconsole.v1schema)
# ---------------------------------------------------------------------------------------------

_S = v1schema.S
_SHOWN_CHARS = 200  # the most of a refused value a message repeats

_SCALAR_TYPE_NAMES = {
    "string": "TYPE_STRING", "bytes": "TYPE_BYTES", "bool": "TYPE_BOOL", "int32": "TYPE_INT32",
    "int64": "TYPE_INT64", "double": "TYPE_DOUBLE",
    "duration": "type.googleapis.com/google.protobuf.Duration",
    "timestamp": "type.googleapis.com/google.protobuf.Timestamp", "map": "map<string, string>",
}
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_DURATION_RE = re.compile(r"^\d+(\.\d{1,9})?s$")
_SKIP = object()  # a value that failed to parse

_snake = v1schema.snake


def _type_name(spec: Field) -> str:
    if spec.type == "enum":
        return f"type.googleapis.com/google.cloud.ml.v1.{spec.ref}"
    if spec.type == "message":
        return f"type.googleapis.com/google.cloud.ml.v1.{v1schema.proto_name(spec.ref)}"
    return _SCALAR_TYPE_NAMES[spec.type]


def _shown(value: object) -> str:
    """A value as JSON for a message, cut short so a huge value is never echoed whole."""
    shown = json.dumps(value, default=str, ensure_ascii=False)
    return shown if len(shown) <= _SHOWN_CHARS else shown[:_SHOWN_CHARS] + "…"


def _invalid_value(errors: _Errors, path: str, spec: Field, value: object) -> object:
    errors.add(path, f"Invalid value at '{path}' ({_type_name(spec)}), {_shown(value)}")
    return _SKIP


def _check_size(value: object, spec: Field, name: str, path: str, errors: _Errors) -> bool:
    """Whether a parsed field is within its length limits; each one it is not is a violation."""
    fits = True
    most_items = spec.max_items
    if isinstance(value, list) and most_items is not None and len(value) > most_items:
        errors.add(path, f"{name} can list at most {most_items} values; got {len(value)}.")
        fits = False
    most_chars = spec.max_chars
    for i, item in enumerate(value if isinstance(value, list) else [value]):
        if isinstance(item, str) and most_chars is not None and len(item) > most_chars:
            where = f"{path}[{i}]" if isinstance(value, list) else path
            errors.add(where, f"{name} is too long: at most {most_chars} characters; got "
                              f"{len(item)}.")
            fits = False
    return fits


def _parse_message(value: object, message: str, path: str, errors: _Errors) -> dict:
    """Read one JSON object against a proto message; unknown names and bad values are errors."""
    if not isinstance(value, dict):
        _invalid_value(errors, path, Field("message", v1schema.PREFIX + message), value)
        return {}
    fields = v1schema.message(message).fields
    # Like any proto3 JSON parser, accept the proto field name as well as the JSON name.
    by_proto_name = {_snake(name): name for name in fields}
    out: dict = {}
    seen: set[str] = set()
    for key, raw in value.items():
        name = key if key in fields else by_proto_name.get(str(key))
        if name is None:
            errors.add(path, f"Invalid JSON payload received. Unknown name \"{key}\" at "
                             f"'{path}': Cannot find field.")
            continue
        if name in seen:  # given both as jsonName and as proto_name
            errors.add(path, f"Invalid JSON payload received. Duplicate field \"{key}\" at "
                             f"'{path}'.")
            continue
        seen.add(name)
        spec = fields[name]
        if raw is None or spec.output_only:
            continue  # null means unset; output-only fields are ignored on input
        field_path = f"{path}.{_snake(name)}"
        parsed = _parse_field(raw, spec, field_path, errors)
        if parsed is not _SKIP and not _check_size(parsed, spec, name, field_path, errors):
            continue
        # An empty string is the proto3 default, the same as leaving the field out.
        if parsed is not _SKIP and parsed != "":
            out[name] = parsed
    return {name: out[name] for name in fields if name in out}


def _parse_field(value: object, spec: Field, path: str, errors: _Errors) -> object:
    if not spec.repeated:
        return _parse_single(value, spec, path, errors)
    if not isinstance(value, list):
        return _invalid_value(errors, path, spec, value)
    items = [_parse_single(item, spec, f"{path}[{i}]", errors) for i, item in enumerate(value)]
    return [item for item in items if item is not _SKIP]


def _parse_single(value: object, spec: Field, path: str, errors: _Errors) -> object:
    kind = spec.type
    if kind == "message":
        return _parse_message(value, v1schema.proto_name(spec.ref), path, errors)
    if kind == "map":
        return _parse_map(value, path, errors)
    if kind in ("string", "bytes", "timestamp", "duration", "enum"):
        if not isinstance(value, str):
            return _invalid_value(errors, path, spec, value)
        if kind == "duration" and not _DURATION_RE.match(value):
            return _invalid_value(errors, path, spec, value)
        if kind == "enum" and value not in v1schema.ENUMS[spec.ref]:
            return _invalid_value(errors, path, spec, value)
        return value
    if kind == "bool":
        parsed = _as_bool(value)
    elif kind == "double":
        parsed = _as_double(value)
    else:
        parsed = _as_int(value)
        low, high = _INT_RANGES[kind]
        if parsed is not None and not low <= parsed <= high:
            parsed = None
        if parsed is not None and kind == "int64":
            parsed = str(parsed)
    return _invalid_value(errors, path, spec, value) if parsed is None else parsed


def _parse_map(value: object, path: str, errors: _Errors) -> object:
    if not isinstance(value, dict):
        return _invalid_value(errors, path, v1schema.LABELS, value)
    out = {}
    for i, (key, item) in enumerate(value.items()):
        if isinstance(item, str):
            out[str(key)] = item
        else:
            _invalid_value(errors, f"{path}[{i}].value", _S, item)
    return out

def _as_bool(value: object) -> bool | None:
    if isinstance(value, bool):
        return value
    # YAML writers and HTML forms often send booleans as text.
    if isinstance(value, str) and value.lower() in ("true", "false"):
        return value.lower() == "true"
    return None


def _as_int(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def _as_double(value: object) -> int | float | None:
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        return None
    try:
        number = float(value)
    except ValueError:
        return None
    if not math.isfinite(number):
        return None
    # The wire prints whole doubles without a fraction ("minValue": 40).
    return int(number) if number.is_integer() and abs(number) < 2**53 else number


def _seconds(duration: str) -> float:
    return float(duration[:-1])


def _one_of(values) -> str:
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]


# ---------------------------------------------------------------------------------------------
# Job id and labels
# ---------------------------------------------------------------------------------------------

_JOB_ID_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")


def validate_job_id(job_id: object, field: str = "job.job_id") -> list[FieldViolation]:
    """Check a job id: a letter, then letters, digits or underscores, 128 characters at most."""
    if job_id is None or job_id == "":
        return [FieldViolation(field, "A job id is required.")]
    if not isinstance(job_id, str) or not _JOB_ID_RE.match(job_id):
        return [FieldViolation(
            field,
            f"Job id {_shown(job_id)} is invalid: it must start with a letter "
            "and contain only letters, numbers and underscores, at most 128 characters.",
        )]
    return []


_MAX_LABELS = 64
_LABEL_RULE = ("lowercase letters (international letters allowed), digits, underscores and "
               "dashes, at most 63 characters")


def _label_char_ok(char: str) -> bool:
    # Letters without case (e.g. CJK) count as lowercase; only uppercase letters are refused.
    return char in "_-" or char.isdigit() or (char.isalpha() and not char.isupper())


def _label_key_ok(key: str) -> bool:
    return (0 < len(key) <= 63 and key[0].isalpha() and not key[0].isupper()
            and all(_label_char_ok(c) for c in key))


def _label_value_ok(value: str) -> bool:
    return len(value) <= 63 and all(_label_char_ok(c) for c in value)


def validate_labels(labels: object, field: str = "job.labels") -> list[FieldViolation]:
    """Check Google's label rules: at most 64 labels, keys and values of a limited alphabet."""
    if not isinstance(labels, dict):
        return [FieldViolation(field, "labels must be a map of strings to strings.")]
    errors = _Errors()
    if len(labels) > _MAX_LABELS:
        errors.add(field, f"A resource can have at most {_MAX_LABELS} labels; got {len(labels)}.")
    for key, value in labels.items():
        if not isinstance(key, str) or not _label_key_ok(key):
            errors.add(field, f"Label key {_shown(key)} is invalid: keys must "
                              f"start with a lowercase letter and use only {_LABEL_RULE}.")
        if not isinstance(value, str) or not _label_value_ok(value):
            errors.add(field, f"Label value {_shown(value)} of key "
                              f"{_shown(key)} is invalid: values may be empty "
                              f"and use only {_LABEL_RULE}.")
    return errors


# ---------------------------------------------------------------------------------------------
# Public entry points
# ---------------------------------------------------------------------------------------------


def validate_job(body: dict) -> dict:
    """Validate a whole Job body and return its normalised copy; raise SpecError otherwise."""
    errors = _Errors()
    job = _parse_message(body, "Job", "job", errors)
    if errors:
        raise SpecError(errors)
    errors.extend(validate_job_id(job.get("jobId")))
    if "labels" in job:
        errors.extend(validate_labels(job["labels"]))
    if "trainingInput" in job and "predictionInput" in job:
        errors.add("job.prediction_input", "A job takes exactly one of trainingInput or "
                                           "predictionInput, not both.")
    elif "trainingInput" not in job and "predictionInput" not in job:
        errors.add("job.training_input", "A job needs trainingInput (a training job) or "
                                         "predictionInput (a batch prediction job).")
    if "trainingInput" in job:
        _check_training_input(job["trainingInput"], "job.training_input", errors)
    if "predictionInput" in job:
        _check_prediction_input(job["predictionInput"], "job.prediction_input", errors)
    if errors:
        raise SpecError(errors)
    return job


def validate_training_input(data: dict, field: str = "job.training_input") -> dict:
    """Validate a TrainingInput on its own and return its normalised copy."""
    return _validate(data, "TrainingInput", field, _check_training_input)


def validate_hyperparameters(data: dict, field: str = "job.training_input.hyperparameters"
                             ) -> dict:
    """Validate a HyperparameterSpec on its own and return its normalised copy."""
    return _validate(data, "HyperparameterSpec", field, _check_hyperparameters)


def _validate(data: object, message: str, field: str, check) -> dict:
    errors = _Errors()
    parsed = _parse_message(data, message, field, errors)
    if not errors:
        check(parsed, field, errors)
    if errors:
        raise SpecError(errors)
    return parsed


# ---------------------------------------------------------------------------------------------
# TrainingInput rules
# ---------------------------------------------------------------------------------------------

_ROLES = (
    # task type, machine type field, count field, config field, words for messages
    ("master", "masterType", None, "masterConfig", "master"),
    ("worker", "workerType", "workerCount", "workerConfig", "worker"),
    ("ps", "parameterServerType", "parameterServerCount", "parameterServerConfig",
     "parameter server"),
    ("evaluator", "evaluatorType", "evaluatorCount", "evaluatorConfig", "evaluator"),
)
_CATEGORY_WORDS = {COMPUTE_ENGINE: "Compute Engine", LEGACY: "legacy", TPU: "TPU"}


def _count(data: dict, key: str | None) -> int:
    return 1 if key is None else int(data.get(key) or 0)


DEFAULT_MAX_REPLICA_COUNT = 100


def max_replica_count() -> int:
    """Most replicas of one role a job may ask for here (``settings.MAX_REPLICA_COUNT``)."""
    from django.conf import settings

    if not settings.configured:
        return DEFAULT_MAX_REPLICA_COUNT
    return getattr(settings, "MAX_REPLICA_COUNT", DEFAULT_MAX_REPLICA_COUNT)


def _tier(ti: dict) -> str:
    # proto3 cannot tell an unset enum from its first value, so a missing tier is BASIC.
    return ti.get("scaleTier", "BASIC")


def _role_machines(ti: dict) -> dict[str, tuple[str | None, int]]:
    """Task type -> (machine type, replica count) the job will really use."""
    if _tier(ti) == "CUSTOM":
        return {task: (ti.get(type_key), _count(ti, count_key))
                for task, type_key, count_key, _, _ in _ROLES}
    machines: dict[str, tuple[str | None, int]] = {task: (None, 0) for task, *_ in _ROLES}
    for role in SCALE_TIERS[_tier(ti)].roles:
        machines[role.task_type] = (role.machine_type, role.count)
    return machines


def _check_training_input(ti: dict, path: str, errors: _Errors) -> None:
    _check_cluster(ti, path, errors)
    _check_accelerators(ti, path, errors)
    _check_code(ti, path, errors)
    _check_region(ti, path, errors)
    _check_scheduling(ti.get("scheduling"), f"{path}.scheduling", errors)
    _check_identity(ti, path, errors)
    if "hyperparameters" in ti:
        _check_hyperparameters(ti["hyperparameters"], f"{path}.hyperparameters", errors)
    from jobs import builtin  # built-in algorithms' own rules (their image, args, machines)

    errors.extend(builtin.check_training_input(ti, path))


def _check_cluster(ti: dict, path: str, errors: _Errors) -> None:
    tier = _tier(ti)
    if tier == "CUSTOM" and not ti.get("masterType"):
        errors.add(f"{path}.master_type", "masterType is required when scaleTier is CUSTOM.")
    if tier != "CUSTOM":
        for _, type_key, count_key, _, _ in _ROLES:
            for key in (type_key, count_key):
                # A zero count is the proto3 default, indistinguishable from leaving it out.
                if key and ti.get(key) and ti[key] != "0":
                    errors.add(f"{path}.{_snake(key)}", f"{key} can only be set when scaleTier "
                                                        f"is CUSTOM; {tier} has a fixed cluster.")
        return
    master = ti.get("masterType")
    _check_machine_name(master, "masterType", f"{path}.master_type", errors)
    most = max_replica_count()
    for task, type_key, count_key, _, _ in _ROLES[1:]:
        machine, count = ti.get(type_key), _count(ti, count_key)
        type_path, count_path = f"{path}.{_snake(type_key)}", f"{path}.{_snake(count_key)}"
        if count < 0:
            errors.add(count_path, f"{count_key} must be 0 or greater; got {count}.")
        if count > most:
            errors.add(count_path, f"{count_key} must be at most {most} on this server "
                                   f"(AICONSOLE_MAX_REPLICA_COUNT); got {count}.")
        if count > 0 and not machine:
            errors.add(type_path, f"{type_key} must be specified when {count_key} > 0.")
        if not machine:
            continue
        if machine == CLOUD_TPU and task != "worker":
            errors.add(type_path, f"cloud_tpu can only be used as masterType or workerType, "
                                  f"not as {type_key}.")
            continue
        if not _check_machine_name(machine, type_key, type_path, errors):
            continue
        if machine == CLOUD_TPU and count != 1:
            errors.add(count_path, f"A cloud_tpu worker needs workerCount 1; got {count}.")
        _check_same_category(master, machine, type_key, type_path, errors)


def _check_machine_name(machine: str | None, key: str, field: str, errors: _Errors) -> bool:
    if machine is None or machine in MACHINE_TYPES:
        return machine is not None
    compute_engine = [m for m, t in MACHINE_TYPES.items() if t.category == COMPUTE_ENGINE]
    legacy = [m for m, t in MACHINE_TYPES.items() if t.category == LEGACY]
    errors.add(field, f'{key} "{machine}" is not a supported machine type. Use a Compute Engine '
                      f"type ({', '.join(compute_engine)}), a legacy type "
                      f"({', '.join(legacy)}) or cloud_tpu.")
    return False


def _check_same_category(master: str | None, machine: str, key: str, field: str,
                         errors: _Errors) -> None:
    master_category = MACHINE_TYPES[master].category if master in MACHINE_TYPES else None
    category = MACHINE_TYPES[machine].category
    # cloud_tpu pairs with either kind of master.
    if master_category in (None, TPU) or category == TPU or category == master_category:
        return
    errors.add(field, f"Compute Engine and legacy machine types cannot be mixed: masterType "
                      f"{master} is a {_CATEGORY_WORDS[master_category]} type but {key} "
                      f"{machine} is a {_CATEGORY_WORDS[category]} type.")


# --- accelerators ----------------------------------------------------------------------------


def _check_accelerators(ti: dict, path: str, errors: _Errors) -> None:
    tier = _tier(ti)
    machines = _role_machines(ti)
    for task, type_key, _, config_key, words in _ROLES:
        machine_name, count = machines[task]
        field = f"{path}.{_snake(config_key)}.accelerator_config"
        accelerator = (ti.get(config_key) or {}).get("acceleratorConfig")
        machine = MACHINE_TYPES.get(machine_name or "")
        source = (f"{type_key} {machine_name}" if tier == "CUSTOM"
                  else f"{machine_name} (from scale tier {tier})")
        if accelerator is None:
            # A cloud_tpu parameter server or evaluator is already refused by _check_cluster.
            cloud_tpu_misplaced = machine_name == CLOUD_TPU and task not in ("master", "worker")
            if tier == "CUSTOM" and machine is not None and count > 0 and not cloud_tpu_misplaced:
                _check_required_accelerator(machine, field, errors)
            continue
        if machine_name is None and tier == "CUSTOM" and (task == "master" or count > 0):
            continue  # the missing machine type is reported by _check_cluster
        if machine_name is None or count == 0:
            errors.add(field, f"{config_key}.acceleratorConfig is set but the job has no "
                              f"{words} replicas.")
        elif machine is not None:
            _check_accelerator(accelerator, machine, source, field, errors)


def _check_required_accelerator(machine, field: str, errors: _Errors) -> None:
    if machine.a2_gpu_count:
        errors.add(field, f"{machine.name} needs an acceleratorConfig with type "
                          f"NVIDIA_TESLA_A100 and count {machine.a2_gpu_count}.")
    elif machine.category == TPU:
        errors.add(field, "A cloud_tpu replica needs an acceleratorConfig with type TPU_V2 or "
                          "TPU_V3 and count 8.")


def _check_accelerator(accelerator: dict, machine, source: str, field: str,
                       errors: _Errors) -> None:
    kind, count = accelerator.get("type"), int(accelerator.get("count") or 0)
    complete = True
    if kind is None:
        errors.add(f"{field}.type", "acceleratorConfig.type is required, e.g. NVIDIA_TESLA_T4.")
        complete = False
    elif kind == "ACCELERATOR_TYPE_UNSPECIFIED":
        errors.add(f"{field}.type", "acceleratorConfig.type must name an accelerator, e.g. "
                                    "NVIDIA_TESLA_T4; ACCELERATOR_TYPE_UNSPECIFIED is not one.")
        complete = False
    if count < 1:
        errors.add(f"{field}.count", f"acceleratorConfig.count must be greater than 0; got "
                                     f"{count}.")
        complete = False
    if machine.category == LEGACY:
        built_in = ", which has its accelerators built in" if machine.builtin_accelerator else ""
        errors.add(field, f"acceleratorConfig can only be used with a Compute Engine machine "
                          f"type; {source} is a legacy machine type{built_in}.")
        return
    if complete:
        problem = _accelerator_problem(kind, count, machine, source)
        if problem:
            errors.add(f"{field}.{problem[0]}", problem[1])


def _accelerator_problem(kind: str, count: int, machine, source: str) -> tuple[str, str] | None:
    """(sub-field, description) of what is wrong with `count` x `kind` on `machine`, if any."""
    accelerator = ACCELERATORS.get(kind)
    if accelerator is None:
        return "type", (f"{kind} is not supported for training jobs; request TPUs as TPU_V2 or "
                        "TPU_V3 on a cloud_tpu replica.")
    if machine.category == TPU:
        if accelerator.kind != "tpu":
            return "type", f"A cloud_tpu replica takes TPU_V2 or TPU_V3, not {kind}."
        if count != 8:
            return "count", f"A cloud_tpu replica takes exactly 8 TPU cores; got {count}."
        return None
    if accelerator.kind == "tpu":
        return "type", f"{kind} can only be used with the cloud_tpu machine type, not {source}."
    if machine.a2_gpu_count:
        if kind != "NVIDIA_TESLA_A100":
            return "type", f"{machine.name} only takes NVIDIA_TESLA_A100, not {kind}."
        if count != machine.a2_gpu_count:
            return "count", (f"{machine.name} comes with exactly {machine.a2_gpu_count} "
                             f"NVIDIA_TESLA_A100; count must be {machine.a2_gpu_count}.")
        return None
    if kind == "NVIDIA_TESLA_A100":
        return "type", (f"NVIDIA_TESLA_A100 can only be attached to a2 machine types "
                        f"(a2-highgpu-1g ... a2-megagpu-16g), not {source}.")
    if count not in accelerator.allowed_counts:
        return "count", (f"{kind} can be attached in counts of "
                         f"{_one_of(accelerator.allowed_counts)}, not {count}.")
    ceiling = accelerator.max_vcpus[count]
    if machine.vcpus <= ceiling:
        return None
    fits = [c for c in accelerator.allowed_counts if accelerator.max_vcpus[c] >= machine.vcpus]
    hint = (f" Use {_one_of(fits)} GPUs or a machine type with fewer vCPUs." if fits
            else f" No number of {kind} fits it; use a machine type with fewer vCPUs.")
    return "count", (f"{machine.name} has {machine.vcpus} vCPUs, but a machine with {count} "
                     f"{kind} may have at most {ceiling} vCPUs.{hint}")


# --- code, runtime and containers ------------------------------------------------------------

_MODULE_RE = re.compile(r"^[A-Za-z_]\w*(\.[A-Za-z_]\w*)*$")
_IMAGE_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._\-/:@]*$")
_MAX_PACKAGES = 100


def _check_code(ti: dict, path: str, errors: _Errors) -> None:
    configs = {key: ti.get(key) or {} for _, _, _, key, _ in _ROLES}
    master_image = configs["masterConfig"].get("imageUri")
    container = any(config.get("imageUri") for config in configs.values())
    for key, config in configs.items():
        image = config.get("imageUri")
        if image and not _IMAGE_RE.match(image):
            errors.add(f"{path}.{_snake(key)}.image_uri", f"{key}.imageUri must be a container "
                       "image reference such as gcr.io/my-project/trainer:latest.")
        if image and not master_image:
            errors.add(f"{path}.{_snake(key)}.image_uri", f"{key}.imageUri requires "
                       "masterConfig.imageUri: a job runs either Python packages or containers.")
    _check_packages(ti, path, errors, required=not master_image)
    if container:
        for key in ("runtimeVersion", "pythonVersion"):
            if ti.get(key):
                errors.add(f"{path}.{_snake(key)}", f"{key} cannot be set together with "
                           "imageUri: a custom container brings its own runtime.")
    else:
        _check_runtime(ti, path, errors)
    _check_container_fields(ti, path, configs, container, errors)


def _check_packages(ti: dict, path: str, errors: _Errors, *, required: bool) -> None:
    packages = ti.get("packageUris", [])
    if required and not packages:
        errors.add(f"{path}.package_uris", "packageUris is required: give at least one Python "
                   "package, or set masterConfig.imageUri to run a custom container.")
    if len(packages) > _MAX_PACKAGES:
        errors.add(f"{path}.package_uris", f"packageUris can list at most {_MAX_PACKAGES} "
                                           f"packages; got {len(packages)}.")
    for i, uri in enumerate(packages):
        if not uri.strip():
            errors.add(f"{path}.package_uris[{i}]", "A package URI must not be empty.")
    module = ti.get("pythonModule")
    if required and not module:
        errors.add(f"{path}.python_module", "pythonModule is required: name the module to run, "
                   "e.g. trainer.task, or set masterConfig.imageUri to run a custom container.")
    elif module and not _MODULE_RE.match(module):
        errors.add(f"{path}.python_module", f'pythonModule "{module}" must be a dotted Python '
                                            "module name such as trainer.task.")


def _check_runtime(ti: dict, path: str, errors: _Errors) -> None:
    runtime = ti.get("runtimeVersion")
    if runtime and runtime not in RUNTIME_VERSIONS:
        errors.add(f"{path}.runtime_version", f'runtimeVersion "{runtime}" is not supported. '
                   f"Supported runtime versions: {', '.join(RUNTIME_VERSIONS)}.")
        return
    python = ti.get("pythonVersion")
    effective = runtime or DEFAULT_RUNTIME_VERSION
    allowed = RUNTIME_VERSIONS[effective].python_versions
    if python and python not in allowed:
        why = {
            "3.7": "Python 3.7 requires runtimeVersion 1.15 or later.",
            "2.7": "Python 2.7 requires runtimeVersion 1.15 or earlier.",
            "3.5": "Python 3.5 requires a runtimeVersion from 1.4 to 1.14.",
        }.get(python, f'pythonVersion "{python}" is not supported.')
        default = "" if runtime else " (the default)"
        errors.add(f"{path}.python_version", f"{why} runtimeVersion {effective}{default} "
                                             f"supports Python {_one_of(allowed)}.")


def _check_container_fields(ti: dict, path: str, configs: dict, container: bool,
                            errors: _Errors) -> None:
    master_image = configs["masterConfig"].get("imageUri")
    machines = _role_machines(ti)
    for task, _, _, key, _ in _ROLES:
        config, field = configs[key], f"{path}.{_snake(key)}"
        for name in ("containerCommand", "containerArgs"):
            if not config.get(name):
                continue
            if not (config.get("imageUri") or master_image):
                errors.add(f"{field}.{_snake(name)}", f"{name} can only be used with a custom "
                                                      "container (set imageUri).")
            elif ti.get("args"):
                errors.add(f"{field}.{_snake(name)}", f"{name} cannot be combined with "
                           "trainingInput.args; put the arguments in containerArgs instead.")
        machine, count = machines[task]
        tf_version = config.get("tpuTfVersion")
        if tf_version and machine != CLOUD_TPU:
            errors.add(f"{field}.tpu_tf_version", "tpuTfVersion only applies to a cloud_tpu "
                                                  "replica.")
        elif tf_version and not re.fullmatch(r"\d+\.\d+", tf_version):
            errors.add(f"{field}.tpu_tf_version", f'tpuTfVersion "{tf_version}" must be a '
                                                  "runtime version as major.minor, e.g. 2.11.")
        elif machine == CLOUD_TPU and count > 0 and container and not tf_version:
            errors.add(f"{field}.tpu_tf_version", "tpuTfVersion is required for a cloud_tpu "
                                                  "replica that runs a custom container.")


# --- region, scheduling, identity, disks -----------------------------------------------------


def _requested_accelerators(ti: dict, path: str) -> list[tuple[str, str]]:
    """(accelerator type, field to blame) for every accelerator the job would attach."""
    tier = _tier(ti)
    requested = []
    if tier != "CUSTOM":
        for role in SCALE_TIERS[tier].roles:
            builtin = MACHINE_TYPES[role.machine_type].builtin_accelerator
            kind = builtin[0] if builtin else role.accelerator_type
            if kind:
                requested.append((kind, f"{path}.scale_tier"))
    machines = _role_machines(ti)
    for task, type_key, _, config_key, _ in _ROLES:
        machine_name, count = machines[task]
        machine = MACHINE_TYPES.get(machine_name or "")
        if machine is None or count == 0:
            continue
        if tier == "CUSTOM" and machine.builtin_accelerator:
            requested.append((machine.builtin_accelerator[0], f"{path}.{_snake(type_key)}"))
        kind = ((ti.get(config_key) or {}).get("acceleratorConfig") or {}).get("type")
        if kind in ACCELERATORS and not machine.builtin_accelerator:
            requested.append((kind, f"{path}.{_snake(config_key)}.accelerator_config.type"))
    return list(dict.fromkeys(requested))


def _check_region(ti: dict, path: str, errors: _Errors) -> None:
    region = ti.get("region")
    if not _check_region_name(region, f"{path}.region", errors):
        return
    available = REGIONS[region].accelerators
    for kind, field in _requested_accelerators(ti, path):
        if kind not in available:
            where = [name for name, r in REGIONS.items() if kind in r.accelerators]
            errors.add(field, f"{kind} is not available in region {region}. Regions with "
                              f"{kind}: {', '.join(where)}.")


def _check_region_name(region: str | None, field: str, errors: _Errors) -> bool:
    if not region:
        errors.add(field, "region is required, e.g. us-central1.")
        return False
    if region not in REGIONS:
        errors.add(field, f'Region "{region}" is not supported. Supported regions: '
                          f"{', '.join(REGIONS)}.")
        return False
    return True


def _check_scheduling(scheduling: dict | None, path: str, errors: _Errors) -> None:
    if not scheduling:
        return
    running, waiting = scheduling.get("maxRunningTime"), scheduling.get("maxWaitTime")
    if running is not None and _seconds(running) <= 0:
        errors.add(f"{path}.max_running_time", "maxRunningTime must be longer than 0s.")
    # The service refuses waits shorter than 30 minutes.
    if waiting is not None and _seconds(waiting) < 1800:
        errors.add(f"{path}.max_wait_time", f"maxWaitTime must be at least 1800s (30 minutes); "
                                            f"got {waiting}.")
    priority = scheduling.get("priority")
    if priority is not None and not 0 <= priority <= 1000:
        errors.add(f"{path}.priority", f"priority must be between 0 and 1000; got {priority}.")


_NETWORK_RE = re.compile(r"^projects/\d+/global/networks/[^/]+$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_KMS_RE = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
_DISK_TYPES = ("pd-ssd", "pd-standard")
_DISK_GB_RANGE = (10, 64000)


def _check_identity(ti: dict, path: str, errors: _Errors) -> None:
    network = ti.get("network")
    if network and not _NETWORK_RE.match(network):
        errors.add(f"{path}.network", "network must look like projects/{projectNumber}/global/"
                   "networks/{network}, e.g. projects/12345/global/networks/myVPC.")
    account = ti.get("serviceAccount")
    if account and not _EMAIL_RE.match(account):
        errors.add(f"{path}.service_account", f'serviceAccount "{account}" must be a service '
                                              "account email address.")
    if "encryptionConfig" in ti:
        key = ti["encryptionConfig"].get("kmsKeyName")
        if not key or not _KMS_RE.match(key):
            errors.add(f"{path}.encryption_config.kms_key_name", "kmsKeyName must look like "
                       "projects/{project}/locations/{location}/keyRings/{keyRing}/cryptoKeys/"
                       "{key}.")
    for _, _, _, key, _ in _ROLES:
        disk = (ti.get(key) or {}).get("diskConfig") or {}
        field = f"{path}.{_snake(key)}.disk_config"
        size, kind = disk.get("bootDiskSizeGb"), disk.get("bootDiskType")
        low, high = _DISK_GB_RANGE
        if size is not None and not low <= size <= high:
            errors.add(f"{field}.boot_disk_size_gb", f"bootDiskSizeGb must be between {low} and "
                                                     f"{high}; got {size}.")
        if kind is not None and kind not in _DISK_TYPES:
            errors.add(f"{field}.boot_disk_type", f'bootDiskType "{kind}" must be pd-ssd or '
                                                  "pd-standard.")


# ---------------------------------------------------------------------------------------------
# HyperparameterSpec rules
# ---------------------------------------------------------------------------------------------

_LOG_SCALES = ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")
_GRID_TYPES = ("INTEGER", "CATEGORICAL", "DISCRETE")
_MAX_DISCRETE_VALUES = 1000


def _check_hyperparameters(hp: dict, path: str, errors: _Errors) -> None:
    params = hp.get("params", [])
    if not params:
        errors.add(f"{path}.params", "params must list at least one parameter to tune.")
    names: set[str] = set()
    for i, param in enumerate(params):
        _check_param(param, f"{path}.params[{i}]", names, errors)
        kind = param.get("type", "PARAMETER_TYPE_UNSPECIFIED")
        # A missing type is reported by _check_param; only a real non-grid type is wrong here.
        if hp.get("algorithm") == "GRID_SEARCH" and kind not in (*_GRID_TYPES,
                                                                 "PARAMETER_TYPE_UNSPECIFIED"):
            errors.add(f"{path}.params[{i}].type", "GRID_SEARCH needs every parameter to be "
                                                   f"INTEGER, CATEGORICAL or DISCRETE; got {kind}.")
    for key, low in (("maxTrials", 1), ("maxParallelTrials", 1), ("maxFailedTrials", 0)):
        if key in hp and hp[key] < low:
            errors.add(f"{path}.{_snake(key)}", f"{key} must be at least {low}; got {hp[key]}.")
    if "resumePreviousJobId" in hp:
        errors.extend(validate_job_id(hp["resumePreviousJobId"],
                                      f"{path}.resume_previous_job_id"))


def _check_param(param: dict, path: str, names: set[str], errors: _Errors) -> None:
    name = param.get("parameterName")
    if not name:
        errors.add(f"{path}.parameter_name", "parameterName is required.")
    elif name in names:
        errors.add(f"{path}.parameter_name", f'parameterName "{name}" is used twice; names must '
                                             "be unique.")
    elif re.search(r"[\s=]", name):
        # The value reaches the trainer as --name=value.
        errors.add(f"{path}.parameter_name", f'parameterName "{name}" must not contain spaces '
                                             "or '='.")
    names.add(name or "")
    kind = param.get("type")
    if kind in (None, "PARAMETER_TYPE_UNSPECIFIED"):
        errors.add(f"{path}.type", "type is required: DOUBLE, INTEGER, CATEGORICAL or DISCRETE.")
        return
    for key, owner in (("categoricalValues", "CATEGORICAL"), ("discreteValues", "DISCRETE")):
        if key in param and kind != owner:
            errors.add(f"{path}.{_snake(key)}", f"{key} can only be set for {owner} parameters.")
    if kind in ("DOUBLE", "INTEGER"):
        _check_range(param, kind, path, errors)
    elif kind == "CATEGORICAL":
        _check_categorical(param, path, errors)
    else:
        _check_discrete(param, path, errors)


def _check_range(param: dict, kind: str, path: str, errors: _Errors) -> None:
    bounds = {key: param.get(key) for key in ("minValue", "maxValue")}
    for key, value in bounds.items():
        if value is None:
            errors.add(f"{path}.{_snake(key)}", f"{key} is required for {kind} parameters.")
        elif kind == "INTEGER" and not isinstance(value, int):
            errors.add(f"{path}.{_snake(key)}", f"{key} must be a whole number for INTEGER "
                                                f"parameters; got {value}.")
    low, high = bounds["minValue"], bounds["maxValue"]
    if low is not None and high is not None and low >= high:
        errors.add(f"{path}.min_value", f"minValue must be less than maxValue; got {low} and "
                                        f"{high}.")
    if param.get("scaleType") in _LOG_SCALES and low is not None and low <= 0:
        errors.add(f"{path}.min_value", f"{param['scaleType']} needs a strictly positive range; "
                                        f"minValue is {low}.")


def _check_categorical(param: dict, path: str, errors: _Errors) -> None:
    values = param.get("categoricalValues", [])
    if not values:
        errors.add(f"{path}.categorical_values", "categoricalValues is required for CATEGORICAL "
                                                 "parameters and must not be empty.")
    elif len(set(values)) != len(values):
        errors.add(f"{path}.categorical_values", "categoricalValues must not repeat a value.")
    elif "" in values:
        errors.add(f"{path}.categorical_values", "categoricalValues must not contain an empty "
                                                 "string.")
    for key in ("minValue", "maxValue"):
        if key in param:
            errors.add(f"{path}.{_snake(key)}", f"{key} must not be set for CATEGORICAL "
                                                "parameters.")
    # NONE is the proto3 default, so it cannot be told apart from leaving scaleType out.
    if param.get("scaleType", "NONE") != "NONE":
        errors.add(f"{path}.scale_type", "scaleType must not be set for CATEGORICAL parameters.")


def _check_discrete(param: dict, path: str, errors: _Errors) -> None:
    values = param.get("discreteValues", [])
    field = f"{path}.discrete_values"
    if not values:
        errors.add(field, "discreteValues is required for DISCRETE parameters and must not be "
                          "empty.")
        return
    if len(values) > _MAX_DISCRETE_VALUES:
        errors.add(field, f"discreteValues can list at most {_MAX_DISCRETE_VALUES} values; got "
                          f"{len(values)}.")
    if any(b <= a for a, b in zip(values, values[1:], strict=False)):
        errors.add(field, "discreteValues must be in strictly increasing order.")
    if param.get("scaleType") in _LOG_SCALES and values[0] <= 0:
        errors.add(field, f"{param['scaleType']} needs strictly positive discreteValues.")


# ---------------------------------------------------------------------------------------------
# PredictionInput rules (batch prediction is checked for shape only)
# ---------------------------------------------------------------------------------------------

_MODEL_NAME_RE = re.compile(r"^projects/[^/]+/models/[^/]+$")
_VERSION_NAME_RE = re.compile(r"^projects/[^/]+/models/[^/]+/versions/[^/]+$")
_INPUT_FORMATS = ("JSON", "TEXT", "TF_RECORD", "TF_RECORD_GZIP")
_OUTPUT_FORMATS = ("JSON", "CSV")


def _check_prediction_input(pi: dict, path: str, errors: _Errors) -> None:
    sources = [key for key in ("modelName", "versionName", "uri") if key in pi]
    if len(sources) != 1:
        errors.add(path, "Exactly one of modelName, versionName or uri must be set; got "
                         f"{' and '.join(sources) if sources else 'none'}.")
    for key, pattern, example in (
        ("modelName", _MODEL_NAME_RE, "projects/{project}/models/{model}"),
        ("versionName", _VERSION_NAME_RE, "projects/{project}/models/{model}/versions/{version}"),
    ):
        if key in pi and not pattern.match(pi[key]):
            errors.add(f"{path}.{_snake(key)}", f"{key} must look like {example}.")
    data_format = pi.get("dataFormat", "DATA_FORMAT_UNSPECIFIED")
    if data_format not in _INPUT_FORMATS:
        errors.add(f"{path}.data_format", f"dataFormat is required and must be one of "
                                          f"{', '.join(_INPUT_FORMATS)}; got {data_format}.")
    output_format = pi.get("outputDataFormat")
    if output_format is not None and output_format not in _OUTPUT_FORMATS:
        errors.add(f"{path}.output_data_format", f"outputDataFormat must be JSON or CSV; got "
                                                 f"{output_format}.")
    paths = pi.get("inputPaths", [])
    if not paths or not all(p.strip() for p in paths):
        errors.add(f"{path}.input_paths", "inputPaths is required: list at least one path, "
                                          "wildcards allowed; paths must not be empty.")
    if not pi.get("outputPath"):
        errors.add(f"{path}.output_path", "outputPath is required.")
    _check_region_name(pi.get("region"), f"{path}.region", errors)
    runtime = pi.get("runtimeVersion")
    if runtime and runtime not in RUNTIME_VERSIONS:
        errors.add(f"{path}.runtime_version", f'runtimeVersion "{runtime}" is not supported. '
                   f"Supported runtime versions: {', '.join(RUNTIME_VERSIONS)}.")
    for key in ("maxWorkerCount", "batchSize"):
        if key in pi and int(pi[key]) < 1:
            errors.add(f"{path}.{_snake(key)}", f"{key} must be at least 1; got {pi[key]}.")
