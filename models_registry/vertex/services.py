"""Vertex AI's ModelService, EndpointService and PredictionService on the model registry.

- ``models:upload`` makes a registry model (or, with ``parentModel``, a new version of one) from
  the artifacts and the serving container named: Google's pre-built prediction images
  (``…/vertex-ai/prediction/sklearn-cpu.1-0``, ``xgboost-cpu.1-7``, ``tf2-cpu.2-11``…) are served by
  the runtime version with that framework, as a v1 version is. Its operation ends when the
  version is READY (or FAILED, with the reason), as the SDK's ``lro.result()`` expects.
- An endpoint holds deployed models (versions) and a traffic split; ``predict`` picks one by the
  split and its version's serving processes answer, checked against the model that answers
  (``ml.models.predict``) as a v1 prediction is, and audited under Vertex's method name.

Permissions are the ``ml.*`` ones the v1 API checks, held by the same roles: a Vertex model is the
model a v1 user sees (``projects/P/models/NAME``), with the same bindings and audit trail.
"""

from __future__ import annotations

import json
import random
import re

from django.db import IntegrityError, transaction
from django.utils import timezone

from aiconsole import audit, iam
from aiconsole import filters as grammar
from aiconsole.errors import FailedPrecondition, FieldViolation, InvalidArgument, Violations
from aiconsole.models import Project, RoleBinding
from aiconsole.protojson import snake
from jobs import catalogue
from jobs.containers import engine as engines
from jobs.containers import images as container_images
from jobs.models import VertexOperation
from jobs.vertex import images, schema
from jobs.vertex.services import check_location, new_id, parent_name
from models_registry import services, spec
from models_registry.models import DeployedModel, Endpoint, Model, Version, VersionState, new_etag
from models_registry.serving import supervisor
from models_registry.vertex import resources

SERVICE = "aiplatform.googleapis.com"
MODEL_SERVICE = "google.cloud.aiplatform.v1.ModelService"
ENDPOINT_SERVICE = "google.cloud.aiplatform.v1.EndpointService"
PREDICTION_SERVICE = "google.cloud.aiplatform.v1.PredictionService"

MODEL_ID = re.compile(r"^[a-z0-9][a-z0-9_-]{0,19}$")
_NAME_CHARS = re.compile(r"[^A-Za-z0-9_]+")
_VERSIONED = re.compile(r"^(?P<id>[^@]+)(?:@(?P<version>[A-Za-z0-9_-]+))?$")
_ALIAS = re.compile(r"^[a-z][a-z0-9-]{0,126}[a-z0-9]$")


# --- looking things up ----------------------------------------------------------------------------


def _visible_in(queryset, location: str):
    """Models or endpoints of a location: a model made through v1 answers in every location."""
    return queryset.filter(location__in=[location, ""])


def find_model(project: Project, location: str, model_id: str, *, actor) -> tuple[Model, Version]:
    """``ID`` (the default version), ``ID@3`` (version 3) or ``ID@alias``; missing and invisible
    look the same to outsiders."""
    match = _VERSIONED.match(model_id)
    name = f"{parent_name(project, location)}/models/{model_id}"
    model = (
        _visible_in(Model.objects.select_related("project", "default_version"), location)
        .filter(project=project, vertex_id=match["id"] if match else None)
        .first()
    )
    if model is None or not iam.can(actor, "ml.models.get", model):
        raise iam.NotFound(name)
    wanted = match["version"] if match else None
    versions = model.versions.all()
    if wanted is None or wanted == "default":
        version = model.default_version
    elif wanted.isdigit():
        version = versions.filter(vertex_version=int(wanted)).first()
    else:
        version = next((v for v in versions if wanted in v.aliases), None)
    if version is None:
        raise iam.NotFound(name)
    version.model = model
    return model, version


def find_endpoint(project: Project, location: str, endpoint_id: str, *, actor, permission: str) -> Endpoint:
    name = f"{parent_name(project, location)}/endpoints/{endpoint_id}"
    endpoint = Endpoint.objects.select_related("project").filter(project=project, vertex_id=endpoint_id).first()
    if endpoint is None or endpoint.location != location:
        raise iam.NotFound(name)
    audit.authorize(
        actor, permission, project, method=f"{ENDPOINT_SERVICE}.{_VERB[permission]}Endpoint", service_name=SERVICE
    )
    return endpoint


