"""The job page: its state, the sections every job has (logs, replicas, resources, outputs) and its kind's own
(``jobs.kinds.JobPage``: a study's trials and charts from ``jobs.tuning``, a built-in algorithm's
results from ``jobs.builtin``, a batch prediction's input and output from ``models_registry``), as
tabs; the fragments the page refreshes itself with (one URL each: ``fragments/<name>/``); the log's fallback poller and
download; cancel. Thin: parse, call a service, render."""

from __future__ import annotations

import json
import threading
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts, iam
from aiconsole.errors import ServiceError
from aiconsole.streaming import StreamedResponse
from jobs import kinds, services
from jobs.builtin import algorithm as builtin
from jobs.executor import queue
from jobs.logs import stream as logstream
from jobs.logs.stream import LogFilter
from jobs.models import ACTIVE_STATES, JobState, Severity, VertexJob
from jobs.training import page as training_page
from jobs.tuning import export, study
from jobs.webaccess import sessions as web_access

LOG_LINES_PER_PAGE = 1000
SEVERITY_ORDER = [s.value for s in Severity]
# Every job's own sections, between its kind's results and its input (the kind's last section).
LOGS = kinds.PageSection("logs", "Logs", "jobs/_logs.html", "logs")
REPLICAS = kinds.PageSection("replicas", "Replicas", "jobs/_replicas.html", "replicas")
# What each replica used of the machine (jobs.metrics.system), fetched when the tab is shown.
RESOURCES = kinds.PageSection("resources", "Resources", "jobs/_resources_panel.html", "resources-panel")
OUTPUTS = kinds.PageSection("outputs", "Outputs", "jobs/_outputs_section.html", "outputs")


# A kind that adds nothing to the page (none registered one).
NO_SECTIONS = kinds.JobPage(sections=lambda request, job: [])


def page_of(job) -> kinds.JobPage:
    kind = kinds.of_job(job)
    return kind.page() if kind.page else NO_SECTIONS


@login_required
def job_detail(request, project_id, job_id):
    """The job's page: a read of the job, audited as one (Data Access)."""
    project = accounts.find_project(project_id, actor=request.user)
    # Its trainingOutput is read only where a section uses it (a study's charts): a large study's
    # is megabytes of JSON that the page, its trial table and its refreshes never show.
    job = services.get_job(project, job_id, actor=request.user, without_output=True)
    page = page_of(job)
    own = page.sections(request, job)
    # Resources only where replicas are sampled: a training job's and a study's trials' (not a batch
    # prediction's serving processes, jobs.metrics.system).
    sampled = bool(job.training_input)
    every = [LOGS, REPLICAS, RESOURCES, OUTPUTS] if sampled else [LOGS, REPLICAS, OUTPUTS]
    sections = [*own[:-1], *every, *own[-1:]] if page.input_last else [*own, *every]
    context = {**_status_context(request, job), **_log_window(request, job, page)}
    for section in own:
        context.update(section.context)
    # What the page shows first (without a hash or a log query): a job that runs, its log; one that
    # ended, its kind's results when it has some (JobPage.finished_opens_on), else its log too.
    if job.state == JobState.RUNNING:  # a running study opens on its trials; other jobs on the log
        opens = page.running_opens_on(job) or "logs"
    else:
        opens = "logs" if job.state in ACTIVE_STATES else page.finished_opens_on(job) or "logs"
    context.update(sections=sections, tabs=_tabs(sections), open_tab=opens)
    return render(request, "jobs/job_detail.html", context)


@login_required
def job_trials_download(request, project_id, job_id):
    """A study's trial table as its view shows it (the page's query string), every matching row: CSV,
    or JSON with ``?format=json`` (``jobs.tuning.export``). A read of the job, audited as one."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, without_output=True)
    names, rows = export.columns_and_rows(job, request.GET)
    if request.GET.get("format") == "json":
        response = HttpResponse(json.dumps(export.as_json(names, rows), indent=1), content_type="application/json")
        suffix = "json"
    else:
        response = HttpResponse(export.as_csv(names, rows), content_type="text/csv")
        suffix = "csv"
    response["Content-Disposition"] = f'attachment; filename="{job.job_id}-trials.{suffix}"'
    return response


@login_required
def vertex_console_link(request, location, vertex_id, **_):
    """The Google Cloud console link the Vertex SDK logs (``/agent-platform/locations/L/training/N``,
    and its older ``/vertex-ai/`` and ``/ai/platform/`` forms), opened on this console's host: the
    job's page, for whoever may read the job; anyone else finds nothing (404)."""
    vertex = VertexJob.objects.select_related("job__project").filter(location=location, vertex_id=vertex_id).first()
    if vertex is None or not iam.can(request.user, "ml.jobs.get", vertex.job):
        raise Http404("No such job.")
    return redirect("jobs:detail", vertex.job.project.project_id, vertex.job.job_id)


