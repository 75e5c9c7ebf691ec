"""Model registry services: models, versions, default versions and online prediction.

Each function checks the permission through IAM (a refusal is audited), changes state inside a
transaction with its Admin Activity entry, and does slow work after commit (deploying a version
runs in the background, see ``deploy``). Reads are Data Access entries when the project turns
them on; ``predict`` is one too (OnlinePredictionService.Predict). HTML views, the REST API and
the CLI (through REST) are thin adapters over these functions.
"""

from __future__ import annotations

import json
import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from django.db import IntegrityError, transaction
from django.db.models import Max, Q

from aiconsole import archives, audit, filters, iam, storage, walks
from aiconsole.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    ServiceError,
)
from aiconsole.models import Project, RoleBinding
from jobs import catalogue, runtimes
from jobs.builtin import algorithm as builtin
from models_registry import conf, deploy, files, requestlog, spec
from models_registry.models import (
    Model,
    Operation,
    OperationType,
    PredictionLog,
    Version,
    VersionState,
    new_etag,
)
from models_registry.resources import EMPTY, model_resource, version_resource
from models_registry.serving import supervisor
from models_registry.serving.processes import FAILED, INVALID, OK, ServingError

MODEL_SERVICE = "google.cloud.ml.v1.ModelService"
PREDICT = "google.cloud.ml.v1.OnlinePredictionService.Predict"
DUPLICATE_MODEL = "A model with the same name already exists."
DUPLICATE_VERSION = "A version with the same name already exists."
MODEL_UPDATABLE = ("description", "labels", "defaultVersion.name", "etag")
VERSION_UPDATABLE = (
    "description",
    "labels",
    "requestLoggingConfig",
    "autoScaling.minNodes",
    "autoScaling.maxNodes",
    "manualScaling.nodes",
    "etag",
)


class Unavailable(ServiceError):
    http_status = 503
    status = "UNAVAILABLE"


# --- looking things up ---------------------------------------------------------------------------


def find_model(project: Project, name: str, *, actor) -> Model:
    """A model by name; missing and invisible look the same to outsiders (404)."""
    model = Model.objects.select_related("project", "default_version").filter(project=project, name=name).first()
    if model is None:
        if not iam.can_see_project(actor, project):
            raise iam.NotFound(project.resource_name)
        raise iam.NotFound(f"{project.resource_name}/models/{name}")
    return model


def find_version(model: Model, name: str) -> Version:
    version = Version.objects.filter(model=model, name=name).first()
    if version is None:
        raise iam.NotFound(f"{model.resource_name}/versions/{name}")
    version.model = model
    return version


def _new_operation(model: Model, kind: str, verb: str, *, version: Version | None = None, **fields) -> Operation:
    """An Operation row named ``{verb}_{model}[_{version}]-{epochMillis}`` (a same-millisecond
    clash moves on by a millisecond)."""
    prefix = f"{verb}_{model.name}_{version.name}" if version is not None else f"{verb}_{model.name}"
    millis = int(time.time() * 1000)
    operation_id = f"{prefix}-{millis}"
    for offset in range(1, 50):
        if not Operation.objects.filter(project=model.project, operation_id=operation_id).exists():
            break
        operation_id = f"{prefix}-{millis + offset}"
    return Operation.objects.create(
        project=model.project,
        operation_id=operation_id,
        operation_type=kind,
        model_name=model.resource_name,
        version=version_resource(version) if version is not None else None,
        **fields,
    )


# --- models ------------------------------------------------------------------------------------------


def create_model(project: Project, body, *, actor) -> Model:
    """projects.models.create: synchronous; the creator is made its Model Owner."""
    method = f"{MODEL_SERVICE}.CreateModel"
    audit.authorize(actor, "ml.models.create", project, method=method)
    data = spec.validate_model(body)
    try:
        with transaction.atomic():
            model = Model.objects.create(
                project=project,
                name=data["name"],
                description=data["description"],
                regions=data["regions"],
                online_prediction_logging=data["onlinePredictionLogging"],
                online_prediction_console_logging=data["onlinePredictionConsoleLogging"],
                labels=data["labels"],
                created_by=actor if getattr(actor, "pk", None) else None,
            )
            if getattr(actor, "pk", None):
                iam.grant(actor, "roles/ml.modelOwner", model)
            audit.record(
                actor=actor,
                project=project,
                method=method,
                resource_name=project.resource_name,
                permission="ml.models.create",
                request={"parent": project.resource_name, "model": body},
                response=model_resource(model, typed=True),
            )
    except IntegrityError:
        raise AlreadyExists(
            f"Field: model.name Error: {DUPLICATE_MODEL}", [FieldViolation("model.name", DUPLICATE_MODEL)]
        ) from None
    # A version is likely to follow: have its runtime's serving environment ready.
    transaction.on_commit(lambda: _prewarm(catalogue.DEFAULT_RUNTIME_VERSION, project))
    return model


