"""Validation of Model and Version bodies: plain functions over plain data.

Field names and JSON types follow the v1 schema; unknown fields are refused as the original's
JSON parser refused them. Service rules (name syntax, one region, runtime/Python pairs, scaling
bounds) come after, all reported together as ``google.rpc.BadRequest`` field violations.
"""

from __future__ import annotations

import re

from aiconsole import protojson, v1schema
from aiconsole.errors import FieldViolation, InvalidArgument, Violations, clipped
from aiconsole.protojson import Field, snake
from jobs import catalogue, runtimes
from jobs import validation as job_spec
from models_registry import conf

NAME_RE = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}$")
NAME_RULE = "A name should start with a letter and contain only letters, numbers and underscores."
DEFAULT_REGION = "us-central1"
DEFAULT_MACHINE_TYPE = "mls1-c1-m2"
MACHINE_TYPES = (
    "mls1-c1-m2",
    "mls1-c4-m2",
    *(f"n1-{kind}-{cpus}" for kind in ("standard", "highmem", "highcpu") for cpus in (2, 4, 8, 16, 32)),
)
FRAMEWORKS = v1schema.ENUMS["Version.Framework"]
METRIC_NAMES = v1schema.ENUMS["MetricSpec.MetricName"][1:]  # a metric must be named

# The fields of each body, from the one schema (aiconsole.v1schema): name -> Field.
MODEL_FIELDS = v1schema.message("Model").fields
VERSION_FIELDS = v1schema.message("Version").fields
# Parts of the Version schema this server does not run: refused with a reason, never ignored.
UNSUPPORTED_VERSION_FIELDS = {key: spec.unsupported for key, spec in VERSION_FIELDS.items() if spec.unsupported}

Problems = Violations  # the one collector (aiconsole.errors)


def _problems() -> Problems:
    return Violations()


_STRINGISH = ("string", "bytes", "timestamp", "duration", "enum", "int64")


def _json_kind(spec: Field) -> str:
    """The JSON type this parser checks a field's value against, as its messages name it."""
    if spec.repeated:
        assert spec.type == "string", spec
        return "strings"
    if spec.type in _STRINGISH:
        return "string"
    return {"bool": "bool", "map": "map", "message": "object"}[spec.type]


def _type_ok(value, kind: str) -> bool:
    if kind == "string":
        return isinstance(value, str)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "strings":
        return isinstance(value, list) and all(isinstance(item, str) for item in value)
    if kind in ("map", "object"):
        return isinstance(value, dict)
    return True


def check_types(body, fields: dict[str, Field], prefix: str) -> Problems:
    """Unknown names and wrong JSON types, worded like the original's parser."""
    problems = _problems()
    if not isinstance(body, dict):
        problems.add(prefix, f"Invalid JSON payload received. Expected an object at '{prefix}'.")
        return problems
    for key, value in body.items():
        if key not in fields:
            problems.add(
                prefix,
                f"Invalid JSON payload received. Unknown name \"{clipped(key)}\" at '{prefix}': Cannot find field.",
            )
            continue
        kind = _json_kind(fields[key])
        if value is not None and not _type_ok(value, kind):
            problems.add(
                f"{prefix}.{snake(key)}",
                f"Invalid value at '{prefix}.{snake(key)}': expected {kind.replace('strings', 'a list of strings')}.",
            )
        elif kind in ("string", "strings"):
            protojson.fits(value, fields[key], key, f"{prefix}.{snake(key)}", problems)
    return problems


def check_name(name, field: str, problems: Problems) -> None:
    if not name:
        problems.add(field, "A name is required. " + NAME_RULE)
    elif not isinstance(name, str) or not NAME_RE.match(name):
        problems.add(field, NAME_RULE + " At most 128 characters.")


def validate_model(body) -> dict:
    """A CreateModel body, normalised: regions defaulted, logging flags as booleans."""
    problems = check_types(body, MODEL_FIELDS, "model")
    problems.raise_if_any()
    check_name(body.get("name"), "model.name", problems)
    regions = body.get("regions") or [DEFAULT_REGION]
    if len(regions) > 1:
        problems.add("model.regions", "Only one region per model is supported.")
    for region in regions:
        if region not in catalogue.REGIONS:
            problems.add(
                "model.regions",
                f"Region {region!r} is not available; choose one of {', '.join(sorted(catalogue.REGIONS))}.",
            )
    labels = body.get("labels") or {}
    problems.violations.extend(job_spec.validate_labels(labels, "model.labels"))
    problems.raise_if_any()
    return {
        "name": body["name"],
        "description": body.get("description") or "",
        "regions": regions,
        "onlinePredictionLogging": bool(body.get("onlinePredictionLogging")),
        "onlinePredictionConsoleLogging": bool(body.get("onlinePredictionConsoleLogging")),
        "labels": labels,
    }


