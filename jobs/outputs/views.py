"""The outputs browser's pages: a folder of a job's (or a trial's) outputs, a file's preview, a
download. Thin: parse, call ``jobs.outputs.files``, render. The job page's Outputs tab shows the
same browser, loaded in place (``request.htmx``: the fragment only)."""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib.auth.decorators import login_required
from django.http import HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.utils.http import content_disposition_header

from aiconsole import accounts, iam
from aiconsole.errors import InvalidArgument, ServiceError
from aiconsole.streaming import StreamedResponse
from jobs import services
from jobs.outputs import files


def _job(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    return services.find_job(project, job_id, actor=request.user)


def _url(job, name: str, **query) -> str:
    """An address of the browser: ``name`` is ``outputs``, ``output_file`` or ``output_download``."""
    query = {key: value for key, value in query.items() if value}
    path = reverse(f"jobs:{name}", args=(job.project.project_id, job.job_id))
    return f"{path}?{urlencode(query)}" if query else path


def _context(request, job, trial_id: str, path: str) -> dict:
    """What every view of the browser shows: the folders on the way, the trials to switch to."""
    parts = path.split("/") if path else []
    folders = parts if request.resolver_match.url_name == "outputs" else parts[:-1]
    trials = list(job.trials.order_by("number").values_list("trial_id", flat=True)[:200])
    return {
        "project": job.project,
        "job": job,
        "trial": trial_id,
        "trials": trials,
        "path": path,
        "root_url": _url(job, "outputs", trial=trial_id),
        "job_root_url": _url(job, "outputs"),
        "trial_url_base": _url(job, "outputs") + "?trial=",
        "crumbs": [
            (name, _url(job, "outputs", trial=trial_id, path="/".join(parts[: i + 1])))
            for i, name in enumerate(folders)
        ],
        "embedded": bool(request.htmx),
        "page_entries": files.PAGE_ENTRIES,
        "scan_entries": files.SCAN_ENTRIES,
    }


def _with_links(job, trial_id: str, listing: files.Listing) -> files.Listing:
    for entry in listing.entries:
        view = "outputs" if entry.kind == "folder" else "output_file"
        entry.open_url = _url(job, view, trial=trial_id, path=entry.path)  # type: ignore[attr-defined]
        entry.download_url = _url(job, "output_download", trial=trial_id, path=entry.path)  # type: ignore[attr-defined]
    return listing


@login_required
def job_outputs(request, project_id, job_id):
    """A folder of the job's outputs, a page of entries at a time."""
    job = _job(request, project_id, job_id)
    trial_id, path = request.GET.get("trial", ""), request.GET.get("path", "")
    context = _context(request, job, trial_id, path)
    try:
        listing = files.list_folder(
            job, path, actor=request.user, trial_id=trial_id, after=request.GET.get("after", "")
        )
        context["listing"] = _with_links(job, trial_id, listing)
        context["root"] = files.job_dir(job, trial_id)
        context["up_url"] = _url(job, "outputs", trial=trial_id, path=listing.path.rpartition("/")[0])
        context["more_url"] = _url(job, "outputs", trial=trial_id, path=listing.path, after=listing.more_after)
    except ServiceError as error:
        _refused(context, job, trial_id, error)
    template = "jobs/outputs.html#outputs-browser" if request.htmx else "jobs/outputs.html"
    return render(request, template, context, status=context.get("status", 200))


def _refused(context: dict, job, trial_id: str, error: ServiceError) -> None:
    """Why the page shows no entries, and still which folder it is in (the read was allowed: the
    service checks the permission before anything else)."""
    if isinstance(error, files.NoJobDir):  # a fact about the job, not a failure
        context["no_folder"] = error.message
        return
    context["problem"] = error.message
    context["status"] = _status(error)
    try:
        context["root"] = files.job_dir(job, trial_id)
    except (ServiceError, iam.IamError):
        pass  # no folder to name: the problem says why


def _status(error: ServiceError) -> int:
    """A path that leaves the job's folder, or names a folder as a file, is a bad request; a job with
    no job dir, or a bucket that cannot be read, is said on the page."""
    return 400 if isinstance(error, InvalidArgument) else 200


@login_required
def job_output_file(request, project_id, job_id):
    """A file's preview: its first rows or lines, an image, or what it is and its size."""
    job = _job(request, project_id, job_id)
    trial_id, path = request.GET.get("trial", ""), request.GET.get("path", "")
    context = _context(request, job, trial_id, path)
    folder, _, name = path.strip("/").rpartition("/")
    context.update(
        file_name=name,
        folder_url=_url(job, "outputs", trial=trial_id, path=folder),
        download_url=_url(job, "output_download", trial=trial_id, path=path),
        inline_url=_url(job, "output_download", trial=trial_id, path=path, inline="1"),
    )
    try:
        context["preview"] = files.preview_file(job, path, actor=request.user, trial_id=trial_id)
        context["root"] = files.job_dir(job, trial_id)
    except ServiceError as error:
        _refused(context, job, trial_id, error)
    template = "jobs/output_file.html#output-preview" if request.htmx else "jobs/output_file.html"
    return render(request, template, context, status=context.get("status", 200))


@login_required
def job_output_download(request, project_id, job_id):
    """The whole file; an image asked for ``inline`` is shown (the preview's ``<img>``)."""
    job = _job(request, project_id, job_id)
    try:
        found = files.download(
            job, request.GET.get("path", ""), actor=request.user, trial_id=request.GET.get("trial", "")
        )
    except ServiceError as error:
        return HttpResponse(
            error.message,
            status=_status(error) if isinstance(error, InvalidArgument) else 409,
            content_type="text/plain; charset=utf-8",
        )
    inline = request.GET.get("inline") and found.content_type.startswith("image/")
    response = StreamedResponse(found.chunks, content_type=found.content_type)
    if found.size is not None:
        response["Content-Length"] = str(found.size)
    # RFC 6266: a name beyond ASCII goes as filename*, which browsers save under (Django would
    # MIME-encode it in filename="…", and the file would be saved as "=?utf-8?b?…").
    response["Content-Disposition"] = content_disposition_header(not inline, _header_name(found.name))
    response["X-Content-Type-Options"] = "nosniff"
    response["Content-Security-Policy"] = "default-src 'none'; sandbox"  # a trainer's file runs nothing here
    return response


def _header_name(name: str) -> str:
    """The name without control characters (a newline cannot be in a header)."""
    return "".join(c if c.isprintable() else "_" for c in name)
