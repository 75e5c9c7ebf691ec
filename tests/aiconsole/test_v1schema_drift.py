"""The one v1 schema (aiconsole.v1schema) against Google's ml v1 discovery document.

The discovery document is the one google-api-python-client ships, the same file the client
builds its requests from. A field renamed or retyped on our side, an enum value gone astray, or a
field of a message we implement that we neither declare nor list as not supported fails here.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import googleapiclient
import pytest

from aiconsole import v1schema
from aiconsole.openapi import build_document
from aiconsole.v1schema import ENUMS, MESSAGES, Field, Message
from console.urls import API_DESCRIPTIONS

DISCOVERY = Path(googleapiclient.__file__).parent / "discovery_cache" / "documents" / "ml.v1.json"


@pytest.fixture(scope="module")
def discovery() -> dict:
    return json.loads(DISCOVERY.read_text())["schemas"]


_STRING_FORMATS = {
    "int64": "int64",
    "byte": "bytes",
    "google-datetime": "timestamp",
    "google-duration": "duration",
    "google-fieldmask": "fieldmask",
}


def _discovery_type(prop: dict) -> tuple:
    """A discovery property as (repeated, type, detail): detail is a message id or enum values."""
    if prop.get("type") == "array":
        return (True, *_discovery_type(prop["items"])[1:])
    if "$ref" in prop:
        return False, "message", prop["$ref"]
    kind, fmt = prop.get("type"), prop.get("format")
    if kind == "string" and "enum" in prop:
        return False, "enum", tuple(prop["enum"])
    if kind == "string":
        return False, _STRING_FORMATS.get(fmt, "string"), None
    if kind == "integer":
        return False, "int32", None
    if kind == "number":
        return False, "double", None
    if kind == "boolean":
        return False, "bool", None
    if kind == "object" and prop.get("additionalProperties") == {"type": "string"}:
        return False, "map", None
    if kind == "object" and prop.get("additionalProperties", {}).get("type") == "any":
        return False, "object", None
    return False, f"unknown:{kind}/{fmt}", None


def _our_type(spec: Field) -> tuple:
    detail = ENUMS[spec.ref] if spec.type == "enum" else spec.ref if spec.type == "message" else None
    return spec.repeated, spec.type, detail


def drift(messages: dict[str, Message], schemas: dict) -> list[str]:
    """Every difference between our messages and the discovery document's, as readable lines."""
    problems = []
    for name, message in messages.items():
        if name not in schemas:
            problems.append(f"{name}: no such message in the discovery document")
            continue
        theirs = schemas[name].get("properties", {})
        for key, spec in message.fields.items():
            if spec.ours:
                if key in theirs:
                    problems.append(f"{name}.{key}: marked as ours, but the discovery document has it")
                continue
            if key not in theirs:
                problems.append(f"{name}.{key}: not in the discovery document (renamed? mark it `ours`)")
                continue
            expected, actual = _discovery_type(theirs[key]), _our_type(spec)
            if expected != actual:
                problems.append(f"{name}.{key}: discovery says {expected}, we say {actual}")
            if theirs[key].get("readOnly") and not spec.output_only:
                problems.append(f"{name}.{key}: read-only in the discovery document, not output_only here")
            if spec.type == "message" and spec.ref not in schemas:
                problems.append(f"{name}.{key}: refers to {spec.ref}, which the discovery document lacks")
        for key in theirs:
            if key not in message.fields and key not in message.not_supported:
                problems.append(
                    f"{name}.{key}: in the discovery document but neither declared nor listed in not_supported"
                )
        for key in message.not_supported:
            if key in message.fields or key not in theirs:
                problems.append(f"{name}.{key}: listed in not_supported but declared, or not in the discovery document")
    return problems


def test_our_v1_schema_matches_the_discovery_document(discovery):
    assert drift(MESSAGES, discovery) == []


def _with_field(message: str, key: str, spec: Field | None, rename: str = "") -> dict[str, Message]:
    """MESSAGES with one field of one message replaced (or renamed, or removed)."""
    name = v1schema.PREFIX + message
    fields = {}
    for field_name, field_spec in MESSAGES[name].fields.items():
        if field_name != key:
            fields[field_name] = field_spec
        elif rename:
            fields[rename] = field_spec
        elif spec is not None:
            fields[field_name] = spec
    return {**MESSAGES, name: dataclasses.replace(MESSAGES[name], fields=fields)}


