"""The job page's labels and note: edited there, for whoever may patch the job (``ml.jobs.update``).

Labels go through ``services.update_job``, as ``projects.jobs.patch`` does (same rules, same audit
entry); the note through ``services.update_job_note``. With htmx the panel is swapped in place; without
JavaScript a save redirects back to the job page, and a refusal shows the panel again on its own page.
Either way an error names the field and the rule and keeps what was typed.
"""

from __future__ import annotations

from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts, audit
from aiconsole.errors import InvalidArgument
from jobs import services

PANEL = "jobs/_annotations.html#annotations"
MAX_TYPED = 20_000  # characters of a labels box read at all; 64 labels of 63+63 fit well inside


def parse_labels(text: str) -> tuple[dict[str, str], list[str]]:
    """``key=value`` lines (blank lines skipped) as labels, and what is wrong with the lines that are not."""
    labels: dict[str, str] = {}
    errors = []
    for number, line in enumerate(text[:MAX_TYPED].splitlines(), start=1):
        line = line.strip()
        if not line:
            continue
        key, equals, value = line.partition("=")
        key, value = key.strip(), value.strip()
        if not equals or not key:
            errors.append(f"Labels, line {number}: “{line[:80]}” is not key=value.")
        elif key in labels:
            errors.append(f"Labels, line {number}: the key “{key[:80]}” is given twice; a key holds one value.")
        else:
            labels[key] = value
    return labels, errors


def _job(request, project_id: str, job_id: str):
    project = accounts.find_project(project_id, actor=request.user)
    return project, services.find_job(project, job_id, actor=request.user)


def _answer(request, project, job, *, saved: str = "", **typed):
    """The panel again: in place (htmx), or after a save the job page, or on its own page with the errors."""
    context = {"project": project, "job": job, "saved": saved, **typed}
    if request.htmx:  # htmx swaps only a 2xx answer in; the errors are in it, as an alert
        return render(request, PANEL, context)
    if not typed.get("errors"):
        messages.success(request, saved)
        return redirect("jobs:detail", project_id=project.project_id, job_id=job.job_id)
    return render(request, "jobs/job_annotations.html", context, status=400)


@login_required
@require_POST
def job_labels(request, project_id, job_id):
    """The panel's one Save: its labels and its note, together. Each is saved only where it changed;
    a refusal of either saves neither, and keeps both as they were typed (so a note typed before a
    label was fixed is never lost). A post of the labels alone (an older page, a script) keeps the note."""
    project, job = _job(request, project_id, job_id)
    # Whoever may not patch the job is refused before anything typed is read back to them.
    audit.authorize(request.user, "ml.jobs.update", job, method=f"{services.JOB_SERVICE}.UpdateJob")
    typed_labels = request.POST.get("labels")
    typed_note = request.POST.get("note")
    labels, errors = parse_labels(typed_labels) if typed_labels is not None else (None, [])
    field = "labels" if errors else ""
    changed: list[str] = []
    if not errors:
        try:
            job, changed = services.update_job_annotations(job, labels=labels, note=typed_note, actor=request.user)
        except InvalidArgument as error:
            field = "note" if any(v.field.endswith("note") for v in error.violations) else "labels"
            errors = [f"{field.capitalize()}: {v.description}" for v in error.violations] or [error.message]
            job.refresh_from_db()
    if errors:
        typed = {"typed_labels": typed_labels, "typed_note": typed_note}
        return _answer(request, project, job, errors=errors, error_field=field, **typed)
    if not changed:
        return _answer(request, project, job, saved="Nothing changed: the labels and note are as they were.")
    return _answer(request, project, job, saved=" and ".join(changed).capitalize() + " saved.")


@login_required
@require_POST
def job_note(request, project_id, job_id):
    project, job = _job(request, project_id, job_id)
    typed = request.POST.get("note", "")
    try:
        job = services.update_job_note(job, typed, actor=request.user)
    except InvalidArgument as error:
        errors = [f"Note: {v.description}" for v in error.violations] or [error.message]
        return _answer(request, project, job, errors=errors, error_field="note", typed_note=typed)
    return _answer(request, project, job, saved="Note saved.")
