"""The project's "Notifications" page: its rules with their last deliveries, a form for a new rule
and a delete button per rule; for those who hold ``monitoring.notificationChannels.*`` (its admins).
Thin: parse, call ``rules``, render."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts
from aiconsole.errors import ServiceError
from jobs.models import NotificationEvent
from jobs.notifications import rules

EVENT_LABELS = {
    NotificationEvent.JOB_SUCCEEDED: "A job succeeded",
    NotificationEvent.JOB_FAILED: "A job failed",
    NotificationEvent.JOB_CANCELLED: "A job was cancelled",
    NotificationEvent.JOB_WAITING: "A job has waited in the queue too long",
    NotificationEvent.STUDY_BEST_IMPROVED: "A study found a better trial",
}
# The form's fields → the REST body's, for naming a refusal where it was typed.
FIELDS = {
    "rule.events": "events",
    "rule.webhook.uri": "webhook",
    "rule.webhook.format": "slack",
    "rule.email.addresses": "emails",
    "rule.waiting_minutes": "waiting_minutes",
    "rule.display_name": "display_name",
}


class RuleForm(forms.Form):
    display_name = forms.CharField(label="Name", max_length=128, required=False)
    events = forms.MultipleChoiceField(
        label="When", choices=list(EVENT_LABELS.items()), widget=forms.CheckboxSelectMultiple
    )
    webhook = forms.CharField(
        label="Webhook URL",
        max_length=2048,
        required=False,
        help_text="Each notification is POSTed here as JSON, signed with the rule's secret (shown once).",
        widget=forms.URLInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    slack = forms.BooleanField(label='Send a Slack-compatible body ({"text": …})', required=False)
    emails = forms.CharField(label="E-mail addresses", max_length=2000, required=False, help_text="Comma-separated.")
    waiting_minutes = forms.IntegerField(
        label="Waiting longer than (minutes)", min_value=1, initial=30, help_text="For “has waited too long”."
    )

    def body(self) -> dict:
        data = self.cleaned_data
        body: dict = {"events": data["events"], "waitingMinutes": data["waiting_minutes"]}
        if data["display_name"]:
            body["displayName"] = data["display_name"]
        if data["webhook"]:
            body["webhook"] = {"uri": data["webhook"], "format": "slack" if data["slack"] else "json"}
        addresses = [a.strip() for a in data["emails"].split(",") if a.strip()]
        if addresses:
            body["email"] = {"addresses": addresses}
        return body


@login_required
def notification_rules(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    found = rules.list_rules(project, actor=request.user)  # refused (403) to all but its admins
    form = RuleForm()
    if request.method == "POST":
        form = RuleForm(request.POST)
        if form.is_valid():
            try:
                created = rules.create_rule(project, form.body(), actor=request.user)
            except ServiceError as error:
                for violation in error.violations or [None]:
                    field = FIELDS.get(violation.field) if violation else None
                    form.add_error(field, violation.description if violation else error.message)
            else:
                messages.success(
                    request,
                    f"Created the rule. Its signing secret, shown this once: {created['secret']}",
                )
                return redirect("jobs:notifications", project_id=project.project_id)
    shown = [rules.resource(rule, deliveries=True) for rule in found]
    for rule in shown:
        rule["rule_id"] = rule["name"].rsplit("/", 1)[1]
    context = {"project": project, "rules": shown, "form": form, "labels": EVENT_LABELS}
    return render(request, "jobs/notifications.html", context)


@login_required
@require_POST
def notification_rule_delete(request, project_id, rule_id):
    project = accounts.find_project(project_id, actor=request.user)
    try:
        rules.delete_rule(project, rule_id, actor=request.user)
    except ServiceError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, "Deleted the rule.")
    return redirect("jobs:notifications", project_id=project.project_id)
