"""The job page's metrics panel (one chart per tag, live while the job runs) and its CSV download."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import StreamingHttpResponse
from django.shortcuts import render

from aiconsole import accounts
from jobs import services
from jobs.metrics import charts
from jobs.metrics import points as metrics
from jobs.models import ACTIVE_STATES

REFRESH_SECONDS = 5


@login_required
def job_metrics(request, project_id, job_id):
    """The panel, loaded by the job page after it shows (htmx) and again every few seconds
    while the job runs; the page reloads nothing else."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False)
    rows = metrics.points_for(job).order_by("pk").values_list("tag", "trial_id", "run", "source", "step", "value")
    context = {
        "project": project,
        "job": job,
        "metric_charts": charts.metric_charts(rows),
        "active": job.state in ACTIVE_STATES,
        "refresh_seconds": REFRESH_SECONDS,
    }
    return render(request, "jobs/_metrics.html", context)


@login_required
def job_metrics_download(request, project_id, job_id):
    """Every point (``?tag=`` for one chart's), as CSV: the columns of the REST API's points."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user)
    tag = request.GET.get("tag", "")
    points = metrics.points_for(job, tag=tag, trial_id=request.GET.get("trial", ""))
    response = StreamingHttpResponse(metrics.csv_lines(metrics.all_rows(points)), content_type="text/csv")
    suffix = "-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in tag) if tag else ""
    response["Content-Disposition"] = f'attachment; filename="{job.job_id}-metrics{suffix}.csv"'
    return response