def _integer(value, field: str, problems: Problems, *, minimum: int) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | str):
        problems.add(field, f"Invalid value at '{field}': expected an integer.")
        return None
    try:
        number = int(value)
    except ValueError:
        problems.add(field, f"Invalid value at '{field}': expected an integer, got {value!r}.")
        return None
    if number < minimum:
        problems.add(field, f"Must be at least {minimum}; got {number}.")
        return None
    return number


def check_scaling(auto, manual, problems: Problems, prefix: str = "version") -> tuple[dict | None, dict | None]:
    """autoScaling / manualScaling, normalised; bounded by this server's per-version node cap."""
    cap = conf.max_nodes()
    if auto is not None and manual is not None:
        problems.add(f"{prefix}.manual_scaling", "Only one of autoScaling and manualScaling may be set.")
        return None, None
    if manual is not None:
        unknown = [k for k in manual if k not in v1schema.message("ManualScaling").fields]
        if unknown:
            problems.add(f"{prefix}.manual_scaling", f"Unknown field {unknown[0]!r}; manualScaling has nodes.")
        nodes = _integer(manual.get("nodes", 1), f"{prefix}.manual_scaling.nodes", problems, minimum=1)
        if nodes is not None and nodes > cap:
            problems.add(
                f"{prefix}.manual_scaling.nodes",
                f"This server runs at most {cap} serving processes per version (AICONSOLE_MODEL_MAX_NODES).",
            )
        return None, {"nodes": nodes} if nodes is not None else None
    if auto is None:
        return None, None
    unknown = [k for k in auto if k not in v1schema.message("AutoScaling").fields]
    if unknown:
        problems.add(
            f"{prefix}.auto_scaling", f"Unknown field {unknown[0]!r}; autoScaling has minNodes, maxNodes and metrics."
        )
    result: dict = {}
    minimum = _integer(auto.get("minNodes", 0), f"{prefix}.auto_scaling.min_nodes", problems, minimum=0)
    if minimum is not None:
        result["minNodes"] = minimum
        if minimum > cap:
            problems.add(
                f"{prefix}.auto_scaling.min_nodes",
                f"This server runs at most {cap} serving processes per version (AICONSOLE_MODEL_MAX_NODES).",
            )
    if auto.get("maxNodes") not in (None, 0, "0"):
        maximum = _integer(auto["maxNodes"], f"{prefix}.auto_scaling.max_nodes", problems, minimum=1)
        if maximum is not None:
            if minimum is not None and maximum < minimum:
                problems.add(f"{prefix}.auto_scaling.max_nodes", "maxNodes must not be less than minNodes.")
            result["maxNodes"] = maximum
    metrics = auto.get("metrics")
    if metrics is not None:
        if not isinstance(metrics, list) or not all(
            isinstance(m, dict) and m.get("name") in METRIC_NAMES for m in metrics
        ):
            problems.add(
                f"{prefix}.auto_scaling.metrics", "Each metric needs a name: CPU_USAGE or GPU_DUTY_CYCLE, and a target."
            )
        else:
            result["metrics"] = metrics
    return result, None


_LOGGING_FIELDS = v1schema.message("RequestLoggingConfig").fields


def check_request_logging(config, problems: Problems, prefix: str = "version") -> dict | None:
    if config is None:
        return None
    field = f"{prefix}.request_logging_config"
    unknown = [k for k in config if k not in _LOGGING_FIELDS]
    if unknown:
        problems.add(
            field, f"Unknown field {unknown[0]!r}; requestLoggingConfig has samplingPercentage and bigqueryTableName."
        )
    result = {}
    rate = config.get("samplingPercentage", 0)
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not 0 <= rate <= 1:
        problems.add(
            f"{field}.sampling_percentage", "samplingPercentage is a fraction from 0 to 1 (0.1 logs 10% of requests)."
        )
    elif rate:
        result["samplingPercentage"] = rate
    table = config.get("bigqueryTableName")
    if table is not None:
        if not isinstance(table, str):
            problems.add(f"{field}.bigquery_table_name", "Must be a string.")
        elif len(table) > _LOGGING_FIELDS["bigqueryTableName"].max_chars:
            protojson.fits(
                table,
                _LOGGING_FIELDS["bigqueryTableName"],
                "bigqueryTableName",
                f"{field}.bigquery_table_name",
                problems,
            )
        elif table:
            result["bigqueryTableName"] = table
    return result


