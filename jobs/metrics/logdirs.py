"""Which folder a job's TensorBoard reads, and whether it has anything to show."""

from __future__ import annotations

import logging

from aiconsole import storage
from jobs.metrics import tfevents
from jobs.models import Job, MetricPoint, MetricSource

logger = logging.getLogger(__name__)

LOCAL_WALK_ENTRIES = 2000  # the job page's look for an event file, at most
GCS_LISTED_OBJECTS = 1000


class NoLogdir(Exception):
    """The job (or trial) has no job dir TensorBoard could read; the message says why."""


def logdir_for(job: Job, trial_id: str = "") -> str:
    """The job dir (``<jobDir>/<trialId>`` for a trial), a resolved local path or a ``gs://`` URI.

    A local one must lie in the job's project area, as when the job ran."""
    job_dir = (job.training_input or {}).get("jobDir")
    if not job_dir:
        raise NoLogdir(f"Job {job.job_id} has no job directory (jobDir), so there is nothing for TensorBoard.")
    if trial_id:
        if not job.trials.filter(trial_id=trial_id).exists():
            raise NoLogdir(f"Job {job.job_id} has no trial {trial_id}.")
        job_dir = f"{job_dir.rstrip('/')}/{trial_id}"
    if storage.is_gcs_uri(job_dir):
        return job_dir
    try:
        return str(storage.resolve_local_path(job_dir, project=job.project, must_exist=False))
    except storage.StorageError as error:
        raise NoLogdir(str(error)) from None


def has_event_files(job: Job) -> bool:
    """Whether TensorBoard would show something: summaries were read while the job ran, or an
    event file lies under its job dir now (a bounded look)."""
    if MetricPoint.objects.filter(job=job, source=MetricSource.TFEVENTS).exists():
        return True
    try:
        logdir = logdir_for(job)
    except NoLogdir:
        return False
    if storage.is_gcs_uri(logdir):
        return _gcs_has_event_files(logdir)
    from pathlib import Path

    return next(tfevents.find_event_files(Path(logdir), LOCAL_WALK_ENTRIES), None) is not None


def _gcs_has_event_files(uri: str) -> bool:
    try:
        bucket, prefix = storage.parse_gcs_uri(uri, require_object=False)
        blobs = storage.gcs_client().list_blobs(
            bucket, prefix=prefix.rstrip("/") + "/" if prefix else None, max_results=GCS_LISTED_OBJECTS, timeout=5
        )
        return any(tfevents.EVENT_FILE_PREFIX in blob.name.rsplit("/", 1)[-1] for blob in blobs)
    except Exception as error:  # an unreachable bucket must not break the job page
        logger.info("Could not look for event files under %s: %s", uri, error)
        return False