def _prewarm(runtime_version: str, project: Project) -> None:
    supervisor.get().prewarm(runtime_version, project)


def get_model(project: Project, name: str, *, actor, audited: bool = True) -> Model:
    method = f"{MODEL_SERVICE}.GetModel"
    model = find_model(project, name, actor=actor)
    audit.authorize(actor, "ml.models.get", model, method=method, data_access=True)
    if audited:
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=model.resource_name,
            permission="ml.models.get",
            data_access=True,
        )
    return model


def _term(fields: dict[str, str]):
    """One ``field op value`` term over a model's or a version's own fields, labels and createTime."""

    def term(field: str, operator: str, value: str) -> Q:
        if field in fields:
            return filters.text_match(fields[field], operator, value)
        if field == "createTime":
            return filters.time_match("create_time", operator, value)
        labelled = filters.label_match(field, operator, value)
        if labelled is not None:
            return labelled
        raise filters.FilterError(
            f"Invalid filter: unknown field {field!r}. Filterable fields: "
            f"{', '.join(fields)}, createTime, labels.<key>."
        )

    return term


def _filtered(queryset, filter_text: str, fields: dict[str, str]):
    """``name:census*``, ``labels.team=ml``, ``state=READY`` and friends, on models or versions."""
    return filters.narrow(queryset, filter_text, _term(fields))


def list_models(project: Project, *, actor, filter_text: str = ""):
    method = f"{MODEL_SERVICE}.ListModels"
    if not iam.can(actor, "ml.models.list", project) and not iam.can_see_project(actor, project):
        raise iam.NotFound(project.resource_name)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=project.resource_name,
        permission="ml.models.list",
        data_access=True,
    )
    models = Model.objects.filter(project=project).visible_to(actor, "ml.models.get")
    models = models.select_related("project", "default_version")
    return _filtered(models, filter_text, {"name": "name", "description": "description"})


def update_model(model: Model, body, update_mask: str, *, actor) -> Operation:
    """projects.models.patch: description, labels or the default version; an UPDATE_MODEL operation."""
    method = f"{MODEL_SERVICE}.UpdateModel"
    audit.authorize(actor, "ml.models.update", model, method=method)
    problems = spec.check_types(body, spec.MODEL_FIELDS, "model")
    problems.raise_if_any()
    paths = spec.mask_paths(update_mask, MODEL_UPDATABLE, "model")
    if "labels" in paths:
        problems.violations.extend(spec.job_spec.validate_labels(body.get("labels") or {}, "model.labels"))
    default_name = ((body.get("defaultVersion") or {}).get("name") or "").rsplit("/", 1)[-1]
    if "defaultVersion.name" in paths and not default_name:
        problems.add("model.default_version.name", "Name the version to make the default.")
    problems.raise_if_any()
    with transaction.atomic():
        current = Model.objects.select_for_update().select_related("project").get(pk=model.pk)
        if "etag" in paths and body.get("etag") and body["etag"] != current.etag:
            raise _stale("model")
        changed = []
        if "description" in paths:
            current.description, changed = body.get("description") or "", [*changed, "description"]
        if "labels" in paths:
            current.labels, changed = body.get("labels") or {}, [*changed, "labels"]
        if "defaultVersion.name" in paths:
            version = find_version(current, default_name)
            _require_ready(version, "made the default")
            current.default_version, changed = version, [*changed, "default_version"]
        if changed:
            current.touch(*changed)
        operation = _new_operation(current, OperationType.UPDATE_MODEL, "update", done=True)
        operation.response = model_resource(current, typed=True)
        operation.end_time = operation.create_time
        operation.save(update_fields=["response", "end_time"])
        audit.record(
            actor=actor,
            project=current.project,
            method=method,
            resource_name=current.resource_name,
            permission="ml.models.update",
            request={"name": current.resource_name, "updateMask": update_mask, "model": body},
            response=operation.response,
        )
    model.refresh_from_db()
    return operation


