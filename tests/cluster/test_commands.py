"""``aiconsole web`` and ``aiconsole worker`` refuse to start without scaled mode's services."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

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
