from django.urls import re_path

from models_registry import api

P = r"^projects/(?P<project_id>[^/:]+)"
OPS = P + r"/operations"
M = P + r"/models/(?P<model>[^/:]+)"
V = M + r"/versions/(?P<version>[^/:]+)"

urlpatterns = [
    re_path(OPS + r"$", api.operations_collection, name="api-operations"),
    re_path(OPS + r"/(?P<operation_id>[^/:]+):cancel$", api.operation_cancel, name="api-operation-cancel"),
    re_path(OPS + r"/(?P<operation_id>[^/:]+)$", api.operation_item, name="api-operation"),
    re_path(M + r":predict$", api.predict, name="api-model-predict"),
    re_path(V + r":predict$", api.predict, name="api-version-predict"),
    re_path(V + r":setDefault$", api.version_set_default, name="api-version-set-default"),
    re_path(M + r":getIamPolicy$", api.model_get_iam_policy, name="api-model-get-iam-policy"),
    re_path(M + r":setIamPolicy$", api.model_set_iam_policy, name="api-model-set-iam-policy"),
    re_path(M + r":testIamPermissions$", api.model_test_iam_permissions, name="api-model-test-iam-permissions"),
    re_path(P + r"/models$", api.models_collection, name="api-models"),
    re_path(M + r"/versions$", api.versions_collection, name="api-versions"),
    re_path(V + r"$", api.version_item, name="api-version"),
    re_path(M + r"$", api.model_item, name="api-model"),
]
