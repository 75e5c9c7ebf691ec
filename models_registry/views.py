"""Console pages for models: the list, a model with its versions, a version, deploy-from-job,
batch prediction, and the "try a prediction" panel. Thin: parse, call a service, render."""

from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from aiconsole import accounts, iam, storage, team_views
from aiconsole.errors import ServiceError
from jobs import catalogue, job_ids
from jobs import services as job_services
from jobs.builtin import algorithm as builtin
from jobs.models import JobState
from models_registry import services, spec
from models_registry.models import BUSY_STATES, Model, VersionState
from models_registry.resources import version_resource
from models_registry.serving import supervisor

PREVIEW_BYTES = 20_000


def _project(request, project_id):
    return accounts.find_project(project_id, actor=request.user)


def _model(request, project_id, name, *, audited=True):
    return services.get_model(_project(request, project_id), name, actor=request.user, audited=audited)


def _message(error: ServiceError) -> str:
    return team_views.plain_message(error)


# --- the list ---------------------------------------------------------------------------------------


@login_required
def model_list(request, project_id):
    project = _project(request, project_id)
    models = list(services.list_models(project, actor=request.user).order_by("name"))
    counts = {}
    for model in models:
        states = list(model.versions.values_list("state", flat=True))
        counts[model.pk] = {"total": len(states), "ready": states.count(VersionState.READY)}
    context = {
        "project": project,
        "models": [(m, counts[m.pk]) for m in models],
        "can_create": iam.can(request.user, "ml.models.create", project),
        "can_batch": iam.can(request.user, "ml.jobs.create", project),
        "regions": sorted(catalogue.REGIONS),
        "default_region": spec.DEFAULT_REGION,
    }
    return render(request, "models_registry/model_list.html", context)


@login_required
@require_POST
def model_create(request, project_id):
    project = _project(request, project_id)
    body = {
        "name": request.POST.get("name", "").strip(),
        "description": request.POST.get("description", ""),
        "regions": [request.POST.get("region") or spec.DEFAULT_REGION],
        "onlinePredictionLogging": request.POST.get("logging") == "on",
        "onlinePredictionConsoleLogging": request.POST.get("console_logging") == "on",
    }
    try:
        model = services.create_model(project, body, actor=request.user)
    except ServiceError as error:
        messages.error(request, _message(error))
        return redirect("models:list", project_id=project.project_id)
    messages.success(request, f"Model {model.name} created: deploy a version to serve predictions.")
    return redirect("models:detail", project_id=project.project_id, model=model.name)


# --- one model ---------------------------------------------------------------------------------------


def _versions_context(request, model: Model) -> dict:
    versions = list(services.list_versions(model, actor=request.user).order_by("-pk"))
    serving = supervisor.get()
    rows = []
    for version in versions:
        version.model = model
        rows.append((version, serving.status(version.pk)))
    return {
        "model": model,
        "project": model.project,
        "versions": rows,
        "busy": any(v.state in BUSY_STATES for v in versions),
        "ready_count": sum(v.state == VersionState.READY for v in versions),
        "can_update": iam.can(request.user, "ml.versions.update", model),
        "can_delete": iam.can(request.user, "ml.versions.delete", model),
    }


@login_required
def model_versions(request, project_id, model):
    """The model page's versions, as the page refreshes them while one deploys: a refresh of a read
    that was audited, so not audited itself."""
    found = _model(request, project_id, model, audited=False)
    return render(request, "models_registry/model_detail.html#versions", _versions_context(request, found))


@login_required
def model_detail(request, project_id, model):
    found = _model(request, project_id, model, audited=True)
    context = _versions_context(request, found)
    ready = [v for v, _ in context["versions"] if v.state == VersionState.READY]
    example = json.dumps({"instances": [[1.0, 2.0, 3.0, 4.0]]}, indent=2)
    context.update(
        {
            "ready_versions": ready,
            "example": example,
            "can_create_version": iam.can(request.user, "ml.versions.create", found),
            "can_predict": iam.can(request.user, "ml.models.predict", found)
            or iam.can(request.user, "ml.versions.predict", found),
            "can_delete_model": iam.can(request.user, "ml.models.delete", found) and not context["versions"],
            "can_share": iam.can(request.user, "ml.models.getIamPolicy", found),
            "runtimes": list(catalogue.RUNTIME_VERSIONS),
            "default_runtime": catalogue.DEFAULT_RUNTIME_VERSION,
            "machine_types": spec.MACHINE_TYPES,
            "frameworks": spec.FRAMEWORKS,
        }
    )
    return render(request, "models_registry/model_detail.html", context)


