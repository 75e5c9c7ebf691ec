"""Who may open a shell into which replica, and what is kept of each: the session's row, its audit
entries and its recording.

Opening one is changing the job: it takes ``ml.jobs.update`` (an editor of the project, the job's
owner), checked through the one IAM layer, and a refusal is audited like any other. Each session's
start and end are Admin Activity entries (``aiconsole.WebAccessService.OpenShell`` and
``CloseShell``, with who, which replica, how long and how many bytes), and everything typed and shown
is recorded as an asciicast (v2) file in the data dir, which only the console can read, downloadable
by those who may open the shell (each download a Data Access read, ``GetRecording``).
"""

from __future__ import annotations

import codecs
import json
import os
import shutil
import time
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from aiconsole import accounts, audit, iam
from aiconsole.middleware import current_request
from jobs import services
from jobs.models import Job, JobState, Replica, ReplicaState, WebAccessSession

CONNECT = "aiconsole.WebAccessService.OpenShell"
DISCONNECT = "aiconsole.WebAccessService.CloseShell"
GET_RECORDING = "aiconsole.WebAccessService.GetRecording"
PERMISSION = "ml.jobs.update"
RECORDINGS_FOLDER = "web-access"


class Refused(Exception):
    """No shell: ``message`` says why in words for the page, ``code`` is the socket's close code."""

    def __init__(self, message: str, code: int):
        super().__init__(message)
        self.code = code


def resource_name(job: Job, label: str, trial_id: str = "") -> str:
    """``projects/P/jobs/J/webAccess/master-replica-0`` (``…/webAccess/trial-3/master-replica-0``)."""
    trial = f"trial-{trial_id}/" if trial_id else ""
    return f"{job.resource_name}/webAccess/{trial}{label}"


def authorized_job(user, project_id: str, job_id: str, *, method: str = CONNECT) -> Job:
    """The job, if ``user`` may open shells into it (``iam.NotFound``/``PermissionDenied`` otherwise,
    the refusal audited)."""
    project = accounts.find_project(project_id, actor=user)
    job = services.find_job(project, job_id, actor=user, without_output=True)
    audit.authorize(user, PERMISSION, job, method=method)
    return job


def may_open(user, job: Job) -> bool:
    return iam.can(user, PERMISSION, job)


def open_replicas(job: Job) -> list[Replica]:
    """The replicas a shell can be opened into now: running, or failed and held, with a port."""
    if not (job.training_input or {}).get("enableWebAccess"):
        return []
    held = Q(shell_until__gt=timezone.now())
    return list(
        Replica.objects.filter(job=job, shell_port__isnull=False)
        .filter(Q(state=ReplicaState.RUNNING) | held)
        .select_related("worker")
        .order_by("trial_id", "pk")
    )


def web_access_uris(job: Job) -> dict[str, dict[str, str]]:
    """``webAccessUris`` by trial id ("" for a job without trials): node name → the shell's page."""
    base = current_request.get().origin or settings.CONSOLE_URL
    uris: dict[str, dict[str, str]] = {}
    for replica in open_replicas(job):
        query = f"?trial={replica.trial_id}" if replica.trial_id else ""
        uris.setdefault(replica.trial_id, {})[replica.label] = (
            f"{base.rstrip('/')}/projects/{job.project.project_id}/jobs/{job.job_id}/shell/{replica.label}/{query}"
        )
    return uris


def add_web_access_uris(job: Job, output: dict) -> None:
    """``trainingOutput.webAccessUris`` (and each trial's) while the job's shells are open."""
    if job.state != JobState.RUNNING or not (job.training_input or {}).get("enableWebAccess"):
        return
    uris = web_access_uris(job)
    if "" in uris:
        output["webAccessUris"] = uris[""]
    for trial in output.get("trials") or []:
        if isinstance(trial, dict) and trial.get("trialId") in uris:
            trial["webAccessUris"] = uris[trial["trialId"]]


def replica_to_open(job: Job, label: str, trial_id: str = "") -> Replica:
    if not (job.training_input or {}).get("enableWebAccess"):
        raise Refused(
            f"Job {job.job_id} was not submitted with web access (trainingInput.enableWebAccess): "
            "its replicas offer no shell.",
            4404,
        )
    for replica in open_replicas(job):
        if replica.label == label and replica.trial_id == trial_id:
            return replica
    what = f"{label} of trial {trial_id}" if trial_id else label
    raise Refused(f"{what} is not running: a shell opens into a replica while it runs.", 4410)


def start(job: Job, replica: Replica, user) -> WebAccessSession:
    """The session's row and its audit entry; its recording is named after it."""
    session = WebAccessSession.objects.create(
        job=job,
        replica_label=replica.label,
        trial_id=replica.trial_id,
        user=user,
        principal=audit.principal_of(user),
    )
    session.recording = f"{job.pk}/{session.pk}.cast"
    session.save(update_fields=["recording"])
    _audit(CONNECT, job, session, actor=user, replica=replica.label, trial=replica.trial_id)
    return session


