"""Web access's pages: the terminal into one replica, and a session's recording.

Both take what opening a shell takes (``ml.jobs.update``, ``sessions.authorized_job``): someone
who may only see the job gets 403 and the audit log says so; someone who may not see it, 404.
"""

from __future__ import annotations

from django.contrib.auth.decorators import login_required
from django.http import FileResponse, Http404
from django.shortcuts import render

from aiconsole import accounts
from jobs.webaccess import sessions


@login_required
def shell_page(request, project_id: str, job_id: str, label: str):
    """A terminal (xterm.js) over the shell's WebSocket; the socket itself admits again."""
    job = sessions.authorized_job(request.user, project_id, job_id)
    trial_id = request.GET.get("trial", "")[:10]
    context = {"project": job.project, "job": job, "label": label, "trial_id": trial_id}
    try:
        sessions.replica_to_open(job, label, trial_id)
    except sessions.Refused as refusal:
        context["refusal"] = str(refusal)
    return render(request, "jobs/shell.html", context, status=200 if "refusal" not in context else 409)


@login_required
def shell_recording(request, project_id: str, job_id: str, session_pk: int):
    """A session's recording (asciicast v2: play it with ``asciinema play``, or read it as JSON lines)."""
    accounts.find_project(project_id, actor=request.user)
    job = sessions.authorized_job(request.user, project_id, job_id, method=sessions.GET_RECORDING)
    session = job.shell_sessions.filter(pk=session_pk).first()
    path = sessions.recording_path(session) if session is not None and session.recording else None
    if session is None or path is None or not path.is_file():
        raise Http404("This session has no recording.")
    sessions.record_download(job, session, actor=request.user)
    name = f"{job.job_id}-{session.replica_label}-{session.pk}.cast"
    return FileResponse(path.open("rb"), as_attachment=True, filename=name, content_type="application/x-asciicast")
