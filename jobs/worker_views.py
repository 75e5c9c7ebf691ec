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
from jobs.models import ACTIVE_STATES, LIVE_REPLICA_STATES, Worker


@login_required
def workers(request):
    if not iam.is_platform_admin(request.user):
        raise Http404("No such page.")
    live = set(capacity.live_workers().values_list("pk", flat=True))
    offers = capacity.offers() if live else {}
    rows = []
    shown = Worker.objects.all() if request.GET.get("all") else Worker.objects.filter(pk__in=live)
    for worker in shown.prefetch_related("replicas__job__project", "jobs__project"):
        offer = offers.get(worker.name)
        rows.append({
            "worker": worker,
            "state": "live" if worker.pk in live else ("stopped" if worker.stopped else "lost"),
            "free_cpus": offer.free_cpus if offer else None,
            "free_memory_gb": offer.free_memory_gb if offer else None,
            "free_devices": sum(len(d) for d in offer.free_devices.values()) if offer else None,
            "replicas": [r for r in worker.replicas.all() if r.state in LIVE_REPLICA_STATES],
            "jobs": [j for j in worker.jobs.all() if j.state in ACTIVE_STATES],
        })
    context = {"rows": rows, "show_all": bool(request.GET.get("all")), "scaled": bool(live) or Worker.objects.exists()}
    template = "jobs/workers.html#worker-rows" if request.htmx else "jobs/workers.html"
    return render(request, template, context)
