"""The compare page, ``/projects/P/compare/?jobs=a,b/3,c``: jobs and trials side by side.

Each job is read through ``services.get_job`` (``ml.jobs.get``, a Data Access entry as on its own
page), its points through ``jobs.metrics.points.points_for``, its curves drawn by
``curves.metric_charts``; what is compared is worked out in ``jobs.metrics.compare`` (pure, shared with
``aiconsole jobs compare``). Everything the page shows is in its query string, so it can be shared:
``agg`` (last, min, max or step, with ``at``) says how the final-metrics table reads each metric,
``baseline`` names the entry the others are read against (its curves drawn as a thick reference
line under the others, the table's differences taken from it), ``inputs=all`` shows every input
(only those that differ, by default); the charts' own settings (``smooth``, ``ylog``, ``xaxis``) are
read by static/charts.js. Two or more tuning jobs get their best-so-far lines on one chart
(``jobs.metrics.studies``).
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from aiconsole import accounts, iam
from jobs import services
from jobs.metrics import charts, compare, curves, studies
from jobs.metrics import points as metrics
from jobs.models import MetricSource

# Points drawn per chart across all lines (each line thinned evenly, its last point kept): 20 jobs'
# curves of 10,000 points stay a light page; the job pages and their CSVs have every point.
POINTS_PER_CHART = 8_000


@login_required
def compare_jobs(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    values = request.GET.getlist("jobs")
    if len(values) > 1:  # the list page's ticked boxes (jobs=a&jobs=b): the shareable form
        query = request.GET.copy()
        query.setlist("jobs", [",".join(v for v in values if v)])
        return redirect(f"{request.path}?{query.urlencode(safe=',/')}")
    entries, malformed = compare.parse_entries(values)
    context = {
        "project": project,
        "jobs_text": values[0] if values else "",
        "max_entries": compare.MAX_ENTRIES,
        "problems": [],
        "entries": [],
    }
    status = _check(entries, malformed, context["problems"])
    if status == 200 and entries:
        resolved, missing = _resolve(project, entries, request.user, context["problems"])
        if missing:
            context["problems"].append(f"Not found in project {project.project_id}: {', '.join(missing)}.")
            status = 404
        elif resolved:
            context |= _comparison(resolved, request.GET)
    return render(request, "jobs/compare.html", context, status=status)


def _check(entries: list[compare.Entry], malformed: list[str], problems: list[str]) -> int:
    if malformed:
        problems.append(f"Not a job ID or jobId/trialId: {', '.join(malformed)}.")
    if len(entries) > compare.MAX_ENTRIES:
        extra = ", ".join(e.label for e in entries[compare.MAX_ENTRIES :])
        problems.append(
            f"At most {compare.MAX_ENTRIES} jobs can be compared; {len(entries)} were given. "
            f"Leave out some of them, e.g. {extra}."
        )
    return 400 if problems else 200


def _resolve(project, entries, actor, problems: list[str]) -> tuple[list[tuple], list[str]]:
    """``(entry, job, trial or None)`` for each entry the user may read; the ids not found. A tuning
    job named without a trial stands for its best trial."""
    jobs: dict[str, object] = {}
    resolved, missing = [], []
    for entry in entries:
        if entry.job_id not in jobs:
            try:
                jobs[entry.job_id] = services.get_job(project, entry.job_id, actor=actor)
            except iam.NotFound:  # missing and invisible look the same (404), as everywhere
                jobs[entry.job_id] = None
        job = jobs[entry.job_id]
        if job is None:
            missing.append(entry.label)
            continue
        trial = None
        if entry.trial_id:
            trial = job.trials.filter(trial_id=entry.trial_id).first()
            if trial is None:
                missing.append(entry.label)
                continue
        elif job.is_hyperparameter_job:
            trial = _best_trial(job)
            if trial is None:
                problems.append(
                    f"{job.job_id} is a tuning job with no trial result yet: name a trial, e.g. {job.job_id}/1."
                )
                continue
            entry = compare.Entry(job.job_id, trial.trial_id)
        if all(e != entry for e, _, _ in resolved):
            resolved.append((entry, job, trial))
    return resolved, missing


def _best_trial(job):
    goal = (job.training_input.get("hyperparameters") or {}).get("goal")
    trials = [t for t in job.trials.defer("all_metrics") if t.objective_value is not None]
    if not trials:
        return None
    pick = min if goal == "MINIMIZE" else max
    return pick(trials, key=lambda t: t.objective_value)


def _aggregation(params) -> tuple[str, int | None]:
    """How the table reads each metric (``?agg=``), and the step for ``agg=step`` (``?at=``)."""
    how = params.get("agg", "last")
    how = how if how in compare.AGGREGATIONS else "last"
    try:
        at = int(params.get("at", ""))
    except ValueError:
        at = None
    return (how if how != "step" or at is not None else "last"), at


def _comparison(resolved: list[tuple], params) -> dict:
    labels = [entry.label for entry, _, _ in resolved]
    how, at = _aggregation(params)
    inputs = compare.input_rows(
        [
            compare.inputs(job.training_input, job.labels, trial.hyperparameters if trial else None)
            for _, job, trial in resolved
        ]
    )
    goals: dict[str, str] = {}
    for _, job, trial in resolved:
        if trial is not None:
            goals = compare.study_goals(job.training_input.get("hyperparameters")) | goals
    chart_rows, finals, tags = [], [], {}
    for index, (entry, job, _) in enumerate(resolved):
        rows = list(
            metrics.points_for(job, trial_id=entry.trial_id)
            .exclude(source=MetricSource.SYSTEM)  # what a run used of the machine is no result of it
            .order_by("pk")
            .values_list("tag", "run", "source", "step", "value", "wall_time")
        )
        group = f"{index:02d}"
        chart_rows += [(tag, group, run, source, step, value, wall) for tag, run, source, step, value, wall in rows]
        finals.append(compare.aggregate_values(((t, r, s, v) for t, r, _, s, v, _ in rows), how, at))
        tags |= {compare.metric_name(tag, run): tag for tag, run, *_ in rows}
    lower, higher = params.getlist("lower"), params.getlist("higher")
    metric_rows = compare.metric_rows(finals, tags, goals, lower, higher)
    baseline = labels.index(params["baseline"]) if params.get("baseline") in labels else None
    for row in metric_rows:
        row.flip_query = _flip_query(params, row)
        row.baseline = baseline
    chosen = _chosen_metric(metric_rows, params.get("metric", ""), goals)
    parallel = compare.parallel_data(labels, inputs, chosen)
    runs = max(1, len({(g, r) for _, g, r, *_ in chart_rows}))
    return {
        "entries": [{"label": e.label, "job": job, "trial": trial} for e, job, trial in resolved],
        "input_rows": inputs,
        # Only the inputs that differ, until asked for all (``inputs=all``, kept in the link).
        "only_differences": params.get("inputs") != "all",
        "inputs_toggle_query": _query(params, inputs=[] if params.get("inputs") == "all" else ["all"]),
        "differing": sum(row.differs for row in inputs),
        "metric_rows": metric_rows,
        "chosen_metric": chosen,
        "metric_charts": curves.metric_charts(
            chart_rows,
            groups=dict(zip((f"{i:02d}" for i in range(len(labels))), labels, strict=True)),
            points_per_series=max(50, POINTS_PER_CHART // runs),
            baseline=f"{baseline:02d}" if baseline is not None else "",
        ),
        "aggregations": compare.AGGREGATIONS,
        "aggregation": how,
        "at": at,
        "baseline": labels[baseline] if baseline is not None else "",
        "parallel_chart": charts.parallel_coordinates(parallel, item="Job", objective=chosen.name)
        if chosen and len(parallel) >= 2
        else None,
        "lower": lower,
        "higher": higher,
        **_studies(resolved),
    }


def _studies(resolved: list[tuple]) -> dict:
    """The compared tuning jobs' best-so-far lines on one chart, where two or more are compared (a
    job named through several of its trials counts once)."""
    jobs = {job.pk: job for _, job, _ in resolved if job.is_hyperparameter_job}
    if len(jobs) < 2:
        return {}
    chart, note = studies.best_so_far_chart(
        [studies.study_of(job.job_id, job.training_input, job.training_output) for job in jobs.values()]
    )
    return {"study_chart": chart, "study_note": note, "study_jobs": [job.job_id for job in jobs.values()]}


def _chosen_metric(rows: list[compare.MetricRow], name: str, goals: dict[str, str]):
    """The metric the parallel coordinates show: the user's, else a study's, else the first."""
    for row in rows:
        if row.name == name:
            return row
    return next((row for row in rows if row.tag in goals), rows[0] if rows else None)


def _query(params, **changes: list[str]) -> str:
    """The page's query string with some parameters set to other values (``[]`` drops one)."""
    query = params.copy()
    for name, values in changes.items():
        query.setlist(name, values)
    return query.urlencode(safe=",/")


def _flip_query(params, row: compare.MetricRow) -> str:
    """The page's query string with the other direction chosen for ``row``'s tag."""
    lower = [t for t in params.getlist("lower") if t != row.tag]
    higher = [t for t in params.getlist("higher") if t != row.tag]
    (higher if row.lower_is_better else lower).append(row.tag)
    return _query(params, lower=lower, higher=higher)