_VERB = {"ml.models.get": "Get", "ml.models.create": "Update", "ml.models.delete": "Delete"}


def _parse(body: object, message: str, path: str) -> dict:
    errors = Violations()
    parsed = schema.parse(body, message, path, errors)
    errors.raise_if_any()
    return parsed


def _v1_name(project: Project, display_name: str, vertex_id: str) -> str:
    """The v1 name a Vertex model gets: its display name in v1's characters, made unique."""
    base = _NAME_CHARS.sub("_", display_name).strip("_")[:100] or "model"
    if not base[0].isalpha():
        base = f"m_{base}"
    if not Model.objects.filter(project=project, name=base).exists():
        return base
    return f"{base}_{vertex_id[-8:]}"


# --- models ------------------------------------------------------------------------------------------


def upload_model(project: Project, location: str, body: dict, *, actor, pipeline: str = "") -> dict:
    """models:upload: a new model, or a new version of ``parentModel``; answers the operation,
    done once the version is READY or FAILED (``finish_uploads``)."""
    method = f"{MODEL_SERVICE}.UploadModel"
    check_location(location)
    request = _parse(body, "UploadModelRequest", "")
    if request.get("serviceAccount"):
        raise InvalidArgument.from_violations(
            [FieldViolation("service_account", "models here are served as the project's account; leave it unset.")]
        )
    given = request.get("model")
    if given is None:
        raise InvalidArgument.from_violations([FieldViolation("model", "model is required.")])
    parent = request.get("parentModel", "")
    model = None
    if parent:
        model, _ = find_model(project, location, parent.rsplit("/", 1)[-1], actor=actor)
        audit.authorize(actor, "ml.versions.create", model, method=method, service_name=SERVICE)
    else:
        audit.authorize(actor, "ml.models.create", project, method=method, service_name=SERVICE)
    data, container = _version_data(project, given, request.get("modelId", ""))
    aliases = [a for a in given.get("versionAliases", []) if a != "default"]
    default = model is None or "default" in given.get("versionAliases", [])
    try:
        with transaction.atomic():
            if model is None:
                model = _new_model(project, location, given, request.get("modelId", ""), actor=actor)
            data["name"] = f"v{(model.versions.count() + 1)}"
            while model.versions.filter(name=data["name"]).exists():
                data["name"] += "_"
            version, _ = services.add_version(
                model,
                data,
                actor=actor,
                default=default,
                aliases=aliases,
                container_spec=container,
                training_pipeline=pipeline,
            )
            operation_id = new_id()
            operation = VertexOperation.objects.create(
                project=project,
                operation_id=operation_id,
                location=location,
                waits_for=f"version:{version.pk}",
                body=resources.operation(
                    f"{parent_name(project, location)}/operations/{operation_id}",
                    "UploadModelOperationMetadata",
                    version.create_time,
                    done=False,
                ),
            )
            audit.record(
                actor=actor,
                project=project,
                method=method,
                resource_name=parent_name(project, location),
                permission="ml.versions.create" if parent else "ml.models.create",
                request={"parent": parent_name(project, location), **body},
                response=operation.body,
                service_name=SERVICE,
            )
    except IntegrityError:
        message = f"Model {request.get('modelId')} already exists in {parent_name(project, location)}."
        raise InvalidArgument.from_violations([FieldViolation("model_id", message)]) from None
    return operation.body