def _stale(what: str) -> ServiceError:
    return Aborted(
        f"The etag does not match the {what}'s current etag: it changed since it was read. Read it again and retry."
    )


def delete_model(model: Model, *, actor) -> Operation:
    """projects.models.delete: only a model without versions; a DELETE_MODEL operation, done."""
    method = f"{MODEL_SERVICE}.DeleteModel"
    audit.authorize(actor, "ml.models.delete", model, method=method)
    with transaction.atomic():
        if Version.objects.filter(model=model).exists():
            raise FailedPrecondition(
                f"Model {model.name} has versions; delete them before the model "
                "(a model with versions cannot be deleted)."
            )
        operation = _new_operation(model, OperationType.DELETE_MODEL, "delete", done=True, response=EMPTY)
        operation.end_time = operation.create_time
        operation.save(update_fields=["end_time"])
        audit.record(
            actor=actor,
            project=model.project,
            method=method,
            resource_name=model.resource_name,
            permission="ml.models.delete",
            request={"name": model.resource_name},
        )
        RoleBinding.objects.filter(
            project=model.project, resource_type=RoleBinding.ResourceType.MODEL, resource_id=model.pk
        ).delete()
        folder = conf.models_dir() / model.project.project_id / model.name
        transaction.on_commit(lambda: shutil.rmtree(folder, ignore_errors=True))
        model.delete()
    return operation


# --- versions ------------------------------------------------------------------------------------------


def _check_deployment_uri(uri: str, project: Project) -> None:
    """Syntax and containment in the project's storage area now; whether there is a model there,
    while deploying."""
    try:
        if storage.is_gcs_uri(uri):
            storage.parse_gcs_uri(uri, require_object=False)
        else:
            storage.resolve_local_path(uri, must_exist=False, project=project)
    except storage.StorageError as error:
        raise InvalidArgument.from_violations([FieldViolation("version.deployment_uri", str(error))]) from None


def create_version(model: Model, body, *, actor) -> Operation:
    """projects.models.versions.create: a CREATING version and its CREATE_VERSION operation.

    The first version of a model becomes its default. The files are fetched and the model
    loaded in the background (``deploy``); the operation ends with the Version or the reason.
    """
    method = f"{MODEL_SERVICE}.CreateVersion"
    audit.authorize(actor, "ml.versions.create", model, method=method)
    data = spec.validate_version(body)
    check_version_source(data, model.project)
    try:
        with transaction.atomic():
            version, operation = add_version(model, data, actor=actor)
            audit.record(
                actor=actor,
                project=version.model.project,
                method=method,
                resource_name=version.model.resource_name,
                permission="ml.versions.create",
                request={"parent": version.model.resource_name, "version": body},
                response={"name": operation.resource_name},
            )
    except IntegrityError:
        raise AlreadyExists(
            f"Field: version.name Error: {DUPLICATE_VERSION}", [FieldViolation("version.name", DUPLICATE_VERSION)]
        ) from None
    model.refresh_from_db()
    return operation


def check_version_source(data: dict, project: Project, field: str = "version") -> None:
    """What a validated version needs from this machine: its files' place and its runtime's Python."""
    _check_deployment_uri(data["deploymentUri"], project)
    reason = runtimes.unavailable_reason(data["runtimeVersion"], data["pythonVersion"])
    if reason:
        raise InvalidArgument.from_violations([FieldViolation(f"{field}.python_version", reason)])


def add_version(model: Model, data: dict, *, actor, default: bool = False, **vertex) -> tuple[Version, Operation]:
    """Inside the caller's transaction: a CREATING version from validated ``data`` (numbered for
    Vertex AI after the model's last), its CREATE_VERSION operation, and its deployment queued for
    after commit. It becomes the model's default when it is the first, or when ``default``."""
    locked = Model.objects.select_for_update().select_related("project").get(pk=model.pk)
    last = locked.versions.aggregate(last=Max("vertex_version"))["last"] or 0
    version = Version.objects.create(
        model=locked,
        name=data["name"],
        description=data["description"],
        deployment_uri=data["deploymentUri"],
        runtime_version=data["runtimeVersion"],
        python_version=data["pythonVersion"],
        framework=data["framework"],
        machine_type=data["machineType"],
        auto_scaling=data["autoScaling"],
        manual_scaling=data["manualScaling"],
        request_logging_config=data["requestLoggingConfig"],
        labels=data["labels"],
        created_by=actor if getattr(actor, "pk", None) else None,
        vertex_version=last + 1,
        **vertex,
    )
    if locked.default_version_id is None or default:
        locked.default_version = version
        locked.touch("default_version")
    version.model = locked
    operation = _new_operation(locked, OperationType.CREATE_VERSION, "create", version=version, target_version=version)
    deploy.enqueue(version.pk)
    return version, operation