def _version_body(post) -> dict:
    body = {
        "name": post.get("name", "").strip(),
        "deploymentUri": post.get("deployment_uri", "").strip(),
        "runtimeVersion": post.get("runtime_version") or None,
        "framework": post.get("framework") or None,
        "machineType": post.get("machine_type") or None,
        "description": post.get("description", ""),
    }
    nodes = post.get("nodes", "").strip()
    if post.get("scaling") == "manual":
        body["manualScaling"] = {"nodes": nodes or "1"}
    else:
        body["autoScaling"] = {"minNodes": nodes or "0"}
    return {k: v for k, v in body.items() if v is not None}


@login_required
@require_POST
def version_create(request, project_id, model):
    found = _model(request, project_id, model, audited=False)
    body = _version_body(request.POST)
    try:
        upload = request.FILES.get("model_file")
        if upload:  # stored, inspected and audited first; the version is made from where it lies
            body["deploymentUri"] = services.upload_model(found, upload.name, upload, actor=request.user)["uri"]
        services.create_version(found, body, actor=request.user)
    except ServiceError as error:
        messages.error(request, _message(error))
    else:
        messages.success(
            request,
            f"Creating version {request.POST.get('name')}: the model is being copied and "
            "loaded. Its state changes to READY when it can serve predictions.",
        )
    return redirect("models:detail", project_id=found.project.project_id, model=found.name)


def _version_action(request, project_id, model, version, action):
    found = _model(request, project_id, model, audited=False)
    target = services.find_version(found, version)
    try:
        note = action(target)
    except ServiceError as error:
        note, failed = _message(error), True
    else:
        failed = False
    if request.htmx:
        context = _versions_context(
            request, Model.objects.select_related("project", "default_version").get(pk=found.pk)
        )
        context["notice"], context["notice_failed"] = note, failed
        return render(request, "models_registry/model_detail.html#versions", context)
    (messages.error if failed else messages.success)(request, note)
    return redirect("models:detail", project_id=found.project.project_id, model=found.name)


@login_required
@require_POST
def version_set_default(request, project_id, model, version):
    def action(target):
        services.set_default_version(target, actor=request.user)
        return f"{target.name} is now the default version."

    return _version_action(request, project_id, model, version, action)


@login_required
@require_POST
def version_delete(request, project_id, model, version):
    def action(target):
        services.delete_version(target, actor=request.user)
        return f"Version {target.name} was deleted."

    return _version_action(request, project_id, model, version, action)


@login_required
@require_POST
def model_delete(request, project_id, model):
    found = _model(request, project_id, model, audited=False)
    try:
        services.delete_model(found, actor=request.user)
    except ServiceError as error:
        messages.error(request, _message(error))
        return redirect("models:detail", project_id=found.project.project_id, model=found.name)
    messages.success(request, f"Model {found.name} was deleted.")
    return redirect("models:list", project_id=found.project.project_id)


@login_required
@require_POST
def try_prediction(request, project_id, model):
    """The panel's request: the same service as models:predict, the answer shown as it came."""
    found = _model(request, project_id, model, audited=False)
    version_name = request.POST.get("version") or None
    body = request.POST.get("body", "").encode()
    context = {"model": found, "project": found.project, "sent_to": version_name or "the default version"}
    try:
        version = services.find_version(found, version_name) if version_name else None
        result = services.predict(found, version, body, actor=request.user)
        context.update(
            status=result.status,
            answer=_pretty(result.body),
            served_by=result.version.name,
            cold_start_ms=result.cold_start_ms,
        )
    except ServiceError as error:
        context.update(
            status=error.http_status,
            answer=_pretty(
                json.dumps(
                    {"error": {"code": error.http_status, "message": error.message, "status": error.status}}
                ).encode()
            ),
        )
    except iam.IamError as error:
        context.update(status=404 if isinstance(error, iam.NotFound) else 403, answer=str(error))
    return render(request, "models_registry/_prediction_result.html", context)


def _pretty(body: bytes) -> str:
    try:
        text = json.dumps(json.loads(body), indent=2)
    except ValueError:
        text = body.decode("utf-8", errors="replace")
    return text if len(text) <= PREVIEW_BYTES else text[:PREVIEW_BYTES] + "\n… (cut)"


# --- one version -----------------------------------------------------------------------------------------


