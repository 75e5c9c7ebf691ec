"""A job's IAM policy over REST, as in the original: ``projects.jobs.getIamPolicy``,
``setIamPolicy`` and ``testIamPermissions`` (the adapters themselves are the core's, in
``aiconsole.iam_api``)."""

from __future__ import annotations

from rest_framework.decorators import api_view

from aiconsole import accounts
from aiconsole.iam_api import get_iam_policy, held_permissions, set_iam_policy
from jobs import services
from jobs.models import Job


def _job(request, project_id: str, job_id: str):
    project = accounts.find_project(project_id, actor=request.user)
    return services.find_job(project, job_id, actor=request.user)


@api_view(["GET", "POST"])
def job_get_iam_policy(request, project_id, job_id):
    return get_iam_policy(request, _job(request, project_id, job_id))


@api_view(["POST"])
def job_set_iam_policy(request, project_id, job_id):
    return set_iam_policy(request, _job(request, project_id, job_id))


@api_view(["POST"])
def job_test_iam_permissions(request, project_id, job_id):
    job = Job.objects.select_related("project").filter(project__project_id=project_id, job_id=job_id).first()
    return held_permissions(request, "job", job)