def get_version(model: Model, name: str, *, actor, audited: bool = True) -> Version:
    method = f"{MODEL_SERVICE}.GetVersion"
    version = find_version(model, name)
    audit.authorize(actor, "ml.versions.get", version, method=method, data_access=True)
    if audited:
        audit.record(
            actor=actor,
            project=model.project,
            method=method,
            resource_name=version.resource_name,
            permission="ml.versions.get",
            data_access=True,
        )
    return version


def list_versions(model: Model, *, actor, filter_text: str = ""):
    method = f"{MODEL_SERVICE}.ListVersions"
    audit.authorize(actor, "ml.versions.list", model, method=method, data_access=True)
    audit.record(
        actor=actor,
        project=model.project,
        method=method,
        resource_name=model.resource_name,
        permission="ml.versions.list",
        data_access=True,
    )
    versions = Version.objects.filter(model=model)
    return _filtered(
        versions,
        filter_text,
        {
            "name": "name",
            "state": "state",
            "framework": "framework",
            "runtimeVersion": "runtime_version",
            "deploymentUri": "deployment_uri",
        },
    )


def _require_ready(version: Version, action: str) -> None:
    if version.state != VersionState.READY:
        raise FailedPrecondition(f"Version {version.name} is {version.state}; only a READY version can be {action}.")


def _require_idle(version: Version, action: str) -> None:
    if version.is_busy:
        raise FailedPrecondition(
            f"Version {version.name} is {version.state}: it cannot be {action} until that finishes."
        )


def update_version(version: Version, body, update_mask: str, *, actor) -> Operation:
    """projects.models.versions.patch: description, labels, request logging, node counts."""

    method = f"{MODEL_SERVICE}.UpdateVersion"
    audit.authorize(actor, "ml.versions.update", version, method=method)
    problems = spec.check_types(body, spec.VERSION_FIELDS, "version")
    problems.raise_if_any()
    paths = spec.mask_paths(update_mask, VERSION_UPDATABLE, "version")
    with transaction.atomic():
        current = Version.objects.select_for_update().select_related("model__project").get(pk=version.pk)
        _require_idle(current, "updated")
        if "etag" in paths and body.get("etag") and body["etag"] != current.etag:
            raise _stale("version")
        changes = _version_changes(current, body, paths, problems)
        problems.raise_if_any()
        for attribute, value in changes.items():
            setattr(current, attribute, value)
        current.etag = new_etag()
        current.save(update_fields=[*changes, "etag"])
        operation = _new_operation(
            current.model,
            OperationType.UPDATE_VERSION,
            "update",
            version=current,
            done=True,
            response=version_resource(current, typed=True),
        )
        operation.end_time = operation.create_time
        operation.save(update_fields=["end_time"])
        audit.record(
            actor=actor,
            project=current.project,
            method=method,
            resource_name=current.resource_name,
            permission="ml.versions.update",
            request={"name": current.resource_name, "updateMask": update_mask, "version": body},
            response=operation.response,
        )
    version.refresh_from_db()
    if version.state == VersionState.READY:
        transaction.on_commit(lambda: supervisor.get().configure(version))
    return operation


