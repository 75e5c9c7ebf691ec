"""The one read of an online prediction beyond the caller: the project, model and version it
names, in a single query on ``aiconsole.reads``' connections (the token's user is read by
``tokens.authenticate_bearer``, the roles by ``iam``, both on the same connections).

Rows become ordinary model instances (the fields a prediction does not read stay deferred); on
PostgreSQL, or inside a transaction (tests), the read goes through Django's connection.
"""

from __future__ import annotations

from aiconsole import reads
from aiconsole.models import Project
from models_registry.models import Model, Version

# The fields a prediction reads, by attname: loaded in one query, the rest stays deferred.
TARGET_FIELDS = (
    ("v", Version, ("id", "name", "state", "error_message", "etag", "local_dir", "model_file", "framework",
                    "runtime_version", "python_version", "machine_type", "auto_scaling", "manual_scaling",
                    "request_logging_config", "model_id")),
    ("m", Model, ("id", "name", "project_id", "default_version_id", "online_prediction_logging",
                  "online_prediction_console_logging", "etag")),
    ("p", Project, ("id", "project_id", "project_number", "data_access_logs")),
)
_sql: dict[str, str] = {}


def _target_sql(with_version: bool) -> str:
    key = f"target:{with_version}"
    if key not in _sql:
        columns = ", ".join(f"{alias}.{reads.attnames(cls)[name].column}" for alias, cls, names in TARGET_FIELDS
                            for name in names)
        join = "v.model_id = m.id AND v.name = %s" if with_version else "v.id = m.default_version_id"
        _sql[key] = (f"SELECT {columns} FROM {Model._meta.db_table} m "
                     f"JOIN {Project._meta.db_table} p ON p.id = m.project_id "
                     f"LEFT JOIN {Version._meta.db_table} v ON {join} WHERE p.project_id = %s AND m.name = %s")
    return _sql[key]


def target(project_id: str, model_name: str, version_name: str | None) -> tuple[Model, Version | None] | None:
    """(model, named version or None) with the model's default version attached; None when the
    model, or the named version, does not exist."""
    with_version = version_name is not None
    params = [version_name, project_id, model_name] if with_version else [project_id, model_name]
    with reads.cursor() as cursor:
        cursor.execute(_target_sql(with_version), params)
        row = cursor.fetchone()
    if row is None:
        return None
    loaded, offset = {}, 0
    for alias, cls, names in TARGET_FIELDS:
        values = row[offset:offset + len(names)]
        loaded[alias] = reads.instance(cls, names, values) if values[0] is not None else None
        offset += len(names)
    model, version = loaded["m"], loaded["v"]
    model.project = loaded["p"]
    if version is not None:
        version.model = model
    if not with_version:
        model.default_version = version
        return model, None
    return (model, version) if version is not None else None
