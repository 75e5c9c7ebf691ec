"""The job page's metrics panel (one chart per metric, live while the job runs) and its CSV download."""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from aiconsole import accounts
from aiconsole.streaming import StreamedResponse
from jobs import kinds, services
from jobs.metrics import curves
from jobs.metrics import points as metrics
from jobs.models import ACTIVE_STATES

REFRESH_SECONDS = 5


@login_required
def job_metrics(request, project_id, job_id):
    """The panel, loaded by the job page after it shows (htmx) and again every few seconds
    while the job runs; the page reloads nothing else."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False)
    rows = (
        metrics.points_for(job)
        .order_by("pk")
        .values_list("tag", "trial_id", "run", "source", "step", "value", "wall_time")
    )
    context = {
        "project": project,
        "job": job,
        "metric_charts": curves.metric_charts(rows, study=_curve_study(job)),
        "active": job.state in ACTIVE_STATES,
        "refresh_seconds": REFRESH_SECONDS,
    }
    return render(request, "jobs/_metrics.html", context)


def _curve_study(job) -> curves.Study | None:
    """What colours the job's lines, as its kind says (a study's trials by their objective)."""
    kind = kinds.of_job(job)
    return kind.page().curve_study(job) if kind.page is not None else None


@login_required
def job_metrics_download(request, project_id, job_id):
    """Every point (``?tag=`` for one chart's, repeated for a chart of several tags), as CSV: the
    columns of the REST API's points."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user)
    tags = [t for t in request.GET.getlist("tag") if t]
    points = metrics.points_for(job, tag=tags[0] if len(tags) == 1 else "", trial_id=request.GET.get("trial", ""))
    if len(tags) > 1:
        points = points.filter(tag__in=tags)
    response = StreamedResponse(metrics.csv_lines(metrics.all_rows(points)), content_type="text/csv")
    name = "+".join(tags)
    suffix = "-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in name) if name else ""
    response["Content-Disposition"] = f'attachment; filename="{job.job_id}-metrics{suffix}.csv"'
    return response
