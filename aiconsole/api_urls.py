"""REST routes of the cross-cutting core: IAM policies on projects."""

from django.urls import re_path

from aiconsole import iam_api

P = r"^projects/(?P<project_id>[^/:]+)"

urlpatterns = [
    re_path(P + r":getIamPolicy$", iam_api.project_get_iam_policy, name="api-project-get-iam-policy"),
    re_path(P + r":setIamPolicy$", iam_api.project_set_iam_policy, name="api-project-set-iam-policy"),
    re_path(P + r":testIamPermissions$", iam_api.project_test_iam_permissions, name="api-project-test-iam-permissions"),
]
