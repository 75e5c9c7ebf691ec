"""The reads of jobs.list's fast path (``jobs.asgi``), on ``aiconsole.reads``' connections.

Raw SQL built from the models' metadata; rows become ordinary model instances (the fields that
``job_resource`` does not read stay deferred). Who may list is not decided here: ``iam.can``.
"""

from __future__ import annotations

from aiconsole import reads
from aiconsole.models import Project
from jobs.models import Job

PROJECT_FIELDS = ("id", "project_id", "project_number", "data_access_logs")
JOB_FIELDS = ("id", "project_id", "job_id", "training_input", "prediction_input", "training_output", "state",
              "error_message", "labels", "etag", "priority", "create_time", "start_time", "end_time")
_sql: dict[str, str] = {}


def project(project_id: str) -> Project | None:
    if "project" not in _sql:
        _sql["project"] = (f"SELECT {reads.columns(Project, PROJECT_FIELDS)} FROM {Project._meta.db_table} "
                           "WHERE project_id = %s")
    with reads.cursor() as cursor:
        cursor.execute(_sql["project"], [project_id])
        row = cursor.fetchone()
    return reads.instance(Project, PROJECT_FIELDS, row) if row else None


def jobs_page(project: Project, limit: int, after: int | None) -> list[Job]:
    """Up to ``limit`` of the project's jobs, newest first, with ids below ``after``."""
    key = f"page:{after is not None}"
    if key not in _sql:
        where = "project_id = %s" + (" AND id < %s" if after is not None else "")
        _sql[key] = (f"SELECT {reads.columns(Job, JOB_FIELDS)} FROM {Job._meta.db_table} WHERE {where} "
                     "ORDER BY id DESC LIMIT %s")
    params = [project.pk, *([after] if after is not None else []), limit]
    with reads.cursor() as cursor:
        cursor.execute(_sql[key], params)
        rows = cursor.fetchall()
    jobs = [reads.instance(Job, JOB_FIELDS, row) for row in rows]
    for job in jobs:
        job.project = project
    return jobs
