"""Training-job services: every write and audited read of jobs goes through here.

Each function checks permission through IAM, changes state inside a transaction, writes the
audit entry in that same transaction and publishes events after commit. HTML views, the REST
API, the CLI and the executor are thin adapters around these functions.
"""

from __future__ import annotations

from django.db import IntegrityError, transaction

from aiconsole import audit, events, iam, storage
from aiconsole.errors import AlreadyExists, FailedPrecondition, FieldViolation, InvalidArgument
from aiconsole.models import Project
from jobs import dispatch, spec
from jobs.models import Job
from jobs.resources import job_resource

JOB_SERVICE = "google.cloud.ml.v1.JobService"
DUPLICATE_JOB = "A job with this id already exists."


def _validate(body: dict) -> dict:
    try:
        return spec.validate_job(body)
    except spec.SpecError as error:
        raise InvalidArgument(error.message, error.violations) from None


def _check_local_paths(training_input: dict) -> None:
    """Local package paths and job dirs must lie inside the storage roots: checked up front."""
    violations = []
    for index, uri in enumerate(training_input.get("packageUris", [])):
        if storage.is_gcs_uri(uri):
            continue
        try:
            storage.resolve_local_path(uri)
        except storage.StorageError as error:
            violations.append(FieldViolation(f"job.training_input.package_uris[{index}]", str(error)))
    job_dir = training_input.get("jobDir")
    if job_dir and not storage.is_gcs_uri(job_dir):
        try:
            storage.resolve_local_path(job_dir, must_exist=False)
        except storage.StorageError as error:
            violations.append(FieldViolation("job.training_input.job_dir", str(error)))
    if violations:
        raise InvalidArgument.from_violations(violations)


def submit_job(project: Project, body: dict, *, actor) -> Job:
    """Create a job from a v1 Job body; it waits QUEUED until the executor takes it."""
    method = f"{JOB_SERVICE}.CreateJob"
    audit.authorize(actor, "ml.jobs.create", project, method=method)
    job_body = _validate(body)
    training_input = job_body.get("trainingInput")
    if training_input is not None:
        _check_local_paths(training_input)
    if training_input is None:
        raise InvalidArgument.from_violations(
            [FieldViolation("job.prediction_input", "Batch prediction jobs are not available on this server yet.")]
        )
    try:
        with transaction.atomic():
            job = Job.objects.create(
                project=project,
                job_id=job_body["jobId"],
                training_input=training_input,
                labels=job_body.get("labels", {}),
                priority=int((training_input.get("scheduling") or {}).get("priority", 0)),
                created_by=actor,
            )
            iam.grant(actor, "roles/ml.jobOwner", job)
            audit.record(
                actor=actor,
                project=project,
                method=method,
                resource_name=project.resource_name,
                permission="ml.jobs.create",
                request={"parent": project.resource_name, "job": body},
                response=job_resource(job),
            )
            _announce(job)
    except IntegrityError:
        raise AlreadyExists(
            f"Field: job.job_id Error: {DUPLICATE_JOB}",
            [FieldViolation("job.job_id", DUPLICATE_JOB)],
        ) from None
    return job


def cancel_job(job: Job, *, actor) -> Job:
    """Cancel a job that has not finished; a finished one is a FAILED_PRECONDITION."""
    method = f"{JOB_SERVICE}.CancelJob"
    audit.authorize(actor, "ml.jobs.cancel", job, method=method)
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
            resource_name=job.resource_name,
            permission="ml.jobs.cancel",
            request={"name": job.resource_name},
        )
        _announce(job)
    return job


def get_job(project: Project, job_id: str, *, actor, audited: bool = True) -> Job:
    """One job, for someone holding ml.jobs.get on it (audited as Data Access).

    ``audited=False`` is for a page refreshing what it already showed (status, new log lines):
    the permission is still checked, but a tab left open does not write an entry every second.
    """
    method = f"{JOB_SERVICE}.GetJob"
    job = find_job(project, job_id, actor=actor)
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


def list_jobs(project: Project, *, actor):
    """The project's jobs the caller may see, newest first."""
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
    return Job.objects.filter(project=project).visible_to(actor, "ml.jobs.get").select_related("project")


def find_job(project: Project, job_id: str, *, actor) -> Job:
    """Look a job up; missing and invisible look the same to outsiders (404)."""
    job = Job.objects.select_related("project").filter(project=project, job_id=job_id).first()
    if job is None:
        if not iam.can_see_project(actor, project):
            raise iam.NotFound(project.resource_name)
        raise iam.NotFound(f"{project.resource_name}/jobs/{job_id}")
    return job


def find_project(project_id: str, *, actor) -> Project:
    project = Project.objects.filter(project_id=project_id).first()
    if project is None or not iam.can_see_project(actor, project):
        raise iam.NotFound(f"projects/{project_id}")
    return project


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