def _version_data(project: Project, given: dict, model_id: str) -> tuple[dict, dict]:
    """The v1 version a Vertex model's body describes, validated as v1 validates a version."""
    violations = []
    if model_id and not MODEL_ID.match(model_id):
        violations.append(
            FieldViolation("model_id", "modelId must be 1 to 20 of a-z, 0-9, - and _, starting with a letter or digit.")
        )
    if not given.get("displayName", "").strip():
        violations.append(FieldViolation("model.display_name", "displayName is required."))
    for alias in given.get("versionAliases", []):
        if alias != "default" and (not _ALIAS.match(alias) or alias.isdigit()):
            violations.append(
                FieldViolation(
                    "model.version_aliases",
                    f"Alias {alias!r} must match [a-z][a-zA-Z0-9-]{{0,126}}[a-z0-9] and is not a version number.",
                )
            )
    container = given.get("containerSpec") or {}
    image = container.get("imageUri", "")
    served = images.prediction_server(image)
    if not image:
        violations.append(
            FieldViolation("model.container_spec.image_uri", "imageUri is required: the image that serves the model.")
        )
    elif served is None:
        problem = _serving_image_problem(image, project)
        if problem:
            violations.append(FieldViolation("model.container_spec.image_uri", problem))
    elif container.get("command") or container.get("args"):
        violations.append(
            FieldViolation(
                "model.container_spec.command",
                "a pre-built prediction image runs its own server: leave command and args unset.",
            )
        )
    if served is not None and not given.get("artifactUri"):
        violations.append(
            FieldViolation("model.artifact_uri", "artifactUri is required: the folder with the model file.")
        )
    if violations:
        raise InvalidArgument.from_violations(violations)
    # A custom serving container is run on the default runtime's terms (none of its Python is used).
    runtime = served.runtime if served is not None else catalogue.DEFAULT_RUNTIME_VERSION
    v1_body = {
        "name": "v1",
        "description": given.get("versionDescription", ""),
        # A custom container may carry its model itself: validated with a stand-in, then left empty.
        "deploymentUri": given.get("artifactUri") or "(none)",
        "runtimeVersion": runtime,
        "pythonVersion": served.python if served is not None else "",
        "framework": served.framework if served is not None else "FRAMEWORK_UNSPECIFIED",
        "labels": given.get("labels", {}),
    }
    try:
        data = spec.validate_version(v1_body)
        if not given.get("artifactUri"):
            data["deploymentUri"] = ""
        else:
            services.check_version_source(data, project, field="model")
    except InvalidArgument as error:
        renamed = [
            FieldViolation(
                v.field.replace("version.deployment_uri", "model.artifact_uri").replace("version.", "model."),
                v.description,
            )
            for v in error.violations
        ]
        raise InvalidArgument.from_violations(renamed) from None
    return data, container


def _serving_image_problem(image: str, project: Project) -> str:
    """Why a custom serving container cannot run for the project ("" when it can)."""
    if engines.available() is None:
        return f"{images.prediction_refusal(image)} (no container engine runs on this machine)"
    try:
        container_images.runnable(image, project)
    except container_images.ImageUnavailable as error:
        return f"The serving container {image} cannot run here: {error}"
    return ""


def _new_model(project: Project, location: str, given: dict, model_id: str, *, actor) -> Model:
    vertex_id = model_id or new_id()
    model = Model.objects.create(
        project=project,
        name=_v1_name(project, given["displayName"], vertex_id),
        display_name=given["displayName"],
        description=given.get("description", ""),
        labels=given.get("labels", {}),
        vertex_id=vertex_id,
        location=location,
        created_by=actor if getattr(actor, "pk", None) else None,
    )
    if getattr(actor, "pk", None):
        iam.grant(actor, "roles/ml.modelOwner", model)
    return model


def get_model(project: Project, location: str, model_id: str, *, actor) -> dict:
    method = f"{MODEL_SERVICE}.GetModel"
    model, version = find_model(project, location, model_id, actor=actor)
    audit.authorize(actor, "ml.models.get", model, method=method, data_access=True, service_name=SERVICE)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=resources.model_name(model, location),
        permission="ml.models.get",
        data_access=True,
        service_name=SERVICE,
    )
    return resources.model_resource(version, location)


def list_models(project: Project, location: str, *, actor, filter_text: str = ""):
    """The models the caller may see, newest first: each as its default version."""
    method = f"{MODEL_SERVICE}.ListModels"
    check_location(location)
    audit.authorize(actor, "ml.models.list", project, method=method, data_access=True, service_name=SERVICE)
    models = _visible_in(Model.objects.visible_to(actor).filter(project=project), location)
    models = models.exclude(default_version=None).select_related("project", "default_version")
    return _narrow(models, filter_text)


