"""HyperparameterSpec rules: the parameters to tune, their ranges and values, and trial counts."""

from __future__ import annotations

import re

from aiconsole.errors import Violations
from aiconsole.protojson import snake
from jobs.validation.names import validate_job_id

_LOG_SCALES = ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")
_GRID_TYPES = ("INTEGER", "CATEGORICAL", "DISCRETE")
_MAX_DISCRETE_VALUES = 1000


def check_hyperparameters(hp: dict, path: str, errors: Violations) -> None:
    params = hp.get("params", [])
    if not params:
        errors.add(f"{path}.params", "params must list at least one parameter to tune.")
    names: set[str] = set()
    for i, param in enumerate(params):
        _check_param(param, f"{path}.params[{i}]", names, errors)
        kind = param.get("type", "PARAMETER_TYPE_UNSPECIFIED")
        # A missing type is reported by _check_param; only a real non-grid type is wrong here.
        if hp.get("algorithm") == "GRID_SEARCH" and kind not in (*_GRID_TYPES, "PARAMETER_TYPE_UNSPECIFIED"):
            errors.add(
                f"{path}.params[{i}].type",
                f"GRID_SEARCH needs every parameter to be INTEGER, CATEGORICAL or DISCRETE; got {kind}.",
            )
    for key, low in (("maxTrials", 1), ("maxParallelTrials", 1), ("maxFailedTrials", 0)):
        if key in hp and hp[key] < low:
            errors.add(f"{path}.{snake(key)}", f"{key} must be at least {low}; got {hp[key]}.")
    if "resumePreviousJobId" in hp:
        errors.extend(validate_job_id(hp["resumePreviousJobId"], f"{path}.resume_previous_job_id"))


def _check_param(param: dict, path: str, names: set[str], errors: Violations) -> None:
    name = param.get("parameterName")
    if not name:
        errors.add(f"{path}.parameter_name", "parameterName is required.")
    elif name in names:
        errors.add(f"{path}.parameter_name", f'parameterName "{name}" is used twice; names must be unique.')
    elif re.search(r"[\s=]", name):
        # The value reaches the trainer as --name=value.
        errors.add(f"{path}.parameter_name", f"parameterName \"{name}\" must not contain spaces or '='.")
    names.add(name or "")
    kind = param.get("type")
    if kind in (None, "PARAMETER_TYPE_UNSPECIFIED"):
        errors.add(f"{path}.type", "type is required: DOUBLE, INTEGER, CATEGORICAL or DISCRETE.")
        return
    for key, owner in (("categoricalValues", "CATEGORICAL"), ("discreteValues", "DISCRETE")):
        if key in param and kind != owner:
            errors.add(f"{path}.{snake(key)}", f"{key} can only be set for {owner} parameters.")
    if kind in ("DOUBLE", "INTEGER"):
        _check_range(param, kind, path, errors)
    elif kind == "CATEGORICAL":
        _check_categorical(param, path, errors)
    else:
        _check_discrete(param, path, errors)


def _check_range(param: dict, kind: str, path: str, errors: Violations) -> None:
    bounds = {key: param.get(key) for key in ("minValue", "maxValue")}
    for key, value in bounds.items():
        if value is None:
            errors.add(f"{path}.{snake(key)}", f"{key} is required for {kind} parameters.")
        elif kind == "INTEGER" and not isinstance(value, int):
            errors.add(f"{path}.{snake(key)}", f"{key} must be a whole number for INTEGER parameters; got {value}.")
    low, high = bounds["minValue"], bounds["maxValue"]
    if low is not None and high is not None and low >= high:
        errors.add(f"{path}.min_value", f"minValue must be less than maxValue; got {low} and {high}.")
    if param.get("scaleType") in _LOG_SCALES and low is not None and low <= 0:
        errors.add(f"{path}.min_value", f"{param['scaleType']} needs a strictly positive range; minValue is {low}.")


def _check_categorical(param: dict, path: str, errors: Violations) -> None:
    values = param.get("categoricalValues", [])
    if not values:
        errors.add(
            f"{path}.categorical_values",
            "categoricalValues is required for CATEGORICAL parameters and must not be empty.",
        )
    elif len(set(values)) != len(values):
        errors.add(f"{path}.categorical_values", "categoricalValues must not repeat a value.")
    elif "" in values:
        errors.add(f"{path}.categorical_values", "categoricalValues must not contain an empty string.")
    for key in ("minValue", "maxValue"):
        if key in param:
            errors.add(f"{path}.{snake(key)}", f"{key} must not be set for CATEGORICAL parameters.")
    # NONE is the proto3 default, so it cannot be told apart from leaving scaleType out.
    if param.get("scaleType", "NONE") != "NONE":
        errors.add(f"{path}.scale_type", "scaleType must not be set for CATEGORICAL parameters.")


def _check_discrete(param: dict, path: str, errors: Violations) -> None:
    values = param.get("discreteValues", [])
    field = f"{path}.discrete_values"
    if not values:
        errors.add(field, "discreteValues is required for DISCRETE parameters and must not be empty.")
        return
    if len(values) > _MAX_DISCRETE_VALUES:
        errors.add(field, f"discreteValues can list at most {_MAX_DISCRETE_VALUES} values; got {len(values)}.")
    if any(b <= a for a, b in zip(values, values[1:], strict=False)):
        errors.add(field, "discreteValues must be in strictly increasing order.")
    if param.get("scaleType") in _LOG_SCALES and values[0] <= 0:
        errors.add(field, f"{param['scaleType']} needs strictly positive discreteValues.")
