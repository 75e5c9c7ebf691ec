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

from tests.conftest import wait_for

TRAIN = """
import json, pickle, sys, warnings
from pathlib import Path

import joblib
import numpy as np
import xgboost as xgb
from sklearn.linear_model import LinearRegression, LogisticRegression

warnings.simplefilter("ignore")
root = Path(sys.argv[1])
rng = np.random.default_rng(7)
X = rng.random((200, 4))
y_class = (X[:, 0] + X[:, 1] > 1.0).astype(int)
y_value = X @ np.array([1.5, -2.0, 0.5, 3.0]) + 0.25
probe = [[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.3, 0.4], [0.5, 0.5, 0.5, 0.5]]
expected = {}

def save(folder, name, writer):
    (root / folder).mkdir(parents=True, exist_ok=True)
    writer(root / folder / name)

classifier = LogisticRegression().fit(X, y_class)
save("sklearn", "model.joblib", lambda p: joblib.dump(classifier, p))
expected["sklearn"] = classifier.predict(probe).tolist()

linear = LinearRegression().fit(X, y_value)
save("linear", "model.pkl", lambda p: p.write_bytes(pickle.dumps(linear)))
expected["linear"] = linear.predict(probe).tolist()

booster = xgb.train({"max_depth": 3, "objective": "binary:logistic"}, xgb.DMatrix(X, label=y_class), 10)
save("xgboost", "model.bst", lambda p: booster.save_model(str(p.with_suffix(".json"))) or
     p.with_suffix(".json").rename(p))
expected["xgboost"] = booster.inplace_predict(np.asarray(probe, dtype=np.float32)).tolist()

save("broken", "model.pkl", lambda p: p.write_bytes(b"this is not a pickle"))
save("empty", "README.txt", lambda p: p.write_text("no model here"))
save("tensorflow", "saved_model.pb", lambda p: p.write_bytes(b"not really a SavedModel"))
(root / "expected.json").write_text(json.dumps({"probe": probe, "predictions": expected}))
"""


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


def wait_version(version, states=("READY", "FAILED"), timeout: float = 120):
    from models_registry.models import Version

    wait_for(lambda: Version.objects.get(pk=version.pk).state in states, timeout,
             message=f"version {version.name} to reach {states}")
    version.refresh_from_db()
    return version


def deploy(model, name: str, uri: str, actor, **fields):
    """Create a version and wait for its operation to finish; returns (version, operation)."""
    from models_registry import services
    from models_registry.models import Operation, Version

    operation = services.create_version(model, {"name": name, "deploymentUri": uri, **fields}, actor=actor)
    wait_for(lambda: Operation.objects.get(pk=operation.pk).done, 120, message=f"the operation creating {name}")
    operation.refresh_from_db()
    version = Version.objects.get(model=model, name=name)
    return version, operation
