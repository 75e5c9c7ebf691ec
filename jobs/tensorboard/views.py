"""``/projects/P/jobs/J/tensorboard/…``: TensorBoard for the job dir (``…/tensorboard/trials/T/…``
for a trial's), proxied. Every request is checked with ``ml.jobs.get`` (404 without a role, as
everywhere); the first page of a visit is audited as a Data Access read of the job.

TensorBoard's own pages need inline scripts and frames of its own, so this path alone answers with
``X-Frame-Options: SAMEORIGIN`` (the console's is DENY) and without the console's CSRF check; a
POST (TensorBoard fetches some data with POST) must come from the console's own origin instead.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth.decorators import login_required
from django.http import HttpResponseNotAllowed, HttpResponseRedirect, StreamingHttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.clickjacking import xframe_options_sameorigin
from django.views.decorators.csrf import csrf_exempt

from aiconsole import accounts
from jobs import services
from jobs.metrics.logdirs import NoLogdir, logdir_for
from jobs.tensorboard import proxy
from jobs.tensorboard.boards import BOARDS, BoardError

METHODS = ("GET", "HEAD", "POST")


@xframe_options_sameorigin
@csrf_exempt
@login_required
async def job_tensorboard(request, project_id, job_id, path="", trial_id=""):
    if request.method not in METHODS:
        return HttpResponseNotAllowed(METHODS)
    if not path and not trial_id and request.GET.get("trial", "").isdigit():
        return HttpResponseRedirect(
            reverse("jobs:trial_tensorboard", args=[project_id, job_id, request.GET["trial"], ""])
        )
    user = await request.auser()
    job = await sync_to_async(_job)(project_id, job_id, user, audited=not path and request.method == "GET")
    if request.method == "POST" and not _same_origin(request):
        return await sync_to_async(render)(request, "403.html", status=403)
    prefix = (
        reverse("jobs:trial_tensorboard", args=[project_id, job_id, trial_id, ""])
        if trial_id
        else reverse("jobs:tensorboard", args=[project_id, job_id, ""])
    ).rstrip("/")
    try:
        logdir = await sync_to_async(logdir_for)(job, trial_id)
        project = await sync_to_async(lambda: job.project)()  # its account runs the board
        board = await sync_to_async(BOARDS.acquire, thread_sensitive=False)(
            f"{project_id}/{job_id}" + (f"/trials/{trial_id}" if trial_id else ""), logdir, prefix, project, user.pk
        )
    except (NoLogdir, BoardError) as error:
        return await _unavailable(request, job, str(error), status=404 if isinstance(error, NoLogdir) else 503)
    try:
        answer = await proxy.forward(
            board.port,
            request.method,
            request.get_full_path(),
            request.headers.items(),
            request.body,
            token=board.token,
            timeout=settings.TENSORBOARD_START_SECONDS,
        )
    except (OSError, TimeoutError, proxy.ProxyError) as error:
        BOARDS.release(board, user.pk)
        return await _unavailable(request, job, f"TensorBoard did not answer: {error}", status=502)
    release = _once(lambda: BOARDS.release(board, user.pk))
    response = StreamingHttpResponse(_released(answer.body, release), status=answer.status)
    response._resource_closers.append(release)  # also when the body is never read (client gone)
    for name, value in answer.headers:
        response[name] = value
    return response


async def _unavailable(request, job, message: str, *, status: int):
    context = {"project": job.project, "job": job, "message": message}
    return await sync_to_async(render)(request, "jobs/tensorboard_unavailable.html", context, status=status)


def _job(project_id, job_id, user, *, audited: bool):
    project = accounts.find_project(project_id, actor=user)
    return services.get_job(project, job_id, actor=user, audited=audited)


def _once(function):
    done = []

    def call():
        if not done:
            done.append(True)
            function()

    return call


async def _released(body, release):
    try:
        async for chunk in body:
            yield chunk
    finally:
        release()


def _same_origin(request) -> bool:
    """The request came from a page of the console's own origin (``Origin``, else ``Referer``)."""
    origin = request.headers.get("Origin", "")
    if not origin:
        referer = urlsplit(request.headers.get("Referer", ""))
        origin = f"{referer.scheme}://{referer.netloc}" if referer.netloc else ""
    if not origin:
        return False
    trusted = {o.rstrip("/") for o in settings.CSRF_TRUSTED_ORIGINS}
    return origin.rstrip("/") in trusted or origin == f"{request.scheme}://{request.get_host()}"
