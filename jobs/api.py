"""The ml v1 REST API for jobs. Thin adapters over jobs.services."""

from __future__ import annotations

import base64

from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole.errors import InvalidArgument
from jobs import services
from jobs.resources import job_resource

DEFAULT_PAGE_SIZE = 20
MAX_PAGE_SIZE = 100


def _page_size(request) -> int:
    raw = request.query_params.get("pageSize", "")
    if not raw:
        return DEFAULT_PAGE_SIZE
    if not raw.isdigit():
        raise InvalidArgument(f"Invalid value at 'page_size' (TYPE_INT32), \"{raw}\"")
    return min(int(raw), MAX_PAGE_SIZE) or DEFAULT_PAGE_SIZE


def _decode_token(token: str) -> int | None:
    if not token:
        return None
    try:
        return int(base64.urlsafe_b64decode(token.encode() + b"==").decode().removeprefix("job:"))
    except ValueError:
        raise InvalidArgument("The page token is not valid.") from None


def _encode_token(pk: int) -> str:
    return base64.urlsafe_b64encode(f"job:{pk}".encode()).decode().rstrip("=")


@api_view(["GET", "POST"])
def jobs_collection(request, project_id):
    project = services.find_project(project_id, actor=request.user)
    if request.method == "POST":
        if not isinstance(request.data, dict):
            raise InvalidArgument("Invalid JSON payload received. Expected a Job object.")
        job = services.submit_job(project, request.data, actor=request.user)
        return Response(job_resource(job))
    size = _page_size(request)
    after = _decode_token(request.query_params.get("pageToken", ""))
    jobs = services.list_jobs(project, actor=request.user).order_by("-pk")
    if after is not None:
        jobs = jobs.filter(pk__lt=after)
    page = list(jobs[: size + 1])
    body: dict = {}
    if page:
        body["jobs"] = [job_resource(job) for job in page[:size]]
    if len(page) > size:
        body["nextPageToken"] = _encode_token(page[size - 1].pk)
    return Response(body)


@api_view(["GET"])
def job_item(request, project_id, job_id):
    project = services.find_project(project_id, actor=request.user)
    return Response(job_resource(services.get_job(project, job_id, actor=request.user)))


@api_view(["POST"])
def job_cancel(request, project_id, job_id):
    project = services.find_project(project_id, actor=request.user)
    services.cancel_job(services.find_job(project, job_id, actor=request.user), actor=request.user)
    return Response({})
