"""Template tags that ask the one permission layer, to hide what a user may not use.

``{% can "ml.jobs.cancel" job as can_cancel %}`` and, where only a project id is at hand (the top
navigation), ``{% can_in_project "logging.privateLogEntries.list" current_project_id as can_audit %}``.
Hiding is a courtesy: the views and services check again.
"""

from django import template

from aiconsole import iam
from aiconsole.models import Project

register = template.Library()


def _user(context):
    request = context.get("request")
    return getattr(request, "user", None) or context.get("user")


@register.simple_tag(takes_context=True)
def can(context, permission: str, resource) -> bool:
    user = _user(context)
    if user is None or resource is None or resource == "":
        return False
    return iam.can(user, permission, resource)


@register.simple_tag(takes_context=True)
def can_in_project(context, permission: str, project_id) -> bool:
    user = _user(context)
    if user is None or not project_id:
        return False
    project = next((p for p in context.get("console_projects") or [] if p.project_id == project_id), None)
    if project is None:
        project = Project.objects.filter(project_id=project_id).first()
    return project is not None and iam.can(user, permission, project)


@register.filter
def role_title(role_name: str) -> str:
    role = iam.ROLES.get(role_name)
    return role.title if role else role_name


@register.filter
def role_permissions(role_name: str) -> str:
    role = iam.ROLES.get(role_name)
    return ", ".join(sorted(role.permissions)) if role else ""
