"""Vertex AI's JobService and PipelineService on the engine: create, get, list, cancel and delete
CustomJobs, HyperparameterTuningJobs and custom TrainingPipelines, and read the operations a
deletion answers. A training pipeline is one job: it runs its task (a CustomJob, or a
HyperparameterTuningJob) on the engine, and answers as a TrainingPipeline whose
``trainingTaskMetadata.backingCustomJob`` is that job, which ``customJobs/<id>`` also answers.

A Vertex job is a job like any other: ``create_job`` translates the body (``jobs.vertex.translate``)
and hands the v1 TrainingInput to ``jobs.services.submit_job``, which validates, checks, queues and
audits it as every submission is; the ``VertexJob`` row it adds in the same transaction keeps the
Vertex name and request. Cancel goes through ``jobs.services.cancel_job``. Every call checks IAM
with the same ``ml.*`` permissions the v1 API uses (Vertex's ``aiplatform.*`` permission names are
held by the roles that hold these, ``PERMISSIONS``) and writes its audit entry under Vertex's
method name (``google.cloud.aiplatform.v1.JobService.CreateCustomJob``).
"""

from __future__ import annotations

import secrets
from collections.abc import Callable

from django.db import transaction
from django.db.models import F
from django.db.models.functions import Coalesce, Greatest

from aiconsole import audit, iam
from aiconsole.errors import FailedPrecondition, FieldViolation, InvalidArgument, Unimplemented
from aiconsole.models import Project, RoleBinding
from jobs import catalogue, services
from jobs.job_ids import vertex_job_id
from jobs.models import Job, VertexCollection, VertexJob, VertexOperation
from jobs.vertex import filters, resources, translate

SERVICE = "aiplatform.googleapis.com"
JOB_SERVICE = "google.cloud.aiplatform.v1.JobService"
PIPELINE_SERVICE = "google.cloud.aiplatform.v1.PipelineService"
OPERATIONS_SERVICE = "google.longrunning.Operations"
NOUNS = {
    VertexCollection.CUSTOM_JOBS: "CustomJob",
    VertexCollection.HYPERPARAMETER_TUNING_JOBS: "HyperparameterTuningJob",
    VertexCollection.TRAINING_PIPELINES: "TrainingPipeline",
    VertexCollection.BATCH_PREDICTION_JOBS: "BatchPredictionJob",
}
READERS: dict[str, Callable[..., translate.Translation]] = {
    VertexCollection.CUSTOM_JOBS: translate.custom_job,
    VertexCollection.HYPERPARAMETER_TUNING_JOBS: translate.tuning_job,
    VertexCollection.TRAINING_PIPELINES: translate.training_pipeline,
}


def register_reader(collection: str, reader: Callable[..., translate.Translation]) -> None:
    """An upper app's reader of a collection's create body (models_registry reads batch prediction
    jobs, whose model it resolves): ``reader(body, location=, project=, actor=) -> Translation``."""
    READERS[collection] = reader


# Vertex AI's permission (aiplatform.customJobs.<verb>, aiplatform.hyperparameterTuningJobs.<verb>) →
# the ml.* permission checked in its place, held by the same predefined roles.
PERMISSIONS = {
    "create": "ml.jobs.create",
    "get": "ml.jobs.get",
    "list": "ml.jobs.list",
    "cancel": "ml.jobs.cancel",
    "delete": "ml.jobs.update",  # the v1 API deletes no job; whoever may change a job may delete it
}
_ID_DIGITS = 19


def new_id() -> str:
    """A resource number as Vertex gives them: 19 decimal digits."""
    return str(10 ** (_ID_DIGITS - 1) + secrets.randbelow(9 * 10 ** (_ID_DIGITS - 1)))


def parent_name(project: Project, location: str) -> str:
    return f"{project.resource_name}/locations/{location}"


def check_location(location: str) -> None:
    """A location must be one of the console's regions (the SDK itself accepts only real ones)."""
    if location not in catalogue.REGIONS:
        message = f"Location {location} is not served here; locations: {', '.join(catalogue.REGIONS)}."
        raise InvalidArgument(message, [FieldViolation("parent", message)])


