"""The one permission layer: predefined roles, the check, and the queryset scope.

Permissions are the original's ``ml.*`` strings; roles are the predefined ones, bound on a
project or on a single job or model. Every entry point (HTML views, REST, WebSocket, CLI through
REST) asks this module. Someone with no access to a project gets NotFound (404); someone who can
see a resource but lacks the permission gets PermissionDenied (403).
"""

from __future__ import annotations

import contextvars
from contextlib import contextmanager
from dataclasses import dataclass

from django.db.models import Q, QuerySet
from django.db.models.signals import post_delete, post_save

from aiconsole.models import Project, RoleBinding

_JOBS = {f"ml.jobs.{verb}" for verb in ("cancel", "create", "get", "getIamPolicy", "list", "setIamPolicy", "update")}
_MODELS = {
    f"ml.models.{verb}"
    for verb in ("create", "delete", "get", "getIamPolicy", "list", "predict", "setIamPolicy", "update")
}
_VERSIONS = {f"ml.versions.{verb}" for verb in ("create", "delete", "get", "list", "predict", "update")}
_STUDIES = {f"ml.studies.{verb}" for verb in ("create", "delete", "get", "getIamPolicy", "list", "setIamPolicy")}
_TRIALS = {f"ml.trials.{verb}" for verb in ("create", "delete", "get", "list", "update")}
_OPERATIONS = {"ml.operations.cancel", "ml.operations.get", "ml.operations.list"}
_LOCATIONS = {"ml.locations.get", "ml.locations.list"}
_PROJECT = {"ml.projects.getConfig", "resourcemanager.projects.get"}

# The console's own extension (not in the original's ml roles): managing a project's members,
# reading its audit log, and its notification rules (named as Cloud Monitoring's channels). Only
# roles/ml.admin holds them.
CONSOLE_PERMISSIONS = frozenset(
    {
        "resourcemanager.projects.getIamPolicy",
        "resourcemanager.projects.setIamPolicy",
        "logging.privateLogEntries.list",
        "monitoring.notificationChannels.list",
        "monitoring.notificationChannels.update",
    }
)
ALL_PERMISSIONS = frozenset(
    _JOBS | _MODELS | _VERSIONS | _STUDIES | _TRIALS | _OPERATIONS | _LOCATIONS | _PROJECT | CONSOLE_PERMISSIONS
)


@dataclass(frozen=True)
class Role:
    name: str
    title: str
    # Where the role may be granted: "project", "job" or "model".
    grantable_on: frozenset[str]
    permissions: frozenset[str]


def _role(name, title, grantable_on, permissions) -> Role:
    return Role(name, title, frozenset(grantable_on), frozenset(permissions))


ROLES: dict[str, Role] = {
    role.name: role
    for role in (
        _role("roles/ml.admin", "AI Platform Admin", {"project"}, ALL_PERMISSIONS),
        _role(
            "roles/ml.developer",
            "AI Platform Developer",
            {"project"},
            {
                "ml.jobs.create",
                "ml.jobs.get",
                "ml.jobs.getIamPolicy",
                "ml.jobs.list",
                *_LOCATIONS,
                "ml.models.create",
                "ml.models.get",
                "ml.models.getIamPolicy",
                "ml.models.list",
                "ml.models.predict",
                "ml.operations.get",
                "ml.operations.list",
                *_PROJECT,
                *_STUDIES,
                *_TRIALS,
                "ml.versions.get",
                "ml.versions.list",
                "ml.versions.predict",
            },
        ),
        _role(
            "roles/ml.viewer",
            "AI Platform Viewer",
            {"project"},
            {
                "ml.jobs.get",
                "ml.jobs.list",
                *_LOCATIONS,
                "ml.models.get",
                "ml.models.list",
                "ml.operations.get",
                "ml.operations.list",
                *_PROJECT,
                "ml.studies.get",
                "ml.studies.getIamPolicy",
                "ml.studies.list",
                "ml.trials.get",
                "ml.trials.list",
                "ml.versions.get",
                "ml.versions.list",
            },
        ),
        _role("roles/ml.jobOwner", "AI Platform Job Owner", {"project", "job"}, _JOBS),
        _role(
            "roles/ml.modelOwner",
            "AI Platform Model Owner",
            {"project", "model"},
            _MODELS | _VERSIONS,
        ),
        _role(
            "roles/ml.modelUser",
            "AI Platform Model User",
            {"project", "model"},
            {"ml.models.get", "ml.models.predict", "ml.versions.get", "ml.versions.list", "ml.versions.predict"},
        ),
        _role("roles/ml.operationOwner", "AI Platform Operation Owner", {"project"}, _OPERATIONS),
    )
}
ADMIN_ROLE = "roles/ml.admin"


