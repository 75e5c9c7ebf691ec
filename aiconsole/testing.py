"""Loaded by pytest before Django's settings (``-p aiconsole.testing`` in pyproject).

Settings are read once from the environment, so the test run's data dir must be chosen before
pytest-django imports them: a fresh temporary data dir per run, and a persistent cache for the
built Python environments (building a runtime stack is minutes cold, seconds warm).
"""

import os
import tempfile
from pathlib import Path

if "AICONSOLE_TEST_KEEP_ENV" not in os.environ:
    for name in ("AICONSOLE_DATABASE_URL", "AICONSOLE_REDIS_URL", "AICONSOLE_EXECUTOR"):
        os.environ.pop(name, None)
    os.environ["AICONSOLE_DATA_DIR"] = tempfile.mkdtemp(prefix="aiconsole-test-")
    cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
    os.environ.setdefault("AICONSOLE_ENV_DIR", str(cache_home / "aiconsole" / "test-envs"))
    os.environ.setdefault("AICONSOLE_STOP_GRACE_SECONDS", "3")
    os.environ.setdefault("AICONSOLE_SECRET_KEY", "test-secret-key-that-trainers-must-never-see")