def _narrow(queryset, text: str):
    def term(field: str, operator: str, value: str):
        name = snake(field) if not field.startswith("labels.") else field
        if name == "display_name":
            return grammar.text_match("display_name", operator, value)
        if name in ("create_time", "update_time"):
            return grammar.time_match("create_time", operator, value)
        labelled = grammar.label_match(name, operator, value)
        if labelled is not None:
            return labelled
        raise grammar.FilterError(
            f"Invalid filter: unknown field {field!r}. Filterable fields: display_name, create_time, labels.<key>."
        )

    return grammar.narrow(queryset, text, term)


def list_versions(project: Project, location: str, model_id: str, *, actor) -> list[dict]:
    method = f"{MODEL_SERVICE}.ListModelVersions"
    model, _ = find_model(project, location, model_id.split("@")[0], actor=actor)
    audit.authorize(actor, "ml.versions.list", model, method=method, data_access=True, service_name=SERVICE)
    versions = list(model.versions.order_by("-vertex_version"))
    for version in versions:
        version.model = model
    return [resources.model_resource(v, location) for v in versions]


def delete_model(project: Project, location: str, model_id: str, *, actor) -> dict:
    """Delete a model with all its versions (Vertex's delete); refused while any is deployed."""
    method = f"{MODEL_SERVICE}.DeleteModel"
    model, _ = find_model(project, location, model_id, actor=actor)
    name = resources.model_name(model, location)
    audit.authorize(actor, "ml.models.delete", model, method=method, service_name=SERVICE)
    deployed = sorted(
        {
            d.endpoint.resource_name
            for d in DeployedModel.objects.filter(version__model=model).select_related("endpoint__project")
        }
    )
    if deployed:
        raise FailedPrecondition(
            f"The model {name} is deployed or being deployed at the following endpoints: {', '.join(deployed)}. "
            "Undeploy it first."
        )
    if model.versions.filter(state__in=[VersionState.CREATING, VersionState.UPDATING]).exists():
        raise FailedPrecondition(f"The model {name} has a version being created or updated; try again when it is done.")
    from models_registry import deploy  # deferred: the deployer stops serving and removes the files

    versions = list(model.versions.all())
    for version in versions:
        version.model = model
        if version.mark_deleting():
            deploy.finish_delete_version(version)
    with transaction.atomic():
        operation = _done_operation(project, location, "DeleteOperationMetadata")
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=name,
            permission="ml.models.delete",
            request={"name": name},
            response=operation,
            service_name=SERVICE,
        )
        RoleBinding.objects.filter(
            project=project, resource_type=RoleBinding.ResourceType.MODEL, resource_id=model.pk
        ).delete()
        model.delete()
    return operation


# --- endpoints -----------------------------------------------------------------------------------


def create_endpoint(project: Project, location: str, body: dict, *, actor, endpoint_id: str = "") -> dict:
    method = f"{ENDPOINT_SERVICE}.CreateEndpoint"
    check_location(location)
    audit.authorize(actor, "ml.models.create", project, method=method, service_name=SERVICE)
    given = _parse(body, "Endpoint", "endpoint")
    violations = []
    if not given.get("displayName", "").strip():
        violations.append(FieldViolation("endpoint.display_name", "displayName is required."))
    if endpoint_id and not re.match(r"^[1-9][0-9]{0,18}$", endpoint_id):
        violations.append(FieldViolation("endpoint_id", "endpointId must be a number of at most 19 digits."))
    if given.get("trafficSplit"):
        violations.append(FieldViolation("endpoint.traffic_split", "a new endpoint has no deployed models to split."))
    if violations:
        raise InvalidArgument.from_violations(violations)
    with transaction.atomic():
        try:
            with transaction.atomic():
                endpoint = Endpoint.objects.create(
                    project=project,
                    location=location,
                    vertex_id=endpoint_id or new_id(),
                    display_name=given["displayName"],
                    description=given.get("description", ""),
                    labels=given.get("labels", {}),
                    created_by=actor if getattr(actor, "pk", None) else None,
                )
        except IntegrityError:
            raise InvalidArgument.from_violations(
                [FieldViolation("endpoint_id", f"Endpoint {endpoint_id} already exists.")]
            ) from None
        body_out = _done_operation(
            project,
            location,
            "CreateEndpointOperationMetadata",
            {"@type": f"{resources.V1}.Endpoint", **resources.endpoint_resource(endpoint)},
        )
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=parent_name(project, location),
            permission="ml.models.create",
            request={"parent": parent_name(project, location), "endpoint": body},
            response=body_out,
            service_name=SERVICE,
        )
    return body_out


