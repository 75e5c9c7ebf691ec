"""``GET /v1/projects/{project}/jobs/{jobId}/metrics``: our extension, a job's metric points.

``?tag=``, ``?trialId=`` and ``?source=`` (``hypertune``, ``tfevents``, or ``system``: the replicas'
use of the machine, run the replica's name) narrow the list; ``pageSize`` (default 1,000, at most 10,000) and
``pageToken`` page it by keyset, in the order the points were recorded. Each point is
``{"tag", "step", "value", "time", "trialId", "source", "run"}`` (``jobs.metrics.points.wire``).
Readable with ``ml.jobs.get``; the first page is a Data Access entry, the pages after it are not.
"""

from __future__ import annotations

from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts
from jobs import services
from jobs.metrics import points as metrics


@api_view(["GET"])
def job_metrics(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    params = request.query_params
    job = services.get_job(project, job_id, actor=request.user, audited=not params.get("pageToken"))
    points = metrics.points_for(
        job, tag=params.get("tag", ""), trial_id=params.get("trialId", ""), source=params.get("source", "")
    )
    page, next_token = metrics.page(points, params)
    body: dict = {"metrics": page}
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)
