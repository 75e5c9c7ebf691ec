"""Console pages for training jobs: the list, the submit form and its live help, clone and resume.
The job page is ``detail``. Thin: parse, call a service, render."""

from __future__ import annotations

import json

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.db.models.fields.json import KT
from django.http import JsonResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts, iam, preferences
from aiconsole.errors import InvalidArgument, ServiceError
from jobs import catalogue, job_ids, services
from jobs.containers import choices as container_choices
from jobs.models import ACTIVE_STATES, JobState
from jobs.training import equivalent
from jobs.tuning import edges
from jobs.web import listing
from jobs.web.forms import CONTAINER, JobSubmitForm, initial_from_job, not_carried, runtime_pythons
from jobs.web.listing import SORTS, JobListQuery

JOBS_PER_PAGE = 100
JOB_DIRS_READ = 20  # the user's latest jobs read for the folder a new job dir is suggested in
MAX_COLUMNS_TEXT = 1000  # every column's name, comma-separated, is under 100 characters
COLUMNS_ASKED = "Columns: say which of the list's columns to show, in order (columns=name,state,created,…)."


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
    query = JobListQuery.from_params(request.GET, saved=preferences.get(request.user, listing.COLUMNS_PREFERENCE))
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
        context["column_order"] = query.column_order()
        context["default_columns"] = listing.DEFAULT_SHOWN
    template = "jobs/job_list.html#job-rows" if request.htmx else "jobs/job_list.html"
    return render(request, template, context)


@login_required
@require_POST
def job_list_columns(request):
    """Keep the jobs list's columns, in order (``columns=name,state,…``), as the signed-in user's own:
    a list opened without ``columns`` shows them. A name that is no column is refused, saying so."""
    asked = request.POST.getlist("columns")
    if sum(len(value) for value in asked) > MAX_COLUMNS_TEXT:
        return JsonResponse({"error": f"Columns: at most {MAX_COLUMNS_TEXT:,} characters of names."}, status=400)
    if not any(value.strip(", ") for value in asked):
        return JsonResponse({"error": COLUMNS_ASKED}, status=400)
    shown, unknown = listing.read_shown(asked)
    if unknown:
        return JsonResponse({"error": listing.unknown_columns_message(unknown)}, status=400)
    if shown == listing.DEFAULT_SHOWN:
        preferences.forget(request.user, listing.COLUMNS_PREFERENCE)
    else:
        preferences.put(request.user, listing.COLUMNS_PREFERENCE, list(shown))
    return JsonResponse({"columns": list(shown)})


@login_required
def job_submit(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "POST":
        # The services authorize a submit, as over REST: a refusal is audited, then answered 403.
        services.authorize_submit(project, actor=request.user)
    else:
        iam.require(request.user, "ml.jobs.create", project)  # only shows the form
    initial, source = _initial(request, project)
    uploads = services.uploaded_packages(project)
    form = JobSubmitForm(request.POST or None, request.FILES or None, initial=initial, project=project, uploads=uploads)
    if not form.is_bound:
        _suggest_job_id(form, project)
        if source is None:
            _suggest_job_dir(form, project, request.user)
        if source is not None and request.GET.get("clone"):
            form.kept = _clone_upload(project, source)
    _follow_job_id(form)
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
        "uploads": uploads,
        **_source_context(request, project, form, source),
        **_form_preview(project, form),
    }
    return render(request, "jobs/job_submit.html", context)


def _source_context(request, project, form, source) -> dict:
    """What the page says about the job it was cloned (or resumed) from; shown again over a form
    that came back with errors (by id: what was not carried was said the first time)."""
    if form.is_bound:
        source_id = form.data.get("cloned_from", "")
        return {"cloned_from_id": source_id} if job_ids.is_job_id(source_id) else {}
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
    form = JobSubmitForm(request.POST, project=project)
    form.is_valid()
    return render(request, "jobs/_form_preview.html", {"project": project, **_form_preview(project, form)})


