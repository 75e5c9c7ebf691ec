"""The built-in XGBoost algorithm (``gcr.io/cloud-ml-algos/boosted_trees:latest``).

Run as ``python -m algorithms.boosted_trees --training_data_path=... --job-dir=...``. Saves
``model/model.bst``, an XGBoost Booster that takes the prepared feature vector (the columns of
``processed_data/`` after the target, or the raw features without ``--preprocess``).
"""

from __future__ import annotations

import numpy as np

from algorithms import trainer
from algorithms.definitions import BOOSTED_TREES, CLASSIFICATION
from algorithms.table import DataError


class BoostedTrees(trainer.Model):
    def __init__(self, booster, objective: str, class_count: int, steps: int):
        self.booster = booster
        self.objective = objective
        self.class_count = class_count
        self.steps = steps

    def _raw(self, x: np.ndarray) -> np.ndarray:
        import xgboost

        return self.booster.predict(xgboost.DMatrix(x))

    def probabilities(self, x: np.ndarray) -> np.ndarray | None:
        if self.objective == "binary:logistic":
            positive = self._raw(x)
            return np.column_stack([1 - positive, positive])
        if self.objective == "multi:softprob":
            return self._raw(x).reshape(len(x), self.class_count)
        return None

    def predict(self, x: np.ndarray) -> np.ndarray:
        if self.objective == "multi:softmax":
            return self._raw(x).astype(int)
        probabilities = self.probabilities(x)
        if probabilities is not None:
            return probabilities.argmax(axis=1)
        return self._raw(x)

    def save(self, folder) -> str:
        # UBJSON, XGBoost's own format, under the name the original used (serving reads it back).
        (folder / "model.bst").write_bytes(self.booster.save_raw("ubj"))
        return "model.bst"


def objective_for(values: dict, model_type: str, class_count: int) -> str:
    objective = values.get("objective")
    if objective == "reg:linear":
        return "reg:squarederror"  # the name XGBoost 0.8x used
    if objective:
        if objective == "binary:logistic" and class_count > 2:
            raise DataError(
                f"--objective binary:logistic needs two classes, but the target has {class_count}: use "
                "multi:softprob or multi:softmax."
            )
        return objective
    if model_type == CLASSIFICATION:
        return "binary:logistic" if class_count == 2 else "multi:softprob"
    return "reg:squarederror"


def fit(prepared, values: dict, log) -> BoostedTrees:
    import xgboost

    model_type = prepared.metadata["model_type"]
    class_count = len(prepared.classes)
    objective = objective_for(values, model_type, class_count)
    params = {
        "objective": objective,
        "eta": values["eta"],
        "max_depth": values["max_depth"],
        "subsample": values["subsample"],
        "colsample_bytree": values["colsample_bytree"],
        "min_child_weight": values["min_child_weight"],
        "gamma": values["gamma"],
        "lambda": values["lambda"],
        "alpha": values["alpha"],
        "seed": values["seed"],
        "tree_method": "hist",
    }
    if objective.startswith("multi:"):
        params["num_class"] = class_count
    if values.get("eval_metric"):
        params["eval_metric"] = values["eval_metric"]
    train = prepared.splits["training"]
    dtrain = xgboost.DMatrix(train.x, label=train.y, feature_names=_safe_names(prepared.features))
    evals = [(dtrain, "training")]
    validation = prepared.splits["validation"]
    if len(validation.y):
        evals.append(
            (
                xgboost.DMatrix(validation.x, label=validation.y, feature_names=_safe_names(prepared.features)),
                "validation",
            )
        )
    rounds = int(values["num_boost_round"])
    log(
        f"Training XGBoost {xgboost.__version__}: {objective}, {rounds} rounds, eta={values['eta']}, "
        f"max_depth={values['max_depth']}."
    )
    booster = xgboost.train(params, dtrain, num_boost_round=rounds, evals=evals, verbose_eval=max(1, rounds // 10))
    booster.feature_names = None  # serving sends plain lists of numbers
    return BoostedTrees(booster, objective, class_count, rounds)


def _safe_names(names: list[str]) -> list[str]:
    # XGBoost refuses names with [ ] <, and duplicates; the metadata keeps the real ones.
    return [f"f{i}" for i in range(len(names))]


def main(argv: list[str] | None = None) -> None:
    trainer.main(BOOSTED_TREES, fit, argv)


if __name__ == "__main__":
    main()
