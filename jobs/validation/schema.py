"""Reading a JSON body against the proto schema (`aiconsole.v1schema`): the first phase.

Unknown names, wrong JSON types, bad enum values and values over their length limits are
violations; if any is found the service rules do not run, as in the original front end. What
comes back is the normalised copy in wire format the package docstring describes.

It also holds small helpers the rule modules use to write their messages: ``shown`` (a value
cut short for a message), ``seconds`` (a parsed Duration) and ``one_of`` ("a, b or c").
"""

from __future__ import annotations

import json
import math
import re

from aiconsole import v1schema
from aiconsole.errors import Violations, clipped
from aiconsole.v1schema import Field

_S = v1schema.S
_SHOWN_CHARS = 200  # the most of a refused value a message repeats

_SCALAR_TYPE_NAMES = {
    "string": "TYPE_STRING",
    "bytes": "TYPE_BYTES",
    "bool": "TYPE_BOOL",
    "int32": "TYPE_INT32",
    "int64": "TYPE_INT64",
    "double": "TYPE_DOUBLE",
    "duration": "type.googleapis.com/google.protobuf.Duration",
    "timestamp": "type.googleapis.com/google.protobuf.Timestamp",
    "map": "map<string, string>",
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


def shown(value: object) -> str:
    """A value as JSON for a message, cut short so a huge value is never echoed whole."""
    shown = json.dumps(value, default=str, ensure_ascii=False)
    return shown if len(shown) <= _SHOWN_CHARS else shown[:_SHOWN_CHARS] + "…"


def _invalid_value(errors: Violations, path: str, spec: Field, value: object) -> object:
    errors.add(path, f"Invalid value at '{path}' ({_type_name(spec)}), {shown(value)}")
    return _SKIP


def _check_size(value: object, spec: Field, name: str, path: str, errors: Violations) -> bool:
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
            errors.add(where, f"{name} is too long: at most {most_chars} characters; got {len(item)}.")
            fits = False
    return fits


def parse_message(value: object, message: str, path: str, errors: Violations) -> dict:
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
            errors.add(
                path, f"Invalid JSON payload received. Unknown name \"{clipped(key)}\" at '{path}': Cannot find field."
            )
            continue
        if name in seen:  # given both as jsonName and as proto_name
            errors.add(path, f"Invalid JSON payload received. Duplicate field \"{key}\" at '{path}'.")
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


def _parse_field(value: object, spec: Field, path: str, errors: Violations) -> object:
    if not spec.repeated:
        return _parse_single(value, spec, path, errors)
    if not isinstance(value, list):
        return _invalid_value(errors, path, spec, value)
    items = [_parse_single(item, spec, f"{path}[{i}]", errors) for i, item in enumerate(value)]
    return [item for item in items if item is not _SKIP]


def _parse_single(value: object, spec: Field, path: str, errors: Violations) -> object:
    kind = spec.type
    if kind == "message":
        return parse_message(value, v1schema.proto_name(spec.ref), path, errors)
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
        parsed = as_double(value)
    else:
        parsed = as_int(value)
        low, high = _INT_RANGES[kind]
        if parsed is not None and not low <= parsed <= high:
            parsed = None
        if parsed is not None and kind == "int64":
            parsed = str(parsed)
    return _invalid_value(errors, path, spec, value) if parsed is None else parsed


def _parse_map(value: object, path: str, errors: Violations) -> object:
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


def as_int(value: object) -> int | None:
    """A proto3 JSON integer (a number, or its decimal text, as int64s travel), None when it is not one."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if value.is_integer() else None
    if isinstance(value, str) and re.fullmatch(r"-?\d+", value.strip()):
        return int(value)
    return None


def as_double(value: object) -> int | float | None:
    """A finite proto3 JSON double (a number or its text), None when it is not one."""
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


def seconds(duration: str) -> float:
    return float(duration[:-1])


def one_of(values) -> str:
    values = [str(v) for v in values]
    return values[0] if len(values) == 1 else ", ".join(values[:-1]) + " or " + values[-1]
