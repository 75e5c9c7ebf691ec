"""REST routes of the cross-cutting core: IAM policies on projects and jobs."""

from django.urls import re_path

from aiconsole import iam_api

P = r"^projects/(?P<project_id>[^/:]+)"
J = P + r"/jobs/(?P<job_id>[^/:]+)"

urlpatterns = [
    re_path(P + r":getIamPolicy$", iam_api.project_get_iam_policy, name="api-project-get-iam-policy"),
    re_path(P + r":setIamPolicy$", iam_api.project_set_iam_policy, name="api-project-set-iam-policy"),
    re_path(P + r":testIamPermissions$", iam_api.project_test_iam_permissions,
            name="api-project-test-iam-permissions"),
    re_path(J + r":getIamPolicy$", iam_api.job_get_iam_policy, name="api-job-get-iam-policy"),
    re_path(J + r":setIamPolicy$", iam_api.job_set_iam_policy, name="api-job-set-iam-policy"),
    re_path(J + r":testIamPermissions$", iam_api.job_test_iam_permissions, name="api-job-test-iam-permissions"),
]
