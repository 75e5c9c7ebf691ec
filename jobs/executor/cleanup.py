"""Cleaning up after jobs: each project's retention (``aiconsole.models.ProjectRetention``), and
the jobs' environment layers nobody used for ``settings.ENVIRONMENT_RETENTION_DAYS``.

Past a project's retention after a job ended, its log lines, its metric points, the job dir the
console made for it (``<work dir>/<project>/<job id>``) and the recordings of the shells opened into
its replicas (``jobs.webaccess``) go, unless the job carries ``keep=true`` or
the label its project's admin named. ``plan`` lists what would go and the space it frees (the dry
run, ``aiconsole gc --dry-run``); ``run`` deletes exactly that, each item checked again under the
job's row lock (a job labelled or started again in between keeps everything) and audited as the
console's own Admin Activity. A job that has not ended is never touched, and a job dir is removed
from a descriptor of its project's folder, never through a link. The worker runs it once a day
(``housekeeping.AuditRetention``).
"""

from __future__ import annotations

import datetime as dt
import logging
import os
import shutil
import threading
from dataclasses import asdict, dataclass
from pathlib import Path

from django.conf import settings
from django.db import transaction
from django.db.models import Count, Sum
from django.db.models.functions import Length
from django.utils import timezone

from aiconsole import audit, beneath, iam
from aiconsole.models import Project, ProjectRetention
from jobs.executor import environments
from jobs.models import TERMINAL_STATES, Job, LogLine, MetricPoint
from jobs.usage import disk
from jobs.usage.services import is_protected
from jobs.webaccess import sessions as web_access

logger = logging.getLogger(__name__)

METHOD = "aiconsole.v1.RetentionService.Delete"
LOGS, METRICS, JOB_DIR, ENVIRONMENT = "logLines", "metricPoints", "jobDir", "environment"
SHELL_RECORDINGS = "shellRecordings"
ROW_OVERHEAD_BYTES = 48  # a row's ids, times and index entries, besides its text: an estimate


@dataclass(frozen=True)
class Item:
    """One thing the clean-up removes: a job's log lines or metric points (``count`` rows), its job
    dir, or an environment layer; ``bytes`` is what it frees (estimated for rows)."""

    project: str
    kind: str
    target: str
    count: int
    bytes: int
    job_pk: int = 0  # the job whose records these are (0 for an environment)

    def as_dict(self) -> dict:
        shown = asdict(self)
        del shown["job_pk"]
        return shown


def _job_dir(job: Job) -> Path:
    return Path(settings.WORK_DIR) / job.project.project_id / job.job_id


def _expired_jobs(retention: ProjectRetention, now: dt.datetime):
    cutoff = now - dt.timedelta(days=retention.days)
    jobs = Job.objects.filter(project=retention.project, state__in=TERMINAL_STATES, end_time__lt=cutoff)
    jobs = jobs.select_related("project").only("pk", "job_id", "labels", "state", "end_time", "project__project_id")
    return [job for job in jobs.order_by("pk") if not is_protected(job.labels, retention.protect_label)]


def _job_items(job: Job) -> list[Item]:
    items = []
    project = job.project.project_id
    logs = LogLine.objects.filter(job=job).aggregate(n=Count("pk"), text=Sum(Length("message")))
    if logs["n"]:
        size = (logs["text"] or 0) + ROW_OVERHEAD_BYTES * logs["n"]
        items.append(Item(project, LOGS, job.resource_name, logs["n"], size, job.pk))
    points = MetricPoint.objects.filter(job=job).aggregate(n=Count("pk"), text=Sum(Length("tag")))
    if points["n"]:
        size = (points["text"] or 0) + ROW_OVERHEAD_BYTES * points["n"]
        items.append(Item(project, METRICS, job.resource_name, points["n"], size, job.pk))
    folder = _job_dir(job)
    if folder.is_dir() and not folder.is_symlink():
        items.append(Item(project, JOB_DIR, str(folder), 0, disk.folder_size(folder)[0], job.pk))
    recordings = web_access.recordings_folder(job.pk)
    if recordings.is_dir():
        size, count = disk.folder_size(recordings)[0], sum(1 for _ in recordings.iterdir())
        items.append(Item(project, SHELL_RECORDINGS, str(recordings), count, size, job.pk))
    return items


