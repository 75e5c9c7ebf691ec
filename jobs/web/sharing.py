"""Sharing one job: who holds which role on it (``ml.jobs.getIamPolicy`` to look,
``ml.jobs.setIamPolicy`` to change), on the core's generic sharing page."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.urls import reverse
from django.views.decorators.http import require_POST

from aiconsole import accounts
from aiconsole.team_views import SharingPage, sharing_add, sharing_page, sharing_remove
from jobs import services


def _job_page(request, project_id: str, job_id: str):
    project = accounts.find_project(project_id, actor=request.user)
    job = services.find_job(project, job_id, actor=request.user)
    args = (project.project_id, job.job_id)
    return job, SharingPage(
        title=f"job {job.job_id}",
        page_url=reverse("jobs:sharing", args=args),
        add_url=reverse("jobs:sharing_add", args=args),
        remove_url_name="jobs:sharing_remove",
        url_args=args,
        back_url=reverse("jobs:detail", args=args),
        breadcrumbs=(
            (project.project_id, reverse("jobs:list", args=args[:1])),
            ("Jobs", reverse("jobs:list", args=args[:1])),
            (job.job_id, reverse("jobs:detail", args=args)),
        ),
    )


@login_required
def job_sharing(request, project_id, job_id):
    return sharing_page(request, *_job_page(request, project_id, job_id))


@login_required
@require_POST
def job_sharing_add(request, project_id, job_id):
    return sharing_add(request, *_job_page(request, project_id, job_id))


@login_required
@require_POST
def job_sharing_remove(request, project_id, job_id, user_id):
    return sharing_remove(request, *_job_page(request, project_id, job_id), user_id)