def _done_operation(project: Project, location: str, metadata: str, response: dict | None = None) -> dict:
    operation_id = new_id()
    return VertexOperation.objects.create(
        project=project,
        operation_id=operation_id,
        location=location,
        body=resources.operation(
            f"{parent_name(project, location)}/operations/{operation_id}",
            metadata,
            timezone.now(),
            done=True,
            response=response,
        ),
    ).body


def get_endpoint(project: Project, location: str, endpoint_id: str, *, actor) -> dict:
    endpoint = find_endpoint(project, location, endpoint_id, actor=actor, permission="ml.models.get")
    return resources.endpoint_resource(endpoint)


def list_endpoints(project: Project, location: str, *, actor, filter_text: str = ""):
    method = f"{ENDPOINT_SERVICE}.ListEndpoints"
    check_location(location)
    audit.authorize(actor, "ml.models.list", project, method=method, data_access=True, service_name=SERVICE)
    return _narrow(Endpoint.objects.filter(project=project, location=location).select_related("project"), filter_text)


def delete_endpoint(project: Project, location: str, endpoint_id: str, *, actor) -> dict:
    """Delete an endpoint with nothing deployed (Vertex refuses one that has: undeploy first).
    Whoever made it may delete it; others need ``ml.models.delete`` on the project."""
    mine = Endpoint.objects.filter(project=project, vertex_id=endpoint_id, created_by_id=getattr(actor, "pk", None))
    permission = "ml.models.create" if mine.exists() else "ml.models.delete"
    endpoint = find_endpoint(project, location, endpoint_id, actor=actor, permission=permission)
    if endpoint.deployed_models.exists():
        raise FailedPrecondition(
            f"Endpoint {endpoint.resource_name} still has deployed models; undeploy them before deleting it."
        )
    with transaction.atomic():
        body = _done_operation(project, location, "DeleteOperationMetadata")
        audit.record(
            actor=actor,
            project=project,
            method=f"{ENDPOINT_SERVICE}.DeleteEndpoint",
            resource_name=endpoint.resource_name,
            permission=permission,
            request={"name": endpoint.resource_name},
            response=body,
            service_name=SERVICE,
        )
        endpoint.delete()
    return body


def _check_split(split: dict[str, int], ids: set[str], field: str) -> None:
    if not split:
        return
    unknown = sorted(set(split) - ids)
    if unknown:
        raise InvalidArgument.from_violations(
            [
                FieldViolation(
                    field, f"trafficSplit names deployed models the endpoint does not have: {', '.join(unknown)}."
                )
            ]
        )
    negative = sorted(key for key, share in split.items() if share < 0)
    if negative:
        raise InvalidArgument.from_violations(
            [FieldViolation(field, f"trafficSplit takes percentages from 0 to 100; {', '.join(negative)} is below 0.")]
        )
    if sum(split.values()) != 100:
        raise InvalidArgument.from_violations(
            [FieldViolation(field, f"trafficSplit must add up to 100; it adds up to {sum(split.values())}.")]
        )


