"""The reads of jobs.list's fast path (``jobs.asgi``), on ``models_registry.hotpath``'s connections.

Raw SQL built from the models' metadata; rows become ordinary model instances (the fields that
``job_resource`` does not read stay deferred). Permission is ``iam``'s: the caller's project-level
RoleBinding rows mapped through ``iam.ROLES``, and platform admins through ``iam.is_platform_admin``.
"""

from __future__ import annotations

from aiconsole import iam
from aiconsole.models import Project, RoleBinding
from jobs.models import Job
from models_registry import hotpath

PROJECT_FIELDS = ("id", "project_id", "project_number", "data_access_logs")
JOB_FIELDS = ("id", "project_id", "job_id", "training_input", "prediction_input", "training_output", "state",
              "error_message", "labels", "etag", "priority", "create_time", "start_time", "end_time")
LIST_PERMISSIONS = ("ml.jobs.list", "ml.jobs.get")
_sql: dict[str, str] = {}


def _columns(cls, names) -> str:
    fields = hotpath.attnames(cls)
    return ", ".join(fields[name].column for name in names)


def project(project_id: str) -> Project | None:
    if "project" not in _sql:
        _sql["project"] = (f"SELECT {_columns(Project, PROJECT_FIELDS)} FROM {Project._meta.db_table} "
                           "WHERE project_id = %s")
    with hotpath._cursor() as cursor:
        cursor.execute(_sql["project"], [project_id])
        row = cursor.fetchone()
    return hotpath.instance(Project, PROJECT_FIELDS, row) if row else None


def project_roles(user, project: Project) -> set[str]:
    if "roles" not in _sql:
        columns = hotpath.attnames(RoleBinding)
        _sql["roles"] = (f"SELECT {columns['role'].column} FROM {RoleBinding._meta.db_table} "
                         f"WHERE {columns['user_id'].column} = %s AND {columns['project_id'].column} = %s "
                         f"AND {columns['resource_type'].column} = %s")
    roles = {iam.ADMIN_ROLE} if iam.is_platform_admin(user) else set()
    with hotpath._cursor() as cursor:
        cursor.execute(_sql["roles"], [user.pk, project.pk, RoleBinding.ResourceType.PROJECT])
        roles.update(role for (role,) in cursor.fetchall())
    return roles


def sees_every_job(user, project: Project) -> bool:
    """Whether the caller may list the project's jobs and get every one of them (the view's
    ``list_jobs`` then scopes nothing away)."""
    granted: set[str] = set()
    for role in project_roles(user, project):
        if role in iam.ROLES:
            granted |= iam.ROLES[role].permissions
    return all(permission in granted for permission in LIST_PERMISSIONS)


def jobs_page(project: Project, limit: int, after: int | None) -> list[Job]:
    """Up to ``limit`` of the project's jobs, newest first, with ids below ``after``."""
    key = f"page:{after is not None}"
    if key not in _sql:
        where = "project_id = %s" + (" AND id < %s" if after is not None else "")
        _sql[key] = (f"SELECT {_columns(Job, JOB_FIELDS)} FROM {Job._meta.db_table} WHERE {where} "
                     "ORDER BY id DESC LIMIT %s")
    params = [project.pk, *([after] if after is not None else []), limit]
    with hotpath._cursor() as cursor:
        cursor.execute(_sql[key], params)
        rows = cursor.fetchall()
    jobs = [hotpath.instance(Job, JOB_FIELDS, row) for row in rows]
    for job in jobs:
        job.project = project
    return jobs
