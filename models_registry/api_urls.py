from django.urls import re_path

from models_registry import api

OPS = r"^projects/(?P<project_id>[^/:]+)/operations"

urlpatterns = [
    re_path(OPS + r"$", api.operations_collection, name="api-operations"),
    re_path(OPS + r"/(?P<operation_id>[^/:]+):cancel$", api.operation_cancel, name="api-operation-cancel"),
    re_path(OPS + r"/(?P<operation_id>[^/:]+)$", api.operation_item, name="api-operation"),
]
