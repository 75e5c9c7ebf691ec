"""The Vertex AI wire shapes of a model's version, an endpoint and its deployed models, and the
long-running operations that upload and deploy them; enums by name (``schema.encode`` writes
numbers when the caller asks)."""

from __future__ import annotations

from django.db.models import Max

from jobs.vertex.resources import timestamp
from models_registry.models import DeployedModel, Endpoint, Model, Version

V1 = "type.googleapis.com/google.cloud.aiplatform.v1"
# Formats batch prediction reads and writes here (models_registry.batch).
INPUT_FORMATS = ["jsonl", "csv"]
OUTPUT_FORMATS = ["jsonl"]


def model_name(model: Model, location: str) -> str:
    return f"projects/{model.project.project_id}/locations/{model.location or location}/models/{model.vertex_id}"


def aliases(version: Version) -> list[str]:
    """The version's aliases, with ``default`` on the model's default version."""
    return (["default"] if version.is_default else []) + [a for a in version.aliases if a != "default"]


def model_resource(version: Version, location: str) -> dict:
    """A Model as Vertex answers it: one version of the model, by ``versionId``."""
    model = version.model
    resource: dict = {
        "name": model_name(model, location),
        "versionId": str(version.vertex_version or ""),
        "versionAliases": aliases(version),
        "versionCreateTime": timestamp(version.create_time),
        "versionUpdateTime": timestamp(version.create_time),
        "displayName": model.display_name or model.name,
    }
    if model.description:
        resource["description"] = model.description
    if version.description:
        resource["versionDescription"] = version.description
    if version.training_pipeline:
        resource["trainingPipeline"] = version.training_pipeline
    if version.container_spec:
        resource["containerSpec"] = version.container_spec
    resource["artifactUri"] = version.deployment_uri
    resource["supportedDeploymentResourcesTypes"] = ["DEDICATED_RESOURCES"]
    resource["supportedInputStorageFormats"] = INPUT_FORMATS
    resource["supportedOutputStorageFormats"] = OUTPUT_FORMATS
    resource["createTime"] = timestamp(model.create_time)
    updated = model.versions.aggregate(last=Max("create_time"))["last"] or model.create_time
    resource["updateTime"] = timestamp(updated)
    deployed = [
        {"endpoint": d.endpoint.resource_name, "deployedModelId": d.deployed_id}
        for d in DeployedModel.objects.filter(version=version).select_related("endpoint__project")
    ]
    if deployed:
        resource["deployedModels"] = deployed
    resource["etag"] = version.etag
    labels = version.labels or model.labels
    if labels:
        resource["labels"] = labels
    return resource


def deployed_model_resource(deployed: DeployedModel) -> dict:
    version = deployed.version
    resource: dict = {"id": deployed.deployed_id, **deployed.resources}
    resource["model"] = model_name(version.model, deployed.endpoint.location)
    resource["modelVersionId"] = str(version.vertex_version or "")
    resource["displayName"] = deployed.display_name or version.model.display_name or version.model.name
    resource["createTime"] = timestamp(deployed.create_time)
    return resource


def endpoint_resource(endpoint: Endpoint) -> dict:
    resource: dict = {"name": endpoint.resource_name, "displayName": endpoint.display_name}
    if endpoint.description:
        resource["description"] = endpoint.description
    deployed = list(endpoint.deployed_models.select_related("version__model__project"))
    if deployed:
        resource["deployedModels"] = [deployed_model_resource(d) for d in deployed]
    if endpoint.traffic_split:
        resource["trafficSplit"] = endpoint.traffic_split
    resource["etag"] = endpoint.etag
    if endpoint.labels:
        resource["labels"] = endpoint.labels
    resource["createTime"] = timestamp(endpoint.create_time)
    resource["updateTime"] = timestamp(endpoint.update_time)
    return resource


def operation(name: str, metadata: str, created, *, done: bool, response: dict | None = None) -> dict:
    """A long-running operation's body; ``response`` is ``{"@type": …, …}`` when it is done."""
    body: dict = {
        "name": name,
        "metadata": {
            "@type": f"{V1}.{metadata}",
            "genericMetadata": {"createTime": timestamp(created), "updateTime": timestamp(created)},
        },
        "done": done,
    }
    if done:
        body["response"] = response or {"@type": "type.googleapis.com/google.protobuf.Empty"}
    return body
