"""Bad built-in algorithm jobs are refused when they are submitted, naming the field and the rule."""

from __future__ import annotations

import pytest

from aiconsole.errors import InvalidArgument
from jobs import services
from jobs.models import Job
from tests.helpers.algorithms import (
    BOOSTED_TREES,
    LINEAR_LEARNER,
    builtin_body,
    classification_rows,
    job_dir_for,
    regression_rows,
)


def _refusal(project, admin, args, image=BOOSTED_TREES, **training_input) -> list[tuple[str, str]]:
    body = builtin_body("refused", image, args, job_dir_for("refused"), **training_input)
    with pytest.raises(InvalidArgument) as refused:
        services.submit_job(project, body, actor=admin)
    assert not Job.objects.exists()
    return [(v.field, v.description) for v in refused.value.violations]


def test_a_valid_builtin_job_is_queued_with_its_image_and_args(project, admin, csv_file):
    data = csv_file(classification_rows(50))
    body = builtin_body(
        "queued",
        BOOSTED_TREES,
        [f"--training_data_path={data}", "--preprocess", "--model_type=classification"],
        job_dir_for("queued"),
    )
    job = services.submit_job(project, body, actor=admin)
    assert job.training_input["masterConfig"]["imageUri"] == BOOSTED_TREES
    assert "packageUris" not in job.training_input


def test_ragged_rows_are_refused_with_the_line(project, admin, csv_file):
    data = csv_file("1,2,3\n0,4,5\n1,6\n")
    [(field, message)] = _refusal(project, admin, [f"--training_data_path={data}", "--model_type=classification"])
    assert field == "job.training_input.args"
    assert message.startswith("--training_data_path:")
    assert "line 3 has 2 columns, but the first row has 3" in message and "ragged" in message


def test_an_empty_file_is_refused(project, admin, csv_file):
    data = csv_file("")
    [(_, message)] = _refusal(project, admin, [f"--training_data_path={data}", "--model_type=regression"])
    assert "is empty: a CSV with at least one row is required" in message


def test_a_text_target_is_refused_for_regression(project, admin, csv_file):
    data = csv_file(regression_rows(10) + ["high,1.0,2.0"])
    [(_, message)] = _refusal(
        project, admin, [f"--training_data_path={data}", "--model_type=regression"], image=LINEAR_LEARNER
    )
    assert "line 11 has the target 'high', which is not a number" in message
    assert "--model_type regression needs a numeric target" in message


def test_a_file_too_large_for_the_machine_is_refused(project, admin, csv_file):
    data = csv_file(regression_rows(5))
    with open(data, "r+b") as handle:
        handle.truncate(4 * 10**9)  # sparse: 4 GB on paper, nothing on disk
    [(_, message)] = _refusal(project, admin, [f"--training_data_path={data}", "--model_type=regression"])
    assert "too large for the master's 15 GB of memory" in message
    assert "Choose a machine type with more memory" in message


def test_a_missing_data_file_and_a_path_outside_storage_are_refused(project, admin):
    [(_, missing)] = _refusal(
        project, admin, [f"--training_data_path={job_dir_for('nothing.csv')}", "--model_type=regression"]
    )
    assert "does not exist" in missing
    [(_, outside)] = _refusal(project, admin, ["--training_data_path=/etc/passwd", "--model_type=regression"])
    assert "is not inside a storage root" in outside


def test_argument_rules_name_the_argument(project, admin):
    problems = _refusal(
        project,
        admin,
        [
            "--training_data_path=gs://b/d.csv",
            "--eta=0",
            "--max_depth=2.5",
            "--validation_split=0.3",
            "--test_split=0.3",
            "--learningrate=1",
        ],
    )
    messages = [message for field, message in problems if field == "job.training_input.args"]
    assert "--eta must be a number above 0 and at most 1; got 0." in messages
    assert "--max_depth must be a whole number at least 1 and at most 30; got '2.5'." in messages
    assert "--validation_split plus --test_split must be at most 0.4; got 0.6." in messages
    assert any(m.startswith("--learningrate is not an argument of the built-in XGBoost") for m in messages)
    assert "--model_type (classification or regression) or --objective is required." in messages


def test_required_job_dir_and_single_replica(project, admin):
    body = builtin_body(
        "refused",
        LINEAR_LEARNER,
        ["--training_data_path=gs://b/d.csv", "--model_type=regression"],
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount="2",
    )
    with pytest.raises(InvalidArgument) as refused:
        services.submit_job(project, body, actor=admin)
    fields = {v.field: v.description for v in refused.value.violations}
    assert "jobDir is required for a built-in algorithm" in fields["job.training_input.job_dir"]
    assert fields["job.training_input.worker_count"] == (
        "A built-in algorithm runs on a single replica: workerCount must be 0."
    )


def test_tuning_parameters_must_be_the_algorithms_arguments(project, admin):
    problems = dict(
        _refusal(
            project,
            admin,
            ["--training_data_path=gs://b/d.csv", "--model_type=regression"],
            hyperparameters={
                "goal": "MAXIMIZE",
                "hyperparameterMetricTag": "accuracy",
                "params": [{"parameterName": "depth", "type": "INTEGER", "minValue": 1, "maxValue": 4}],
            },
        )
    )
    assert "not a tunable argument" in problems["job.training_input.hyperparameters.params[0].parameter_name"]
    assert (
        "for regression it reports rmse, mae, r2"
        in problems["job.training_input.hyperparameters.hyperparameter_metric_tag"]
    )


def test_a_custom_container_image_not_here_and_unknown_algorithm_images_are_refused(project, admin):
    [(field, message)] = _refusal(project, admin, [], image="gcr.io/p/trainer:latest")
    assert field == "job.training_input.master_config.image_uri"
    # With an engine: the image is not in its store (never pulled); without one: containers cannot run.
    assert "gcr.io/p/trainer:latest is not on this server" in message or message.startswith(
        "Custom containers cannot run on this server"
    )
    [(field, message)] = _refusal(project, admin, [], image="gcr.io/cloud-ml-algos/image_classification:latest")
    assert "is a built-in algorithm this server does not provide" in message