def validate_version(body) -> dict:
    """A CreateVersion body, normalised, with defaults for what the caller left out."""
    problems = check_types(body, VERSION_FIELDS, "version")
    problems.raise_if_any()
    check_name(body.get("name"), "version.name", problems)
    for key, reason in UNSUPPORTED_VERSION_FIELDS.items():
        if body.get(key):
            problems.add(f"version.{snake(key)}", reason)
    uri = body.get("deploymentUri") or ""
    if not uri.strip():
        problems.add(
            "version.deployment_uri",
            "deploymentUri is required: the Cloud Storage (gs://) or local folder that holds the model file.",
        )
    runtime = body.get("runtimeVersion") or catalogue.DEFAULT_RUNTIME_VERSION
    known = runtimes.RUNTIMES.get(runtime)
    python = body.get("pythonVersion") or (
        runtimes.default_python(known) if known else catalogue.DEFAULT_PYTHON_VERSION
    )
    if runtime not in catalogue.RUNTIME_VERSIONS:
        problems.add(
            "version.runtime_version",
            f'runtimeVersion "{runtime}" is not supported. Supported '
            f"runtime versions: {', '.join(catalogue.RUNTIME_VERSIONS)}.",
        )
    elif python not in catalogue.RUNTIME_VERSIONS[runtime].python_versions:
        allowed = " or ".join(catalogue.RUNTIME_VERSIONS[runtime].python_versions)
        problems.add("version.python_version", f"runtimeVersion {runtime} supports Python {allowed}, not {python}.")
    framework = body.get("framework") or "FRAMEWORK_UNSPECIFIED"
    if framework not in FRAMEWORKS:
        problems.add("version.framework", f"framework must be one of {', '.join(FRAMEWORKS)}; got {framework}.")
    machine = body.get("machineType") or DEFAULT_MACHINE_TYPE
    if machine not in MACHINE_TYPES:
        problems.add(
            "version.machine_type",
            f"Machine type {machine!r} is not supported for online "
            f"prediction; choose one of {', '.join(MACHINE_TYPES)}.",
        )
    auto, manual = check_scaling(body.get("autoScaling"), body.get("manualScaling"), problems)
    logging_config = check_request_logging(body.get("requestLoggingConfig"), problems)
    labels = body.get("labels") or {}
    problems.violations.extend(job_spec.validate_labels(labels, "version.labels"))
    problems.raise_if_any()
    if auto is None and manual is None:
        auto = {"minNodes": 0}  # the original's default for mls1 machines: scale to zero
    return {
        "name": body["name"],
        "description": body.get("description") or "",
        "deploymentUri": uri.strip(),
        "runtimeVersion": runtime,
        "pythonVersion": python,
        "framework": framework,
        "machineType": machine,
        "autoScaling": auto,
        "manualScaling": manual,
        "requestLoggingConfig": logging_config or None,
        "labels": labels,
    }


def mask_paths(update_mask: str | None, allowed: tuple[str, ...], what: str) -> list[str]:
    """The paths of an updateMask, each one this resource lets callers change."""
    paths = [p.strip() for p in (update_mask or "").split(",") if p.strip()]
    if not paths:
        raise InvalidArgument.from_violations(
            [
                FieldViolation(
                    "update_mask", f"The update mask is required; updatable fields of a {what}: {', '.join(allowed)}."
                )
            ]
        )
    aliases = {p: p for p in allowed}
    aliases.update({snake(p).replace("._", "."): p for p in allowed})
    unknown = [p for p in paths if p not in aliases]
    if unknown:
        raise InvalidArgument.from_violations(
            [
                FieldViolation(
                    "update_mask", f"Field {p!r} cannot be updated; updatable fields of a {what}: {', '.join(allowed)}."
                )
                for p in unknown
            ]
        )
    return [aliases[p] for p in paths]
