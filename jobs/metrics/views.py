"""The job page's metrics panel (one chart per metric, live while the job runs), its Resources panel
(the replicas' sampled use of the machine, ``jobs.metrics.system``: one chart per resource, one line
per replica) and their CSV download."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import render

from aiconsole import accounts
from aiconsole.streaming import StreamedResponse
from jobs import kinds, services
from jobs.metrics import curves, system
from jobs.metrics import points as metrics
from jobs.models import ACTIVE_STATES, MetricSource

REFRESH_SECONDS = 5


@login_required
def job_metrics(request, project_id, job_id):
    """The panel, loaded by the job page after it shows (htmx) and again every few seconds
    while the job runs; the page reloads nothing else. ``?lines=all``: a study's every trial's lines,
    not only its best ones'."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False)
    rows = (
        metrics.points_for(job)
        .exclude(source=MetricSource.SYSTEM)  # the Resources tab's
        .order_by("pk")
        .values_list("tag", "trial_id", "run", "source", "step", "value", "wall_time")
    )
    every = request.GET.get("lines") == "all"  # a study's every trial, not only its best ones
    charts = curves.metric_charts(rows, study=_curve_study(job), every=every)
    context = {
        "project": project,
        "job": job,
        "metric_charts": charts,
        "active": job.state in ACTIVE_STATES,
        "refresh_seconds": REFRESH_SECONDS,
        "all_lines": every,
        "lines_capped": any(chart.beyond_cap for chart in charts),
    }
    return render(request, "jobs/_metrics.html", context)


@login_required
def job_resources(request, project_id, job_id):
    """The Resources panel: loaded when its tab is first shown, again every few seconds while the job runs."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False)
    points = metrics.points_for(job, source=MetricSource.SYSTEM)
    trials = system.drawn_trials(job)
    if trials is not None:
        points = points.filter(trial_id__in=[trial.trial_id for trial in trials])
    rows = points.order_by("pk").values_list("tag", "trial_id", "run", "source", "step", "value", "wall_time")
    context = {
        "project": project,
        "job": job,
        "resource_charts": curves.metric_charts(rows),
        "resource_trials": trials,
        "resource_trials_max": system.DRAWN_TRIALS,
        "active": job.state in ACTIVE_STATES,
        "refresh_seconds": REFRESH_SECONDS,
        "every_seconds": settings.SYSTEM_METRICS_SECONDS,
    }
    return render(request, "jobs/_resources.html", context)


def _curve_study(job) -> curves.Study | None:
    """What colours the job's lines, as its kind says (a study's trials by their objective)."""
    kind = kinds.of_job(job)
    return kind.page().curve_study(job) if kind.page is not None else None


@login_required
def job_metrics_download(request, project_id, job_id):
    """Every point the job reported (``?tag=`` for one chart's, repeated for a chart of several tags;
    ``?source=system`` for what was sampled of its replicas, the Resources tab's), as CSV: the
    columns of the REST API's points."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user)
    tags = [t for t in request.GET.getlist("tag") if t]
    source = request.GET.get("source", "")
    points = metrics.points_for(
        job, tag=tags[0] if len(tags) == 1 else "", trial_id=request.GET.get("trial", ""), source=source
    )
    if not tags and not source:
        points = points.exclude(source=MetricSource.SYSTEM)  # the Metrics tab's points: the job's own
    if len(tags) > 1:
        points = points.filter(tag__in=tags)
    response = StreamedResponse(metrics.csv_lines(metrics.all_rows(points)), content_type="text/csv")
    name = "+".join(tags)
    suffix = "-" + "".join(c if c.isalnum() or c in "-_." else "_" for c in name) if name else ""
    response["Content-Disposition"] = f'attachment; filename="{job.job_id}-metrics{suffix}.csv"'
    return response
