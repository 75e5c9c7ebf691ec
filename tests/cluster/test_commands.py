"""``aiconsole web`` and ``aiconsole worker`` refuse to start without scaled mode's services."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))


def run(tmp_path, *argv, **env):
    clean = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    clean.update({"AICONSOLE_DATA_DIR": str(tmp_path), **env})
    return subprocess.run([AICONSOLE, *argv], capture_output=True, text=True, env=clean, timeout=60)


def test_worker_needs_postgresql(tmp_path):
    done = run(tmp_path, "worker", "--region", "us-central1")
    assert done.returncode == 2
    assert "scaled mode needs PostgreSQL: set AICONSOLE_DATABASE_URL" in done.stderr


def test_web_needs_redis(tmp_path):
    done = run(tmp_path, "web", AICONSOLE_DATABASE_URL="postgres://postgres@127.0.0.1:5432/postgres")
    assert done.returncode == 2
    assert "scaled mode needs Redis: set AICONSOLE_REDIS_URL" in done.stderr


@pytest.mark.slow
def test_processes_started_together_on_a_fresh_database_migrate_one_at_a_time(tmp_path):
    from bench.support.cluster import cluster_env, drop_database, scratch_database

    url, admin = scratch_database()
    try:
        code = "from console.cli.server import setup_django, migrate; setup_django(None); migrate(); print('ok')"
        env = cluster_env(tmp_path, url, "redis://127.0.0.1:6379/15")
        processes = [
            subprocess.Popen(
                [sys.executable, "-c", code], env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            )
            for _ in range(3)
        ]
        outcomes = [process.communicate(timeout=300) for process in processes]
        assert [p.returncode for p in processes] == [0, 0, 0], [err[-2000:] for _, err in outcomes]
        assert all(out.strip() == "ok" for out, _ in outcomes)
    finally:
        drop_database(url, admin)
