"""Reading a proto3 JSON body against a schema written as data: the one reader of request bodies.

Both APIs this server speaks take proto3 JSON: ml v1 (``aiconsole.v1schema``, read by
``jobs.validation``) and Vertex AI v1 (``jobs.vertex.schema``). A ``Schema`` says where one API's
messages and enums are and which of two proto3 habits it keeps; ``read`` does the rest, as Google's
JSON front end does: a field by its JSON or its proto name, unknown or duplicate names refused, each
value checked against its type (int64 as a number or its text, durations as ``"<seconds>s"``,
enums by name, or by number where the schema numbers them), strings and lists held to their
limits, and every problem a violation worded as that front end words it, named by its proto
field path. What comes back is the canonical copy: JSON names, enums by name, int64 as text.

Pure data and functions: no database, no Django.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass

from aiconsole.errors import Violations, clipped

MAX_CHARS = 1024  # longest string a field may hold unless it says otherwise
_SHOWN_CHARS = 200  # the most of a refused value a message repeats

# Value types, in the discovery document's terms:
#   string, bytes (string/byte), timestamp (string/google-datetime), duration (string/google-duration),
#   int64 (string/int64), int32 (integer/int32), double (number/double), bool (boolean),
#   fieldmask (string/google-fieldmask), enum (string with enum values), message ($ref),
#   map (object of strings, or of ``ref``'s type), object (any JSON object, e.g. an operation's metadata).
TYPES = (
    "string",
    "bytes",
    "timestamp",
    "duration",
    "fieldmask",
    "int64",
    "int32",
    "double",
    "bool",
    "enum",
    "message",
    "map",
    "object",
)


@dataclass(frozen=True)
class Field:
    """One field of a message.

    ``ref`` names the enum (its proto name) or the message (its key in the schema); for a map, the
    type of its values when they are not strings. ``max_chars`` bounds each string (None: no
    bound); ``max_items`` bounds a repeated field.
    """

    type: str
    ref: str = ""
    repeated: bool = False
    output_only: bool = False
    max_chars: int | None = MAX_CHARS
    max_items: int | None = None
    unsupported: str = ""  # the reason this server refuses a value for the field
    ours: str = ""  # why we added a field the API's own schema does not have

    def __post_init__(self):
        if self.type not in TYPES:
            raise ValueError(f"Unknown field type {self.type!r}; one of {', '.join(TYPES)}.")


@dataclass(frozen=True)
class Schema:
    """One API's messages and enums, as ``read`` needs them.

    ``enums`` holds each enum's names, or its names with their numbers, which a value may then be
    given as. ``zero_is_unset``: a zero value (0, false, an empty list, an enum's zero) reads as
    the field left out, as proto3 has it; otherwise only an empty string does.
    ``refuse_unsupported``: a field marked ``unsupported`` is refused while reading, with its
    reason; otherwise it is kept for a later rule to refuse.
    """

    package: str  # the proto package the messages of errors name, e.g. google.cloud.ml.v1
    fields: Callable[[str], Mapping[str, Field]]  # a message's fields by JSON name
    enums: Mapping[str, Collection[str]]
    zero_is_unset: bool = False
    refuse_unsupported: bool = False

    def enum_name(self, enum: str, value: object) -> str | None:
        """The value's name, given as a name (or a number, where the enum has numbers); None
        when it is neither."""
        values = self.enums[enum]
        if isinstance(value, str) and value in values:
            return value
        number = as_int(value)
        if number is None or not isinstance(values, Mapping):
            return None
        return next((name for name, n in values.items() if n == number), None)


_SCALAR_TYPE_NAMES = {
    "string": "TYPE_STRING",
    "bytes": "TYPE_BYTES",
    "bool": "TYPE_BOOL",
    "int32": "TYPE_INT32",
    "int64": "TYPE_INT64",
    "double": "TYPE_DOUBLE",
    "duration": "type.googleapis.com/google.protobuf.Duration",
    "timestamp": "type.googleapis.com/google.protobuf.Timestamp",
    "fieldmask": "type.googleapis.com/google.protobuf.FieldMask",
    "object": "type.googleapis.com/google.protobuf.Struct",
}
_INT_RANGES = {"int32": (-(2**31), 2**31 - 1), "int64": (-(2**63), 2**63 - 1)}
_DURATION_RE = re.compile(r"^-?\d+(\.\d{1,9})?s$")
_TIMESTAMP_RE = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d{1,9})?(Z|[+-]\d\d:\d\d)$")
_SKIP = object()  # a value that failed to parse


def snake(name: str) -> str:
    """A JSON (camelCase) field name as its proto field name, which field paths use."""
    return re.sub(r"([A-Z])", r"_\1", name).lower()


def proto_name(name: str) -> str:
    """``GoogleCloudMlV1__TrainingInput`` -> ``TrainingInput``, the name the proto and its errors use."""
    return name.split("__", 1)[-1]


def shown(value: object) -> str:
    """A value as JSON for a message, cut short so a huge value is never echoed whole."""
    text = json.dumps(value, default=str, ensure_ascii=False)
    return text if len(text) <= _SHOWN_CHARS else text[:_SHOWN_CHARS] + "…"


def read(value: object, schema: Schema, message: str, path: str, errors: Violations) -> dict:
    """Read one JSON object against ``message`` of ``schema`` into its canonical copy; each
    problem is added to ``errors`` under ``path``."""
    if not isinstance(value, dict):
        _invalid(errors, path, schema, Field("message", message), value)
        return {}
    fields = schema.fields(message)
    # Like any proto3 JSON parser, accept the proto field name as well as the JSON name.
    by_proto_name = {snake(name): name for name in fields}
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
        field_path = f"{path}.{snake(name)}" if path else snake(name)
        parsed = _parse_field(raw, schema, spec, field_path, errors)
        if parsed is _SKIP or not fits(parsed, spec, name, field_path, errors):
            continue
        # An empty string is the proto3 default, the same as leaving the field out.
        if parsed == "" or (schema.zero_is_unset and _is_zero(parsed, schema, spec)):
            continue
        if schema.refuse_unsupported and spec.unsupported:
            errors.add(field_path, f"{name}: {spec.unsupported}")
            continue
        out[name] = parsed
    return {name: out[name] for name in fields if name in out}


def _type_name(schema: Schema, spec: Field) -> str:
    if spec.type in ("enum", "message"):
        return f"type.googleapis.com/{schema.package}.{proto_name(spec.ref)}"
    if spec.type == "map":
        return f"map<string, {spec.ref or 'string'}>"
    return _SCALAR_TYPE_NAMES[spec.type]


def _invalid(errors: Violations, path: str, schema: Schema, spec: Field, value: object) -> object:
    errors.add(path, f"Invalid value at '{path}' ({_type_name(schema, spec)}), {shown(value)}")
    return _SKIP


def fits(value: object, spec: Field, name: str, path: str, errors: Violations) -> bool:
    """Whether a field's value is within its length limits; each one it is not is a violation
    (``models_registry.spec`` holds Model and Version bodies to them with this too)."""
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


def _is_zero(value: object, schema: Schema, spec: Field) -> bool:
    if spec.type == "enum":
        numbers = schema.enums[spec.ref]
        return isinstance(numbers, Mapping) and numbers.get(value) == 0
    if spec.type == "message":
        return False  # a message given, even empty, is set (proto3 keeps its presence)
    if isinstance(value, bool):
        return value is False
    return value in ("", [], {}, "0", 0, "0s")


def _parse_field(value: object, schema: Schema, spec: Field, path: str, errors: Violations) -> object:
    if not spec.repeated:
        return _parse_single(value, schema, spec, path, errors)
    if not isinstance(value, list):
        return _invalid(errors, path, schema, spec, value)
    items = [_parse_single(item, schema, spec, f"{path}[{i}]", errors) for i, item in enumerate(value)]
    return [item for item in items if item is not _SKIP]


def _parse_single(value: object, schema: Schema, spec: Field, path: str, errors: Violations) -> object:
    kind = spec.type
    if kind == "message":
        return read(value, schema, spec.ref, path, errors)
    if kind == "map":
        return _parse_map(value, schema, spec, path, errors)
    if kind == "object":
        return value if isinstance(value, dict) else _invalid(errors, path, schema, spec, value)
    if kind == "enum":
        name = schema.enum_name(spec.ref, value)
        return _invalid(errors, path, schema, spec, value) if name is None else name
    if kind in ("string", "bytes", "timestamp", "duration", "fieldmask"):
        if not isinstance(value, str):
            return _invalid(errors, path, schema, spec, value)
        if kind == "duration" and not _DURATION_RE.match(value):
            return _invalid(errors, path, schema, spec, value)
        if kind == "timestamp" and not _TIMESTAMP_RE.match(value):
            return _invalid(errors, path, schema, spec, value)
        return value
    parsed: object
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
    return _invalid(errors, path, schema, spec, value) if parsed is None else parsed


def _parse_map(value: object, schema: Schema, spec: Field, path: str, errors: Violations) -> object:
    """A map<string, V>: each value read as a V, a wrong one named by its entry, as the front end does."""
    if not isinstance(value, dict):
        return _invalid(errors, path, schema, spec, value)
    values = Field(spec.ref or "string", max_chars=None)
    out = {}
    for i, (key, item) in enumerate(value.items()):
        parsed = _parse_single(item, schema, values, f"{path}[{i}].value", errors)
        if parsed is not _SKIP:
            out[str(key)] = parsed
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