@login_required
def job_fragment(request, project_id, job_id, name: str):
    """One part of the job's page, as the page refreshes it (its status, replicas, filtered log, and
    its kind's own: a study's trial table and charts, a built-in algorithm's results). The page's
    own read was audited; a refresh of it is not a read of its own, so none is."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False, without_output=True)
    if name == "status":
        return render(request, "jobs/job_detail.html#job-status", _status_context(request, job))
    if name == "replicas":
        return render(request, "jobs/_replicas.html#job-replicas", _replica_context(job, request.user))
    page = page_of(job)
    if name == "logs":  # the log filters, applied in place
        context = {**_status_context(request, job), **_log_window(request, job, page)}
        return render(request, "jobs/_logs.html#log-panel", context)
    response = page.fragment(request, job, name)
    if response is None:
        raise Http404(f"{job.job_id} has no part {name!r}.")
    return response


def _tabs(sections: list[kinds.PageSection]) -> list[kinds.PageSection]:
    """One tab per key, in order (a study's metric curves share the Charts tab with its charts)."""
    seen: dict[str, kinds.PageSection] = {}
    for section in sections:
        seen.setdefault(section.key, section)
    return list(seen.values())


def _replica_context(job, user) -> dict:
    return {
        "project": job.project,
        "job": job,
        "replicas": list(job.replicas.select_related("worker").order_by("pk")),
        "active": job.state in ACTIVE_STATES,
        **web_access.page_context(job, user),  # shells into its replicas, and the sessions so far
        # Which Python and build it ran on, and whether the GPUs it asks for were there: said in the
        # header and on the replicas, not only in a log line.
        "ran_on": training_page.ran_on(job) if job.training_input else None,
    }


def _status_context(request, job) -> dict:
    return {
        **_replica_context(job, request.user),
        "can_cancel": job.state in ACTIVE_STATES and iam.can(request.user, "ml.jobs.cancel", job),
        "position": job.job_position(),
        "waiting": queue.explain(job, actor=request.user),
        "deploy_problem": (problem := _deploy_problem(job)),
        # Said only where a model could be: a training job's own job dir (a study's best trial
        # is deployed from its table; a job without a job dir saved nothing the console can find).
        "deploy_note": problem
        if problem and (job.training_input or {}).get("jobDir") and not job.is_hyperparameter_job
        else None,
        "can_clone": bool(job.training_input) and iam.can(request.user, "ml.jobs.create", job.project),
        "builtin_clone": bool(job.training_input) and builtin.is_builtin_job(job),
        "study_progress": study.progress(job),
    }


def _deploy_problem(job) -> str | None:
    """Why a SUCCEEDED training job offers no "Deploy as model version" (None: it does)."""
    if job.state != JobState.SUCCEEDED or not job.training_input:
        return None
    return kinds.deploy_problem(job)


def _log_choices(job, page: kinds.JobPage, log_filter: LogFilter) -> dict:
    """Replicas and trials to filter on, from the job's rows and its kind's plan (never a scan of its log)."""
    replicas = list(job.replicas.values_list("label", "trial_id"))
    tasks = {label for label, _ in replicas} | set(page.log_tasks(job)) | {"service"}
    trials = {trial for _, trial in replicas if trial} | ({log_filter.trial} if log_filter.trial else set())
    tasks |= {log_filter.task} if log_filter.task else set()
    return {
        "tasks": sorted(tasks, key=_task_order),
        "trials": sorted(trials, key=lambda t: (len(t), t)),
        "severities": SEVERITY_ORDER,
    }


def _task_order(task: str):
    """master-replica-0, worker-replica-0, worker-replica-1, …, ps-replica-0, …, service."""
    role, _, index = task.partition("-replica-")
    roles = ["master", "worker", "ps", "evaluator"]
    return (roles.index(role) if role in roles else len(roles), int(index) if index.isdigit() else 0, task)


def _log_window(request, job, page: kinds.JobPage) -> dict:
    """The lines the page opens with. Live: the newest, then the socket streams from ``cursor``.
    Anchored (``before``, ``after``, ``first_error``): one keyset page, links to move on."""
    log_filter = LogFilter.from_page(request.GET)
    lines = log_filter.apply(job.log_lines.all())
    after, before = request.GET.get("after", ""), request.GET.get("before", "")
    window = {
        "filters": log_filter,
        "filter_query": urlencode(log_filter.as_params()),
        "cursor": logstream.last_id(job.pk),
        "first_error": None,
        **_log_choices(job, page, log_filter),
    }
    if request.GET.get("first_error"):
        window["first_error"] = logstream.first_error_id(job.pk, log_filter)
        after = str(window["first_error"] - 1) if window["first_error"] else ""
    if after.isdigit():
        rows = list(lines.filter(pk__gt=int(after)).order_by("pk")[: LOG_LINES_PER_PAGE + 1])
        shown = rows[:LOG_LINES_PER_PAGE]
        earlier = bool(shown) and lines.filter(pk__lt=shown[0].pk).exists()
        return {
            **window,
            "lines": shown,
            "earlier": earlier,
            "later": len(rows) > LOG_LINES_PER_PAGE,
            "last_shown": shown[-1].pk if shown else after,
            "live": False,
        }
    # Live, the page shows lines up to the cursor and the socket sends those after it.
    lines = lines.filter(pk__lt=int(before)) if before.isdigit() else lines.filter(pk__lte=window["cursor"])
    rows = list(lines.order_by("-pk")[: LOG_LINES_PER_PAGE + 1])
    shown = rows[:LOG_LINES_PER_PAGE][::-1]
    return {
        **window,
        "lines": shown,
        "earlier": len(rows) > LOG_LINES_PER_PAGE,
        "later": before.isdigit(),
        "last_shown": shown[-1].pk if shown else int(before or 1) - 1,
        "live": not before.isdigit(),
    }


@login_required
def job_logs(request, project_id, job_id):
    """New log lines after ``after``: the page's fallback poller when its socket cannot connect."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False)
    log_filter = LogFilter.from_page(request.GET)
    after = request.GET.get("after", "")
    lines = log_filter.apply(job.log_lines.all()).order_by("pk")
    lines = list((lines.filter(pk__gt=int(after)) if after.isdigit() else lines)[:LOG_LINES_PER_PAGE])
    context = {
        "project": project,
        "job": job,
        "lines": lines,
        "last_id": lines[-1].pk if lines else (after if after.isdigit() else 0),
        "active": job.state in ACTIVE_STATES,
        "filter_query": urlencode(log_filter.as_params()),
    }
    return render(request, "jobs/job_logs_append.html", context)


DOWNLOAD_FIELDS = ("pk", "time", "severity", "task_name", "trial_id", "seq", "stream", "message")
# Log downloads read and format their pages (CPU, under the GIL) two at a time in this process,
# as tuples: twenty downloads at once, each filling a client's buffers, took the time every
# other request needed. A download waiting on its client holds none.
_DOWNLOAD_PAGES = threading.BoundedSemaphore(2)
DOWNLOAD_PAGE = 1000  # lines: a page's reading and formatting holds the GIL for some 10 ms


@login_required
def job_logs_download(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False)
    services.record_log_read(job, actor=request.user, via="download")
    as_json = request.GET.get("format") == "json"
    lines = LogFilter.from_page(request.GET).apply(job.log_lines.all())

    def row(line: tuple) -> str:
        _, time, severity, task_name, trial_id, seq, stream, message = line
        if as_json:
            return (
                json.dumps(
                    {
                        "timestamp": time.isoformat(),
                        "severity": severity,
                        "task": task_name,
                        "trial": trial_id or None,
                        "seq": seq,
                        "stream": stream,
                        "message": message,
                    }
                )
                + "\n"
            )
        return f"{time:%Y-%m-%d %H:%M:%S} {severity:<8} {task_name} {message}\n"

    def page(after: int) -> tuple[str, int]:
        with _DOWNLOAD_PAGES:
            chunk = list(lines.filter(pk__gt=after).order_by("pk").values_list(*DOWNLOAD_FIELDS)[:DOWNLOAD_PAGE])
            return "".join(map(row, chunk)), chunk[-1][0] if chunk else 0

    async def rows():
        # A page of lines at a time, each sent before the next is read: served from a plain
        # generator, Django reads the whole log into memory first (a 10-million-line log, GBs,
        # for each download), and a client that reads slowly holds all of it.
        text, last = await sync_to_async(page)(0)
        while last:
            yield text
            text, last = await sync_to_async(page)(last)

    extension = "jsonl" if as_json else "log"
    response = StreamedResponse(rows(), content_type="application/x-ndjson" if as_json else "text/plain")
    response["Content-Disposition"] = f'attachment; filename="{job.job_id}.{extension}"'
    return response


@login_required
@require_POST
def job_cancel(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    job = services.find_job(project, job_id, actor=request.user)
    try:
        services.cancel_job(job, actor=request.user)
    except ServiceError as error:
        messages.error(request, error.message)
    if request.htmx:
        return render(request, "jobs/job_detail.html#job-status", _status_context(request, job))
    return redirect("jobs:detail", project_id=project.project_id, job_id=job.job_id)