def deploy_model(project: Project, location: str, endpoint_id: str, body: dict, *, actor) -> dict:
    """endpoints.deployModel: a READY version joins the endpoint, with its share of the traffic
    (``trafficSplit``, where ``"0"`` is the model being deployed). Its serving processes keep
    ``minReplicaCount`` warm, as a v1 version's ``autoScaling.minNodes`` does."""
    method = f"{ENDPOINT_SERVICE}.DeployModel"
    endpoint = find_endpoint(project, location, endpoint_id, actor=actor, permission="ml.models.get")
    request = _parse(body, "DeployModelRequest", "")
    given = request.get("deployedModel")
    if not given or not given.get("model"):
        raise InvalidArgument.from_violations([FieldViolation("deployed_model.model", "model is required.")])
    model_ref = given["model"].rsplit("/models/", 1)[-1]
    try:
        model, version = find_model(project, location, model_ref, actor=actor)
    except iam.NotFound:
        raise InvalidArgument.from_violations(
            [FieldViolation("deployed_model.model", f"Model {given['model']} does not exist.")]
        ) from None
    audit.authorize(actor, "ml.versions.update", model, method=method, service_name=SERVICE)
    if version.state != VersionState.READY:
        raise FailedPrecondition(f"Model {given['model']} is {version.state}, not READY: it cannot be deployed.")
    resources_given = {key: given[key] for key in ("dedicatedResources", "automaticResources") if key in given}
    with transaction.atomic():
        locked = Endpoint.objects.select_for_update().select_related("project").get(pk=endpoint.pk)
        existing = {d.deployed_id for d in locked.deployed_models.all()}
        deployed_id = given.get("id") or new_id()[:18]
        if deployed_id in existing:
            raise InvalidArgument.from_violations(
                [FieldViolation("deployed_model.id", f"A deployed model {deployed_id} is already on the endpoint.")]
            )
        split = dict(request.get("trafficSplit") or {})
        if "0" in split:
            split[deployed_id] = split.pop("0")
        if not split:  # the SDK always sends one; a bare request gives the new model everything
            split = {deployed_id: 100}
        _check_split(split, existing | {deployed_id}, "traffic_split")
        deployed = DeployedModel.objects.create(
            endpoint=locked,
            deployed_id=deployed_id,
            version=version,
            display_name=given.get("displayName", ""),
            resources=resources_given,
        )
        _keep_warm(version)
        response = {
            "@type": f"{resources.V1}.DeployModelResponse",
            "deployedModel": resources.deployed_model_resource(deployed),
        }
        split = {k: v for k, v in split.items() if v} or {deployed_id: 0}
        return _split_changed(locked, split, method, "DeployModelOperationMetadata", response, body, actor=actor)


def _split_changed(endpoint: Endpoint, split: dict, method: str, metadata: str, response: dict, body: dict, *, actor):
    """Inside the deploying or undeploying transaction: the endpoint's new split, the done
    operation that answers it, and its Admin Activity entry."""
    endpoint.traffic_split = split
    endpoint.etag = new_etag()
    endpoint.update_time = timezone.now()
    endpoint.save(update_fields=["traffic_split", "etag", "update_time"])
    operation = _done_operation(endpoint.project, endpoint.location, metadata, response)
    audit.record(
        actor=actor,
        project=endpoint.project,
        method=method,
        resource_name=endpoint.resource_name,
        permission="ml.versions.update",
        request={"endpoint": endpoint.resource_name, **body},
        response=operation,
        service_name=SERVICE,
    )
    return operation


def _replicas(given: dict) -> int:
    for key in ("dedicatedResources", "automaticResources"):
        if key in given:
            return max(int(given[key].get("minReplicaCount") or 1), 1)
    return 1


def _keep_warm(version: Version) -> None:
    """A deployed version keeps the largest ``minReplicaCount`` of its deployments (their rows as they
    now stand) warm; once it is deployed nowhere it scales to zero again."""
    minimum = max((_replicas(d.resources) for d in DeployedModel.objects.filter(version=version)), default=0)
    if version.manual_scaling:
        return  # a fixed node count set through v1 stays as it is
    auto = dict(version.auto_scaling or {})
    auto["minNodes"] = minimum
    Version.objects.filter(pk=version.pk).update(auto_scaling=auto, etag=new_etag())
    version.auto_scaling = auto
    transaction.on_commit(lambda: supervisor.get().configure(version))