def _method(verb: str, collection: str) -> str:
    noun = NOUNS[VertexCollection(collection)]
    service = PIPELINE_SERVICE if collection == VertexCollection.TRAINING_PIPELINES else JOB_SERVICE
    return f"{service}.{verb}{noun}{'s' if verb == 'List' else ''}"


def create_job(project: Project, location: str, collection: str, body: dict, *, actor) -> tuple[Job, VertexJob]:
    """Create a CustomJob or HyperparameterTuningJob; it waits QUEUED like any job."""
    method = _method("Create", collection)
    services.authorize_submit(project, actor=actor, method=method, service_name=SERVICE)
    check_location(location)
    reader = READERS.get(collection)
    if reader is None:
        raise Unimplemented(f"Vertex AI's {collection} are not served by this console.")
    try:
        if collection == VertexCollection.BATCH_PREDICTION_JOBS:
            translation = reader(body, location=location, project=project, actor=actor)
        else:
            translation = reader(body, location=location)
    except translate.VertexError as error:
        raise InvalidArgument.from_violations(error.violations) from None
    vertex_id = new_id()
    v1_body: dict = {"jobId": vertex_job_id(translation.display_name, vertex_id)}
    if translation.prediction_input is not None:
        v1_body["predictionInput"] = translation.prediction_input
    else:
        v1_body["trainingInput"] = translation.training_input
    if translation.labels:
        v1_body["labels"] = translation.labels
    created: dict[str, VertexJob] = {}

    def attach(job: Job) -> dict:
        created["vertex"] = VertexJob.objects.create(
            job=job,
            collection=collection,
            vertex_id=vertex_id,
            location=location,
            display_name=translation.display_name,
            request=translation.request,
            engine=translation.engine,
        )
        return resources.job_resource(job, created["vertex"], trials=[])

    noun = NOUNS[VertexCollection(collection)]
    field = noun[0].lower() + noun[1:]
    try:
        job = services.submit_job(
            project,
            v1_body,
            actor=actor,
            method=method,
            service_name=SERVICE,
            audit_request={"parent": parent_name(project, location), field: body},
            on_create=attach,
        )
    except InvalidArgument as error:
        if not error.violations:
            raise
        raise InvalidArgument.from_violations(translation.vertex_violations(error.violations)) from None
    return job, created["vertex"]


def find_job(project: Project, location: str, collection: str, vertex_id: str, *, actor) -> VertexJob:
    """A Vertex job by its name; missing and invisible look the same to outsiders (404)."""
    # A custom training pipeline's job is its backing CustomJob too.
    collections = [collection]
    if collection == VertexCollection.CUSTOM_JOBS:
        collections.append(VertexCollection.TRAINING_PIPELINES)
    vertex = (
        VertexJob.objects.select_related("job__project")
        .filter(job__project=project, collection__in=collections, location=location, vertex_id=vertex_id)
        .first()
    )
    if vertex is not None and vertex.collection != collection and vertex.runs_as != collection:
        vertex = None
    if vertex is None:
        if not iam.can_see_project(actor, project):
            raise iam.NotFound(project.resource_name)
        raise iam.NotFound(f"{parent_name(project, location)}/{collection}/{vertex_id}")
    return vertex


def get_job(project: Project, location: str, collection: str, vertex_id: str, *, actor) -> VertexJob:
    """One Vertex job, for someone holding ml.jobs.get on it (a Data Access entry)."""
    method = _method("Get", collection)
    vertex = find_job(project, location, collection, vertex_id, actor=actor)
    audit.authorize(actor, PERMISSIONS["get"], vertex.job, method=method, data_access=True, service_name=SERVICE)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=vertex.resource_name,
        permission=PERMISSIONS["get"],
        data_access=True,
        service_name=SERVICE,
    )
    return vertex


