"""The workers page (scaled mode): where replicas can run, what runs there, and their heartbeats.

Workers are the installation's machines, not a project's resources: platform admins see them;
for anyone else the page does not exist (404), as for a project they have no role in.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from aiconsole import iam
from jobs import catalogue
from jobs.cluster import capacity
from jobs.executor import environments
from jobs.models import Worker


@login_required
def workers(request):
    if not iam.is_platform_admin(request.user):
        raise Http404("No such page.")
    show_all = bool(request.GET.get("all"))
    context = {
        "rows": capacity.summaries(include_gone=show_all),
        "show_all": show_all,
        "hidden": 0 if show_all else capacity.hidden_workers(),
        "coordinator": capacity.coordinator(),
        "scaled": Worker.objects.exists(),
    }
    template = "jobs/workers.html#worker-rows" if request.htmx else "jobs/workers.html"
    return render(request, template, context)


@login_required
def runtime_versions(request):
    """Runtime versions on this machine: Python, frameworks, built or not, size on disk.

    Like the original's runtime version list, the catalogue is for everyone signed in (they pick
    a runtime for their jobs); where a stack is installed on the server is for platform admins.
    """
    rows = environments.inventory(with_sizes=True)
    admin = iam.is_platform_admin(request.user)
    for row in rows:
        if not admin:
            row["path"] = row["interpreter"] = None
    return render(
        request,
        "jobs/runtimes.html",
        {"rows": rows, "admin": admin, "default_runtime": catalogue.DEFAULT_RUNTIME_VERSION},
    )
