"""Training-job services: every write and audited read of jobs goes through here.

Each function checks permission through IAM, changes state inside a transaction, writes the
audit entry in that same transaction and publishes events after commit. HTML views, the REST
API, the CLI and the executor are thin adapters around these functions.
"""

from __future__ import annotations

import itertools
import os
import re
from pathlib import Path

from django.conf import settings
from django.db import IntegrityError, transaction

from aiconsole import archives, audit, events, iam, storage
from aiconsole.errors import (
    Aborted,
    AlreadyExists,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
)
from aiconsole.models import Project
from jobs import catalogue, dispatch, filters, kinds, runtimes, validation
from jobs.models import Job
from jobs.quotas import admission as quotas
from jobs.wire import job_resource

JOB_SERVICE = "google.cloud.ml.v1.JobService"
CREATE_JOB = f"{JOB_SERVICE}.CreateJob"
DUPLICATE_JOB = "A job with this id already exists."


def _validate(body: dict) -> dict:
    try:
        return validation.validate_job(body)
    except validation.SpecError as error:
        raise InvalidArgument(error.message, error.violations) from None


def check_training_input(training_input: dict, *, project: Project, actor) -> None:
    """What submitting a training job checks beyond the v1 schema (every training kind's ``check``):
    its paths and runtime here, then each feature's own (``kinds.register_submission_check``)."""
    _check_local_paths(training_input, project)
    _check_runtime_available(training_input)
    for check in kinds.submission_checks():
        violations = check(training_input, project=project)
        if violations:
            raise InvalidArgument.from_violations(violations)


def _check_local_paths(training_input: dict, project: Project) -> None:
    """Local package paths and job dirs must lie in the project's storage area (or a shared root),
    and gs:// ones name a valid bucket and object (the rule deploymentUri gets): checked up front."""
    violations = []
    for index, uri in enumerate(training_input.get("packageUris", [])):
        try:
            if storage.is_gcs_uri(uri):
                storage.parse_gcs_uri(uri)
            else:
                storage.resolve_local_path(uri, project=project)
        except storage.StorageError as error:
            violations.append(FieldViolation(f"job.training_input.package_uris[{index}]", str(error)))
    job_dir = training_input.get("jobDir")
    if job_dir:
        try:
            if storage.is_gcs_uri(job_dir):
                storage.parse_gcs_uri(job_dir, require_object=False)
            else:
                storage.resolve_local_path(job_dir, must_exist=False, project=project)
        except storage.StorageError as error:
            violations.append(FieldViolation("job.training_input.job_dir", str(error)))
    if violations:
        raise InvalidArgument.from_violations(violations)


def _check_runtime_available(training_input: dict) -> None:
    """The job's runtime/Python pair must be runnable here: refused now, not failed later."""
    if (training_input.get("masterConfig") or {}).get("imageUri"):
        return  # a container (or a built-in algorithm) brings its own runtime
    reason = runtimes.unavailable_reason(training_input.get("runtimeVersion"), training_input.get("pythonVersion"))
    if reason:
        raise InvalidArgument.from_violations([FieldViolation("job.training_input.python_version", reason)])


def authorize_submit(project: Project, *, actor, method: str = CREATE_JOB, service_name: str | None = None) -> None:
    """Refuse, with the audit entry a refused ``submit_job`` writes, someone who may not create jobs.

    For an adapter that does work before ``submit_job`` (the console form stores its upload
    first), so a refused submit is audited as CreateJob however it arrives.
    """
    audit.authorize(actor, "ml.jobs.create", project, method=method, service_name=service_name)


