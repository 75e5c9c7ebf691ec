"""The ml v1 REST API for jobs and project configuration. Thin adapters over the services."""

from __future__ import annotations

from django.http import HttpResponse
from django.views.decorators.csrf import csrf_exempt
from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts, audit, iam, paging
from aiconsole.errors import FailedPrecondition, FieldViolation, InvalidArgument
from jobs import catalogue, services
from jobs.quotas import admission as quotas
from jobs.tuning import export
from jobs.wire import job_resource


def _job_body(request) -> dict:
    if not isinstance(request.data, dict):
        raise InvalidArgument(
            "Invalid JSON payload received. Expected an object at 'job'.",
            [FieldViolation("job", "Expected a JSON object.")],
        )
    return request.data


@api_view(["GET", "POST"])
def jobs_collection(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "POST":
        job = services.submit_job(project, _job_body(request), actor=request.user)
        return Response(job_resource(job))
    jobs = services.list_jobs(project, actor=request.user, filter_text=request.query_params.get("filter", ""))
    page, next_token = paging.keyset_page(jobs, request, "jobs")
    for job in page:
        job.project = project  # the caller named it: no join, no 20 more rows to build
    body: dict = {}
    if page:
        body["jobs"] = [job_resource(job) for job in page]
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)


@api_view(["GET", "PATCH"])
def job_item(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "PATCH":
        job = services.find_job(project, job_id, actor=request.user)
        updated = services.update_job(
            job, _job_body(request), request.query_params.get("updateMask", ""), actor=request.user
        )
        return Response(job_resource(updated))
    return Response(job_resource(services.get_job(project, job_id, actor=request.user)))


@api_view(["POST"])
def job_cancel(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    services.cancel_job(services.find_job(project, job_id, actor=request.user), actor=request.user)
    return Response({})


@api_view(["GET"])
def project_config(request, project_id):
    """projects.getConfig: the service account trainers would run as."""
    project = accounts.find_project(project_id, actor=request.user)
    method = "google.cloud.ml.v1.ProjectManagementService.GetConfig"
    audit.authorize(request.user, "ml.projects.getConfig", project, method=method, data_access=True)
    audit.record(
        actor=request.user,
        project=project,
        method=method,
        resource_name=project.resource_name,
        permission="ml.projects.getConfig",
        data_access=True,
    )
    number = project.project_number
    return Response(
        {
            "serviceAccount": f"service-{number}@cloud-ml.google.com.iam.gserviceaccount.com",
            "serviceAccountProject": str(number),
            "config": {"tpuServiceAccount": f"service-{number}@cloud-tpu.iam.gserviceaccount.com"},
        }
    )


def _location(project, region: str) -> dict:
    return {
        "name": f"{project.resource_name}/locations/{region}",
        "capabilities": catalogue.location_capabilities(region),
    }


@api_view(["GET"])
def locations_collection(request, project_id):
    project = accounts.find_project(project_id, actor=request.user)
    iam.require(request.user, "ml.locations.list", project)
    page, next_token = paging.list_page(sorted(catalogue.REGIONS), request, "locations")
    body: dict = {"locations": [_location(project, region) for region in page]} if page else {}
    if next_token:
        body["nextPageToken"] = next_token
    return Response(body)


@api_view(["GET"])
def runtime_versions(request, project_id):
    """Extension: the runtime catalogue and whether each runtime/Python pair can run here now."""
    project = accounts.find_project(project_id, actor=request.user)
    iam.require(request.user, "ml.locations.list", project)
    return Response({"runtimeVersions": services.runtime_versions()})


@api_view(["GET"])
def location_item(request, project_id, location_id):
    project = accounts.find_project(project_id, actor=request.user)
    iam.require(request.user, "ml.locations.get", project)
    if location_id not in catalogue.REGIONS:
        raise iam.NotFound(f"{project.resource_name}/locations/{location_id}")
    return Response(_location(project, location_id))


@api_view(["POST"])
def package_upload(request, project_id):
    """Our extension (the original staged packages in Cloud Storage): the raw body is one trainer
    package; the answer's ``uri`` goes into ``trainingInput.packageUris``."""
    project = accounts.find_project(project_id, actor=request.user)
    package = services.upload_package(
        project, request.query_params.get("name", ""), request._request, actor=request.user
    )
    return Response(package)


@csrf_exempt  # it changes nothing; a POST to a wrong path must still get the JSON 404
def api_not_found(request, *args, **kwargs):
    """Anything else under /v1/: the Google error envelope, not an HTML page."""
    from django.http import JsonResponse

    message = f"The requested URL {request.path} was not found on this server."
    return JsonResponse({"error": {"code": 404, "message": message, "status": "NOT_FOUND", "details": []}}, status=404)


@api_view(["GET"])
def job_trials(request, project_id, job_id):
    """A study's trials (our extension): ``{"columns", "trials"}``, or CSV with ``?alt=csv``; the
    trial table's query keys (``trial_sort``, ``trial_state``, ``cols``, ``min.X``/``max.X``…) choose
    the rows and columns, as the page's download does."""
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, without_output=True)
    if not job.is_hyperparameter_job:
        raise FailedPrecondition(f"Job {job_id} is not a hyperparameter tuning job: it has no trials.")
    names, rows = export.columns_and_rows(job, request.query_params)
    if request.query_params.get("alt") == "csv":
        return HttpResponse(export.as_csv(names, rows), content_type="text/csv")
    return Response(export.as_json(names, rows))


@api_view(["GET", "PATCH"])
def project_quotas(request, project_id):
    """projects/P/quotas: GET the limits, weight and usage; PATCH ``{"limits": [...], "weight": W}``."""
    project = accounts.find_project(project_id, actor=request.user)
    if request.method == "PATCH":
        return Response(quotas.set_quotas(project, request.data, actor=request.user))
    return Response(quotas.read_quotas(project, actor=request.user))
