"""The project's "Container images" page: which engine runs containers here, the images the project
uploaded, an upload form and a delete button per image. Thin: parse, call ``images``, render."""

from __future__ import annotations

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.shortcuts import redirect, render
from django.views.decorators.http import require_POST

from aiconsole import accounts, audit, iam
from aiconsole.errors import ServiceError
from jobs.containers import engine as engines
from jobs.containers import images


class ImageUploadForm(forms.Form):
    name = forms.CharField(
        label="Image name",
        max_length=1024,
        help_text="The name jobs give as imageUri, e.g. gcr.io/my-project/trainer:v1 (:latest when no tag).",
        widget=forms.TextInput(attrs={"autocomplete": "off", "spellcheck": "false"}),
    )
    file = forms.FileField(
        label="Image archive",
        help_text="docker save or podman save output (docker-archive or oci-archive), gzipped or not.",
    )


@login_required
def image_list(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    form = ImageUploadForm()
    if request.method == "POST":
        # Refused before the form is read, and audited as the load itself would be.
        audit.authorize(request.user, "ml.jobs.create", project, method=images.LOAD_METHOD)
        form = ImageUploadForm(request.POST, request.FILES)
        if form.is_valid() and _load(request, project, form):
            return redirect("jobs:images", project_id=project.project_id)
    context = {
        "project": project,
        "images": images.list_images(project, actor=request.user),
        "form": form,
        "can_change": iam.can(request.user, "ml.jobs.create", project),
        "engine": _engine(request.user),
    }
    return render(request, "jobs/images.html", context)


def _load(request, project, form: ImageUploadForm) -> bool:
    try:
        image = images.load_image(project, form.cleaned_data["name"], form.cleaned_data["file"], actor=request.user)
    except ServiceError as error:
        for violation in error.violations or [None]:
            field = violation.field if violation and violation.field in form.fields else None
            form.add_error(field, violation.description if violation else error.message)
        return False
    messages.success(request, f"Loaded {image.name}: jobs of {project.project_id} can run it now.")
    return True


def _engine(user) -> dict:
    """What the page says about the engine; where it is installed is for platform admins."""
    described = engines.current().describe()
    if not iam.is_platform_admin(user):
        described.pop("path", None)
    return described


@login_required
@require_POST
def image_delete(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    name = request.POST.get("name", "")
    try:
        images.delete_image(project, name, actor=request.user)
    except ServiceError as error:
        messages.error(request, error.message)
    else:
        messages.success(request, f"Deleted {name}.")
    return redirect("jobs:images", project_id=project.project_id)