def _form_preview(project, form) -> dict:
    """What the form's fields describe so far (on a fresh form: its initial values)."""
    kept = getattr(form, "kept", None)
    if not form.is_bound:
        form = JobSubmitForm(_initial_data(form, kept), initial=form.initial, project=project)
    form.is_valid()
    data = form.data
    if kept is None and not data.get("remove_kept_package"):
        kept = services.kept_upload(project, data.get("kept_package", ""))
    chosen = (data.get("package_file_name") or "").replace("\\", "/").rsplit("/", 1)[-1].strip()
    package = form.cleaned_data.get("uploaded_package") or kept  # one picked from the uploads wins
    uploads = {f"upload:{chosen}": chosen} if chosen else {package["uri"]: package["name"]} if package else {}
    body = form.draft_body(next(iter(uploads), None))
    ti = body["trainingInput"]
    spec = form.cleaned_data.get("hyperparameters")
    return {
        "preview": equivalent.build(project.project_id, body["jobId"] or "JOB_ID", ti, body.get("labels"), uploads),
        "units_per_hour": equivalent.units_per_hour(ti),
        "estimate_problem": equivalent.estimate_problem(ti) or "choose machine types the catalogue knows",
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
        return _widened(request, initial_from_job(job, resume=job.is_hyperparameter_job)), job
    module = (job.training_input or {}).get("pythonModule") or _image_name(job.training_input) or "trainer.task"
    new_id = job_ids.suggest_job_id(lambda job_id: project.jobs.filter(job_id=job_id).exists(), module)
    # The console's own uploads never go in Package URIs (their paths are not shown): the first
    # is the kept upload, any other is named on the page as one to upload again.
    return initial_from_job(job, job_id=new_id, kept_uris=tuple(_uploads_of(project, job))), job


def _widened(request, initial: dict) -> dict:
    """``?widen=NAME:upper`` (the study page's "Resume with this bound widened"): the resumed study's
    spec with that bound of NAME widened (jobs.tuning.edges), said over the form. Anything else
    there is ignored, as a hand-edited link should not break the form."""
    spec = initial.get("hyperparameters")
    widened = edges.widened_spec(json.loads(spec), request.GET.get("widen", "")) if spec else None
    if widened is None:
        return initial
    messages.info(request, widened[1])
    return {**initial, "hyperparameters": json.dumps(widened[0], indent=2)}


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
        suggested = job_ids.suggest_job_id(lambda job_id: project.jobs.filter(job_id=job_id).exists())
        form.initial["job_id"] = suggested
        form.fields["job_id"].widget.attrs["data-suggested"] = suggested


def _suggest_job_dir(form, project, user) -> None:
    """A fresh form's job dir: a folder of its own named after the job, in the folder of the last job
    dir this user gave in this project (``gs://bucket/jobs``), else in the console's for the project."""
    if form.initial.get("job_dir"):
        return
    recent = project.jobs.filter(created_by=user).order_by("-create_time")
    folder = str(settings.STORAGE_DIR / "job-dirs" / project.project_id)
    for job_dir in recent.values_list(KT("training_input__jobDir"), flat=True)[:JOB_DIRS_READ]:
        parent = (job_dir or "").rstrip("/").rpartition("/")[0]
        if parent and not parent.endswith(":/"):
            folder = parent
            break
    form.initial["job_dir"] = f"{folder}/{form.initial['job_id']}"


def _follow_job_id(form) -> None:
    """A job dir named after the job (``<folder>/<job id>``, as suggested) follows the id the user
    types (jobform.js), until they edit the job dir."""
    values = form.data if form.is_bound else form.initial
    job_dir, job_id = str(values.get("job_dir") or ""), str(values.get("job_id") or "").strip()
    folder, slash, last = job_dir.rpartition("/")
    if job_id and slash and folder and not folder.endswith(":/") and last == job_id:
        form.fields["job_dir"].widget.attrs.update({"data-suggested": job_dir, "data-folder": folder})


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
    container = form.cleaned_data.get("code") == CONTAINER
    upload = None if container else form.cleaned_data.get("package_file")
    picked = None if container or upload else form.cleaned_data.get("uploaded_package")
    if upload:  # a newly chosen file replaces a kept or picked one
        uploaded_uri = _store_upload(request, form, project, upload)
        if uploaded_uri is None:
            return None
    else:
        uploaded_uri = picked["uri"] if picked else _kept_uri(request, project)
    try:
        return services.submit_job(
            project, form.job_body(uploaded_uri), actor=request.user, cloned_from=form.cleaned_data["cloned_from"]
        )
    except InvalidArgument as error:
        form.add_violations(error.violations)
    except ServiceError as error:
        form.add_violations(error.violations) if error.violations else form.add_error(None, error.message)
    if uploaded_uri and not picked:  # a picked one stays picked
        _keep_upload(request, form, project, upload, uploaded_uri)
    return None
