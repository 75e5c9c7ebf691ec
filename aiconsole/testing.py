"""Loaded by pytest before Django's settings (``-p aiconsole.testing`` in pyproject).

Settings are read once from the environment, so the test run's data dir must be chosen before
pytest-django imports them: a fresh temporary data dir per run, and a persistent cache for the
built Python environments (building a runtime stack is minutes cold, seconds warm).
"""

import os
import shutil
import sys
import tempfile
from pathlib import Path

# The suite starts a hundred-odd Python processes of the project's (consoles, CLI commands, Django
# snippets), and each test worker rewrites and imports every test module: where the environment says
# PYTHONDONTWRITEBYTECODE (some shells and CI images do), every one of them compiled the same
# modules again. The suite keeps its bytecode caches (__pycache__, which git ignores) whatever the
# caller's setting: BENCHMARKS.md has the fast lane's time with and without.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# The suite's own process holds gRPC clients and servers (the Vertex tests) and forks with a
# preexec_fn (the executor's trainers, CLI commands under limits): with gRPC's fork handlers on,
# such a child could abort before it ran ("epoll_wait error: Bad file descriptor"). The console
# keeps gRPC out of processes that fork; the suite turns the handlers off.
os.environ.setdefault("GRPC_ENABLE_FORK_SUPPORT", "false")

# As the console's entry points do (console.cli.server): what the suite's console writes is
# private to it, so tests see the permissions a real console gives its files.
os.umask(0o077)

_MADE_DATA_DIR: str | None = None  # the data dir this process made, removed when its run ends

if "AICONSOLE_TEST_KEEP_ENV" not in os.environ:
    for name in ("AICONSOLE_DATABASE_URL", "AICONSOLE_REDIS_URL", "AICONSOLE_EXECUTOR"):
        os.environ.pop(name, None)
    _MADE_DATA_DIR = os.environ["AICONSOLE_DATA_DIR"] = tempfile.mkdtemp(prefix="aiconsole-test-")
    if os.geteuid() == 0:
        # As root, trainers run as an unprivileged user (aiconsole.trainer_user), which must reach
        # the environments: not under root's home, which is private.
        cache = Path("/var/cache/aiconsole")
        cache.mkdir(parents=True, exist_ok=True)
        cache.chmod(0o755)
        os.environ.setdefault("AICONSOLE_ENV_DIR", str(cache / "test-envs"))
    else:
        cache_home = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache"))
        os.environ.setdefault("AICONSOLE_ENV_DIR", str(cache_home / "aiconsole" / "test-envs"))
    os.environ.setdefault("AICONSOLE_STOP_GRACE_SECONDS", "3")
    # Tests that count a job's points count its own: the ones about sampled resource use turn it on.
    os.environ.setdefault("AICONSOLE_SYSTEM_METRICS_SECONDS", "0")
    os.environ.setdefault("AICONSOLE_SECRET_KEY", "test-secret-key-that-trainers-must-never-see")

# As the console's entry points do before Django starts (aiconsole.datadir).
from aiconsole import datadir  # noqa: E402

datadir.prepare()


def pytest_unconfigure(config) -> None:
    """The run's data dir goes with it, after the session's fixtures have stopped its consoles and
    removed its trainer accounts (tests/conftest.py): a test worker's holds some 350 MB (the metric
    flood inputs, trained models, job dirs), and every run left its own behind."""
    if _MADE_DATA_DIR:
        shutil.rmtree(_MADE_DATA_DIR, ignore_errors=True)