def _version_changes(current: Version, body: dict, paths: list[str], problems: spec.Problems) -> dict:
    changes: dict = {}
    if "description" in paths:
        changes["description"] = body.get("description") or ""
    if "labels" in paths:
        labels = body.get("labels") or {}
        problems.violations.extend(spec.job_spec.validate_labels(labels, "version.labels"))
        changes["labels"] = labels
    if "requestLoggingConfig" in paths:
        config = spec.check_request_logging(body.get("requestLoggingConfig") or {}, problems)
        changes["request_logging_config"] = config or None
    scaling_paths = [p for p in paths if p.startswith(("autoScaling.", "manualScaling."))]
    if any(p.startswith("manualScaling.") for p in scaling_paths) and current.manual_scaling is None:
        problems.add(
            "version.manual_scaling",
            "This version uses autoScaling; manualScaling cannot be set on it (create a new version instead).",
        )
    elif any(p.startswith("autoScaling.") for p in scaling_paths) and current.manual_scaling is not None:
        problems.add(
            "version.auto_scaling",
            "This version uses manualScaling; autoScaling cannot be set on it (create a new version instead).",
        )
    elif scaling_paths and current.manual_scaling is not None:
        _, manual = spec.check_scaling(None, {"nodes": (body.get("manualScaling") or {}).get("nodes", 1)}, problems)
        changes["manual_scaling"] = manual
    elif scaling_paths:
        auto = dict(current.auto_scaling or {})
        given = body.get("autoScaling") or {}
        for path in scaling_paths:
            key = path.split(".", 1)[1]
            if given.get(key) is None:
                auto.pop(key, None)
            else:
                auto[key] = given[key]
        changes["auto_scaling"], _ = spec.check_scaling(auto, None, problems)
    return changes


def delete_version(version: Version, *, actor) -> Operation:
    """projects.models.versions.delete: stops its serving processes and removes its files.

    The default version can only go when it is the model's last one.
    """
    method = f"{MODEL_SERVICE}.DeleteVersion"
    audit.authorize(actor, "ml.versions.delete", version, method=method)
    with transaction.atomic():
        model = Model.objects.select_for_update().select_related("project").get(pk=version.model_id)
        current = Version.objects.get(pk=version.pk)
        current.model = model
        _require_idle(current, "deleted")
        if current.is_default and Version.objects.filter(model=model).exclude(pk=current.pk).exists():
            raise FailedPrecondition(
                f"Version {current.name} is the default version of model {model.name}; "
                "make another version the default before deleting it (the default "
                "version can only be deleted when it is the last one)."
            )
        current.mark_deleting()
        operation = _new_operation(model, OperationType.DELETE_VERSION, "delete", version=current)
        audit.record(
            actor=actor,
            project=model.project,
            method=method,
            resource_name=current.resource_name,
            permission="ml.versions.delete",
            request={"name": current.resource_name},
            response={"name": operation.resource_name},
        )
        transaction.on_commit(lambda: deploy.finish_delete_version(current, operation))
    return operation


def set_default_version(version: Version, *, actor) -> Version:
    """projects.models.versions.setDefault: a READY version becomes the one models:predict uses."""
    method = f"{MODEL_SERVICE}.SetDefaultVersion"
    audit.authorize(actor, "ml.versions.update", version, method=method)
    with transaction.atomic():
        model = Model.objects.select_for_update().select_related("project").get(pk=version.model_id)
        current = Version.objects.get(pk=version.pk)
        current.model = model
        _require_ready(current, "made the default")
        model.default_version = current
        model.touch("default_version")
        audit.record(
            actor=actor,
            project=model.project,
            method=method,
            resource_name=current.resource_name,
            permission="ml.versions.update",
            request={"name": current.resource_name},
            response=version_resource(current, typed=True),
        )
    return current


# --- online prediction ---------------------------------------------------------------------------------


@dataclass
class Prediction:
    """An online prediction's HTTP answer: status and body exactly as the client gets them."""

    status: int
    body: bytes
    version: Version
    cold_start_ms: float | None = None


def recent_predictions(model: Model, version: Version, *, actor, limit: int = 50) -> list:
    """The version's last logged predictions. Request and response bodies are the callers' data:
    only those who may change the model (``ml.models.update``) see them; others see the access rows."""
    logs = list(PredictionLog.objects.filter(version=version).order_by("-pk")[:limit])
    if not iam.can(actor, "ml.models.update", model):
        for log in logs:
            log.request = log.response = None
    return logs


def prediction_target(
    project_id: str, model_name: str, version_name: str | None, *, actor
) -> tuple[Model, Version | None]:
    """The model (with its project and default version) and the named version of a predict call."""

    model = (
        Model.objects.select_related("project", "default_version")
        .filter(project__project_id=project_id, name=model_name)
        .first()
    )
    if model is not None and version_name is None:
        return model, None
    version = Version.objects.filter(model=model, name=version_name).first() if model is not None else None
    if version is not None:
        version.model = model
        return model, version
    project = Project.objects.filter(project_id=project_id).first()
    if project is None or not iam.can_see_project(actor, project):
        raise iam.NotFound(f"projects/{project_id}")
    model = find_model(project, model_name, actor=actor)
    raise iam.NotFound(f"{model.resource_name}/versions/{version_name}")


