"""Built-in algorithms run for real: our shipped package through the executor, on generated CSVs."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bench.support.waiting import wait_for
from jobs import services
from jobs.models import TERMINAL_STATES, Job, JobState
from jobs.wire import job_resource
from models_registry import services as model_services
from tests.helpers.algorithms import (
    BOOSTED_TREES,
    LINEAR_LEARNER,
    builtin_body,
    classification_rows,
    job_dir_for,
    regression_rows,
)
from tests.helpers.jobs import log_text
from tests.helpers.models import deploy

pytestmark = pytest.mark.executor


@pytest.fixture(autouse=True)
def _no_prewarming(settings):
    settings.MODEL_PREWARM = False


@pytest.fixture
def run_builtin(executor, admin, project):
    def run(job_id: str, image: str, args: list[str], timeout: float = 600, **training_input) -> Job:
        body = builtin_body(job_id, image, args, job_dir_for(job_id), **training_input)
        job = services.submit_job(project, body, actor=admin)
        wait_for(
            lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, timeout, message=f"job {job_id} to finish"
        )
        job.refresh_from_db()
        return job

    return run


def _lines(path: Path) -> list[list[float]]:
    return [[float(cell) for cell in line.split(",")] for line in path.read_text().splitlines() if line]


def test_boosted_trees_preprocesses_splits_trains_and_reports(run_builtin, csv_file):
    data = csv_file(classification_rows(500, missing=0.02))
    job = run_builtin(
        "xgb_classes",
        BOOSTED_TREES,
        [
            f"--training_data_path={data}",
            "--preprocess",
            "--model_type=classification",
            "--validation_split=0.2",
            "--test_split=0.1",
            "--num_round=15",
            "--max_depth=4",
            "--seed=7",
        ],
    )

    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)
    job_dir = Path(job_dir_for("xgb_classes"))
    metadata = json.loads((job_dir / "artifacts/metadata.json").read_text())
    rows = metadata["rows"]
    kept = rows["read"] - rows["dropped_missing_target"] - rows["dropped_missing_values"]
    assert rows["read"] == 500 and rows["dropped_missing_values"] > 0  # a missing x2 is 1 of 6 cells: > 10%
    assert (rows["validation"], rows["test"]) == (round(kept * 0.2), round(kept * 0.1))
    assert rows["training"] + rows["validation"] + rows["test"] == kept
    for split in ("training", "validation", "test"):
        processed = _lines(job_dir / f"processed_data/{split}.csv")
        assert len(processed) == rows[split]
        assert all(len(row) == 1 + len(metadata["features"]) for row in processed)
    treatments = {c["name"]: c["treatment"] for c in metadata["columns"]}
    assert treatments == {
        "column_0": "target",
        "column_1": "numeric",
        "column_2": "numeric",
        "column_3": "vocabulary",
        "column_4": "row_id",
        "column_5": "constant",
    }
    assert sorted(metadata["features"]) == ["column_1", "column_2", "column_3=blue", "column_3=green", "column_3=red"]
    assert metadata["target"]["classes"] == [0.0, 1.0]
    numeric = next(c for c in metadata["columns"] if c["name"] == "column_1")
    assert {"mean", "std", "min", "max", "typical_range"} <= set(numeric)
    assert (job_dir / "model/model.bst").stat().st_size > 0
    evaluation = json.loads((job_dir / "artifacts/evaluation.json").read_text())
    assert set(evaluation["test"]) == {"accuracy", "auc", "log_loss"}
    assert evaluation["test"]["accuracy"] > 0.75 and evaluation["test"]["auc"] > 0.8
    output = job_resource(job)["trainingOutput"]
    assert output["isBuiltInAlgorithmJob"] is True
    assert output["builtInAlgorithmOutput"]["framework"] == "XGBOOST"
    assert output["builtInAlgorithmOutput"]["modelPath"] == job_dir_for("xgb_classes") + "/model/"
    assert {"runtimeVersion", "pythonVersion"} <= set(output["builtInAlgorithmOutput"])
    assert "Test metrics: accuracy=" in log_text(job)


def test_linear_learner_model_is_deployed_from_the_job_and_predicts(run_builtin, csv_file, serving, project, admin):
    data = csv_file(regression_rows(300))
    job = run_builtin(
        "linear_values",
        LINEAR_LEARNER,
        [
            f"--training_data_path={data}",
            "--model_type=regression",
            "--learning_rate=0.01",
            "--max_steps=600",
            "--batch_size=50",
        ],
    )

    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)
    output = job_resource(job)["trainingOutput"]["builtInAlgorithmOutput"]
    model = model_services.create_model(project, {"name": "values"}, actor=admin)
    # As the original asked: the version runs on the runtime the algorithm trained on.
    version, operation = deploy(
        model,
        "v1",
        output["modelPath"],
        admin,
        runtimeVersion=output["runtimeVersion"],
        pythonVersion=output["pythonVersion"],
    )
    assert version.state == "READY", version.error_message
    assert version.framework == "SCIKIT_LEARN"
    probe = [[0.0, 0.0], [1.0, 4.0], [-1.0, 8.0]]
    answer = model_services.predict(model, None, json.dumps({"instances": probe}).encode(), actor=admin)
    predictions = json.loads(answer.body)["predictions"]
    for (x1, x2), predicted in zip(probe, predictions, strict=True):
        assert predicted == pytest.approx(3 * x1 + 0.5 * x2, abs=0.3)


def test_boosted_trees_model_predicts_probabilities_through_the_registry(
    run_builtin, csv_file, serving, project, admin
):
    data = csv_file(classification_rows(300, seed=5))
    job = run_builtin(
        "xgb_served",
        BOOSTED_TREES,
        [f"--training_data_path={data}", "--preprocess", "--objective=binary:logistic", "--num_boost_round=10"],
    )
    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)

    model = model_services.create_model(project, {"name": "colours"}, actor=admin)
    version, _ = deploy(model, "v1", job_dir_for("xgb_served") + "/model/", admin)
    assert (version.state, version.framework) == ("READY", "XGBOOST"), version.error_message
    test_rows = _lines(Path(job_dir_for("xgb_served")) / "processed_data/test.csv")
    body = json.dumps({"instances": [row[1:] for row in test_rows]}).encode()
    predictions = json.loads(model_services.predict(model, None, body, actor=admin).body)["predictions"]
    assert all(0.0 <= p <= 1.0 for p in predictions)
    right = sum((p > 0.5) == (row[0] == 1.0) for p, row in zip(predictions, test_rows, strict=True))
    assert right / len(test_rows) > 0.75


def test_tuning_job_over_boosted_trees_reports_each_trial(run_builtin, csv_file):
    data = csv_file(classification_rows(300, seed=9))
    job = run_builtin(
        "xgb_tuned",
        BOOSTED_TREES,
        [f"--training_data_path={data}", "--preprocess", "--model_type=classification", "--num_round=5"],
        hyperparameters={
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": "auc",
            "maxTrials": 3,
            "maxParallelTrials": 1,
            "params": [
                {"parameterName": "max_depth", "type": "INTEGER", "minValue": 1, "maxValue": 6},
                {"parameterName": "eta", "type": "DOUBLE", "minValue": 0.05, "maxValue": 0.5},
            ],
        },
    )

    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)
    output = job_resource(job)["trainingOutput"]
    assert output["isBuiltInAlgorithmJob"] and output["isHyperparameterTuningJob"]
    assert "modelPath" not in output["builtInAlgorithmOutput"]  # only a job without tuning has one
    trials = output["trials"]
    assert len(trials) == 3
    for trial in trials:
        assert trial["state"] == "SUCCEEDED"
        assert 0.5 <= trial["finalMetric"]["objectiveValue"] <= 1.0
        assert trial["builtInAlgorithmOutput"]["modelPath"] == f"{job_dir_for('xgb_tuned')}/{trial['trialId']}/model/"
        trial_dir = Path(job_dir_for("xgb_tuned"), trial["trialId"])
        evaluation = json.loads((trial_dir / "artifacts/evaluation.json").read_text())
        assert evaluation["validation"]["auc"] == pytest.approx(trial["finalMetric"]["objectiveValue"])
        assert (trial_dir / "model/model.bst").is_file()
    assert len({json.dumps(t["hyperparameters"], sort_keys=True) for t in trials}) == 3


def test_categorical_data_without_preprocess_fails_in_the_first_step_with_the_reason(run_builtin, csv_file):
    data = csv_file(classification_rows(100))
    job = run_builtin("xgb_raw", BOOSTED_TREES, [f"--training_data_path={data}", "--model_type=classification"])

    assert job.state == JobState.FAILED
    assert "column 4 (column_3) is 'red', not a number" in job.error_message
    assert "add --preprocess" in job.error_message
    assert not Path(job_dir_for("xgb_raw"), "model").exists()
