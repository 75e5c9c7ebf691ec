"""Team administration pages: a project's members and roles, and per-resource sharing.

Thin adapters over ``aiconsole.policies``. Project members need roles/ml.admin
(``resourcemanager.projects.getIamPolicy``/``setIamPolicy``); the sharing page is
generic: jobs (``jobs/web/sharing.py``) and models reuse ``sharing_page`` with their own lookup,
permissions and URLs.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.contrib import messages
from django.contrib.auth import get_user_model
from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import redirect, render
from django.urls import reverse
from django.views.decorators.http import require_POST

from aiconsole import accounts, iam, policies
from aiconsole.errors import ServiceError
from aiconsole.models import Project


def plain_message(error: ServiceError) -> str:
    """What went wrong in words, without the API's ``Field: … Error:`` framing."""
    if error.violations:
        return " ".join(v.description for v in error.violations)
    return error.message


def _user(user_id: int):
    user = get_user_model().objects.filter(pk=user_id).first()
    if user is None:
        raise Http404("No such user.")
    return user


def _role_choices(resource_type: str) -> list[tuple[str, str]]:
    return [(name, iam.ROLES[name].title) for name in iam.roles_grantable_on(resource_type)]


def _rows(resource) -> list[policies.Member]:
    """Members without another GetIamPolicy entry: used right after a change the user made."""
    by_user: dict[int, policies.Member] = {}
    for role, users in policies.current_bindings(resource).items():
        for user in users:
            by_user.setdefault(user.pk, policies.Member(user, [])).roles.append(role)
    return sorted(by_user.values(), key=lambda m: m.user.get_username())


def _respond(request, render_partial, back_url: str, error: str | None, success: str | None):
    """htmx: the refreshed section with its message inline; otherwise redirect with a message."""
    if request.htmx:
        return render_partial(error=error, success=success)
    if error:
        messages.error(request, error)
    elif success:
        messages.success(request, success)
    return redirect(back_url)


def _attempt(change) -> tuple[str | None, str | None]:
    try:
        return None, change()
    except ServiceError as error:
        return plain_message(error), None


# --- project members ------------------------------------------------------------------------------


def _members_context(request, project: Project, rows, *, error=None, success=None) -> dict:
    admins = [m.user.pk for m in rows if iam.ADMIN_ROLE in m.roles and m.user.is_active]
    return {
        "project": project,
        "members": rows,
        "roles": _role_choices("project"),
        "role_titles": {name: role.title for name, role in iam.ROLES.items()},
        "can_edit": iam.can(request.user, "resourcemanager.projects.setIamPolicy", project),
        "last_admin": admins[0] if len(admins) == 1 else None,
        "error": error,
        "success": success,
    }


@login_required
def members(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    rows = policies.members(project, actor=request.user)
    template = "aiconsole/members.html#members" if request.htmx else "aiconsole/members.html"
    return render(request, template, _members_context(request, project, rows))


def _members_change(request, project: Project, change):
    error, success = _attempt(change)

    def partial(**notes):
        context = _members_context(request, project, _rows(project), **notes)
        return render(request, "aiconsole/members.html#members", context)

    return _respond(request, partial, reverse("team:members", args=[project.project_id]), error, success)


@login_required
@require_POST
def member_add(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    identifier, role = request.POST.get("member", ""), request.POST.get("role", "")

    def change():
        user = policies.add_member(project, identifier, role, actor=request.user)
        return f"{user.get_username()} now has {iam.ROLES[role].title}."

    return _members_change(request, project, change)


@login_required
@require_POST
def member_role(request, project_id, user_id):
    project = accounts.find_project(project_id, actor=request.user)
    user, role = _user(user_id), request.POST.get("role", "")

    def change():
        policies.change_member_role(project, user, role, actor=request.user)
        return f"{user.get_username()} now has {iam.ROLES[role].title}."

    return _members_change(request, project, change)


@login_required
@require_POST
def member_remove(request, project_id, user_id):
    project = accounts.find_project(project_id, actor=request.user)
    user = _user(user_id)

    def change():
        policies.remove_member(project, user, actor=request.user)
        return f"{user.get_username()} was removed from {project.project_id}."

    return _members_change(request, project, change)


@login_required
@require_POST
def data_access_logs(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    enabled = request.POST.get("enabled") == "on"

    def change():
        policies.set_data_access_logs(project, enabled, actor=request.user)
        return f"Data Access audit logs are {'on' if enabled else 'off'}."

    return _members_change(request, project, change)


# --- sharing one resource (a job, a model) -------------------------------------------------------


@dataclass(frozen=True)
class SharingPage:
    """What a sharing page needs to know about its resource besides the resource itself."""

    title: str  # "Job census_1"
    page_url: str
    add_url: str
    remove_url_name: str  # reversed with url_args + [user_id]
    url_args: tuple
    back_url: str
    breadcrumbs: tuple[tuple[str, str], ...]


def _sharing_context(request, resource, page: SharingPage, rows, *, error=None, success=None) -> dict:
    kind = policies.kind_of(resource)
    return {
        "resource": resource,
        "page": page,
        "project": iam.binding_target(resource)[0],
        "members": [(m, reverse(page.remove_url_name, args=[*page.url_args, m.user.pk])) for m in rows],
        "roles": _role_choices(kind.resource_type),
        "role_titles": {name: role.title for name, role in iam.ROLES.items()},
        "can_edit": iam.can(request.user, kind.set_permission, resource),
        "error": error,
        "success": success,
    }


def sharing_page(request, resource, page: SharingPage):
    """GET: who holds which role on the resource; POST to ``page.add_url``/remove to change it."""
    rows = policies.members(resource, actor=request.user)
    template = "aiconsole/sharing.html#sharing" if request.htmx else "aiconsole/sharing.html"
    return render(request, template, _sharing_context(request, resource, page, rows))


def sharing_change(request, resource, page: SharingPage, change):
    error, success = _attempt(change)

    def partial(**notes):
        context = _sharing_context(request, resource, page, _rows(resource), **notes)
        return render(request, "aiconsole/sharing.html#sharing", context)

    return _respond(request, partial, page.page_url, error, success)


def sharing_add(request, resource, page: SharingPage):
    identifier, role = request.POST.get("member", ""), request.POST.get("role", "")

    def change():
        user = policies.add_member(resource, identifier, role, actor=request.user)
        return f"{user.get_username()} now has {iam.ROLES[role].title} on {page.title}."

    return sharing_change(request, resource, page, change)


def sharing_remove(request, resource, page: SharingPage, user_id: int):
    user = _user(user_id)

    def change():
        policies.remove_member(resource, user, actor=request.user)
        return f"{user.get_username()} no longer has access to {page.title} through this page."

    return sharing_change(request, resource, page, change)