def predict(
    model: Model, version: Version | None, body: bytes, *, actor, method: str = PREDICT, permission: str = ""
) -> Prediction:
    """projects.predict: the named version, or the model's default, answers the instances.

    ``ml.versions.predict`` when a version is named, ``ml.models.predict`` otherwise (or the
    ``permission`` given, on the model: Vertex AI's endpoints); audited as Data Access under
    ``method``. The body goes to the version's serving process as it came, and its answer back.
    """

    if not permission:
        permission = "ml.versions.predict" if version is not None else "ml.models.predict"
    checked = model if permission.startswith("ml.models.") else (version or model)
    service = "aiplatform.googleapis.com" if method != PREDICT else None
    audit.authorize(actor, permission, checked, method=method, data_access=True, service_name=service)
    target = version if version is not None else model.default_version
    if target is None:
        raise FailedPrecondition(
            f"Model {model.name} has no default version: create a version, or name one "
            f"({model.resource_name}/versions/VERSION:predict)."
        )
    target.model = model
    if target.state != VersionState.READY:
        reason = f": {target.error_message}" if target.error_message else "."
        raise FailedPrecondition(f"Version {target.name} is {target.state}, not READY{reason}")
    started = time.perf_counter()
    try:
        answer = supervisor.get().predict(target, body)
    except ServingError as error:
        raise Unavailable(f"Version {target.name} could not answer: {error}") from None
    if answer.code == OK:
        result = Prediction(200, answer.body, target, answer.cold_start_ms)
    elif answer.code == FAILED:
        result = Prediction(400, json.dumps({"error": answer.body.decode("utf-8", "replace")}).encode(), target)
    elif answer.code == INVALID:
        raise InvalidArgument(answer.body.decode("utf-8", "replace"))
    else:
        raise ServiceError(
            f"The serving process of version {target.name} failed: {answer.body.decode('utf-8', 'replace')}"
        )
    audit.record(
        actor=actor,
        project=model.project,
        method=method,
        resource_name=(version or model).resource_name,
        permission=permission,
        data_access=True,
        service_name=service,
    )
    if model.online_prediction_logging:
        requestlog.record(target, actor, result.status, (time.perf_counter() - started) * 1000, body, result.body)
    return result


# --- batch prediction jobs ---------------------------------------------------------------------------------


def check_prediction_input(prediction_input: dict, *, actor, project: Project) -> None:
    """What jobs.create checks on a predictionInput beyond its schema: local paths in the
    project's storage area (or a shared root), and ``ml.models.predict`` (modelName) or
    ``ml.versions.predict`` (versionName)
    on the model, which must exist."""
    violations = []
    path = "job.prediction_input"
    uris = [(f"{path}.input_paths[{i}]", p, True) for i, p in enumerate(prediction_input.get("inputPaths", []))]
    uris.append((f"{path}.output_path", prediction_input.get("outputPath", ""), False))
    if prediction_input.get("uri"):
        uris.append((f"{path}.uri", prediction_input["uri"], False))
    for field, uri, wildcard in uris:
        try:
            if storage.is_gcs_uri(uri):
                storage.parse_gcs_uri(uri, require_object=False)
            else:
                # A wildcard stays inside its folder: the folder is what must lie in a root.
                folder = uri.rsplit("/", 1)[0] if wildcard and any(c in uri for c in "*?[") else uri
                storage.resolve_local_path(folder or "/", must_exist=False, project=project)
        except storage.StorageError as error:
            violations.append(FieldViolation(field, str(error)))
    if violations:
        raise InvalidArgument.from_violations(violations)
    name = prediction_input.get("versionName") or prediction_input.get("modelName")
    if not name:
        return
    parts = name.split("/")
    project = Project.objects.filter(project_id=parts[1]).first()
    if project is None or not iam.can_see_project(actor, project):
        raise iam.NotFound(f"projects/{parts[1]}")
    model = find_model(project, parts[3], actor=actor)
    method = "google.cloud.ml.v1.JobService.CreateJob"
    if prediction_input.get("versionName"):
        version = find_version(model, parts[5])
        audit.authorize(actor, "ml.versions.predict", version, method=method)
    else:
        audit.authorize(actor, "ml.models.predict", model, method=method)


