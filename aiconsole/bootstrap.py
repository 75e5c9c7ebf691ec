"""First-start setup: an admin account and a default project, created once."""

from __future__ import annotations

import os
import secrets
from dataclasses import dataclass

from django.contrib.auth import get_user_model
from django.db import transaction

from aiconsole import iam
from aiconsole.models import Project

DEFAULT_PROJECT = "default-project"


@dataclass
class BootstrapResult:
    username: str
    password: str | None  # set only when it was generated now and must be shown once
    project: Project


def ensure_admin_and_project() -> BootstrapResult:
    username = os.environ.get("AICONSOLE_ADMIN_USER") or "admin"
    configured_password = os.environ.get("AICONSOLE_ADMIN_PASSWORD")
    project_id = os.environ.get("AICONSOLE_DEFAULT_PROJECT") or DEFAULT_PROJECT
    User = get_user_model()
    shown = None
    with transaction.atomic():
        user = User.objects.filter(username=username).first()
        if user is None:
            password = configured_password or secrets.token_urlsafe(12)
            user = User.objects.create_superuser(username=username, email="", password=password)
            shown = None if configured_password else password
        project, _ = Project.objects.get_or_create(project_id=project_id, defaults={"display_name": project_id})
        iam.grant(user, "roles/ml.admin", project)
    return BootstrapResult(username=username, password=shown, project=project)
