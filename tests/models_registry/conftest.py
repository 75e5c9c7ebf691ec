"""Real models for the registry's tests, trained by the runtime environment's own Python.

The test process has no scikit-learn or XGBoost; the runtime environment (built once, cached in
~/.cache/aiconsole/test-envs) has both, so a tiny training script runs there and writes model
files, and the predictions it expects, into the server's storage root.
"""

from __future__ import annotations

import json
import subprocess
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from tests.helpers.models import TRAIN


@pytest.fixture(autouse=True)
def _no_prewarming(settings):
    """Tests start serving environments when they deploy, never behind a test's back."""
    settings.MODEL_PREWARM = False


@pytest.fixture(scope="session")
def runtime_python() -> Path:
    from jobs.executor import environments

    return environments.runtime_environment("2.11", lambda message: None).python


@pytest.fixture(scope="session")
def trained(runtime_python) -> dict:
    """Model folders (sklearn, linear, xgboost, broken, empty, tensorflow) and what they predict."""
    root = settings.STORAGE_DIR / "test-models" / "project-a"
    if not (root / "expected.json").exists():
        script = root.parent / "train_models.py"
        root.mkdir(parents=True, exist_ok=True)
        script.write_text(textwrap.dedent(TRAIN))
        subprocess.run([str(runtime_python), "-I", str(script), str(root)], check=True, timeout=300,
                       capture_output=True)
    info = json.loads((root / "expected.json").read_text())
    return {"root": root, "probe": info["probe"], "expected": info["predictions"],
            **{name: str(root / name) for name in ("sklearn", "linear", "xgboost", "broken", "empty", "tensorflow")}}


@pytest.fixture(scope="session")
def _serving_session():
    yield
    from models_registry.serving import supervisor

    supervisor.stop()


@pytest.fixture
def serving(_serving_session, transactional_db):
    """The console's serving supervisor; each test's serving processes are stopped after it (the
    runtime's zygote stays up for the session: it is what makes later cold starts fast)."""
    from models_registry.serving import supervisor

    instance = supervisor.start()
    yield instance
    instance.pause()  # its database goes away with the test
    for pk in list(instance.pools):
        instance.retire(pk)