def list_jobs(project: Project, location: str, collection: str, *, actor, filter_text: str = ""):
    """The location's jobs of the collection that the caller may see, narrowed by a Vertex filter."""
    method = _method("List", collection)
    if not iam.can(actor, PERMISSIONS["list"], project) and not iam.can_see_project(actor, project):
        raise iam.NotFound(project.resource_name)  # job-level owners may still list the jobs they own
    check_location(location)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=parent_name(project, location),
        permission=PERMISSIONS["list"],
        data_access=True,
        service_name=SERVICE,
    )
    jobs = (
        Job.objects.filter(project=project, vertex__collection=collection, vertex__location=location)
        .visible_to(actor, "ml.jobs.get")
        .select_related("vertex", "project")
        .annotate(
            update_time=Greatest(
                F("create_time"), Coalesce("start_time", "create_time"), Coalesce("end_time", "create_time")
            )
        )
    )
    return filters.narrow(jobs, filter_text)


def cancel_job(project: Project, location: str, collection: str, vertex_id: str, *, actor) -> VertexJob:
    """Cancel a Vertex job through the engine's cancel; a finished one is a FAILED_PRECONDITION."""
    vertex = find_job(project, location, collection, vertex_id, actor=actor)
    try:
        services.cancel_job(
            vertex.job,
            actor=actor,
            method=_method("Cancel", collection),
            service_name=SERVICE,
            resource_name=vertex.resource_name,
        )
    except FailedPrecondition:
        state = _state_name(collection, vertex.job.state)
        raise FailedPrecondition(
            f"{NOUNS[VertexCollection(collection)]} {vertex.resource_name} is in state {state} and cannot be cancelled."
        ) from None
    return vertex


def delete_job(project: Project, location: str, collection: str, vertex_id: str, *, actor) -> dict:
    """Delete a finished Vertex job (its logs, metrics and trials with it; what it wrote to its
    output directory stays). Answers the finished long-running operation Vertex answers."""
    method = _method("Delete", collection)
    vertex = find_job(project, location, collection, vertex_id, actor=actor)
    name = vertex.resource_name
    audit.authorize(actor, PERMISSIONS["delete"], vertex.job, method=method, service_name=SERVICE)
    noun = NOUNS[VertexCollection(collection)]
    with transaction.atomic():
        job = Job.objects.select_for_update().get(pk=vertex.job.pk)
        if not job.is_terminal:
            raise FailedPrecondition(
                f"{noun} {name} is in state {_state_name(collection, job.state)}: only a finished job "
                "can be deleted; cancel it first."
            )
        operation_id = new_id()
        operation = VertexOperation.objects.create(
            project=project,
            operation_id=operation_id,
            location=location,
            body=resources.operation(
                f"{parent_name(project, location)}/operations/{operation_id}",
                method_metadata="DeleteOperationMetadata",
                created=job.end_time or job.create_time,
            ),
        )
        RoleBinding.objects.filter(
            project=project, resource_type=RoleBinding.ResourceType.JOB, resource_id=job.pk
        ).delete()
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=name,
            permission=PERMISSIONS["delete"],
            request={"name": name},
            response=operation.body,
            service_name=SERVICE,
        )
        job.delete()
    return operation.body


def _state_name(collection: str, state: str) -> str:
    states = resources.PIPELINE_STATES if collection == VertexCollection.TRAINING_PIPELINES else resources.STATES
    return states.get(state, state)


def get_operation(project: Project, location: str, operation_id: str, *, actor) -> dict:
    """A long-running operation this API answered (a Data Access entry)."""
    method = f"{OPERATIONS_SERVICE}.GetOperation"
    audit.authorize(actor, "ml.operations.get", project, method=method, data_access=True, service_name=SERVICE)
    operation = VertexOperation.objects.filter(project=project, location=location, operation_id=operation_id).first()
    name = f"{parent_name(project, location)}/operations/{operation_id}"
    if operation is None:
        raise iam.NotFound(name)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=name,
        permission="ml.operations.get",
        data_access=True,
        service_name=SERVICE,
    )
    return operation.body
