"""The audit log on a real PostgreSQL: the append-only trigger, the purge through it, the chain lock.

Each run makes a scratch database on the PostgreSQL at 127.0.0.1:5432 (trust auth, as on
developer machines and in CI) and drives the console against it as an operator would: the
``aiconsole`` executable, plus a short Python session for what needs a clock in the past. Without
PostgreSQL these tests skip, except in CI (``CI=true``), where its absence is a failure.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import uuid
from pathlib import Path

import pytest

pytestmark = pytest.mark.slow  # starts servers and processes: left out of the fast lane

psycopg = pytest.importorskip("psycopg")

SERVER = "postgresql://postgres@127.0.0.1:5432/"
AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def database_url():
    try:
        admin = psycopg.connect(SERVER + "postgres", autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as error:
        if os.environ.get("CI") == "true":
            pytest.fail(f"PostgreSQL must be running at 127.0.0.1:5432 in CI: {error}")
        pytest.skip(f"no PostgreSQL at 127.0.0.1:5432: {error}")
    name = f"aiconsole_audit_{uuid.uuid4().hex[:12]}"
    admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield SERVER + name
    finally:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
        admin.close()


@pytest.fixture(scope="module")
def console(database_url, tmp_path_factory):
    """Run ``aiconsole …`` or a Python snippet with Django set up, against the scratch database."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        {
            "AICONSOLE_DATA_DIR": str(tmp_path_factory.mktemp("pg-data")),
            "AICONSOLE_DATABASE_URL": database_url,
            "DJANGO_SETTINGS_MODULE": "console.settings",
        }
    )

    class Console:
        def __call__(self, *argv: str) -> subprocess.CompletedProcess:
            return subprocess.run([AICONSOLE, *argv], capture_output=True, text=True, env=env, timeout=120)

        def python(self, source: str) -> str:
            code = "import django\ndjango.setup()\n" + textwrap.dedent(source)
            done = subprocess.run(
                [sys.executable, "-c", code], capture_output=True, text=True, env=env, cwd=ROOT, timeout=120
            )
            assert done.returncode == 0, done.stderr
            return done.stdout

    run = Console()
    for argv in (
        ("users", "create", "alice", "--email", "alice@example.com"),
        ("projects", "create", "census-team"),
        ("projects", "add-iam-policy-binding", "census-team", "--member=user:alice", "--role=roles/ml.admin"),
    ):
        done = run(*argv)
        assert done.returncode == 0, done.stderr
    return run


@pytest.fixture
def sql(database_url):
    with psycopg.connect(database_url, autocommit=True) as connection:
        yield connection


def count(sql) -> int:
    return sql.execute("SELECT count(*) FROM aiconsole_auditentry").fetchone()[0]


def test_trigger_refuses_update(console, sql):
    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only: UPDATE refused"):
        sql.execute("UPDATE aiconsole_auditentry SET principal = 'mallory@example.com'")

    assert (
        sql.execute("SELECT count(*) FROM aiconsole_auditentry WHERE principal = 'mallory@example.com'").fetchone()[0]
        == 0
    )
    assert console("audit", "verify").returncode == 0


def test_trigger_refuses_delete(console, sql):
    before = count(sql)

    with pytest.raises(psycopg.errors.InsufficientPrivilege, match="append-only: DELETE refused"):
        sql.execute("DELETE FROM aiconsole_auditentry")

    assert count(sql) == before > 0
    assert console("audit", "verify").returncode == 0


def test_the_consoles_own_connection_cannot_update_either(console):
    out = console.python("""
        from django.db import connection
        from aiconsole.models import AuditEntry
        try:
            with connection.cursor() as cursor:
                cursor.execute("UPDATE aiconsole_auditentry SET granted = false")
        except Exception as error:
            print(type(error).__name__, error)
    """)

    assert out.startswith("ProgrammingError audit entries are append-only")


def test_purge_deletes_old_entries_through_the_trigger_and_the_chain_still_verifies(console, sql):
    console.python("""
        from datetime import timedelta
        from unittest.mock import patch
        from django.utils import timezone
        from aiconsole import audit, iam
        from aiconsole.models import Project

        project = Project.objects.get(project_id="census-team")
        project.data_access_logs = True
        project.save()
        with patch("django.utils.timezone.now", return_value=timezone.now() - timedelta(days=45)):
            for n in range(3):
                audit.record(actor=iam.SYSTEM, project=project, method="google.cloud.ml.v1.JobService.GetJob",
                             resource_name="projects/census-team/jobs/j", permission="ml.jobs.get",
                             data_access=True, request={"n": n})
        audit.record(actor=iam.SYSTEM, project=project, method="google.cloud.ml.v1.JobService.ListJobs",
                     resource_name="projects/census-team", permission="ml.jobs.list", data_access=True)
    """)

    purged = console("audit", "purge")

    assert purged.returncode == 0, purged.stderr
    assert "Removed 3 Data Access entries older than 30 days." in purged.stdout
    assert sql.execute("SELECT method_name FROM aiconsole_auditentry WHERE log_type = 'data_access'").fetchall() == [
        ("google.cloud.ml.v1.JobService.ListJobs",)
    ]
    verified = console("audit", "verify")
    assert verified.returncode == 0, verified.stderr
    # The purge's permission ended with its transaction.
    with pytest.raises(psycopg.errors.InsufficientPrivilege):
        sql.execute("DELETE FROM aiconsole_auditentry WHERE log_type = 'data_access'")


def test_concurrent_writers_keep_one_chain(console):
    out = console.python("""
        import threading
        from django.db import connection
        from aiconsole import audit, iam
        from aiconsole.models import Project

        project = Project.objects.get(project_id="census-team")
        start = threading.Barrier(4)

        def write():
            start.wait(timeout=30)
            for n in range(15):
                audit.record(actor=iam.SYSTEM, project=project, method="google.cloud.ml.v1.JobService.CreateJob",
                             resource_name=project.resource_name, permission="ml.jobs.create", request={"n": n})
            connection.close()

        writers = [threading.Thread(target=write) for _ in range(4)]
        for writer in writers:
            writer.start()
        for writer in writers:
            writer.join()
        print(audit.verify_chain())
    """)

    assert out.strip() == "[]"


def test_tampering_done_as_the_database_owner_is_still_caught(console, sql):
    # Whoever may drop the trigger can edit rows; the keyed chain is what tells.
    sql.execute("ALTER TABLE aiconsole_auditentry DISABLE TRIGGER aiconsole_audit_append_only")
    try:
        sql.execute(
            "UPDATE aiconsole_auditentry SET principal = 'mallory@example.com' "
            "WHERE id = (SELECT min(id) FROM aiconsole_auditentry WHERE log_type = 'activity')"
        )
    finally:
        sql.execute("ALTER TABLE aiconsole_auditentry ENABLE TRIGGER aiconsole_audit_append_only")

    verified = console("audit", "verify")

    assert verified.returncode == 1
    assert "(position 1) was altered" in verified.stderr
