"""Model and Version body validation: pure functions, no database."""

from __future__ import annotations

import pytest

from aiconsole.errors import InvalidArgument
from models_registry import spec


def fields(error: InvalidArgument) -> set[str]:
    return {v.field for v in error.violations}


def test_a_model_gets_the_default_region():
    assert spec.validate_model({"name": "census"})["regions"] == ["us-central1"]


@pytest.mark.parametrize("name", ["", "1model", "has-dash", "a" * 129, "spaces here"])
def test_model_names_follow_the_original_rule(name):
    with pytest.raises(InvalidArgument) as refused:
        spec.validate_model({"name": name})
    assert fields(refused.value) == {"model.name"}


def test_unknown_model_fields_are_refused_like_the_original_parser():
    with pytest.raises(InvalidArgument) as refused:
        spec.validate_model({"name": "m", "colour": "blue"})
    assert 'Unknown name "colour"' in refused.value.message


def test_a_model_has_at_most_one_known_region():
    with pytest.raises(InvalidArgument) as refused:
        spec.validate_model({"name": "m", "regions": ["us-central1", "europe-west4"]})
    assert "Only one region" in refused.value.message
    with pytest.raises(InvalidArgument):
        spec.validate_model({"name": "m", "regions": ["mars-north1"]})


def test_a_version_gets_defaults_and_scales_to_zero():
    version = spec.validate_version({"name": "v1", "deploymentUri": "gs://bucket/model/"})
    assert version["runtimeVersion"] == "2.11" and version["pythonVersion"] == "3.7"
    assert version["machineType"] == "mls1-c1-m2"
    assert version["autoScaling"] == {"minNodes": 0} and version["manualScaling"] is None


def test_a_version_needs_a_deployment_uri():
    with pytest.raises(InvalidArgument) as refused:
        spec.validate_version({"name": "v1"})
    assert fields(refused.value) == {"version.deployment_uri"}


@pytest.mark.parametrize(
    "body, field",
    [
        ({"autoScaling": {"minNodes": 1}, "manualScaling": {"nodes": 1}}, "version.manual_scaling"),
        ({"manualScaling": {"nodes": 0}}, "version.manual_scaling.nodes"),
        ({"autoScaling": {"minNodes": -1}}, "version.auto_scaling.min_nodes"),
        ({"autoScaling": {"minNodes": 3, "maxNodes": 2}}, "version.auto_scaling.max_nodes"),
        ({"manualScaling": {"nodes": 99}}, "version.manual_scaling.nodes"),
        ({"machineType": "n1-standard-7"}, "version.machine_type"),
        ({"framework": "PYTORCH"}, "version.framework"),
        ({"runtimeVersion": "0.9"}, "version.runtime_version"),
        ({"runtimeVersion": "2.11", "pythonVersion": "2.7"}, "version.python_version"),
        ({"packageUris": ["gs://b/p.tar.gz"], "predictionClass": "p.C"}, "version.package_uris"),
        ({"container": {"image": "gcr.io/x"}}, "version.container"),
        ({"requestLoggingConfig": {"samplingPercentage": 2}}, "version.request_logging_config.sampling_percentage"),
    ],
)
def test_version_rules(body, field):
    with pytest.raises(InvalidArgument) as refused:
        spec.validate_version({"name": "v1", "deploymentUri": "gs://bucket/m", **body})
    assert field in fields(refused.value)


def test_int64_node_counts_may_travel_as_strings():
    version = spec.validate_version({"name": "v1", "deploymentUri": "gs://b/m", "manualScaling": {"nodes": "2"}})
    assert version["manualScaling"] == {"nodes": 2} and version["autoScaling"] is None


def test_update_masks_accept_camel_and_snake_case():
    assert spec.mask_paths("default_version.name,description", ("description", "defaultVersion.name"), "model") == [
        "defaultVersion.name",
        "description",
    ]
    with pytest.raises(InvalidArgument):
        spec.mask_paths("regions", ("description",), "model")
    with pytest.raises(InvalidArgument):
        spec.mask_paths("", ("description",), "model")
