"""What every built-in algorithm does around its model: read, check, prepare, evaluate, save, report.

An algorithm module supplies ``fit(prepared, values, log) -> Model``; this module does the rest:

1. read and check the arguments and the data (a clear message and exit status 1 on bad input,
   before any training);
2. prepare the splits (``algorithms.preprocess``) and write ``processed_data/`` and
   ``artifacts/metadata.json``;
3. train, evaluate on the validation and test splits, save ``model/`` and
   ``artifacts/evaluation.json``;
4. report the validation metrics through cloudml-hypertune when the job is a tuning trial.

A tuning trial is given ``--job-dir <jobDir>/<trial id>`` by the platform, as the original did, so
trials do not overwrite each other.
"""

from __future__ import annotations

import json
import os
import sys
import time
from dataclasses import dataclass

import numpy as np

from algorithms import files, preprocess
from algorithms.definitions import (
    CLASSIFICATION,
    Algorithm,
    model_type_of,
    parse_args,
    primary_metric,
)
from algorithms.table import DataError, check_target, decode, read_text

MEMORY_SHARE = 5  # a CSV may use at most a fifth of the machine's memory


class Model:
    """A trained model: class probabilities or numbers, and how to save it."""

    steps = 0

    def predict(self, x: np.ndarray) -> np.ndarray:
        raise NotImplementedError

    def probabilities(self, x: np.ndarray) -> np.ndarray | None:
        return None

    def save(self, folder) -> str:
        raise NotImplementedError


@dataclass
class Run:
    algorithm: Algorithm
    values: dict
    model_type: str
    output: files.Output
    output_uri: str


def log(message: str) -> None:
    print(message, flush=True)


def fail(message: str) -> None:
    """End the replica with the reason as the last line of stderr (the job's errorMessage shows it)."""
    print(f"ERROR: {message}", file=sys.stderr, flush=True)
    sys.exit(1)


def main(algorithm: Algorithm, fit, argv: list[str] | None = None) -> None:
    argv = list(sys.argv[1:] if argv is None else argv)
    started = time.monotonic()
    try:
        run = _start(algorithm, argv)
        tables = _read_tables(run)
        prepared = preprocess.prepare(*tables, run.values, run.model_type)
    except DataError as error:
        fail(str(error))
        return
    _write_prepared(run, prepared)
    log(f"Reading and preparing the data took {time.monotonic() - started:.2f} s.")
    started = time.monotonic()
    try:
        model = fit(prepared, run.values, log)
    except DataError as error:
        fail(str(error))
        return
    log(f"Training took {time.monotonic() - started:.2f} s.")
    started = time.monotonic()
    evaluation = _evaluate(run, prepared, model)
    log(f"Evaluation took {time.monotonic() - started:.2f} s.")
    model_file = model.save(run.output.folder("model"))
    evaluation["model_file"] = model_file
    run.output.path("artifacts/evaluation.json").write_text(json.dumps(evaluation, indent=2))
    run.output.commit()
    log(f"Saved the model to {files.join(run.output_uri, 'model', model_file)}.")
    _report(run, evaluation, model)


def _start(algorithm: Algorithm, argv: list[str]) -> Run:
    values, problems = parse_args(algorithm, argv)
    if problems:
        raise DataError(" ".join(problems))
    job_dir = values.pop("job_dir", None)
    if not job_dir:
        raise DataError("--job-dir is required: the folder where the model, processed_data/ and artifacts/ go.")
    output_uri = job_dir  # a tuning trial's own folder already: <jobDir>/<trial id>
    model_type = model_type_of(algorithm, values)
    log(
        f"Built-in {algorithm.title}: {model_type}, preprocess={'on' if values['preprocess'] else 'off'}, "
        f"writing to {output_uri}."
    )
    return Run(algorithm, values, model_type, files.Output(output_uri), output_uri)


def _memory_bytes() -> int | None:
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (ValueError, OSError, AttributeError):
        return None


def _read(uri: str, header: bool, width: int | None = None):
    size = files.size_of(uri)
    memory = _memory_bytes()
    if memory and size * MEMORY_SHARE > memory:
        raise DataError(
            f"{uri} is {size / 1e9:.1f} GB, too large for this machine's {memory / 1e9:.1f} GB of memory: "
            f"a CSV may use at most a fifth of it. Use a machine type with more memory."
        )
    log(f"Reading {uri} ({size} bytes).")
    return read_text(decode(files.read_bytes(uri), uri), source=uri, header=header, width=width)


