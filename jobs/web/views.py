"""Console pages for training jobs. Thin: parse, call a service, render."""

from __future__ import annotations

import json
import shlex
import threading
from urllib.parse import urlencode

from asgiref.sync import sync_to_async
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import StreamingHttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts, iam
from aiconsole.errors import InvalidArgument, ServiceError
from jobs import catalogue, kinds, naming, runtimes, services
from jobs.builtin import algorithm as builtin
from jobs.containers import choices as container_choices
from jobs.logs import stream as logstream
from jobs.logs.stream import LogFilter
from jobs.metrics import charts
from jobs.models import ACTIVE_STATES, JobState, Severity
from jobs.spec import roles
from jobs.tuning import study
from jobs.web import equivalent, listing, trials
from jobs.web.forms import CONTAINER, JobSubmitForm, initial_from_job, not_carried, runtime_pythons
from jobs.web.listing import SORTS, JobListQuery

JOBS_PER_PAGE = 100
LOG_LINES_PER_PAGE = 1000
SEVERITY_ORDER = [s.value for s in Severity]


@login_required
def home(request):
    project = iam.projects_for(request.user).first()
    if project is None:
        return render(request, "aiconsole/no_projects.html")
    return redirect("jobs:list", project_id=project.project_id)


@login_required
def job_list(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    visible = services.list_jobs(project, actor=request.user)
    query = JobListQuery.from_params(request.GET)
    jobs = visible.select_related("created_by")
    before = request.GET.get("before", "")  # the keyset links of earlier releases
    if before.isdigit():
        jobs = jobs.filter(pk__lt=int(before))
    jobs = query.apply(jobs)
    start = (query.page - 1) * JOBS_PER_PAGE
    page = list(jobs[start : start + JOBS_PER_PAGE + 1])
    context = {
        "project": project,
        "jobs": page[:JOBS_PER_PAGE],
        "rows": listing.rows(page[:JOBS_PER_PAGE], query),
        "query": query,
        "older": query.url(page=query.page + 1) if len(page) > JOBS_PER_PAGE else None,
        "newer": query.url(page=query.page - 1) if query.page > 1 else None,
        "sorts": {column: query.sort_link(column) for column in SORTS},
        "chosen": query.headings(),
        "states": [s for s in JobState.values if s != JobState.STATE_UNSPECIFIED],
        "job_types": listing.JOB_TYPES,
        "any_active": any(job.state in ACTIVE_STATES for job in page),
        "can_create": iam.can(request.user, "ml.jobs.create", project),
    }
    if not request.htmx:
        context["creators"] = listing.creators(visible)
        context["choices"] = listing.column_choices(visible, query)
    template = "jobs/job_list.html#job-rows" if request.htmx else "jobs/job_list.html"
    return render(request, template, context)


@login_required
def job_detail(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    part = request.GET.get("part") if request.htmx else None  # a fragment the page refreshes itself
    job = services.get_job(
        project, job_id, actor=request.user, audited=part not in ("status", "trials", "charts", "builtin", "replicas")
    )
    if part == "status":
        return render(request, "jobs/job_detail.html#job-status", _status_context(request, job))
    if part == "trials" and job.is_hyperparameter_job:
        context = {"project": project, "job": job, "can_resume": _can_resume(request, job), **_trials(job, request)}
        # The address bar follows the table (sort, filters, columns), so a copied link shows it:
        # static/trials.js puts this address there (htmx's own HX-Replace-Url first snapshots the
        # whole page for its history cache, which cost a large study's re-sort half a second).
        context["trial_page_url"] = trials.page_url(request.path, request.GET, context["trial_query"])
        return render(request, "jobs/_trials.html#trial-table", context)
    if part == "replicas" and job.is_hyperparameter_job:
        return render(request, "jobs/job_detail.html#study-replicas", _status_context(request, job))
    if part == "builtin" and builtin.is_builtin_job(job):
        return render(
            request,
            "jobs/_builtin_results.html#builtin-results",
            {"project": project, "job": job, **_builtin_context(request, job)},
        )
    if part == "charts" and job.is_hyperparameter_job:
        return render(
            request,
            "jobs/_trials.html#study-charts",
            {"project": project, "job": job, **_study_charts(job, request.GET)},
        )
    summary = _training_summary(job)
    context = {**_status_context(request, job), **_log_window(request, job, summary), "summary": summary}
    if job.training_input:
        uploads = {uri: name for name, uri in summary["packages"] if name}
        context["preview"] = equivalent.build(project.project_id, job.job_id, job.training_input, job.labels, uploads)
    if job.is_hyperparameter_job:
        # The charts follow the page (htmx, ``part=charts``): built while the browser shows the
        # rest. ``?charts=inline`` puts them in the page, for a browser without JavaScript.
        inline = request.GET.get("charts") == "inline"
        context.update(_study_charts(job, request.GET) if inline else _contour_choice(request.GET))
        context["charts_inline"] = inline
        context.update(_trials(job, request))
        context["can_resume"] = _can_resume(request, job)
    if builtin.is_builtin_job(job):
        context.update(_builtin_context(request, job))
    return render(request, "jobs/job_detail.html", context)


def _trials(job, request) -> dict:
    """The study's trial table as the query string asks, its rows already drawn."""
    table = study.trial_table(job, request.GET)
    table["trial_body"] = trials.body(
        table["trial_rows"],
        table["trial_shown"],
        job_id=job.job_id,
        best=table["best_trial_id"],
        goal=table["trial_goal"],
        failures=table["trial_failures"],
    )
    return table


def _can_resume(request, job) -> bool:
    return job.is_terminal and iam.can(request.user, "ml.jobs.create", job.project)


def _builtin_context(request, job) -> dict:
    """A built-in job's results: of the trial asked for, else of the best one so far."""
    trial = request.GET.get("trial") or (builtin.best_trial(job) if job.is_hyperparameter_job else "")
    return {
        "builtin": builtin.results(job, trial),
        "builtin_trial_asked": request.GET.get("trial", ""),
        "can_deploy": iam.can(request.user, "ml.models.create", job.project),
    }


def _contour_choice(params) -> dict:
    """The pair of parameters the user picked for the contour plot, if any."""
    pair = (params.get("contour_x", ""), params.get("contour_y", ""))
    return {"contour_x": pair[0] if all(pair) else "", "contour_y": pair[1] if all(pair) else ""}


def _study_charts(job, params) -> dict:
    """The study's charts (the contour for the chosen pair of parameters, if any)."""
    spec = (job.training_input or {}).get("hyperparameters", {})
    choice = _contour_choice(params)
    pair = (choice["contour_x"], choice["contour_y"])
    return {
        "tuning_charts": charts.tuning_charts(
            job.training_output, spec.get("goal"), spec, contour=pair if all(pair) else None
        ),
        **choice,
    }


def _status_context(request, job) -> dict:
    return {
        "project": job.project,
        "job": job,
        "replicas": list(job.replicas.select_related("worker").order_by("pk")),
        "active": job.state in ACTIVE_STATES,
        "can_cancel": job.state in ACTIVE_STATES and iam.can(request.user, "ml.jobs.cancel", job),
        "position": job.job_position(),
        "deploy_problem": _deploy_problem(job),
        "can_clone": bool(job.training_input) and iam.can(request.user, "ml.jobs.create", job.project),
        "builtin_clone": bool(job.training_input) and builtin.is_builtin_job(job),
    }


def _deploy_problem(job) -> str | None:
    """Why a SUCCEEDED training job offers no "Deploy as model version" (None: it does)."""
    if job.state != JobState.SUCCEEDED or not job.training_input:
        return None
    return kinds.deploy_problem(job)


def _training_summary(job) -> dict:
    training_input = job.training_input or {}
    try:
        plans = catalogue.replica_plan(training_input)
    except Exception:  # a job stored by an older release must still render
        plans = []
    # An uploaded package shows as the file the user gave, never as its path on this server.
    packages = [(services.uploaded_name(uri, job.project), uri) for uri in training_input.get("packageUris") or []]
    shown = {**training_input, "packageUris": [f"{name} (uploaded)" if name else uri for name, uri in packages]}
    try:
        runtime, _ = runtimes.resolve_pair(training_input.get("runtimeVersion"), training_input.get("pythonVersion"))
        python, python_note, _ = runtimes.python_choice(
            training_input.get("runtimeVersion"), training_input.get("pythonVersion")
        )
    except KeyError:  # a runtime this console no longer has: show what was asked
        runtime, python, python_note = None, training_input.get("pythonVersion") or "", ""
    return {
        "input": training_input,
        "container": None if builtin.is_builtin_job(job) else _container_summary(training_input, plans),
        "runtime": runtime.name if runtime else training_input.get("runtimeVersion") or "",
        "python": python,
        "python_note": python_note,
        "packages": packages,
        "input_json": json.dumps(shown if packages else training_input, indent=2, sort_keys=True),
        "plans": [(catalogue.replica_label(p.task_type, p.index), p) for p in plans],
    }


def _container_summary(training_input: dict, plans) -> dict | None:
    """A custom container job's images, commands and args per role (None for a package job): each
    role that runs, or names an image, with the master's image where it names none."""
    master = training_input.get("masterConfig") or {}
    if not master.get("imageUri"):
        return None
    tasks = {plan.task_type for plan in plans} | {"master"}
    shown = []
    for task, _type_key, _count_key, config_key, words in roles.ROLES:
        config = training_input.get(config_key) or {}
        if task in tasks or config.get("imageUri"):
            shown.append((words, config))
    return {
        "images": [
            (words, config.get("imageUri") or master["imageUri"], not config.get("imageUri")) for words, config in shown
        ],
        "commands": [(words, shlex.join(c["containerCommand"])) for words, c in shown if c.get("containerCommand")],
        "args": [(words, shlex.join(c["containerArgs"])) for words, c in shown if c.get("containerArgs")],
        "chief": bool(training_input.get("useChiefInTfConfig")),
    }


def _log_choices(job, summary: dict, log_filter: LogFilter) -> dict:
    """Replicas and trials to filter on, from the job's rows (never a scan of its log)."""
    replicas = list(job.replicas.values_list("label", "trial_id"))
    tasks = {label for label, _ in replicas} | {label for label, _ in summary["plans"]} | {"service"}
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


def _log_window(request, job, summary: dict) -> dict:
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
        **_log_choices(job, summary, log_filter),
    }
    if request.GET.get("first_error"):
        window["first_error"] = logstream.first_error_id(job.pk, log_filter)
        after = str(window["first_error"] - 1) if window["first_error"] else ""
    if after.isdigit():
        page = list(lines.filter(pk__gt=int(after)).order_by("pk")[: LOG_LINES_PER_PAGE + 1])
        shown = page[:LOG_LINES_PER_PAGE]
        earlier = bool(shown) and lines.filter(pk__lt=shown[0].pk).exists()
        return {
            **window,
            "lines": shown,
            "earlier": earlier,
            "later": len(page) > LOG_LINES_PER_PAGE,
            "last_shown": shown[-1].pk if shown else after,
            "live": False,
        }
    # Live, the page shows lines up to the cursor and the socket sends those after it.
    lines = lines.filter(pk__lt=int(before)) if before.isdigit() else lines.filter(pk__lte=window["cursor"])
    page = list(lines.order_by("-pk")[: LOG_LINES_PER_PAGE + 1])
    shown = page[:LOG_LINES_PER_PAGE][::-1]
    return {
        **window,
        "lines": shown,
        "earlier": len(page) > LOG_LINES_PER_PAGE,
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
    response = StreamingHttpResponse(rows(), content_type="application/x-ndjson" if as_json else "text/plain")
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


@login_required
def job_submit(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "POST":
        # The services authorize a submit, as over REST: a refusal is audited, then answered 403.
        services.authorize_submit(project, actor=request.user)
    else:
        iam.require(request.user, "ml.jobs.create", project)  # only shows the form
    initial, source = _initial(request, project)
    form = JobSubmitForm(request.POST or None, request.FILES or None, initial=initial)
    if not form.is_bound:
        _suggest_job_id(form, project)
        if source is not None and request.GET.get("clone"):
            form.kept = _clone_upload(project, source)
    if request.method == "POST":
        if form.is_valid():
            job = _submit(request, project, form)
            if job is not None:
                return redirect("jobs:detail", project_id=project.project_id, job_id=job.job_id)
        elif request.FILES.get("package_file") and "package_file" not in form.errors:
            _keep_upload(request, form, project, request.FILES["package_file"])
        elif not getattr(form, "kept", None):
            _keep_upload(request, form, project, None, _kept_uri(request, project))
    context = {
        "project": project,
        "form": form,
        "tiers": catalogue.SCALE_TIERS,
        "machines": equivalent.machine_descriptions(),
        "images": container_choices.offered_images(project),
        "runtime_pythons": runtime_pythons(),
        **_source_context(request, project, form, source),
        **_form_preview(project, form),
    }
    return render(request, "jobs/job_submit.html", context)


def _source_context(request, project, form, source) -> dict:
    """What the page says about the job it was cloned (or resumed) from; shown again over a form
    that came back with errors (by id: what was not carried was said the first time)."""
    if form.is_bound:
        source_id = form.data.get("cloned_from", "")
        return {"cloned_from_id": source_id} if naming.is_job_id(source_id) else {}
    if source is None:
        return {}
    left = _uploads_left_behind(project, source, getattr(form, "kept", None)) if request.GET.get("clone") else []
    return {
        "cloned_from_id": source.job_id,
        "not_carried": not_carried(source.training_input or {}),
        "uploads_left": left,
    }


@login_required
@require_POST
def job_submit_preview(request, project_id):
    """The form's live help (ML units per hour, the equivalent command and REST body) for what it
    holds now: the same builders the job page uses. Nothing is stored or submitted."""
    project = accounts.find_project(project_id, actor=request.user)
    iam.require(request.user, "ml.jobs.create", project)
    form = JobSubmitForm(request.POST)
    form.is_valid()
    return render(request, "jobs/_form_preview.html", {"project": project, **_form_preview(project, form)})


def _form_preview(project, form) -> dict:
    """What the form's fields describe so far (on a fresh form: its initial values)."""
    kept = getattr(form, "kept", None)
    if not form.is_bound:
        form = JobSubmitForm(_initial_data(form, kept), initial=form.initial)
    form.is_valid()
    data = form.data
    if kept is None and not data.get("remove_kept_package"):
        kept = services.kept_upload(project, data.get("kept_package", ""))
    chosen = (data.get("package_file_name") or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    uploads = {f"upload:{chosen}": chosen} if chosen else {kept["uri"]: kept["name"]} if kept else {}
    body = form.draft_body(next(iter(uploads), None))
    ti = body["trainingInput"]
    spec = form.cleaned_data.get("hyperparameters")
    return {
        "preview": equivalent.build(project.project_id, body["jobId"] or "JOB_ID", ti, body.get("labels"), uploads),
        "units_per_hour": equivalent.units_per_hour(ti),
        "tuning_parsed": {"spec": spec, "error": " ".join(form.errors.get("hyperparameters", []))},
    }


def _initial_data(form, kept) -> dict:
    """A fresh form's initial values as the data a browser would post."""
    data = {}
    for name, field in form.fields.items():
        value = form.get_initial_for_field(field, name)
        if value not in (None, ""):
            data[name] = str(value)
    if kept:
        data["kept_package"] = kept["ref"]
    return data


def _initial(request, project) -> tuple[dict | None, object]:
    """``?resume=JOB``: the form prefilled from that tuning job, resuming its study.
    ``?clone=JOB``: prefilled from any training job, with a new suggested id and its package."""
    previous = request.GET.get("resume") or request.GET.get("clone")
    if request.method != "GET" or not previous:
        return None, None
    job = services.get_job(project, previous, actor=request.user)
    if request.GET.get("resume"):
        return initial_from_job(job, resume=job.is_hyperparameter_job), job
    module = (job.training_input or {}).get("pythonModule") or _image_name(job.training_input) or "trainer.task"
    new_id = naming.suggest_job_id(lambda job_id: project.jobs.filter(job_id=job_id).exists(), module)
    # The console's own uploads never go in Package URIs (their paths are not shown): the first
    # is the kept upload, any other is named on the page as one to upload again.
    return initial_from_job(job, job_id=new_id, kept_uris=tuple(_uploads_of(project, job))), job


def _image_name(training_input: dict | None) -> str:
    """``gcr.io/p/census-trainer:v3`` → ``census-trainer``: a container job's image, as a name."""
    image = ((training_input or {}).get("masterConfig") or {}).get("imageUri") or ""
    return image.rsplit("/", 1)[-1].split("@")[0].split(":")[0]


def _uploads_of(project, job) -> dict[str, str]:
    """The job's packages the console stored from an upload: uri → file name."""
    uris = (job.training_input or {}).get("packageUris") or []
    return {uri: name for uri in uris if (name := services.uploaded_name(uri, project))}


def _clone_upload(project, job) -> dict | None:
    """The source job's first uploaded package, kept by reference (None if it is gone)."""
    for uri in _uploads_of(project, job):
        return services.kept_upload(project, services.upload_ref(uri))
    return None


def _uploads_left_behind(project, job, kept) -> list[str]:
    """Uploaded packages of a cloned job the form does not keep (gone, or past the first)."""
    return [name for uri, name in _uploads_of(project, job).items() if not kept or uri != kept["uri"]]


def _suggest_job_id(form, project) -> None:
    """A fresh form opens on its job id: the one it came with, else an unused ``<module>_<time>``
    (``data-suggested``: console.js follows the module the user types while the id is untouched)."""
    form.fields["job_id"].widget.attrs["autofocus"] = True
    if not form.initial.get("job_id"):
        suggested = naming.suggest_job_id(lambda job_id: project.jobs.filter(job_id=job_id).exists())
        form.initial["job_id"] = suggested
        form.fields["job_id"].widget.attrs["data-suggested"] = suggested


def _store_upload(request, form, project, upload) -> str | None:
    """The REST upload's service: the package is inspected and audited, a refusal shown at the field."""
    try:
        return services.upload_package(project, upload.name, upload, actor=request.user)["uri"]
    except InvalidArgument as error:
        form.add_error("package_file", " ".join(v.description for v in error.violations) or error.message)
        return None


def _kept_uri(request, project) -> str | None:
    """The upload an earlier try kept (``kept_package``), unless the user removed it."""
    if request.POST.get("remove_kept_package"):
        return None
    kept = services.kept_upload(project, request.POST.get("kept_package", ""))
    return kept["uri"] if kept else None


def _keep_upload(request, form, project, upload, uploaded_uri: str | None = None) -> None:
    """Keep a stored upload for the re-rendered form: shown by name and size with "remove", sent
    back as a reference (never the server path, never added to Package URIs), used once."""
    uploaded_uri = uploaded_uri or (_store_upload(request, form, project, upload) if upload else None)
    form.kept = services.kept_upload(project, services.upload_ref(uploaded_uri)) if uploaded_uri else None


def _submit(request, project, form):
    uploaded_uri = None
    # A container job stores no upload and uses no kept one (which stays kept, for the form shown again).
    upload = None if form.cleaned_data.get("code") == CONTAINER else form.cleaned_data.get("package_file")
    if upload:  # a newly chosen file replaces a kept one
        uploaded_uri = _store_upload(request, form, project, upload)
        if uploaded_uri is None:
            return None
    else:
        uploaded_uri = _kept_uri(request, project)
    try:
        return services.submit_job(
            project, form.job_body(uploaded_uri), actor=request.user, cloned_from=form.cleaned_data["cloned_from"]
        )
    except InvalidArgument as error:
        form.add_violations(error.violations)
    except ServiceError as error:
        form.add_violations(error.violations) if error.violations else form.add_error(None, error.message)
    if uploaded_uri:
        _keep_upload(request, form, project, upload, uploaded_uri)
    return None