def submit_job(
    project: Project,
    body: dict,
    *,
    actor,
    cloned_from: str = "",
    method: str = CREATE_JOB,
    service_name: str | None = None,
    audit_request: dict | None = None,
    on_create=None,
) -> Job:
    """Create a job from a v1 Job body; it waits QUEUED until the executor takes it.

    ``cloned_from``: the id of the project's job the console's form was filled from (a clone or a
    resumed study), kept on the new job when the caller may read that job. Another API that creates
    the engine's jobs (``jobs.vertex``) names its own audit ``method``, ``service_name`` and
    ``audit_request``, and ``on_create(job)``, called inside the transaction, adds its own rows and
    returns the response the audit entry records.
    """
    authorize_submit(project, actor=actor, method=method, service_name=service_name)
    job_body = _validate(body)
    training_input = job_body.get("trainingInput")
    prediction_input = job_body.get("predictionInput")
    kind = kinds.of(training_input, prediction_input)
    kind.check(job_body[kind.input_field], project=project, actor=actor)
    # One that can never fit its project's quota is refused now, not left waiting for ever.
    quotas.check_submission(Job(project=project, training_input=training_input, prediction_input=prediction_input))
    try:
        with transaction.atomic():
            job = Job.objects.create(
                project=project,
                job_id=job_body["jobId"],
                training_input=training_input,
                prediction_input=prediction_input,
                labels=job_body.get("labels", {}),
                priority=int(((training_input or {}).get("scheduling") or {}).get("priority", 0)),
                created_by=actor,
                cloned_from=_readable_source(project, cloned_from, actor),
            )
            iam.grant(actor, "roles/ml.jobOwner", job)
            response = on_create(job) if on_create is not None else job_resource(job)
            request = audit_request or {"parent": project.resource_name, "job": body}
            audit.record(
                actor=actor,
                project=project,
                method=method,
                resource_name=request.get("parent", project.resource_name),  # the parent, as Create… entries do
                permission="ml.jobs.create",
                request=request,
                response=response,
                service_name=service_name,
            )
            _announce(job)
    except IntegrityError:
        raise AlreadyExists(
            f"Field: job.job_id Error: {DUPLICATE_JOB}",
            [FieldViolation("job.job_id", DUPLICATE_JOB)],
        ) from None
    return job


def _readable_source(project: Project, job_id: str, actor) -> str:
    """``job_id`` when it names a job of ``project`` the actor may read, else nothing: a forged or
    stale source is dropped, never shown as a link to a job the reader cannot see."""
    source = Job.objects.filter(project=project, job_id=job_id).first() if job_id else None
    return job_id if source is not None and iam.can(actor, "ml.jobs.get", source) else ""


def upload_package(project: Project, filename: str, stream, *, actor) -> dict:
    """Store an uploaded trainer package after checking it is a safe, real package.

    The REST upload and the console's submit form both call this: the same inspection, the same
    refusals naming the file, the same audit entry.
    """

    method = "aiconsole.PackageService.UploadPackage"
    audit.authorize(actor, "ml.jobs.create", project, method=method)
    path = _save_upload(project, filename, stream)
    try:
        info = archives.inspect_package(path, filename=filename)
    except archives.ArchiveError as error:
        path.unlink(missing_ok=True)
        path.parent.rmdir()
        raise InvalidArgument(str(error), [FieldViolation("body", str(error))]) from None
    package = {
        "uri": str(path),
        "name": path.name,
        "sizeBytes": str(path.stat().st_size),
        "sha256": storage.file_digest(path),
        "kind": info.kind,
        "modules": sorted(info.modules)[:50],
    }
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=project.resource_name,
        permission="ml.jobs.create",
        request={"name": filename},
        response=package,
    )
    return package


def upload_data_file(project: Project, filename: str, stream, *, actor) -> dict:
    """Store a data file (a built-in algorithm's training CSV) to name in a job's arguments.

    Its content is checked when the job that uses it is submitted (``jobs.builtin.algorithm``), as for a
    file already in storage.
    """

    method = "aiconsole.DataService.UploadDataFile"
    audit.authorize(actor, "ml.jobs.create", project, method=method)
    path = _save_upload(project, filename, stream)
    uploaded = {
        "uri": str(path),
        "name": path.name,
        "sizeBytes": str(path.stat().st_size),
        "sha256": storage.file_digest(path),
    }
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=project.resource_name,
        permission="ml.jobs.create",
        request={"name": filename},
        response=uploaded,
    )
    return uploaded


