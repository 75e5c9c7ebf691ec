"""The built-in linear learner (``gcr.io/cloud-ml-algos/linear_learner_cpu:latest``), on scikit-learn.

Run as ``python -m algorithms.linear_learner --model_type=classification ...``. Trains an
``SGDClassifier`` (logistic loss) or ``SGDRegressor`` (squared loss) with elastic-net
regularisation for ``max_steps`` mini-batches of ``batch_size`` rows, and saves
``model/model.joblib``: a scikit-learn Pipeline (standard scaling, then the linear model) that
takes the prepared feature vector and predicts the original class labels or numbers.
"""

from __future__ import annotations

import numpy as np

from algorithms import trainer
from algorithms.definitions import CLASSIFICATION, LINEAR_LEARNER
from algorithms.table import DataError

ADAPTIVE_FACTOR = 5.0
MIN_RATE_SHARE = 1e-6  # the adaptive rate never falls below this share of --learning_rate


class Linear(trainer.Model):
    def __init__(self, pipeline, classes: list, steps: int):
        self.pipeline = pipeline
        self.classes = classes
        self.steps = steps

    def probabilities(self, x: np.ndarray) -> np.ndarray | None:
        if not self.classes:
            return None
        return self.pipeline.predict_proba(x)

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.classes:
            return self.pipeline.predict_proba(x).argmax(axis=1)
        return self.pipeline.predict(x)

    def save(self, folder) -> str:
        import joblib

        joblib.dump(self.pipeline, folder / "model.joblib")
        return "model.joblib"


def _estimator(values: dict, classification: bool):
    from sklearn.linear_model import SGDClassifier, SGDRegressor

    l1, l2 = values["l1_regularization_strength"], values["l2_regularization_strength"]
    common = {
        "penalty": "elasticnet",
        "alpha": max(l1 + l2, 1e-12),
        "l1_ratio": l1 / (l1 + l2) if l1 + l2 else 0.0,
        "learning_rate": "constant",
        "eta0": values["learning_rate"],
        "random_state": values["seed"],
    }
    return SGDClassifier(loss="log_loss", **common) if classification else SGDRegressor(loss="squared_error", **common)


def fit(prepared, values: dict, log) -> Linear:
    from sklearn.metrics import log_loss, mean_squared_error
    from sklearn.pipeline import Pipeline
    from sklearn.preprocessing import StandardScaler

    train = prepared.splits["training"]
    if np.isnan(train.x).any():
        raise DataError(
            "The training data has missing values; the linear learner needs --preprocess to fill them "
            "with the column mean."
        )
    classification = prepared.metadata["model_type"] == CLASSIFICATION
    labels = (
        np.array(prepared.classes, dtype=object if isinstance(prepared.classes[0], str) else float)
        if classification
        else None
    )
    y = labels[train.y] if classification else train.y
    scaler = StandardScaler().fit(train.x)
    x = scaler.transform(train.x)
    model = _estimator(values, classification)
    steps, batch = int(values["max_steps"]), int(values["batch_size"])
    adaptive = values["optimizer_type"] == "adaptive"
    per_pass = max(1, int(np.ceil(len(x) / batch)))
    order = np.random.RandomState(values["seed"]).permutation(len(x))
    best = np.inf
    log(
        f"Training a linear {'classifier' if classification else 'regressor'}: {steps} steps of {batch} rows, "
        f"learning_rate={values['learning_rate']} ({values['optimizer_type']})."
    )
    for step in range(steps):
        start = (step % per_pass) * batch
        rows = order[start : start + batch]
        if classification:
            model.partial_fit(x[rows], y[rows], classes=labels)
        else:
            model.partial_fit(x[rows], y[rows])
        if (step + 1) % per_pass == 0 or step + 1 == steps:
            loss = (
                log_loss(y, model.predict_proba(x), labels=labels)
                if classification
                else mean_squared_error(y, model.predict(x))
            )
            if not np.isfinite(loss):
                raise DataError(
                    f"Training diverged at step {step + 1} (the loss is {loss}); use a smaller --learning_rate."
                )
            if adaptive and loss >= best:
                model.eta0 = max(model.eta0 / ADAPTIVE_FACTOR, values["learning_rate"] * MIN_RATE_SHARE)
            best = min(best, loss)
            if (step + 1) // per_pass % max(1, steps // per_pass // 10) == 0 or step + 1 == steps:
                log(f"step {step + 1}: training loss {loss:.6g}, learning rate {model.eta0:.3g}")
            order = np.random.RandomState(values["seed"] + step).permutation(len(x))
    pipeline = Pipeline([("scale", scaler), ("model", model)])
    return Linear(pipeline, list(prepared.classes), steps)


def main(argv: list[str] | None = None) -> None:
    trainer.main(LINEAR_LEARNER, fit, argv)


if __name__ == "__main__":
    main()
