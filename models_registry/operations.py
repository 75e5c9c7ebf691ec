"""projects.operations get/list/cancel, and the wire shape of an Operation."""

from __future__ import annotations

from django.db import transaction

from aiconsole import audit, iam
from aiconsole.models import Project
from jobs.wire import rfc3339
from models_registry.models import Operation

OPERATIONS = "google.longrunning.Operations"


def operation_resource(operation: Operation) -> dict:
    metadata: dict = {
        "@type": "type.googleapis.com/google.cloud.ml.v1.OperationMetadata",
        "createTime": rfc3339(operation.create_time),
        "operationType": operation.operation_type,
        "projectNumber": str(operation.project.project_number),
    }
    for key, value in (
        ("startTime", rfc3339(operation.start_time)),
        ("endTime", rfc3339(operation.end_time)),
        ("modelName", operation.model_name),
        ("version", operation.version),
        ("labels", operation.labels),
    ):
        if value:
            metadata[key] = value
    if operation.cancellation_requested:
        metadata["isCancellationRequested"] = True
    resource: dict = {"name": operation.resource_name, "metadata": metadata}
    if operation.done:
        resource["done"] = True
        if operation.error:
            resource["error"] = operation.error
        elif operation.response is not None:
            resource["response"] = operation.response
    return resource


def find_operation(project: Project, operation_id: str, *, actor) -> Operation:
    operation = Operation.objects.select_related("project").filter(project=project, operation_id=operation_id).first()
    if operation is None:
        raise iam.NotFound(f"{project.resource_name}/operations/{operation_id}")
    return operation


def get_operation(project: Project, operation_id: str, *, actor) -> Operation:
    method = f"{OPERATIONS}.GetOperation"
    audit.authorize(actor, "ml.operations.get", project, method=method, data_access=True)
    operation = find_operation(project, operation_id, actor=actor)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=operation.resource_name,
        permission="ml.operations.get",
        data_access=True,
    )
    return operation


def list_operations(project: Project, *, actor):
    method = f"{OPERATIONS}.ListOperations"
    audit.authorize(actor, "ml.operations.list", project, method=method, data_access=True)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=project.resource_name,
        permission="ml.operations.list",
        data_access=True,
    )
    return Operation.objects.filter(project=project).select_related("project").order_by("-pk")


def cancel_operation(project: Project, operation_id: str, *, actor) -> Operation:
    """Request cancellation; a finished operation is left as it is, as the original did."""
    method = f"{OPERATIONS}.CancelOperation"
    audit.authorize(actor, "ml.operations.cancel", project, method=method)
    operation = find_operation(project, operation_id, actor=actor)
    with transaction.atomic():
        if not operation.done:
            Operation.objects.filter(pk=operation.pk).update(cancellation_requested=True)
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=operation.resource_name,
            permission="ml.operations.cancel",
        )
    operation.refresh_from_db()
    return operation
