"""The usage pages: a project's (for those who may list its jobs) and every project's (for platform
admins), by day and user, with a CSV download and, for platform admins, the project's retention.
Thin: parse, call ``services``, render."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts, iam
from aiconsole.errors import InvalidArgument, ServiceError
from jobs.usage import csvfile, services


class RetentionForm(forms.Form):
    days = forms.IntegerField(
        label="Keep a job's logs, metric points and job dir (days after it ends)",
        min_value=0,
        max_value=36500,
        help_text="0 keeps them for ever. Jobs labelled keep=true are always kept.",
    )
    protect_label = forms.CharField(
        label="Also keep jobs carrying the label", max_length=63, required=False, help_text="A label key, e.g. paper."
    )


def _usage(request, project=None):
    """(usage, error): an unreadable window falls back to the default one, with its message."""
    try:
        window = services.parse_window(request.GET.get("from"), request.GET.get("to"))
        error = ""
    except InvalidArgument as refusal:
        window, error = services.parse_window(None, None), refusal.message
    if project is None:
        return services.all_usage(*window, actor=request.user), error
    return services.project_usage(project, *window, actor=request.user), error


def _csv(usage: dict) -> HttpResponse:
    response = HttpResponse(csvfile.usage_csv(usage["rows"]), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{csvfile.filename(usage)}"'
    return response


@login_required
def project_usage(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    usage, error = _usage(request, project)
    if request.GET.get("format") == "csv":
        return _csv(usage)
    retention = services.retention_of(project)
    form = RetentionForm(initial={"days": retention.days, "protect_label": retention.protect_label})
    context = {"project": project, "usage": usage, "error": error, "retention": retention, "form": form}
    context["can_set_retention"] = iam.is_platform_admin(request.user)
    return render(request, "jobs/usage.html", context)


@login_required
def all_usage(request):
    usage, error = _usage(request)
    if request.GET.get("format") == "csv":
        return _csv(usage)
    return render(request, "jobs/usage.html", {"project": None, "usage": usage, "error": error})


@login_required
@require_POST
def project_retention(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    form = RetentionForm(request.POST)
    if not form.is_valid():
        messages.error(request, " ".join(str(e) for errors in form.errors.values() for e in errors))
        return redirect("jobs:usage", project_id=project.project_id)
    try:
        services.set_retention(
            project, form.cleaned_data["days"], form.cleaned_data["protect_label"], actor=request.user
        )
    except ServiceError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Saved the retention.")
    return redirect("jobs:usage", project_id=project.project_id)
