"""The reads of an online prediction, without Django's per-request database connection.

Under ASGI, Django runs each request's synchronous code in a thread of its own, so every request
opens a database connection and closes it at the end; with the embedded SQLite that, and building
three ORM queries, costs more than everything else a prediction does. A prediction reads three
things: the bearer token's user, the project/model/version it names, and the caller's roles
there. Here they are read with raw SQL (built from the models' metadata) on a few long-lived
SQLite connections shared by the request threads.

Permission stays the one permission layer's: the roles come from the same RoleBinding rows and
mean what ``iam.ROLES`` says, and platform admins are recognised by ``iam.is_platform_admin``; a
grant here is exactly ``iam.can``'s grant (``tests/models_registry/test_hotpath.py`` checks them
against each other for every persona). Anything else goes the ordinary way: a refusal is left to
``audit.authorize`` (audited, worded as everywhere), writes use Django's connection, and on
PostgreSQL, or inside a transaction (tests), every read goes through Django's connection too.
"""

from __future__ import annotations

import queue
import sqlite3
from contextlib import contextmanager
from datetime import UTC
from functools import lru_cache

from django.contrib.auth import get_user_model
from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.utils.dateparse import parse_datetime

from aiconsole import iam
from aiconsole.models import ApiToken, Project, RoleBinding
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
USER_FIELDS = ("is_active", "is_superuser")
_sql: dict[str, str] = {}
_pool: queue.SimpleQueue = queue.SimpleQueue()
_pool_name: list[str] = [""]


def attnames(cls) -> dict:
    return {f.attname: f for f in cls._meta.concrete_fields}


@lru_cache(maxsize=32)
def _layout(cls, names: tuple[str, ...]) -> tuple[list[str], list[int], list]:
    """For building ``cls`` from ``names``' values: the names in field order (what ``from_db``
    wants), where each one's value sits in ``names``, and each one's converter (JSON, booleans)."""
    fields = attnames(cls)
    ordered = [name for name in fields if name in names]
    converters = []
    for name in ordered:
        field = fields[name]
        if isinstance(field, models.JSONField):
            converters.append(lambda value, field=field: field.from_db_value(value, None, connection)
                              if isinstance(value, str | bytes) else value)
        elif isinstance(field, models.BooleanField):
            converters.append(lambda value: bool(value) if value is not None else None)
        elif isinstance(field, models.DateTimeField):
            converters.append(_datetime)  # SQLite hands back text; PostgreSQL a datetime already
        else:
            converters.append(None)
    return ordered, [names.index(name) for name in ordered], converters


def _datetime(value):
    if not isinstance(value, str):
        return value
    moment = parse_datetime(value)
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def instance(cls, names: tuple[str, ...], values):
    """A model instance from some of its fields' database values (the others deferred)."""
    ordered, positions, converters = _layout(cls, tuple(names))
    row = [values[i] if convert is None else convert(values[i]) for i, convert in zip(positions, converters,
                                                                                       strict=True)]
    return cls.from_db(ALIAS, ordered, row)


# --- connections ------------------------------------------------------------------------------------


ALIAS = DEFAULT_DB_ALIAS


@lru_cache(maxsize=1)
def _sqlite() -> bool:
    return connections[ALIAS].vendor == "sqlite"


def _shared() -> bool:
    return _sqlite() and not connections[ALIAS].in_atomic_block


def _open(name: str) -> sqlite3.Connection:
    shared = sqlite3.connect(name, timeout=30, isolation_level=None, check_same_thread=False)
    shared.execute("PRAGMA query_only = ON")
    return shared


@contextmanager
def _cursor():
    """A cursor taking ``%s`` parameters: a shared SQLite connection, or Django's own."""
    if not _shared():
        with connection.cursor() as cursor:
            yield cursor
        return
    name = str(connections[ALIAS].settings_dict["NAME"])
    if _pool_name[0] != name:  # a different database (tests make their own): start over
        _pool_name[0] = name
        while not _pool.empty():
            _pool.get_nowait().close()
    try:
        shared = _pool.get_nowait()
    except queue.Empty:
        shared = _open(name)
    try:
        yield _Cursor(shared)
    finally:
        _pool.put(shared)