def _save_upload(project: Project, filename: str, stream):
    try:
        return storage.save_upload(stream, filename, project=project.project_id)
    except storage.StorageError as error:
        raise InvalidArgument(str(error), [FieldViolation("name", str(error))]) from None


def cancel_job(
    job: Job,
    *,
    actor,
    method: str = f"{JOB_SERVICE}.CancelJob",
    service_name: str | None = None,
    resource_name: str | None = None,
) -> Job:
    """Cancel a job that has not finished; a finished one is a FAILED_PRECONDITION. Another API
    (``jobs.vertex``) names its audit ``method``, ``service_name`` and the job's ``resource_name``."""
    audit.authorize(actor, "ml.jobs.cancel", job, method=method, service_name=service_name)
    resource_name = resource_name or job.resource_name
    with transaction.atomic():
        if not job.request_cancel():
            raise FailedPrecondition(
                f"Job {job.job_id} cannot be cancelled: it is already in the terminal state {job.state}."
                if job.is_terminal
                else f"Job {job.job_id} is already being cancelled."
            )
        audit.record(
            actor=actor,
            project=job.project,
            method=method,
            resource_name=resource_name,
            permission="ml.jobs.cancel",
            request={"name": resource_name},
            service_name=service_name,
        )
        _announce(job)
    return job


UPDATABLE_FIELDS = {"labels", "etag"}


def update_job(job: Job, body: dict, update_mask: str, *, actor) -> Job:
    """projects.jobs.patch: only labels may change; an etag in the mask must match."""
    method = f"{JOB_SERVICE}.UpdateJob"
    audit.authorize(actor, "ml.jobs.update", job, method=method)
    paths = [p.strip() for p in update_mask.split(",") if p.strip()]
    if not paths:
        raise InvalidArgument.from_violations(
            [FieldViolation("update_mask", "The update mask is required; updatable fields: labels, etag.")]
        )
    unknown = [p for p in paths if p not in UPDATABLE_FIELDS]
    if unknown:
        raise InvalidArgument.from_violations(
            [
                FieldViolation("update_mask", f"Field {p!r} cannot be updated; updatable fields: labels, etag.")
                for p in unknown
            ]
        )
    labels = body.get("labels") or {}
    violations = validation.validate_labels(labels, "job.labels")
    if violations:
        raise InvalidArgument.from_violations(violations)
    with transaction.atomic():
        current = Job.objects.select_for_update().get(pk=job.pk)
        if "etag" in paths and body.get("etag") and body["etag"] != current.etag:
            raise Aborted(
                f"The etag {body['etag']!r} does not match the job's current etag: "
                "the job changed since it was read. Read it again and retry."
            )
        if "labels" in paths:
            current.touch_labels(labels)
        _audit_patch(actor, job, update_mask, body, job_resource(current))
    job.refresh_from_db()
    return job


def _audit_patch(actor, job: Job, update_mask: str, body: dict, response: dict) -> None:
    """A change to a job, audited as ``projects.jobs.patch`` with the fields it names."""
    audit.record(
        actor=actor,
        project=job.project,
        method=f"{JOB_SERVICE}.UpdateJob",
        resource_name=job.resource_name,
        permission="ml.jobs.update",
        request={"name": job.resource_name, "updateMask": update_mask, "job": body},
        response=response,
    )


NOTE_MAX_CHARS = 500


def update_job_annotations(job: Job, *, labels: dict | None, note: str | None, actor) -> tuple[Job, list[str]]:
    """The job page's one Save: its labels and its note together, each only where it changed (None:
    not given); a refusal of either (InvalidArgument, its field ``job.labels`` or ``job.note``) saves
    neither. The job as it is now, and what changed ("labels", "note")."""
    audit.authorize(actor, "ml.jobs.update", job, method=f"{JOB_SERVICE}.UpdateJob")  # even when nothing changes
    changed = []
    with transaction.atomic():
        if labels is not None and labels != (job.labels or {}):
            job = update_job(job, {"labels": labels}, "labels", actor=actor)
            changed.append("labels")
        if note is not None and normalized_note(note) != job.note:
            job = update_job_note(job, note, actor=actor)
            changed.append("note")
    return job, changed