def undeploy_model(project: Project, location: str, endpoint_id: str, body: dict, *, actor) -> dict:
    method = f"{ENDPOINT_SERVICE}.UndeployModel"
    endpoint = find_endpoint(project, location, endpoint_id, actor=actor, permission="ml.models.get")
    request = _parse(body, "UndeployModelRequest", "")
    deployed_id = request.get("deployedModelId", "")
    deployed = (
        endpoint.deployed_models.select_related("version__model__project").filter(deployed_id=deployed_id).first()
    )
    if deployed is None:
        raise iam.NotFound(f"{endpoint.resource_name}/deployedModels/{deployed_id or '(none)'}")
    audit.authorize(actor, "ml.versions.update", deployed.version.model, method=method, service_name=SERVICE)
    with transaction.atomic():
        locked = Endpoint.objects.select_for_update().select_related("project").get(pk=endpoint.pk)
        remaining = {d.deployed_id for d in locked.deployed_models.all()} - {deployed_id}
        split = dict(request.get("trafficSplit") or {})
        if not split:
            split = {k: v for k, v in locked.traffic_split.items() if k != deployed_id}
            if remaining and sum(split.values()) != 100:
                if locked.traffic_split.get(deployed_id):
                    raise FailedPrecondition(
                        f"Deployed model {deployed_id} takes {locked.traffic_split[deployed_id]}% of the traffic: "
                        "give a trafficSplit for the models that stay."
                    )
        _check_split({k: v for k, v in split.items() if k in remaining or v}, remaining, "traffic_split")
        deployed.delete()
        _keep_warm(deployed.version)
        response = {"@type": f"{resources.V1}.UndeployModelResponse"}
        split = {k: v for k, v in split.items() if k in remaining and v}
        return _split_changed(locked, split, method, "UndeployModelOperationMetadata", response, body, actor=actor)


# --- prediction ----------------------------------------------------------------------------------------


def choose(endpoint: Endpoint) -> DeployedModel:
    """The deployed model that answers this request, drawn by the traffic split."""
    deployed = {d.deployed_id: d for d in endpoint.deployed_models.select_related("version__model__project")}
    weighted = [(deployed[k], v) for k, v in endpoint.traffic_split.items() if k in deployed and v > 0]
    if not weighted:
        raise FailedPrecondition(
            f"Endpoint {endpoint.resource_name} has no deployed model taking traffic: deploy a model to it first."
        )
    models, weights = zip(*weighted, strict=True)
    return random.choices(models, weights=weights)[0]


def predict(project_id: str, location: str, endpoint_id: str, body: bytes, *, actor, raw: bool = False):
    """endpoints.predict (``{"instances": […], "parameters": …}``) or rawPredict (the body as it
    came): the chosen deployed model's version answers, checked (``ml.models.predict``) and audited
    as a v1 prediction is. Returns (the registry's Prediction, the deployed model)."""
    endpoint = (
        Endpoint.objects.select_related("project")
        .filter(project__project_id=project_id, vertex_id=endpoint_id, location=location)
        .first()
    )
    if endpoint is None or not iam.can_see_project(actor, endpoint.project):
        raise iam.NotFound(f"projects/{project_id}/locations/{location}/endpoints/{endpoint_id}")
    if not raw:
        try:
            request = json.loads(body or b"{}")
        except ValueError:
            raise InvalidArgument("Invalid JSON payload received: the body is not JSON.") from None
        if not isinstance(request, dict) or not isinstance(request.get("instances"), list):
            raise InvalidArgument.from_violations(
                [FieldViolation("instances", "instances is required: a list of the inputs to predict.")]
            )
        forwarded = {"instances": request["instances"]}
        if request.get("parameters") is not None:
            forwarded["parameters"] = request["parameters"]
        body = json.dumps(forwarded).encode()
    deployed = choose(endpoint)
    version = deployed.version
    method = f"{PREDICTION_SERVICE}.{'RawPredict' if raw else 'Predict'}"
    result = services.predict(version.model, version, body, actor=actor, method=method, permission="ml.models.predict")
    return result, deployed
