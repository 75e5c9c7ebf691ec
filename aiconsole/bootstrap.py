"""First-start setup: an admin account and a default project, created once and audited."""

from __future__ import annotations

import secrets
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.db import transaction

from aiconsole import accounts, audit, iam, policies, secret_env
from aiconsole.models import Project, RoleBinding


@dataclass
class BootstrapResult:
    username: str
    password: str | None  # set only when it was generated now and must be shown once
    project: Project


def ensure_admin_and_project() -> BootstrapResult:
    username = settings.ADMIN_USER
    configured_password = secret_env.lookup("AICONSOLE_ADMIN_PASSWORD")
    project_id = settings.DEFAULT_PROJECT
    shown = None
    with transaction.atomic():
        user = get_user_model().objects.filter(username=username).first()
        if user is None:
            password = configured_password or secrets.token_urlsafe(12)
            user = get_user_model().objects.create_superuser(username=username, email="", password=password)
            audit.record(
                actor=iam.SYSTEM,
                project=None,
                method=accounts.CREATE_USER,
                resource_name=f"users/{username}",
                permission="aiconsole.users.create",
                request={"user": {"username": username, "platformAdmin": True}},
                response={"name": f"users/{username}"},
            )
            shown = None if configured_password else password
        project = Project.objects.filter(project_id=project_id).first()
        if project is None:
            project = accounts.create_project(project_id, actor=iam.SYSTEM)
        if not RoleBinding.objects.filter(
            user=user, project=project, role="roles/ml.admin", resource_type=RoleBinding.ResourceType.PROJECT
        ).exists():
            policies.add_member(project, username, "roles/ml.admin", actor=iam.SYSTEM)
    return BootstrapResult(username=username, password=shown, project=project)
