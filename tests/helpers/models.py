"""Saved model files and deployed versions for the prediction tests."""

from __future__ import annotations

from tests.helpers.waiting import wait_for

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


def wait_version(version, states=("READY", "FAILED"), timeout: float = 120):
    from models_registry.models import Version

    wait_for(
        lambda: Version.objects.get(pk=version.pk).state in states,
        timeout,
        message=f"version {version.name} to reach {states}",
    )
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