@pytest.mark.parametrize(
    ("changed", "expected"),
    [
        (
            _with_field("TrainingInput", "workerCount", None, rename="workersCount"),
            "GoogleCloudMlV1__TrainingInput.workersCount: not in the discovery document",
        ),
        (
            _with_field("TrainingInput", "workerCount", v1schema.I32),
            "GoogleCloudMlV1__TrainingInput.workerCount: discovery says (False, 'int64', None), we say "
            "(False, 'int32', None)",
        ),
        (
            _with_field("ReplicaConfig", "containerArgs", v1schema.S),
            "GoogleCloudMlV1__ReplicaConfig.containerArgs: discovery says (True, 'string', None)",
        ),
        (
            _with_field("Version", "autoScaling", Field("message", v1schema.PREFIX + "ManualScaling")),
            "GoogleCloudMlV1__Version.autoScaling: discovery says (False, 'message', 'GoogleCloudMlV1__AutoScaling')",
        ),
        (
            _with_field("Version", "framework", v1schema.S),
            "GoogleCloudMlV1__Version.framework: discovery says (False, 'enum',",
        ),
        (
            _with_field("Model", "onlinePredictionLogging", None),
            "GoogleCloudMlV1__Model.onlinePredictionLogging: in the discovery document but neither declared",
        ),
        (
            _with_field("Job", "jobPosition", v1schema.I64),
            "GoogleCloudMlV1__Job.jobPosition: read-only in the discovery document",
        ),
        (
            _with_field("Job", "jobId", Field("string", ours="an extension")),
            "GoogleCloudMlV1__Job.jobId: marked as ours, but the discovery document has it",
        ),
        (
            {
                **MESSAGES,
                "GoogleLongrunning__ListOperationsResponse": Message(
                    MESSAGES["GoogleLongrunning__ListOperationsResponse"].fields
                ),
            },
            "GoogleLongrunning__ListOperationsResponse.unreachable: in the discovery document but neither declared",
        ),
    ],
    ids=[
        "renamed",
        "int64-as-int32",
        "list-as-string",
        "other-message",
        "enum-as-string",
        "left-out",
        "read-only-as-input",
        "stale-ours",
        "not-supported-unlisted",
    ],
)
def test_a_renamed_or_retyped_field_is_caught(discovery, changed, expected):
    problems = drift(changed, discovery)
    assert any(problem.startswith(expected) for problem in problems), problems


def test_a_changed_enum_value_is_caught(discovery, monkeypatch):
    monkeypatch.setitem(ENUMS, "TrainingInput.ScaleTier", (*ENUMS["TrainingInput.ScaleTier"][:-1], "CUSTOM_TIER"))
    assert drift(MESSAGES, discovery) == [
        "GoogleCloudMlV1__TrainingInput.scaleTier: discovery says (False, 'enum', ('BASIC', 'STANDARD_1', "
        "'PREMIUM_1', 'BASIC_GPU', 'BASIC_TPU', 'CUSTOM')), we say (False, 'enum', ('BASIC', 'STANDARD_1', "
        "'PREMIUM_1', 'BASIC_GPU', 'BASIC_TPU', 'CUSTOM_TIER'))"
    ]


def test_every_enum_is_used_by_some_field():
    used = {spec.ref for message in MESSAGES.values() for spec in message.fields.values() if spec.type == "enum"}
    assert used == set(ENUMS)


def test_the_catalogue_agrees_with_the_schema_enums():
    from jobs import catalogue

    assert tuple(catalogue.SCALE_TIERS) == ENUMS["TrainingInput.ScaleTier"]
    assert catalogue.ACCELERATOR_TYPE_VALUES == ENUMS["AcceleratorType"]


# --- the validators and the OpenAPI document read this one source ----------------------------------------


def test_the_openapi_document_describes_the_schema_messages():
    schemas = build_document(*API_DESCRIPTIONS)["components"]["schemas"]
    for name, message in MESSAGES.items():
        described = schemas[v1schema.proto_name(name)]
        assert list(described["properties"]) == list(message.fields), name
        assert described["additionalProperties"] is False
    training = schemas["TrainingInput"]["properties"]
    assert training["scaleTier"]["enum"] == list(ENUMS["TrainingInput.ScaleTier"])
    assert training["workerCount"]["type"] == "string"  # int64 travels as a JSON string
    assert training["masterConfig"] == {"$ref": "#/components/schemas/ReplicaConfig"}
    assert training["args"]["maxItems"] == 256 and training["args"]["items"]["maxLength"] == 4096


def test_model_and_version_checks_take_their_fields_from_the_schema():
    from models_registry import spec

    assert spec.MODEL_FIELDS is v1schema.message("Model").fields
    assert spec.VERSION_FIELDS is v1schema.message("Version").fields
    assert set(spec.UNSUPPORTED_VERSION_FIELDS) == {
        "acceleratorConfig",
        "packageUris",
        "predictionClass",
        "container",
        "routes",
        "explanationConfig",
    }


def test_every_schema_field_of_a_training_input_is_read_by_the_job_validator():
    from jobs import validation as spec

    # Each known field, even with a wrong value, is read as that field, never as an unknown name.
    for key in v1schema.message("TrainingInput").fields:
        with pytest.raises(spec.SpecError) as refused:
            spec.validate_training_input({key: {"not": "this"}, "unknownField": 1})
        assert [v.description for v in refused.value.violations if v.field == "job.training_input"] == [
            "Invalid JSON payload received. Unknown name \"unknownField\" at 'job.training_input': Cannot find field."
        ], key
