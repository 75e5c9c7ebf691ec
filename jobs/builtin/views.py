"""Console pages for built-in algorithms: the job form and the data analysis page. Thin."""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from aiconsole import accounts, iam, storage
from aiconsole.errors import ServiceError
from algorithms.table import DataError
from jobs import job_ids, services
from jobs.builtin import analysis as analysis_runner
from jobs.builtin.forms import BuiltinJobForm, DataAnalysisForm, initial_from_builtin_job


@login_required
def builtin_submit(request, project_id):
    """A built-in algorithm job: a CSV and a few arguments, no trainer to write."""
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "POST":
        # The services authorize a submit, as over REST: a refusal is audited, then answered 403.
        services.authorize_submit(project, actor=request.user)
    else:
        iam.require(request.user, "ml.jobs.create", project)  # only shows the form
    source = (
        services.get_job(project, request.GET["clone"], actor=request.user)
        if (request.method == "GET" and request.GET.get("clone"))
        else None
    )
    initial = _clone_initial(project, source) if source else {"training_data_path": request.GET.get("data", "")}
    form = BuiltinJobForm(request.POST or None, request.FILES or None, initial=initial)
    if request.method == "POST" and form.is_valid():
        job = _submit(request, project, form)
        if job is not None:
            return redirect("jobs:detail", project_id=project.project_id, job_id=job.job_id)
    return render(request, "jobs/builtin_submit.html", {"project": project, "form": form, "cloned_from": source})


def _clone_initial(project, job) -> dict:
    """A built-in job's "Clone": its algorithm, data and arguments, under a new suggested id."""
    new_id = job_ids.suggest_job_id(lambda job_id: project.jobs.filter(job_id=job_id).exists(), "builtin")
    return initial_from_builtin_job(job, job_id=new_id, default_job_dir=_default_job_dir(project, job.job_id))


def _default_job_dir(project, job_id: str) -> str:
    return str(settings.STORAGE_DIR / "job-dirs" / project.project_id / job_id)


def _submit(request, project, form):
    data_path = form.cleaned_data.get("training_data_path") or ""
    upload = form.cleaned_data.get("data_file")
    if upload:
        try:
            data_path = services.upload_data_file(project, upload.name, upload, actor=request.user)["uri"]
        except ServiceError as error:
            form.add_error("data_file", " ".join(v.description for v in error.violations) or error.message)
            return None
    default_job_dir = _default_job_dir(project, form.cleaned_data["job_id"])
    try:
        return services.submit_job(
            project,
            form.job_body(training_data_path=data_path, default_job_dir=default_job_dir),
            actor=request.user,
            cloned_from=form.cleaned_data["cloned_from"],
        )
    except ServiceError as error:
        form.add_violations(error.violations) if error.violations else form.add_error(None, error.message)
    return None


@login_required
def data_analysis(request, project_id):
    """Column types, missing values, distributions, outliers, correlation, label balance, warnings."""
    project = accounts.find_project(project_id, actor=request.user)
    iam.require(request.user, "ml.jobs.create", project)  # it reads any file a job could read
    form = DataAnalysisForm(request.GET if "path" in request.GET else None)
    context = {"project": project, "form": form}
    if form.is_bound and form.is_valid():
        data = form.cleaned_data
        try:  # only files of this project's storage area, read where they were checked
            outcome = analysis_runner.analyse(
                data["path"],
                header=data["header"],
                model_type=data["model_type"],
                compare=data["compare"] or None,
                project=project,
            )
        except (storage.StorageError, DataError) as error:
            form.add_error("path", str(error))
        else:
            context.update(_analysis_context(form, outcome))
    partial = request.htmx and form.is_bound  # the result polling itself while it is analysed
    return render(request, "jobs/data_analysis.html" + ("#analysis-result" if partial else ""), context)


def _analysis_context(form, outcome) -> dict:
    if outcome.state == analysis_runner.FAILED:
        form.add_error("path", outcome.message)
    if outcome.state != analysis_runner.READY:
        return {"analysis": outcome}
    return {"analysis": outcome, "report": outcome.report, **outcome.charts}  # drawn beside the analysis