@login_required
def version_detail(request, project_id, model, version):
    found = _model(request, project_id, model, audited=False)
    target = services.get_version(found, version, actor=request.user)
    logs = services.recent_predictions(found, target, actor=request.user) if found.online_prediction_logging else []
    context = {
        "model": found,
        "project": found.project,
        "version": target,
        "serving": supervisor.get().status(target.pk),
        "logs": logs,
        "resource_json": json.dumps(version_resource(target), indent=2),
    }
    return render(request, "models_registry/version_detail.html", context)


# --- deploy a job's output --------------------------------------------------------------------------------


_model_files_under = services.model_folders_under


@login_required
def deploy_from_job(request, project_id):
    """Deploy a SUCCEEDED job's output as a model version (a new model or an existing one)."""
    project = _project(request, project_id)
    job = job_services.get_job(project, request.GET.get("job") or request.POST.get("job", ""), actor=request.user)
    job_dir = (job.training_input or {}).get("jobDir", "")
    candidates = _model_files_under(job_dir, project) if job_dir and not storage.is_gcs_uri(job_dir) else []
    if job_dir and storage.is_gcs_uri(job_dir):
        candidates = [job_dir]
    chosen = (request.GET.get("deployment_uri") or builtin.model_dir(job)) if builtin.is_builtin_job(job) else ""
    if chosen:  # a built-in algorithm's model/ folder (or the trial the job page showed) comes first
        candidates = [chosen] + [c for c in candidates if c.rstrip("/") != chosen.rstrip("/")]
    models = list(services.list_models(project, actor=request.user).order_by("name"))
    context = {
        "project": project,
        "job": job,
        "job_dir": job_dir,
        "candidates": candidates,
        "models": models,
        "succeeded": job.state == JobState.SUCCEEDED,
        "post": request.POST,
        "runtime": _runtime_of(job),
    }
    if request.method == "POST" and context["succeeded"]:
        done = _deploy(request, project, job)
        if done is not None:
            return done
    return render(request, "models_registry/deploy.html", context)


def _deploy(request, project, job):
    post = request.POST
    try:
        if post.get("model") == "__new__":
            model = services.create_model(project, {"name": post.get("new_model", "").strip()}, actor=request.user)
        else:
            model = services.find_model(project, post.get("model", ""), actor=request.user)
        body = {
            "name": post.get("version", "").strip(),
            "deploymentUri": post.get("deployment_uri", "").strip(),
            "runtimeVersion": post.get("runtime_version") or None,
            "description": f"Deployed from job {job.job_id}.",
            "labels": {"source_job": job.job_id.lower()},
        }
        services.create_version(model, {k: v for k, v in body.items() if v is not None}, actor=request.user)
    except ServiceError as error:
        messages.error(request, _message(error))
        return None
    messages.success(request, f"Deploying {job.job_id}'s model as {model.name}/{post.get('version')}.")
    return redirect("models:detail", project_id=project.project_id, model=model.name)


# --- batch prediction ----------------------------------------------------------------------------------------


@login_required
def batch_new(request, project_id):
    project = _project(request, project_id)
    if request.method == "POST":
        # The services authorize a submit, as over REST: a refusal is audited, then answered 403.
        job_services.authorize_submit(project, actor=request.user)
    else:
        iam.require(request.user, "ml.jobs.create", project)  # only shows the form
    models = list(services.list_models(project, actor=request.user).order_by("name"))
    job_id = request.POST.get("job_id") or job_ids.suggest_job_id(
        lambda job_id: project.jobs.filter(job_id=job_id).exists(), "batch"
    )
    context = {
        "project": project,
        "models": models,
        "post": request.POST,
        "regions": sorted(catalogue.REGIONS),
        "formats": ("JSON", "TEXT"),
        "job_id": job_id,
        "output_base": str(storage_dir(project)),
        "default_output": str(storage_dir(project) / job_id) if job_ids.is_job_id(job_id) else "",
    }
    if request.method == "POST":
        try:
            job = job_services.submit_job(project, _batch_body(request.POST, project), actor=request.user)
        except ServiceError as error:
            context["errors"] = _batch_errors(error)
        else:
            messages.success(request, f"Batch prediction job {job.job_id} submitted.")
            return redirect("jobs:detail", project_id=project.project_id, job_id=job.job_id)
    return render(request, "models_registry/batch_new.html", context)


