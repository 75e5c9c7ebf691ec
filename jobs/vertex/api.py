"""Vertex AI's REST API for CustomJobs and HyperparameterTuningJobs: thin adapters over
``jobs.vertex.services``, reached from ``jobs.vertex.api_urls``.

Paths are Vertex's (``/v1/projects/P/locations/L/customJobs[/ID[:cancel]]``, the same for
``hyperparameterTuningJobs``, ``/v1/projects/P/locations/L/operations/ID``); errors are Google's
envelope, which the SDK turns into its exceptions. Enums go out as numbers when the request says
``$alt=json;enum-encoding=int`` (the SDK always does), as names otherwise.
"""

from __future__ import annotations

from django.db.models import prefetch_related_objects
from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts, iam, paging
from aiconsole.errors import FieldViolation, InvalidArgument, Unimplemented
from jobs.models import VertexCollection
from jobs.vertex import resources, schema, services

_MESSAGES = {
    VertexCollection.CUSTOM_JOBS: "CustomJob",
    VertexCollection.HYPERPARAMETER_TUNING_JOBS: "HyperparameterTuningJob",
    VertexCollection.TRAINING_PIPELINES: "TrainingPipeline",
    VertexCollection.BATCH_PREDICTION_JOBS: "BatchPredictionJob",
}
_FIELDS = {
    VertexCollection.CUSTOM_JOBS: "custom_job",
    VertexCollection.HYPERPARAMETER_TUNING_JOBS: "hyperparameter_tuning_job",
    VertexCollection.TRAINING_PIPELINES: "training_pipeline",
    VertexCollection.BATCH_PREDICTION_JOBS: "batch_prediction_job",
}


def _enum_ints(request) -> bool:
    return "enum-encoding=int" in request.query_params.get("$alt", "")


def _answer(request, vertex, collection: str) -> Response:
    resource = resources.job_resource(vertex.job, vertex, collection=collection)
    return Response(schema.encode(resource, _MESSAGES[VertexCollection(collection)], enum_ints=_enum_ints(request)))


def _body(request, collection: str) -> dict:
    if not isinstance(request.data, dict):
        field = _FIELDS[VertexCollection(collection)]
        raise InvalidArgument(
            f"Invalid JSON payload received. Expected an object at '{field}'.",
            [FieldViolation(field, "Expected a JSON object.")],
        )
    return request.data


@api_view(["GET", "POST"])
def jobs_collection(request, project_id, location, collection):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "POST":
        _, vertex = services.create_job(project, location, collection, _body(request, collection), actor=request.user)
        return _answer(request, vertex, collection)
    jobs = services.list_jobs(
        project, location, collection, actor=request.user, filter_text=request.query_params.get("filter", "")
    )
    page, next_token = paging.keyset_page(jobs, request, f"vertex-{collection}-{location}")
    if collection == VertexCollection.HYPERPARAMETER_TUNING_JOBS:
        prefetch_related_objects(page, "trials")  # each study answers its trials: one query for the page
    message = _MESSAGES[VertexCollection(collection)]
    enum_ints = _enum_ints(request)
    body: dict = {}
    if page:
        body[collection] = [
            schema.encode(resources.job_resource(job, job.vertex), message, enum_ints=enum_ints) for job in page
        ]
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)


@api_view(["GET", "DELETE"])
def job_item(request, project_id, location, collection, vertex_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "DELETE":
        return Response(services.delete_job(project, location, collection, vertex_id, actor=request.user))
    vertex = services.get_job(project, location, collection, vertex_id, actor=request.user)
    return _answer(request, vertex, collection)


@api_view(["POST"])
def job_cancel(request, project_id, location, collection, vertex_id):
    project = accounts.find_project(project_id, actor=request.user)
    services.cancel_job(project, location, collection, vertex_id, actor=request.user)
    return Response({})


@api_view(["GET"])
def operation_item(request, project_id, location, operation_id):
    project = accounts.find_project(project_id, actor=request.user)
    return Response(services.get_operation(project, location, operation_id, actor=request.user))


# What models_registry.vertex serves under a location, named in refusals of what is not.
REGISTRY_COLLECTIONS = ("models", "endpoints")


@api_view(["GET", "POST", "PATCH", "PUT", "DELETE"])
def not_served(request, project_id, location, rest):
    """A Vertex AI collection or method this console does not serve (``datasets``,
    ``models/ID:export``…): UNIMPLEMENTED in Google's envelope, which the SDK raises as
    ``MethodNotImplemented``, naming what is served. Only for someone who may see the project."""
    project = accounts.find_project(project_id, actor=request.user)
    served = ", ".join([*(collection.value for collection in VertexCollection), *REGISTRY_COLLECTIONS])
    path = request.path.removeprefix("/v1/")
    if rest in {*VertexCollection.values, *REGISTRY_COLLECTIONS, "operations"}:
        _, _, verb = path.rpartition(":")
        if ":" not in path or "/" in verb:  # a served collection: only this name is not one of them
            raise iam.NotFound(path)
        raise Unimplemented(f"The method {rest}.{verb} of Vertex AI is not served by this console.")
    raise Unimplemented(
        f"Vertex AI's {rest} are not served by this console. Under {project.resource_name}/locations/{location} "
        f"it serves {served} and operations/ID: custom training, tuning and training pipelines, models "
        "(upload, get, list, delete), endpoints (create, deploy, undeploy, predict)."
    )
