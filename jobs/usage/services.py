"""Usage and retention services: a project's usage by day and user (for those who may list its
jobs), every project's (for platform admins), and a project's retention (set by platform admins).
Reads are audited as Data Access, changes as Admin Activity."""

from __future__ import annotations

import datetime as dt

from django.db import transaction
from django.db.models import Q
from django.utils import timezone

from aiconsole import audit, iam
from aiconsole.errors import FieldViolation, InvalidArgument
from aiconsole.models import Project, ProjectRetention
from jobs import catalogue
from jobs.models import Job
from jobs.usage import disk
from jobs.usage.reckoning import Figures, Span, job_days

USAGE_METHOD = "aiconsole.v1.UsageService.GetUsage"
RETENTION_METHOD = "aiconsole.v1.RetentionService.SetRetention"
DEFAULT_DAYS = 30
MAX_DAYS = 366  # one answer covers at most a year, so a request cannot ask for every day since 1970
KEEP_LABEL = ("keep", "true")


def parse_window(start: str | None, end: str | None, *, today: dt.date | None = None) -> tuple[dt.date, dt.date]:
    """``from`` and ``to`` (YYYY-MM-DD, inclusive); by default the last 30 days to today."""
    today = today or timezone.now().astimezone(dt.UTC).date()
    try:
        last = dt.date.fromisoformat(end) if end else today
    except ValueError:
        raise InvalidArgument.from_violations([FieldViolation("to", "Expected a date as YYYY-MM-DD.")]) from None
    try:
        first = dt.date.fromisoformat(start) if start else last - dt.timedelta(days=DEFAULT_DAYS - 1)
    except ValueError:
        raise InvalidArgument.from_violations([FieldViolation("from", "Expected a date as YYYY-MM-DD.")]) from None
    if first > last:
        raise InvalidArgument.from_violations([FieldViolation("from", "Must not be after 'to'.")])
    if (last - first).days >= MAX_DAYS:
        raise InvalidArgument.from_violations([FieldViolation("from", f"At most {MAX_DAYS} days in one request.")])
    return first, last


def _spans(job: Job, now: dt.datetime) -> list[Span]:
    """The job's replicas as they ran; where it kept none (or none started), its planned replicas
    over the job's own start and end."""
    ran = []
    for r in job.replicas.all():
        if r.start_time is not None:
            plan = catalogue.ReplicaPlan(
                r.task_type, r.task_index, r.machine_type, r.accelerator_type or None, r.accelerator_count
            )
            ran.append(Span(plan, r.start_time, r.end_time or now))
    if ran:
        return ran
    if not job.training_input or job.start_time is None:
        return []
    try:
        plans = catalogue.replica_plan(job.training_input)
    except (KeyError, ValueError, TypeError):
        return []
    return [Span(plan, job.start_time, job.end_time or now) for plan in plans]


def _rows(projects: list[Project], first: dt.date, last: dt.date) -> list[dict]:
    """One row per (day, project, user) that used anything, oldest day first."""
    now = timezone.now()
    window_start = dt.datetime.combine(first, dt.time(), tzinfo=dt.UTC)
    window_end = dt.datetime.combine(last, dt.time(), tzinfo=dt.UTC) + dt.timedelta(days=1)
    jobs = (
        Job.objects.filter(project__in=projects, start_time__isnull=False, start_time__lt=window_end)
        .filter(Q(end_time__isnull=True) | Q(end_time__gte=window_start))
        .select_related("project", "created_by")
        .prefetch_related("replicas")
        .defer("runner", "prediction_input")
    )
    table: dict[tuple[dt.date, str, str], Figures] = {}
    for job in jobs.iterator(chunk_size=500):
        user = job.created_by.get_username() if job.created_by else ""
        days = job_days(job.job_id, _spans(job, now), recorded_ml_units=job.consumed_ml_units, first=first, last=last)
        for day, figures in days.items():
            table.setdefault((day, job.project.project_id, user), Figures()).add(figures)
    return [
        {"date": day.isoformat(), "project": project, "user": user, **figures.as_dict()}
        for (day, project, user), figures in sorted(table.items())
    ]