# Where a violation of the predictionInput shows on the batch form: (field path prefix, input id, label).
BATCH_FIELDS = (
    ("job.job_id", "batch-job", "Job ID"),
    ("job.prediction_input.uri", "batch-uri", "Model folder"),
    ("job.prediction_input.model_name", "batch-source", "Model"),
    ("job.prediction_input.version_name", "batch-source", "Model"),
    ("job.prediction_input.input_paths", "batch-inputs", "Input paths"),
    ("job.prediction_input.data_format", "batch-format", "Input format"),
    ("job.prediction_input.output_data_format", "batch-output-format", "Output format"),
    ("job.prediction_input.output_path", "batch-output", "Output path"),
    ("job.prediction_input.region", "batch-region", "Region"),
    ("job.prediction_input.batch_size", "batch-size", "Batch size"),
    ("job.prediction_input.max_worker_count", "batch-workers", "Max workers"),
)


def _batch_errors(error: ServiceError) -> list[tuple[str, str, str]]:
    """The refusal as the form's error summary lists it: each violation linked to its input."""
    entries = []
    for violation in error.violations or []:
        found = next((row for row in BATCH_FIELDS if violation.field.startswith(row[0])), None)
        entries.append((found[1], found[2], violation.description) if found else ("", "", violation.description))
    return entries or [("", "", error.message)]


def storage_dir(project) -> Path:
    """Where batch prediction jobs of ``project`` write unless told otherwise: a folder per job below it."""
    return settings.STORAGE_DIR / "predictions" / project.project_id


def _batch_body(post, project) -> dict:
    source = post.get("source", "")
    job_id = post.get("job_id", "").strip()
    output_path = post.get("output_path", "").strip()
    if not output_path and job_ids.is_job_id(job_id):
        output_path = str(storage_dir(project) / job_id)  # each job its own folder, as the form suggests
    prediction_input = {
        "dataFormat": post.get("data_format", "JSON"),
        "inputPaths": [p.strip() for p in post.get("input_paths", "").splitlines() if p.strip()],
        "outputPath": output_path,
        "region": post.get("region", ""),
    }
    if source == "__uri__":
        prediction_input["uri"] = post.get("uri", "").strip()
    elif "/" in source:
        model_name, version_name = source.split("/", 1)
        prediction_input["versionName"] = f"{project.resource_name}/models/{model_name}/versions/{version_name}"
    else:
        prediction_input["modelName"] = f"{project.resource_name}/models/{source}"
    for field, key in (("batch_size", "batchSize"), ("max_worker_count", "maxWorkerCount")):
        if post.get(field, "").strip():
            prediction_input[key] = post[field].strip()
    if post.get("output_format") == "CSV":
        prediction_input["outputDataFormat"] = "CSV"
    return {"jobId": job_id, "predictionInput": prediction_input}


# --- sharing (the generic page from aiconsole.team_views) -----------------------------------------------------


def _sharing(request, project_id, model):
    found = services.find_model(_project(request, project_id), model, actor=request.user)
    args = (found.project.project_id, found.name)
    return found, team_views.SharingPage(
        title=f"model {found.name}",
        page_url=reverse("models:sharing", args=args),
        add_url=reverse("models:sharing_add", args=args),
        remove_url_name="models:sharing_remove",
        url_args=args,
        back_url=reverse("models:detail", args=args),
        breadcrumbs=(
            (found.project.project_id, reverse("jobs:list", args=args[:1])),
            ("Models", reverse("models:list", args=args[:1])),
            (found.name, reverse("models:detail", args=args)),
        ),
    )


@login_required
def model_sharing(request, project_id, model):
    return team_views.sharing_page(request, *_sharing(request, project_id, model))


@login_required
@require_POST
def model_sharing_add(request, project_id, model):
    return team_views.sharing_add(request, *_sharing(request, project_id, model))


@login_required
@require_POST
def model_sharing_remove(request, project_id, model, user_id):
    return team_views.sharing_remove(request, *_sharing(request, project_id, model), user_id)


def _runtime_of(job) -> str:
    """The runtime a job's model was trained on: what its version should serve on."""
    if builtin.is_builtin_job(job):
        return builtin.training_output(job)["builtInAlgorithmOutput"]["runtimeVersion"]
    return (job.training_input or {}).get("runtimeVersion") or catalogue.DEFAULT_RUNTIME_VERSION


@login_required
def batch_job(request, project_id, job_id):
    """The address of a batch prediction job's input and output in earlier releases: the job page's
    Prediction tab now (models_registry/page.py), where its files open in the outputs browser."""
    project = _project(request, project_id)
    job = job_services.find_job(project, job_id, actor=request.user)
    iam.require(request.user, "ml.jobs.get", job)
    return redirect(reverse("jobs:detail", args=(project.project_id, job.job_id)) + "#prediction")