class _Cursor:
    def __init__(self, shared: sqlite3.Connection):
        self.shared = shared
        self.rows: list = []

    def execute(self, sql: str, params) -> None:
        self.rows = self.shared.execute(sql.replace("%s", "?"), params).fetchall()

    def fetchone(self):
        return self.rows[0] if self.rows else None

    def fetchall(self) -> list:
        return self.rows


# --- the three reads --------------------------------------------------------------------------------


def _target_sql(with_version: bool) -> str:
    key = f"target:{with_version}"
    if key not in _sql:
        columns = ", ".join(f"{alias}.{attnames(cls)[name].column}" for alias, cls, names in TARGET_FIELDS
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
    with _cursor() as cursor:
        cursor.execute(_target_sql(with_version), params)
        row = cursor.fetchone()
    if row is None:
        return None
    loaded, offset = {}, 0
    for alias, cls, names in TARGET_FIELDS:
        values = row[offset:offset + len(names)]
        loaded[alias] = instance(cls, names, values) if values[0] is not None else None
        offset += len(names)
    model, version = loaded["m"], loaded["v"]
    model.project = loaded["p"]
    if version is not None:
        version.model = model
    if not with_version:
        model.default_version = version
        return model, None
    return (model, version) if version is not None else None


def _user_names() -> list[str]:
    user_model = get_user_model()
    return [user_model._meta.pk.attname, user_model.USERNAME_FIELD, "email", *USER_FIELDS]


def reads_users() -> bool:
    """Whether the user model has the fields read here (a custom one may not)."""
    fields = attnames(get_user_model())
    return all(name in fields for name in _user_names())


def bearer_user(raw: str):
    """``(user, token id)`` for an unrevoked token of an active user, the user with what IAM and
    audit read (the rest deferred); ``(None, None)`` otherwise."""
    user_model = get_user_model()
    fields = attnames(user_model)
    names = _user_names()
    if "token" not in _sql:
        columns = ", ".join(f"u.{fields[name].column}" for name in names)
        _sql["token"] = (f"SELECT t.id, {columns} FROM {ApiToken._meta.db_table} t "
                         f"JOIN {user_model._meta.db_table} u ON u.{user_model._meta.pk.column} = t.user_id "
                         "WHERE t.key_hash = %s AND t.revoked IS NULL")
    from aiconsole.models import hash_token

    with _cursor() as cursor:
        cursor.execute(_sql["token"], [hash_token(raw)])
        row = cursor.fetchone()
    if row is None:
        return None, None
    user = instance(user_model, tuple(names), row[1:])
    return (user, row[0]) if user.is_active else (None, None)


def _roles_sql() -> str:
    if "roles" not in _sql:
        columns = attnames(RoleBinding)
        _sql["roles"] = (
            f"SELECT {columns['role'].column} FROM {RoleBinding._meta.db_table} "
            f"WHERE {columns['user_id'].column} = %s AND {columns['project_id'].column} = %s AND "
            f"({columns['resource_type'].column} = %s OR "
            f"({columns['resource_type'].column} = %s AND {columns['resource_id'].column} = %s))")
    return _sql["roles"]


def can(user, permission: str, model: Model) -> bool:
    """Whether ``iam.can`` would grant ``permission`` on the model (or one of its versions).

    False also means "ask the permission layer": callers then go through ``audit.authorize``.
    """
    if not _shared() or not getattr(user, "is_authenticated", False) or not getattr(user, "is_active", False):
        return False
    roles = {iam.ADMIN_ROLE} if iam.is_platform_admin(user) else set()
    with _cursor() as cursor:
        cursor.execute(_roles_sql(), [user.pk, model.project_id, RoleBinding.ResourceType.PROJECT,
                                      Model.iam_resource_type, model.pk])
        roles.update(role for (role,) in cursor.fetchall())
    return any(permission in iam.ROLES[role].permissions for role in roles if role in iam.ROLES)
