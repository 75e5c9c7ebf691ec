"""The audit viewer: filter, page (keyset, newest first), look at one entry, export JSON lines.

Who may read it: roles/ml.admin on the project (``logging.privateLogEntries.list``, our
extension), and platform admins (superusers), who also have a view across all projects with the
server-wide entries (tokens, users, purges). Reading the log is itself a Data Access event.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

from django import forms
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render
from django.urls import reverse

from aiconsole import accounts, audit, cloud_logging
from aiconsole.models import AuditEntry
from aiconsole.streaming import StreamedResponse

PAGE_SIZE = 50
EXPORT_CHUNK = 1000
TIME_FORMATS = ["%Y-%m-%dT%H:%M", "%Y-%m-%dT%H:%M:%S", "%Y-%m-%d %H:%M", "%Y-%m-%d"]


class AuditFilterForm(forms.Form):
    log_type = forms.ChoiceField(required=False, label="Log", choices=[("", "All logs"), *AuditEntry.LogType.choices])
    since = forms.DateTimeField(
        required=False,
        label="From (UTC)",
        input_formats=TIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    until = forms.DateTimeField(
        required=False,
        label="Until (UTC)",
        input_formats=TIME_FORMATS,
        widget=forms.DateTimeInput(attrs={"type": "datetime-local"}),
    )
    principal = forms.CharField(required=False, max_length=254, help_text="contains")
    method = forms.CharField(required=False, max_length=120, help_text="contains")
    resource = forms.CharField(required=False, max_length=300, help_text="starts with")
    outcome = forms.ChoiceField(
        required=False,
        label="Permission",
        choices=[("", "Granted or denied"), ("granted", "Granted"), ("denied", "Denied")],
    )

    def clean(self):
        data = super().clean()
        if data.get("since") and data.get("until") and data["since"] > data["until"]:
            raise forms.ValidationError("The start of the time range is after its end.")
        return data

    def apply(self, entries):
        data = self.cleaned_data
        if data.get("log_type"):
            entries = entries.filter(log_type=data["log_type"])
        if data.get("since"):
            entries = entries.filter(timestamp__gte=data["since"])
        if data.get("until"):
            entries = entries.filter(timestamp__lte=data["until"])
        if data.get("principal"):
            entries = entries.filter(principal__icontains=data["principal"])
        if data.get("method"):
            entries = entries.filter(method_name__icontains=data["method"])
        if data.get("resource"):
            entries = entries.filter(resource_name__startswith=data["resource"])
        if data.get("outcome"):
            entries = entries.filter(granted=data["outcome"] == "granted")
        return entries


def _scope(request, project_id):
    project = accounts.find_project(project_id, actor=request.user) if project_id else None
    return project, audit.entries_for(project, actor=request.user)


def _filtered(request, entries):
    form = AuditFilterForm(request.GET)
    return form, (form.apply(entries) if form.is_valid() else entries.none())


def _urls(project) -> dict:
    if project is None:
        return {"list": reverse("team:audit_all"), "export": reverse("team:audit_all_export")}
    args = [project.project_id]
    return {"list": reverse("team:audit", args=args), "export": reverse("team:audit_export", args=args)}


@login_required
def audit_log(request, project_id=None):
    project, entries = _scope(request, project_id)
    form, entries = _filtered(request, entries)
    before = request.GET.get("before", "")
    if before.isdigit():
        entries = entries.filter(pk__lt=int(before))
    page = list(entries.order_by("-pk")[: PAGE_SIZE + 1])
    query = request.GET.copy()
    query.pop("before", None)
    context = {
        "project": project,
        "form": form,
        "entries": page[:PAGE_SIZE],
        "older": page[PAGE_SIZE - 1].pk if len(page) > PAGE_SIZE else None,
        "query": query.urlencode(),
        "urls": _urls(project),
    }
    return render(request, "aiconsole/audit_log.html", context)


@login_required
def audit_entry(request, entry_id, project_id=None):
    project, entries = _scope(request, project_id)
    entry = entries.filter(pk=entry_id).first()
    if entry is None:
        raise Http404("No such audit entry.")
    context = {
        "project": project,
        "entry": entry,
        "log_entry": json.dumps(cloud_logging.log_entry(entry), indent=2, sort_keys=True),
        "urls": _urls(project),
    }
    return render(request, "aiconsole/audit_entry.html", context)


def _export_line(pk: int, entry, problem: str | None) -> str:
    """One LogEntry, or for a row that cannot be one a marker naming it and what is wrong."""
    if problem is None:
        try:
            return json.dumps(cloud_logging.log_entry(entry), sort_keys=True) + "\n"
        except Exception as error:  # whatever the row holds, the export goes on
            problem = f"it cannot be written as a log entry ({error})"
    return json.dumps({"malformedEntry": {"id": pk, "problem": problem}}, sort_keys=True) + "\n"


@login_required
def audit_export(request, project_id=None):
    """JSON lines, oldest first, one Cloud Logging LogEntry per line; streamed in keyset chunks.

    Every row is written: one that cannot be a LogEntry (edited outside the console) becomes
    ``{"malformedEntry": {"id": …, "problem": …}}``, so the file is complete and says where.
    """
    project, entries = _scope(request, project_id)
    form, entries = _filtered(request, entries)

    def lines():
        last = 0
        while True:
            ids = list(entries.filter(pk__gt=last).order_by("pk").values_list("pk", flat=True)[:EXPORT_CHUNK])
            if not ids:
                return
            for pk, entry, problem in audit.load_entries(ids):
                yield _export_line(pk, entry, problem)
            last = ids[-1]

    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    name = f"audit-{project.project_id if project else 'all'}-{stamp}.jsonl"
    response = StreamedResponse(lines(), content_type="application/x-ndjson")
    response["Content-Disposition"] = f'attachment; filename="{name}"'
    return response
