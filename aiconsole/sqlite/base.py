"""Django's SQLite backend, with a small pool of open connections per process.

Django opens a database connection for each request and closes it at the end (``CONN_MAX_AGE`` 0,
as it must be under ASGI, where every request's code runs on a thread of its own). For SQLite an
open is not the cheap part of a request it is for a server: the file is opened, Django registers
its thirty-odd SQL functions and runs its pragmas, and this console's WAL pragmas follow. Measured on a
bearer-token ``jobs.list`` page, that is about a fifth of the whole request (BENCHMARKS.md).

So a connection Django closes goes back to a pool instead, and the next connection Django opens
in this process takes it: Django's own bookkeeping (``connect()``, autocommit, the
``connection_created`` signal) runs as for a new one; only the file's open and the per-connection
set-up are skipped. A connection is pooled only when it is clean: no transaction open, constraint
checks on, not broken, and still pointing at the same file (a test database deleted and made
again under the same name is a new file). A forked child never uses its parent's connections.
"""

from __future__ import annotations

import os
import threading
from typing import Any

from django.db.backends.sqlite3 import base

POOL_SIZE = 8


class _Pool:
    """Idle connections to one database file, for this process only."""

    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.idle: list[tuple[Any, tuple[int, int]]] = []
        self.pid = os.getpid()

    def take(self, identity: tuple[int, int] | None):
        with self.lock:
            if self.pid != os.getpid():  # a forked child: the parent's connections are not its own
                self.idle, self.pid = [], os.getpid()
            while self.idle:
                connection, file = self.idle.pop()
                if file == identity:
                    return connection
                connection.close()
        return None

    def give(self, connection, identity: tuple[int, int]) -> bool:
        with self.lock:
            if self.pid != os.getpid() or len(self.idle) >= POOL_SIZE:
                return False
            self.idle.append((connection, identity))
            return True


_pools: dict[str, _Pool] = {}
_pools_lock = threading.Lock()


def _pool(name: str) -> _Pool:
    with _pools_lock:
        return _pools.setdefault(name, _Pool())


def _identity(name: str) -> tuple[int, int] | None:
    try:
        info = os.stat(name)
    except OSError:
        return None
    return info.st_dev, info.st_ino


class DatabaseWrapper(base.DatabaseWrapper):
    """SQLite as Django has it, reusing the connections this process closed."""

    def _pooled(self) -> bool:
        return not self.is_in_memory_db()

    def get_new_connection(self, conn_params):
        if self._pooled():
            name = str(self.settings_dict["NAME"])
            connection = _pool(name).take(_identity(name))
            if connection is not None:
                return connection
        return super().get_new_connection(conn_params)

    def _close(self):
        connection = self.connection
        if connection is not None and self._pooled() and self._reusable(connection):
            name = str(self.settings_dict["NAME"])
            identity = _identity(name)
            if identity is not None and _pool(name).give(connection, identity):
                return
        super()._close()

    def _reusable(self, connection) -> bool:
        """Clean enough for the next request: no open transaction, and Django's state says so."""
        if self.in_atomic_block or self.needs_rollback or self.errors_occurred:
            return False
        if connection.in_transaction:
            return False
        # Django turns foreign keys off around schema changes and loaddata; never hand that on.
        return connection.execute("PRAGMA foreign_keys").fetchone() == (1,)
