"""REST: ``GET /v1/projects/P/usage?from=YYYY-MM-DD&to=YYYY-MM-DD`` (``projects/-`` for every
project, platform admins only), JSON or, with ``alt=csv``, CSV. Thin adapters over the services."""

from __future__ import annotations

from django.http import HttpResponse
from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts
from jobs.usage import csvfile, services


def _answer(request, usage: dict):
    if request.query_params.get("alt") == "csv":
        response = HttpResponse(csvfile.usage_csv(usage["rows"]), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = f'attachment; filename="{csvfile.filename(usage)}"'
        return response
    return Response(usage)


def _window(request):
    return services.parse_window(request.query_params.get("from"), request.query_params.get("to"))


@api_view(["GET"])
def project_usage(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    return _answer(request, services.project_usage(project, *_window(request), actor=request.user))


@api_view(["GET"])
def all_usage(request):
    return _answer(request, services.all_usage(*_window(request), actor=request.user))