# --- uploaded model files -------------------------------------------------------------------------------

MODEL_UPLOAD_SUFFIXES = (".joblib", ".pkl", ".bst", ".json", ".zip", ".tar.gz", ".tgz")
UPLOAD_RULE = (
    "a model file (.joblib, .pkl, .bst or .json) or an archive (.zip or .tar.gz) of a folder "
    "holding one, or a SavedModel (saved_model.pb)"
)


def upload_model(model: Model, filename: str, stream, *, actor) -> dict:
    """Store an uploaded model file or archive in the project's storage area, for a new version.

    A single file becomes ``model.<ext>`` in a folder of its own; an archive is checked and
    extracted with ``archives.safe_extract`` (no path outside the folder, no links out, bounded
    sizes), then must hold a model. Refusals name the file, never a server path; nothing is kept.
    Returns ``{"uri": the folder to deploy, "name", "sizeBytes", "framework"}``.
    """

    method = "aiconsole.ModelService.UploadModel"
    audit.authorize(actor, "ml.versions.create", model, method=method)
    display = Path(filename or "").name
    suffix = next((s for s in MODEL_UPLOAD_SUFFIXES if display.lower().endswith(s)), None)
    if suffix is None:
        raise InvalidArgument.from_violations(
            [FieldViolation("model_file", f"{display or 'The file'} is not {UPLOAD_RULE}.")]
        )
    try:
        path = storage.save_upload(stream, display, project=model.project.project_id)
    except storage.StorageError as error:
        raise InvalidArgument.from_violations([FieldViolation("model_file", str(error))]) from None
    folder = path.parent / "model"
    try:
        if suffix in (".zip", ".tar.gz", ".tgz"):
            archives.safe_extract(path, folder)
        else:
            folder.mkdir()
            shutil.move(str(path), folder / f"model{suffix}")
        detected = files.detect_model(folder, "", display)
    except (archives.ArchiveError, files.DeployError) as error:
        shutil.rmtree(path.parent, ignore_errors=True)
        raise InvalidArgument.from_violations([FieldViolation("model_file", str(error))]) from None
    size = path.stat().st_size if path.exists() else (folder / f"model{suffix}").stat().st_size
    path.unlink(missing_ok=True)  # the archive's content is kept, not the archive
    uploaded = {
        "uri": str(detected.model_dir),
        "name": display,
        "sizeBytes": str(size),
        "framework": detected.framework,
    }
    audit.record(
        actor=actor,
        project=model.project,
        method=method,
        resource_name=model.resource_name,
        permission="ml.versions.create",
        request={"name": display},
        response={"name": display, "sizeBytes": str(size), "framework": detected.framework},
    )
    return uploaded


def model_folders_under(job_dir: str, project: Project) -> list[str]:
    """Folders under a local job dir that hold a model file (the dir itself first), at most 20.

    Empty when the job dir is not in ``project``'s storage area (or a shared root): the walk never
    follows links, so everything it offers lies where the project may read."""

    try:
        root = storage.resolve_local_path(job_dir, project=project)
    except storage.StorageError:
        return []
    names = {n for files_ in files.MODEL_FILES.values() for n in files_}
    found: list[str] = []
    try:
        for path in walks.walk_files(root):  # bounded, never through a link
            if path.name in names and str(path.parent) not in found:
                found.append(str(path.parent))
            if len(found) >= 20:
                break
    except walks.WalkLimitError:
        pass  # offer what the bounded walk found
    return sorted(found, key=lambda p: (p != str(root), len(p), p))


def deploy_problem(job) -> str | None:
    """Why a SUCCEEDED training job has nothing to deploy, or None when it has (its job dir on
    Cloud Storage counts: the deploy page lets the user name the folder)."""
    job_dir = (job.training_input or {}).get("jobDir", "")
    if not job_dir:
        return "this job has no job directory (trainingInput.jobDir), so it saved no model the console can find"
    if storage.is_gcs_uri(job_dir):
        return None

    if builtin.is_builtin_job(job) or model_folders_under(job_dir, job.project):
        return None
    return "no model file (model.joblib, model.pkl, model.bst, saved_model.pb) is in its job directory"
