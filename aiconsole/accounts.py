"""Projects and user accounts: created by platform admins (the CLI on the server, as ``system``).

Audit method names: ``google.cloudresourcemanager.v1.Projects.CreateProject`` (in the new
project's Admin Activity log) and ``aiconsole.UserService.CreateUser`` (server-wide). Passwords are
never recorded.
"""

from __future__ import annotations

import secrets

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction

from aiconsole import audit, iam
from aiconsole.errors import AlreadyExists, FieldViolation, InvalidArgument
from aiconsole.models import PROJECT_ID_VALIDATOR, Project

CREATE_PROJECT = "google.cloudresourcemanager.v1.Projects.CreateProject"
CREATE_USER = "aiconsole.UserService.CreateUser"


def _require_platform_admin(actor, permission: str, resource_name: str, method: str) -> None:
    if iam.is_platform_admin(actor):
        return
    audit.record(actor=actor, project=None, method=method, resource_name=resource_name, permission=permission,
                 granted=False, status_code=audit.CODE_PERMISSION_DENIED,
                 status_message="Only platform admins may do this.")
    raise iam.PermissionDenied(permission, resource_name)


def create_project(project_id: str, *, actor, display_name: str = "") -> Project:
    """A new, empty project. A platform admin who is a real user becomes its first admin."""
    name = f"projects/{project_id}"
    _require_platform_admin(actor, "resourcemanager.projects.create", name, CREATE_PROJECT)
    try:
        PROJECT_ID_VALIDATOR(project_id)
    except ValidationError as error:
        raise InvalidArgument.from_violations([FieldViolation("project.project_id", error.messages[0])]) from None
    try:
        with transaction.atomic():
            project = Project.objects.create(project_id=project_id, display_name=display_name[:100] or project_id)
            if actor is not iam.SYSTEM:
                iam.grant(actor, iam.ADMIN_ROLE, project)
            audit.record(actor=actor, project=project, method=CREATE_PROJECT, resource_name=name,
                         permission="resourcemanager.projects.create",
                         service_name="cloudresourcemanager.googleapis.com",
                         request={"project": {"projectId": project_id, "name": project.display_name}},
                         response={"projectId": project_id, "projectNumber": str(project.project_number),
                                   "name": project.display_name})
    except IntegrityError:
        raise AlreadyExists(f"Project {project_id} already exists.",
                            [FieldViolation("project.project_id", "A project with this id already exists.")]) from None
    return project


def create_user(username: str, *, actor, email: str = "", password: str | None = None):
    """A new account; returns (user, password) where password is generated when none was given."""
    _require_platform_admin(actor, "aiconsole.users.create", f"users/{username}", CREATE_USER)
    User = get_user_model()
    candidate = User(username=username, email=email)
    violations = []
    try:
        candidate.full_clean(exclude=["password"], validate_unique=False)
    except ValidationError as error:
        violations += [FieldViolation(f"user.{field}", " ".join(messages))
                       for field, messages in error.message_dict.items()]
    generated = password is None
    password = secrets.token_urlsafe(12) if generated else password
    try:
        password_validation.validate_password(password, candidate)
    except ValidationError as error:
        violations.append(FieldViolation("user.password", " ".join(error.messages)))
    if violations:
        raise InvalidArgument.from_violations(violations)
    try:
        with transaction.atomic():
            user = User.objects.create_user(username=username, email=email, password=password)
            audit.record(actor=actor, project=None, method=CREATE_USER, resource_name=f"users/{username}",
                         permission="aiconsole.users.create",
                         request={"user": {"username": username, "email": email}},
                         response={"name": f"users/{username}"})
    except IntegrityError:
        raise AlreadyExists(f"User {username} already exists.",
                            [FieldViolation("user.username", "A user with this name already exists.")]) from None
    return user, password
