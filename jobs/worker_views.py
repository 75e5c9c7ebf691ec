"""The workers page (scaled mode): where replicas can run, what runs there, and their heartbeats.

Workers are the installation's machines, not a project's resources: platform admins see them;
for anyone else the page does not exist (404), as for a project they have no role in.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import Http404
from django.shortcuts import render

from aiconsole import iam
from jobs.cluster import capacity
from jobs.models import Worker


@login_required
def workers(request):
    if not iam.is_platform_admin(request.user):
        raise Http404("No such page.")
    show_all = bool(request.GET.get("all"))
    context = {"rows": capacity.summaries(include_gone=show_all), "show_all": show_all,
               "scaled": Worker.objects.exists()}
    template = "jobs/workers.html#worker-rows" if request.htmx else "jobs/workers.html"
    return render(request, template, context)