def _read_tables(run: Run):
    header = bool(run.values["header"])
    train = _read(run.values["training_data_path"], header)
    check_target(train, run.model_type)
    others = []
    for key in ("validation_data_path", "test_data_path"):
        uri = run.values.get(key)
        table = _read(uri, header, width=train.width) if uri else None
        if table is not None:
            check_target(table, run.model_type)
            if header:
                table.names = train.names
        others.append(table)
    log(f"Read {len(train.rows)} rows of {train.width} columns.")
    return train, others[0], others[1]


def _write_prepared(run: Run, prepared: preprocess.Prepared) -> None:
    rows = prepared.metadata["rows"]
    log(
        f"Split: {rows['training']} training, {rows['validation']} validation, {rows['test']} test rows; "
        f"{len(prepared.features)} features."
    )
    for reason in ("dropped_missing_target", "dropped_missing_values", "dropped_unseen_class"):
        if rows.get(reason):
            log(f"Dropped {rows[reason]} rows: {reason.removeprefix('dropped_').replace('_', ' ')}.")
    if run.values["preprocess"]:
        for name, split in prepared.splits.items():
            preprocess.write_csv(run.output.path(f"processed_data/{name}.csv"), split)
    metadata = {"algorithm": run.algorithm.name, "framework": run.algorithm.framework, **prepared.metadata}
    run.output.path("artifacts/metadata.json").write_text(json.dumps(metadata, indent=2, default=str))


def metrics(
    model_type: str, y: np.ndarray, predicted: np.ndarray, probabilities: np.ndarray | None, class_count: int
) -> dict:
    """Accuracy, AUC and log loss for classes; RMSE, MAE and R² for numbers."""
    from sklearn import metrics as m

    if len(y) == 0:
        return {}
    if model_type != CLASSIFICATION:
        result = {
            "rmse": float(np.sqrt(m.mean_squared_error(y, predicted))),
            "mae": float(m.mean_absolute_error(y, predicted)),
        }
        if len(y) > 1:
            result["r2"] = float(m.r2_score(y, predicted))
        return result
    result = {"accuracy": float(m.accuracy_score(y, predicted))}
    if probabilities is not None:
        labels = list(range(class_count))
        result["log_loss"] = float(m.log_loss(y, probabilities, labels=labels))
        if len(set(y.tolist())) == class_count:  # AUC needs every class among the rows
            scores = probabilities[:, 1] if class_count == 2 else probabilities
            result["auc"] = (
                float(m.roc_auc_score(y, scores, multi_class="ovr", labels=labels))
                if class_count > 2
                else float(m.roc_auc_score(y, scores))
            )
    return result


def _evaluate(run: Run, prepared: preprocess.Prepared, model: Model) -> dict:
    result = {
        "model_type": run.model_type,
        "framework": run.algorithm.framework,
        "features": prepared.features,
        "rows": {},
    }
    if prepared.classes:
        result["classes"] = prepared.classes
    for name in ("validation", "test", "training"):
        split = prepared.splits[name]
        result["rows"][name] = int(len(split.y))
        if not len(split.y):
            continue
        probabilities = model.probabilities(split.x)
        predicted = model.predict(split.x)
        result[name] = metrics(run.model_type, split.y, predicted, probabilities, len(prepared.classes))
        if name == "test" and prepared.classes:
            result["confusion_matrix"] = _confusion(split.y, predicted, len(prepared.classes))
    for name in ("validation", "test"):
        if result.get(name):
            log(f"{name.capitalize()} metrics: " + ", ".join(f"{k}={v:.6g}" for k, v in result[name].items()))
    return result


def _confusion(y: np.ndarray, predicted: np.ndarray, count: int) -> list[list[int]]:
    matrix = np.zeros((count, count), dtype=int)
    for actual, guess in zip(y.tolist(), predicted.astype(int).tolist(), strict=True):
        matrix[actual][guess] += 1
    return matrix.tolist()


def _report(run: Run, evaluation: dict, model: Model) -> None:
    """Tuning trials report every validation metric under its own tag, and the job's tag."""
    if not os.environ.get("CLOUD_ML_HP_METRIC_FILE"):
        return
    import hypertune

    scores = evaluation.get("validation") or evaluation.get("test") or evaluation.get("training") or {}
    reporter = hypertune.HyperTune()
    step = max(1, int(model.steps))
    for name, value in scores.items():
        reporter.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag=name, metric_value=value, global_step=step
        )
    tag = os.environ.get("CLOUD_ML_HP_METRIC_TAG") or ""
    if tag and tag not in scores and primary_metric(run.model_type) in scores:
        reporter.report_hyperparameter_tuning_metric(
            hyperparameter_metric_tag=tag, metric_value=scores[primary_metric(run.model_type)], global_step=step
        )
    log(f"Reported {', '.join(scores)} to hyperparameter tuning.")