def normalized_note(note: str) -> str:
    """A note as it is stored: its ends trimmed, its line breaks ``\\n``."""
    return note.strip().replace("\r\n", "\n")


def update_job_note(job: Job, note: str, *, actor) -> Job:
    """The console's note on a job (not a v1 field), for whoever may patch the job: audited as a patch
    of ``note``, as a label change is audited as a patch of ``labels``."""
    method = f"{JOB_SERVICE}.UpdateJob"
    audit.authorize(actor, "ml.jobs.update", job, method=method)
    note = normalized_note(note)
    if len(note) > NOTE_MAX_CHARS:
        raise InvalidArgument.from_violations(
            [FieldViolation("job.note", f"A note is at most {NOTE_MAX_CHARS} characters; this one has {len(note)}.")]
        )
    if "\x00" in note:
        raise InvalidArgument.from_violations([FieldViolation("job.note", "A note cannot hold a NUL character.")])
    with transaction.atomic():
        current = Job.objects.select_for_update().get(pk=job.pk)
        current.note = note
        current.save(update_fields=["note"])
        _audit_patch(actor, job, "note", {"note": note}, {"name": job.resource_name, "note": note})
    job.note = note
    return job


def get_job(project: Project, job_id: str, *, actor, audited: bool = True, without_output: bool = False) -> Job:
    """One job, for someone holding ml.jobs.get on it (audited as Data Access).

    ``audited=False`` is for a page refreshing what it already showed (status, new log lines):
    the permission is still checked, but a tab left open does not write an entry every second.
    ``without_output=True`` leaves its trainingOutput to be read when used (``Job.objects.without_output``).
    """
    method = f"{JOB_SERVICE}.GetJob"
    job = find_job(project, job_id, actor=actor, without_output=without_output)
    audit.authorize(actor, "ml.jobs.get", job, method=method, data_access=True)
    if not audited:
        return job
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=job.resource_name,
        permission="ml.jobs.get",
        data_access=True,
    )
    return job


LOGGING_SERVICE = "google.logging.v2.LoggingServiceV2"


def record_log_read(job: Job, *, actor, via: str) -> None:
    """A read of a job's log (download, stream, API) as a Data Access entry, when enabled.

    Callers have already checked ml.jobs.get; follow-up pages of the same read are not recorded,
    so an open stream does not write an entry per batch.
    """
    audit.record(
        actor=actor,
        project=job.project,
        method=f"{LOGGING_SERVICE}.ListLogEntries",
        resource_name=f"{job.resource_name}/logs",
        permission="ml.jobs.get",
        data_access=True,
        request={"resourceNames": [job.resource_name], "via": via},
    )


def list_jobs(project: Project, *, actor, filter_text: str = ""):
    """The project's jobs the caller may see, newest first, narrowed by a list filter."""
    method = f"{JOB_SERVICE}.ListJobs"
    if not iam.can(actor, "ml.jobs.list", project):
        # Job-level owners may still list the jobs they own.
        if not iam.can_see_project(actor, project):
            raise iam.NotFound(project.resource_name)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=project.resource_name,
        permission="ml.jobs.list",
        data_access=True,
    )
    jobs = Job.objects.filter(project=project).visible_to(actor, "ml.jobs.get").defer("runner", "restarts")
    return filters.narrow(jobs, filter_text)


def find_job(project: Project, job_id: str, *, actor, without_output: bool = False) -> Job:
    """Look a job up; missing and invisible look the same to outsiders (404)."""
    jobs = Job.objects.without_output() if without_output else Job.objects.all()
    job = jobs.select_related("project").filter(project=project, job_id=job_id).first()
    if job is None:
        if not iam.can_see_project(actor, project):
            raise iam.NotFound(project.resource_name)
        raise iam.NotFound(f"{project.resource_name}/jobs/{job_id}")
    return job


