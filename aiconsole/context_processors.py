"""What every console page needs: the projects the user can switch between."""

from aiconsole import iam


def console(request):
    user = getattr(request, "user", None)
    if user is None or not user.is_authenticated:
        return {}
    match = getattr(request, "resolver_match", None)
    current = match.kwargs.get("project_id") if match else None
    return {"console_projects": list(iam.projects_for(user)), "current_project_id": current}