def roles_grantable_on(resource_type: str) -> list[str]:
    """Role names that may be bound on a project, a job or a model, in table order."""
    return [name for name, role in ROLES.items() if resource_type in role.grantable_on]


class SystemPrincipal:
    """Whoever runs server-side admin commands on the console's own machine (``aiconsole …``).

    Shell access to the data dir already gives everything, so it passes every check; audit
    entries name it ``system``.
    """

    is_authenticated = True
    is_active = True
    is_superuser = True
    pk = None
    username = "system"
    email = ""

    def get_username(self) -> str:
        return self.username

    def __str__(self) -> str:
        return self.username


SYSTEM = SystemPrincipal()


class IamError(Exception):
    """Base for the two refusals; carries the resource name for messages."""


class NotFound(IamError):
    def __init__(self, resource_name: str):
        self.resource_name = resource_name
        super().__init__(f"{resource_name} not found.")


class PermissionDenied(IamError):
    def __init__(self, permission: str, resource_name: str):
        self.permission = permission
        self.resource_name = resource_name
        super().__init__(f"Permission '{permission}' denied on resource '{resource_name}'.")


def policy_holder(resource):
    """The row whose policy governs a resource: a version answers with its model (``iam_parent``)."""
    parent = getattr(resource, "iam_parent", None)
    return resource if parent is None else parent


def _target(resource) -> tuple[Project, str, int | None]:
    """(project, resource type, primary key) of a Project, Job or Model row."""
    resource = policy_holder(resource)
    if isinstance(resource, Project):
        return resource, RoleBinding.ResourceType.PROJECT, None
    return resource.project, resource.iam_resource_type, resource.pk


def binding_target(resource) -> tuple[Project, str, int | None]:
    """Where a resource's own bindings live: (project, resource type, primary key or None)."""
    return _target(resource)


def _is_platform_admin(user) -> bool:
    return bool(getattr(user, "is_active", False) and getattr(user, "is_superuser", False))


def is_platform_admin(user) -> bool:
    """Superusers (and the system principal) hold roles/ml.admin everywhere, without bindings."""
    return _is_platform_admin(user)


# --- the decision, with a per-request cache -------------------------------------------------------
#
# Every request (Django's ``RequestIdMiddleware``, the ASGI fronts) runs inside ``request_cache``:
# the role bindings read for one (user, resource) are kept until the request ends, so a view that
# checks several permissions on one resource reads them once. Nothing outlives the request: a
# grant or a revocation takes effect on the next one (and within the same request too: any
# RoleBinding saved or deleted empties the cache).

_request_cache: contextvars.ContextVar[dict | None] = contextvars.ContextVar("aiconsole_iam_cache", default=None)


@contextmanager
def request_cache():
    """The scope of one request's cached decisions."""
    token = _request_cache.set({})
    try:
        yield
    finally:
        _request_cache.reset(token)


def _forget(**kwargs) -> None:
    cache = _request_cache.get()
    if cache:
        cache.clear()


post_save.connect(_forget, sender=RoleBinding, dispatch_uid="aiconsole-iam-cache-save")
post_delete.connect(_forget, sender=RoleBinding, dispatch_uid="aiconsole-iam-cache-delete")


def _bound_roles(user_pk, project_pk, resource_type: str, pk) -> frozenset[str]:
    """Roles bound to the user on the project, and on the resource when ``pk`` is given."""
    cache = _request_cache.get()
    key = (user_pk, project_pk, resource_type, pk)
    if cache is not None and key in cache:
        return cache[key]
    roles = frozenset(
        RoleBinding.objects.filter(
            Q(resource_type=RoleBinding.ResourceType.PROJECT) | Q(resource_type=resource_type, resource_id=pk),
            user_id=user_pk,
            project_id=project_pk,
        ).values_list("role", flat=True)
    )
    if cache is not None:
        cache[key] = roles
    return roles