def runtime_versions() -> list[dict]:
    """Every runtime version, its Pythons, and whether each pair can run on this installation."""
    answer = []
    for runtime in runtimes.RUNTIMES.values():
        pythons = []
        for python in runtime.accepted_pythons:
            reason = runtimes.unavailable_reason(runtime.name, python)
            pythons.append(
                {"pythonVersion": python, "available": reason is None, **({"reason": reason} if reason else {})}
            )
        answer.append(
            {
                "runtimeVersion": runtime.name,
                "tensorflowVersion": runtime.tensorflow,
                "default": runtime.name == catalogue.DEFAULT_RUNTIME_VERSION,
                "defaultPythonVersion": runtimes.default_python(runtime),
                "extension": runtime.is_extension,
                "frameworks": runtime.frameworks(),
                "notes": list(runtime.notes),
                "pythonVersions": pythons,
            }
        )
    return answer


def _announce(job: Job) -> None:
    payload = {"type": "job.state", "job": job.pk, "state": job.state}
    events.publish(events.group_for_job(job.pk), payload)
    events.publish(events.group_for_project_jobs(job.project_id), payload)
    dispatch.job_changed(job.pk)


def announce_state(job: Job) -> None:
    """Used by the executor after it moves a job along (outside any user call)."""
    payload = {"type": "job.state", "job": job.pk, "state": job.state}
    events.send_now(events.group_for_job(job.pk), payload)
    events.send_now(events.group_for_project_jobs(job.project_id), payload)


_UPLOAD_REF = re.compile(r"[0-9a-f]{16}/[A-Za-z0-9_+-][A-Za-z0-9._+-]*")


def upload_ref(uri: str) -> str:
    """How a form names a package it stored (``<token>/<file name>``), never the server path."""
    path = Path(uri)
    return f"{path.parent.name}/{path.name}"


def kept_upload(project: Project, ref: str) -> dict | None:
    """A package ``upload_package`` stored for this project, by its ``upload_ref``; None if gone."""
    if not _UPLOAD_REF.fullmatch(ref or ""):
        return None
    path = Path(settings.STORAGE_DIR).resolve() / "packages" / project.project_id / ref
    if not path.is_file() or path.is_symlink():
        return None
    return {"uri": str(path), "ref": ref, "name": path.name, "size": path.stat().st_size}


PACKAGE_SUFFIXES = (".tar.gz", ".tgz", ".tar.bz2", ".tar.xz", ".tar", ".zip", ".whl")  # what upload_package takes
UPLOADS_OFFERED = 50  # the newest packages the submit form offers again
UPLOADS_SCANNED = 5000  # a project's upload folders read to find them, at most


def uploaded_packages(project: Project, *, limit: int = UPLOADS_OFFERED) -> list[dict]:
    """The trainer packages ``upload_package`` stored for ``project``, newest first, as ``kept_upload``
    describes them plus when (``uploaded``, seconds since the epoch): what the submit form offers to
    use again instead of a new upload. Read from the project's upload folder, never through a link."""
    root = Path(settings.STORAGE_DIR).resolve() / "packages" / project.project_id
    found: list[dict] = []
    try:
        folders = list(itertools.islice(os.scandir(root), UPLOADS_SCANNED))
    except OSError:
        return []
    for folder in folders:
        if not folder.is_dir(follow_symlinks=False):
            continue
        try:
            files = [entry for entry in os.scandir(folder.path) if entry.is_file(follow_symlinks=False)]
        except OSError:
            continue
        for entry in files:
            ref = f"{folder.name}/{entry.name}"
            if _UPLOAD_REF.fullmatch(ref) and entry.name.lower().endswith(PACKAGE_SUFFIXES):
                stat = entry.stat(follow_symlinks=False)
                found.append({"ref": ref, "name": entry.name, "size": stat.st_size, "uploaded": stat.st_mtime})
    found.sort(key=lambda package: (-package["uploaded"], package["name"]))
    return found[:limit]


def uploaded_name(uri: str, project: Project) -> str | None:
    """The file name of a package the console stored for ``project`` (to show instead of its path)."""
    if not isinstance(uri, str) or storage.is_gcs_uri(uri):
        return None
    root = Path(settings.STORAGE_DIR).resolve() / "packages" / project.project_id
    path = Path(uri.removeprefix("file://"))
    return path.name if path.parent.parent == root else None