def _environments_before(now: dt.datetime) -> float | None:
    """Layers last used before this (seconds since the epoch) are unused: past the retention, and
    before any job still waiting or running was made (each job touches its layer as it prepares)."""
    days = settings.ENVIRONMENT_RETENTION_DAYS
    if not days:
        return None
    before = (now - dt.timedelta(days=days)).timestamp()
    oldest = (
        Job.objects.exclude(state__in=TERMINAL_STATES).order_by("create_time").values_list("create_time", flat=True)
    )
    first = oldest.first()
    return min(before, first.timestamp()) if first is not None else before


def plan(*, now: dt.datetime | None = None, project: Project | None = None) -> list[Item]:
    """What the clean-up would remove now (the dry run)."""
    now = now or timezone.now()
    retentions = ProjectRetention.objects.filter(days__gt=0).select_related("project")
    if project is not None:
        retentions = retentions.filter(project=project)
    items = [item for retention in retentions for job in _expired_jobs(retention, now) for item in _job_items(job)]
    before = _environments_before(now)
    if project is None and before is not None:
        items += [Item("", ENVIRONMENT, str(path), 0, size) for path, size in environments.unused_job_layers(before)]
    return items


def _still_expired(job_pk: int, now: dt.datetime) -> Job | None:
    """The job under its row lock, if it still may lose its records (not labelled, not restarted)."""
    job = Job.objects.select_for_update().select_related("project").filter(pk=job_pk).first()
    if job is None or job.state not in TERMINAL_STATES or job.end_time is None:
        return None
    retention = ProjectRetention.objects.filter(project=job.project).first()
    if retention is None or not retention.days or job.end_time >= now - dt.timedelta(days=retention.days):
        return None
    return None if is_protected(job.labels, retention.protect_label) else job


def _remove_job_dir(job: Job) -> None:
    work = Path(settings.WORK_DIR)
    with beneath.folder(work, work / job.project.project_id) as parent:
        shutil.rmtree(job.job_id, dir_fd=parent)  # fd-based: a link inside is removed, never followed


def _delete(item: Item, now: dt.datetime, before: float | None) -> bool:
    if item.kind == ENVIRONMENT:
        return before is not None and environments.remove_job_layer(Path(item.target), before)
    with transaction.atomic():
        job = _still_expired(item.job_pk, now)
        if job is None:
            return False
        if item.kind == LOGS:
            LogLine.objects.filter(job=job).delete()
        elif item.kind == METRICS:
            MetricPoint.objects.filter(job=job).delete()
        elif item.kind == SHELL_RECORDINGS:
            web_access.remove_recordings(job.pk)
        else:
            _remove_job_dir(job)
    return True


def _audit(item: Item, actor) -> None:
    project = Project.objects.filter(project_id=item.project).first() if item.project else None
    audit.record(
        actor=actor,
        project=project,
        method=METHOD,
        resource_name=item.target if item.kind != ENVIRONMENT else f"environments/{os.path.basename(item.target)}",
        permission="aiconsole.retention.delete",
        request={"kind": item.kind},
        response={"count": item.count, "bytes": item.bytes},
    )


def run(
    *,
    actor=iam.SYSTEM,
    now: dt.datetime | None = None,
    project: Project | None = None,
    stopping: threading.Event | None = None,
) -> list[Item]:
    """Remove what ``plan`` lists (what changed since is kept); each removal audited. The removed.
    ``stopping``, once set, ends it before the next removal."""
    now = now or timezone.now()
    items = plan(now=now, project=project)
    before = _environments_before(now)
    removed = []
    for item in items:
        if stopping is not None and stopping.is_set():
            break
        try:
            done = _delete(item, now, before)
        except OSError as error:
            logger.warning("Clean-up could not remove %s: %s", item.target, error)
            continue
        if done:
            _audit(item, actor)
            removed.append(item)
    if removed:
        logger.info("Clean-up removed %d items, %d bytes", len(removed), sum(item.bytes for item in removed))
    return removed