def _audit(method: str, job: Job, session: WebAccessSession, *, actor, data_access: bool = False, **data) -> None:
    """The session's entry in the audit log, on its replica's resource name."""
    audit.record(
        actor=actor,
        project=job.project,
        method=method,
        resource_name=resource_name(job, session.replica_label, session.trial_id),
        permission=PERMISSION,
        data_access=data_access,
        service_data={"session": session.pk, **data},
    )


def finish(session_pk: int, *, reason: str, input_bytes: int, output_bytes: int) -> None:
    session = WebAccessSession.objects.select_related("job__project", "user").get(pk=session_pk)
    if session.ended is not None:
        return
    session.ended = timezone.now()
    session.end_reason = reason[:300]
    session.input_bytes, session.output_bytes = input_bytes, output_bytes
    session.save(update_fields=["ended", "end_reason", "input_bytes", "output_bytes"])
    _audit(
        DISCONNECT,
        session.job,
        session,
        actor=session.user or iam.SYSTEM,
        replica=session.replica_label,
        trial=session.trial_id,
        durationSeconds=round((session.ended - session.started).total_seconds(), 1),
        inputBytes=input_bytes,
        outputBytes=output_bytes,
        reason=session.end_reason,
    )


def record_download(job: Job, session: WebAccessSession, *, actor) -> None:
    """A recording's download: a Data Access read, where the project keeps those."""
    _audit(GET_RECORDING, job, session, actor=actor, data_access=True)


def still_admitted(session_key: str | None, user_pk: int, job_pk: int) -> int | None:
    """None while the user may keep the shell open; otherwise the close code (signed out: 4401;
    no longer allowed to change the job: 4403)."""
    user = accounts.session_user(session_key)
    if user is None or user.pk != user_pk:
        return 4401
    job = Job.objects.without_output().select_related("project").filter(pk=job_pk).first()
    if job is None or not may_open(user, job):
        return 4403
    return None


def page_context(job: Job, user) -> dict:
    """What the job page's replicas section shows of web access: which replicas a shell opens into
    (labels by trial id) and the sessions so far with how long each lasted, for those who may open one."""
    if not (job.training_input or {}).get("enableWebAccess"):
        return {"web_access": False}
    allowed = may_open(user, job)
    shells = {r.pk for r in open_replicas(job)} if allowed and job.state == JobState.RUNNING else set()
    return {
        "web_access": True,
        "may_open_shell": allowed,
        "shell_pks": shells,
        "shell_sessions": [(s, _lasted(s)) for s in job.shell_sessions.all()[:50]] if allowed else [],
    }


def _lasted(session: WebAccessSession) -> float | None:
    """How long a session lasted, in seconds (the job page shows it, not its end time); None while open."""
    return (session.ended - session.started).total_seconds() if session.ended else None


def recording_path(session: WebAccessSession) -> Path:
    return Path(settings.DATA_DIR) / RECORDINGS_FOLDER / session.recording


def recordings_folder(job_pk: int) -> Path:
    """Where a job's shell recordings are: in the data dir, which only the console can read."""
    return Path(settings.DATA_DIR) / RECORDINGS_FOLDER / str(job_pk)


def remove_recordings(job_pk: int) -> None:
    """A job's recordings go (its retention ran out, or the job itself went); its sessions stay
    listed, saying they have none."""
    shutil.rmtree(recordings_folder(job_pk), ignore_errors=True)
    WebAccessSession.objects.filter(job_id=job_pk).update(recording="")


def job_deleted(sender, instance: Job, **kwargs) -> None:
    """A deleted job's recordings go with it, once the deletion is committed."""
    job_pk = instance.pk
    transaction.on_commit(lambda: shutil.rmtree(recordings_folder(job_pk), ignore_errors=True))


class Recording:
    """An asciicast v2 file of one session: a header line, then ``[seconds, "o"|"i", text]`` lines.
    Only the console's user can read it; past ``WEB_ACCESS_RECORDING_MAX_BYTES`` it says it was cut
    and records no more."""

    def __init__(self, path: Path, *, rows: int, cols: int, title: str):
        path.parent.mkdir(parents=True, exist_ok=True, mode=0o700)
        descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o600)
        self.file = os.fdopen(descriptor, "w", encoding="utf-8")
        self.started = time.monotonic()
        self.written = 0
        self.full = False
        self.decoders = {kind: codecs.getincrementaldecoder("utf-8")("replace") for kind in "io"}
        self._line({"version": 2, "width": cols, "height": rows, "timestamp": int(time.time()), "title": title})

    def _line(self, content) -> None:
        text = json.dumps(content, ensure_ascii=False) + "\n"
        self.written += len(text)
        self.file.write(text)

    def add(self, kind: str, data: bytes) -> None:
        if self.full or self.file.closed:
            return
        text = self.decoders[kind].decode(data)
        if not text:
            return
        if self.written + len(text) > settings.WEB_ACCESS_RECORDING_MAX_BYTES:
            self.full = True
            cut = "\r\n[The recording stops here: it reached AICONSOLE_WEB_ACCESS_RECORDING_MAX_MB.]\r\n"
            self._line([round(time.monotonic() - self.started, 3), "o", cut])
            return
        self._line([round(time.monotonic() - self.started, 3), kind, text])

    def close(self) -> None:
        if not self.file.closed:
            self.file.close()
