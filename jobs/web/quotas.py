"""The project's "Quotas" page: its limits with what its running jobs hold, and its fair-queue
weight; platform admins set or lift a limit there. Thin: parse, call ``quotas``, render."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render

from aiconsole import accounts, iam
from aiconsole.errors import ServiceError
from jobs import catalogue
from jobs.quotas import admission as quotas


class LimitForm(forms.Form):
    metric = forms.ChoiceField(label="Quota", choices=[])
    region = forms.ChoiceField(label="Region", choices=[], required=False)
    limit = forms.IntegerField(
        label="Limit", min_value=0, max_value=quotas.MAX_LIMIT, required=False, help_text="Empty: lift the quota."
    )
    weight = forms.FloatField(
        label="Weight in the fair queue",
        min_value=0.001,
        max_value=1000,
        required=False,
        help_text="1: an equal share.",
    )

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        metric, region = self.fields["metric"], self.fields["region"]
        assert isinstance(metric, forms.ChoiceField) and isinstance(region, forms.ChoiceField)
        metric.choices = [(m, m) for m in quotas.metrics()]
        region.choices = [("", "All regions"), *((r, r) for r in catalogue.REGIONS)]

    def body(self) -> dict:
        data = self.cleaned_data
        body: dict = {"limits": [{"metric": data["metric"], "region": data["region"] or "", "limit": data["limit"]}]}
        if data["weight"] is not None:
            body["weight"] = data["weight"]
        return body


@login_required
def project_quotas(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    described = quotas.read_quotas(project, actor=request.user)
    can_set = iam.is_platform_admin(request.user)
    form = LimitForm(initial={"weight": described.get("weight", 1.0)})
    if request.method == "POST":
        if not can_set:
            quotas.set_quotas(project, {}, actor=request.user)  # refused (403) and audited as such
        form = LimitForm(request.POST)
        if form.is_valid():
            try:
                quotas.set_quotas(project, form.body(), actor=request.user)
            except ServiceError as error:
                form.add_error(None, error.message)
            else:
                messages.success(request, f"Updated the quotas of {project.project_id}.")
                return redirect("jobs:quotas", project_id=project.project_id)
    context = {"project": project, "quotas": described, "form": form, "can_set": can_set}
    return render(request, "jobs/quotas.html", context)
