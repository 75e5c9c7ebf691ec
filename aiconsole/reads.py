"""Reads on a few long-lived SQLite connections, for the code every API request runs.

Under ASGI, Django runs each request's synchronous code in a thread of its own, so every request
opens a database connection and closes it at the end; with the embedded SQLite that, and
compiling ORM queries, costs more than a bearer-token read of a jobs page or a prediction does.
The few reads every such request makes (the token's user in ``tokens.authenticate_bearer``, the
caller's role bindings in ``iam``, and the rows the ASGI fronts answer from) run here instead:
raw SQL built from the models' metadata, on one pool of read-only connections shared by every
thread. Rows become ordinary model instances (fields not read stay deferred).

On PostgreSQL, or inside a transaction (tests, services), every read goes through Django's own
connection, so it sees what the transaction wrote. Writes always use Django's connection.
"""

from __future__ import annotations

import queue
import sqlite3
from contextlib import contextmanager
from datetime import UTC
from functools import lru_cache

from django.db import DEFAULT_DB_ALIAS, connection, connections, models
from django.utils.dateparse import parse_datetime

ALIAS = DEFAULT_DB_ALIAS
_pool: queue.SimpleQueue = queue.SimpleQueue()
_pool_name: list[str] = [""]


def attnames(cls) -> dict:
    """A model's concrete fields by attname (``project_id``, not ``project``)."""
    return {f.attname: f for f in cls._meta.concrete_fields}


def columns(cls, names, alias: str = "") -> str:
    """The SQL column list for some of a model's fields, optionally qualified by a table alias."""
    fields = attnames(cls)
    prefix = f"{alias}." if alias else ""
    return ", ".join(prefix + fields[name].column for name in names)


@lru_cache(maxsize=64)
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
    """Text from a pooled connection, a naive datetime from Django's SQLite cursor (stored as UTC),
    an aware one from PostgreSQL: always an aware datetime, as the ORM gives."""
    moment = parse_datetime(value) if isinstance(value, str) else value
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def instance(cls, names: tuple[str, ...], values):
    """A model instance from some of its fields' database values (the others deferred)."""
    ordered, positions, converters = _layout(cls, tuple(names))
    row = [values[i] if convert is None else convert(values[i])
           for i, convert in zip(positions, converters, strict=True)]
    return cls.from_db(ALIAS, ordered, row)


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
def cursor():
    """A cursor taking ``%s`` parameters: a pooled SQLite connection, or Django's own."""
    if not _shared():
        with connection.cursor() as django_cursor:
            yield django_cursor
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
