"""The v1 wire shapes of Model and Version: fully qualified names, unset fields left out."""

from __future__ import annotations

from jobs.wire import rfc3339
from models_registry.models import Model, Version

MODEL_TYPE = "type.googleapis.com/google.cloud.ml.v1.Model"
VERSION_TYPE = "type.googleapis.com/google.cloud.ml.v1.Version"
EMPTY = {"@type": "type.googleapis.com/google.protobuf.Empty"}  # what a finished delete operation answers


def version_resource(version: Version, *, typed: bool = False) -> dict:
    resource: dict = {"@type": VERSION_TYPE} if typed else {}
    resource["name"] = version.resource_name
    if version.description:
        resource["description"] = version.description
    resource["deploymentUri"] = version.deployment_uri
    resource["createTime"] = rfc3339(version.create_time)
    if version.last_use_time:
        resource["lastUseTime"] = rfc3339(version.last_use_time)
    resource["runtimeVersion"] = version.runtime_version
    resource["pythonVersion"] = version.python_version
    if version.framework and version.framework != "FRAMEWORK_UNSPECIFIED":
        resource["framework"] = version.framework
    resource["machineType"] = version.machine_type
    if version.manual_scaling is not None:
        resource["manualScaling"] = version.manual_scaling
    elif version.auto_scaling is not None:
        resource["autoScaling"] = version.auto_scaling
    if version.request_logging_config:
        resource["requestLoggingConfig"] = version.request_logging_config
    resource["state"] = version.state
    if version.error_message:
        resource["errorMessage"] = version.error_message
    if version.is_default:
        resource["isDefault"] = True
    if version.labels:
        resource["labels"] = version.labels
    resource["etag"] = version.etag
    return resource


def model_resource(model: Model, *, typed: bool = False) -> dict:
    resource: dict = {"@type": MODEL_TYPE} if typed else {}
    resource["name"] = model.resource_name
    if model.description:
        resource["description"] = model.description
    resource["regions"] = model.regions or []
    if model.online_prediction_logging:
        resource["onlinePredictionLogging"] = True
    if model.online_prediction_console_logging:
        resource["onlinePredictionConsoleLogging"] = True
    if model.labels:
        resource["labels"] = model.labels
    default = model.default_version
    if default is not None:
        default.model = model  # already at hand: no query per list row
        resource["defaultVersion"] = version_resource(default)
    resource["etag"] = model.etag
    return resource