def _totals(rows: list[dict]) -> dict:
    totals: dict = {"mlUnits": 0.0, "cpuHours": 0.0, "acceleratorHours": 0.0}
    for row in rows:
        for key in totals:
            totals[key] += row[key]
    return {
        "mlUnits": catalogue.round_ml_units(totals["mlUnits"]),
        "cpuHours": round(totals["cpuHours"], 4),
        "acceleratorHours": round(totals["acceleratorHours"], 4),
    }


def _record_read(project: Project, actor, first: dt.date, last: dt.date) -> None:
    audit.record(
        actor=actor,
        project=project,
        method=USAGE_METHOD,
        resource_name=f"{project.resource_name}/usage",
        permission="ml.jobs.list",
        data_access=True,
        request={"from": first.isoformat(), "to": last.isoformat()},
    )


def project_usage(project: Project, first: dt.date, last: dt.date, *, actor) -> dict:
    """A project's usage per day and user, its totals and the disk space it holds; for those who may
    list its jobs (404 to those with no role in it, 403 to the others)."""
    audit.authorize(actor, "ml.jobs.list", project, method=USAGE_METHOD, data_access=True)
    _record_read(project, actor, first, last)
    rows = _rows([project], first, last)
    return {
        "project": project.project_id,
        "from": first.isoformat(),
        "to": last.isoformat(),
        "rows": rows,
        "totals": _totals(rows),
        "disk": disk.project_disk(project),
    }


def all_usage(first: dt.date, last: dt.date, *, actor) -> dict:
    """Every project's usage: platform admins only (404 to everyone else, who cannot know of it)."""
    if not iam.is_platform_admin(actor):
        raise iam.NotFound("usage")
    projects = list(Project.objects.all())
    for project in projects:
        _record_read(project, actor, first, last)
    rows = _rows(projects, first, last)
    return {"from": first.isoformat(), "to": last.isoformat(), "rows": rows, "totals": _totals(rows)}


def retention_of(project: Project) -> ProjectRetention:
    """The project's retention (unsaved, keeping everything, when none was set)."""
    return ProjectRetention.objects.filter(project=project).first() or ProjectRetention(project=project)


def set_retention(project: Project, days: int, protect_label: str = "", *, actor) -> ProjectRetention:
    """Set how many days after a job ends its records and job dir are kept (0: for ever), and a label
    that protects a job from that (besides ``keep=true``). Platform admins only."""
    if not iam.is_platform_admin(actor):
        audit.authorize(actor, "resourcemanager.projects.setIamPolicy", project, method=RETENTION_METHOD)
        raise iam.PermissionDenied("aiconsole.retention.set", f"{project.resource_name}/retention")
    violations = []
    if not isinstance(days, int) or isinstance(days, bool) or not 0 <= days <= 36500:
        violations.append(FieldViolation("retention.days", "A whole number of days from 0 (keep) to 36500."))
    protect_label = (protect_label or "").strip()
    if len(protect_label) > 63:
        violations.append(FieldViolation("retention.protect_label", "At most 63 characters."))
    if violations:
        raise InvalidArgument.from_violations(violations)
    with transaction.atomic():
        retention, _ = ProjectRetention.objects.update_or_create(
            project=project, defaults={"days": days, "protect_label": protect_label}
        )
        audit.record(
            actor=actor,
            project=project,
            method=RETENTION_METHOD,
            resource_name=f"{project.resource_name}/retention",
            permission="resourcemanager.projects.setIamPolicy",
            request={"days": days, "protectLabel": protect_label},
        )
    return retention


def is_protected(labels: dict | None, protect_label: str) -> bool:
    """``keep=true``, or any value of the label the project's admin named."""
    labels = labels or {}
    return str(labels.get(KEEP_LABEL[0], "")).lower() == KEEP_LABEL[1] or bool(
        protect_label and protect_label in labels
    )
