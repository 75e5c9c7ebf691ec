"""Saved model files for the prediction tests and bench/models.py: ``TRAIN`` is a script, run with
a runtime's Python and a folder, that saves scikit-learn, linear and XGBoost models there (and a
broken pickle, an empty folder and a fake SavedModel), with the predictions each must give for its
probe rows in ``expected.json``."""

from __future__ import annotations

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
