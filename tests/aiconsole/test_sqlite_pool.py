"""The embedded database reuses the connections Django closes, and only clean ones."""

from __future__ import annotations

import os

import pytest
from django.db import connections

from aiconsole.sqlite.base import DatabaseWrapper


@pytest.fixture
def database(tmp_path, django_db_blocker):
    """Connections to a database file of the test's own (not the suite's test database)."""
    path = tmp_path / "pool.sqlite3"
    opened: list[DatabaseWrapper] = []

    def connect() -> DatabaseWrapper:
        wrapper = DatabaseWrapper({**connections.settings["default"], "NAME": str(path)}, alias="pool-test")
        wrapper.ensure_connection()
        opened.append(wrapper)
        return wrapper

    with django_db_blocker.unblock():
        yield connect
        for wrapper in opened:
            wrapper.close()


def test_a_connection_django_closes_serves_the_next_one_opened(database):
    first = database()
    raw = first.connection
    first.close()

    assert database().connection is raw


def test_a_connection_closed_inside_a_transaction_is_not_handed_on(database):
    first = database()
    raw = first.connection
    with first.cursor() as cursor:
        cursor.execute("CREATE TABLE t (x integer)")
    raw.execute("BEGIN")
    raw.execute("INSERT INTO t VALUES (1)")
    first.close()

    second = database()
    assert second.connection is not raw
    with second.cursor() as cursor:
        cursor.execute("SELECT count(*) FROM t")
        assert cursor.fetchone() == (0,)  # the uncommitted row went with its connection


def test_a_connection_with_foreign_keys_off_is_not_handed_on(database):
    first = database()
    raw = first.connection
    first.disable_constraint_checking()
    first.close()

    second = database()
    assert second.connection is not raw
    with second.cursor() as cursor:
        cursor.execute("PRAGMA foreign_keys")
        assert cursor.fetchone() == (1,)


def test_a_database_file_made_again_under_the_same_name_gets_a_new_connection(database, tmp_path):
    first = database()
    with first.cursor() as cursor:
        cursor.execute("CREATE TABLE old_table (x integer)")
    first.close()
    os.remove(tmp_path / "pool.sqlite3")  # as a test run's database is destroyed and created again

    second = database()
    with second.cursor() as cursor:
        cursor.execute("SELECT name FROM sqlite_master WHERE name = 'old_table'")
        assert cursor.fetchall() == []


def test_a_forked_child_opens_its_own_connection(database):
    first = database()
    raw = first.connection
    first.close()

    pid = os.fork()
    if pid == 0:  # the child: the parent's pooled connection must not come back
        try:
            child = database()
            os._exit(0 if child.connection is not raw else 1)
        except BaseException:
            os._exit(2)
    _, status = os.waitpid(pid, 0)
    assert os.waitstatus_to_exitcode(status) == 0
    assert database().connection is raw  # still the parent's to use