def roles_of(user, resource) -> set[str]:
    """Roles the user holds on the resource: project-level ones plus those bound on it."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return set()
    if user is SYSTEM:
        return {ADMIN_ROLE}
    holder = policy_holder(resource)
    if isinstance(holder, Project):
        where = (holder.pk, RoleBinding.ResourceType.PROJECT, None)
    else:  # the project's id, without loading the project
        where = (holder.project_id, holder.iam_resource_type, holder.pk)
    roles = {ADMIN_ROLE} if _is_platform_admin(user) else set()
    roles.update(_bound_roles(user.pk, *where))
    return roles


def permissions_of(user, resource) -> set[str]:
    permissions: set[str] = set()
    for role in roles_of(user, resource):
        if role in ROLES:
            permissions |= ROLES[role].permissions
    return permissions


def can(user, permission: str, resource) -> bool:
    if permission not in ALL_PERMISSIONS:
        raise ValueError(f"Unknown permission {permission!r}")
    return permission in permissions_of(user, resource)


def can_see_project(user, project: Project) -> bool:
    """Whether the user has any binding in the project: decides 404 versus 403."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return False
    if _is_platform_admin(user):
        return True
    return RoleBinding.objects.filter(user=user, project=project).exists()


def require(user, permission: str, resource) -> None:
    """Raise NotFound or PermissionDenied unless the user holds the permission."""
    if can(user, permission, resource):
        return
    project, _, pk = _target(resource)
    resource_name = resource.resource_name
    if pk is None:
        visible = can_see_project(user, project)
    else:
        visible = bool(roles_of(user, resource))
    if not visible:
        raise NotFound(resource_name)
    raise PermissionDenied(permission, resource_name)


def projects_for(user) -> QuerySet[Project]:
    """Projects the user has any role in."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return Project.objects.none()
    if _is_platform_admin(user):
        return Project.objects.all()
    return Project.objects.filter(bindings__user=user).distinct()


def roles_granting(permission: str) -> list[str]:
    return [name for name, role in ROLES.items() if permission in role.permissions]


def scope(queryset: QuerySet, user, permission: str) -> QuerySet:
    """Rows of a job or model queryset on which the user holds the permission."""
    if not getattr(user, "is_authenticated", False) or not user.is_active:
        return queryset.none()
    if _is_platform_admin(user):
        return queryset
    granting = roles_granting(permission)
    resource_type = queryset.model.iam_resource_type
    project_ids = RoleBinding.objects.filter(
        user=user, role__in=granting, resource_type=RoleBinding.ResourceType.PROJECT
    ).values("project_id")
    resource_ids = RoleBinding.objects.filter(user=user, role__in=granting, resource_type=resource_type).values(
        "resource_id"
    )
    return queryset.filter(Q(project_id__in=project_ids) | Q(pk__in=resource_ids))


def grant(user, role: str, resource) -> RoleBinding:
    """Bind a role; callers are services, which check ``setIamPolicy`` first."""
    if role not in ROLES:
        raise ValueError(f"Unknown role {role!r}")
    project, resource_type, pk = _target(resource)
    if resource_type not in ROLES[role].grantable_on:
        raise ValueError(f"{role} cannot be granted on a {resource_type}")
    binding, _ = RoleBinding.objects.get_or_create(
        project=project, resource_type=resource_type, resource_id=pk, role=role, user=user
    )
    return binding


def denial_help(permission: str, resource_name: str) -> dict:
    """What a "Permission denied" page tells: the roles that grant ``permission`` and whom to ask
    (the admins of the project ``resource_name`` lies in, from its bindings)."""
    roles = [ROLES[name].title + f" ({name})" for name in roles_granting(permission) if name in ROLES]
    project_id = resource_name.split("/")[1] if resource_name.startswith("projects/") else ""
    admins = (
        sorted(
            set(
                RoleBinding.objects.filter(
                    project__project_id=project_id,
                    resource_type=RoleBinding.ResourceType.PROJECT,
                    role=ADMIN_ROLE,
                    user__is_active=True,
                ).values_list("user__username", flat=True)
            )
        )
        if project_id
        else []
    )
    return {
        "permission": permission,
        "resource_name": resource_name,
        "granting_roles": roles,
        "admins": admins,
        "project_id": project_id,
    }
