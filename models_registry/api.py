"""REST adapters for projects.operations."""

from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import paging
from jobs.services import find_project
from models_registry import operations


@api_view(["GET"])
def operations_collection(request, project_id):
    project = find_project(project_id, actor=request.user)
    page, next_token = paging.keyset_page(operations.list_operations(project, actor=request.user), request,
                                          "operations")
    body: dict = {"operations": [operations.operation_resource(o) for o in page]} if page else {}
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)


@api_view(["GET"])
def operation_item(request, project_id, operation_id):
    project = find_project(project_id, actor=request.user)
    return Response(operations.operation_resource(operations.get_operation(project, operation_id,
                                                                           actor=request.user)))


@api_view(["POST"])
def operation_cancel(request, project_id, operation_id):
    project = find_project(project_id, actor=request.user)
    operations.cancel_operation(project, operation_id, actor=request.user)
    return Response({})
