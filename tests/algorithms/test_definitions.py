"""The algorithms' argument reading, shared by the console and the trainer. Pure."""

from __future__ import annotations

from algorithms import definitions as algos
from algorithms.definitions import BOOSTED_TREES, LINEAR_LEARNER, parse_args


def test_images_select_algorithms_with_or_without_the_tag():
    assert algos.by_image("gcr.io/cloud-ml-algos/boosted_trees:latest") is BOOSTED_TREES
    assert algos.by_image("gcr.io/cloud-ml-algos/boosted_trees") is BOOSTED_TREES
    assert algos.by_image("gcr.io/cloud-ml-algos/linear_learner_cpu:latest") is LINEAR_LEARNER
    assert algos.by_image("gcr.io/p/trainer:latest") is None
    assert algos.for_training_input({"masterConfig": {"imageUri": LINEAR_LEARNER.image}}) is LINEAR_LEARNER


def test_arguments_take_every_spelling_and_fill_defaults():
    values, problems = parse_args(
        BOOSTED_TREES,
        [
            "--training_data_path",
            "gs://b/d.csv",
            "--preprocess",
            "--num_round=30",
            "--max-depth",
            "4",
            "--objective=reg:linear",
            "--job-dir",
            "/out",
        ],
    )
    assert problems == []
    assert values["training_data_path"] == "gs://b/d.csv"
    assert values["preprocess"] is True and values["header"] is False
    assert (values["num_boost_round"], values["max_depth"], values["eta"]) == (30, 4, 0.3)
    assert values["job_dir"] == "/out"
    assert algos.model_type_of(BOOSTED_TREES, values) == "regression"


def test_a_later_value_wins_as_tuning_appends_its_own():
    values, problems = parse_args(
        LINEAR_LEARNER,
        ["--training_data_path=d.csv", "--model_type=regression", "--learning_rate=0.1", "--learning_rate=0.002"],
    )
    assert problems == [] and values["learning_rate"] == 0.002


def test_problems_name_the_argument_and_the_rule():
    _, problems = parse_args(
        LINEAR_LEARNER, ["positional", "--preprocess=maybe", "--batch_size=0", "--optimizer_type=ftrl"]
    )
    assert "'positional' is not an argument: write --name=value." in problems
    assert "--preprocess must be true or false (or the flag alone for true); got 'maybe'." in problems
    assert "--batch_size must be a whole number at least 1 and at most 1000000; got 0." in problems
    assert "--optimizer_type must be one of gradient_descent, adaptive; got 'ftrl'." in problems
    assert any(p.startswith("--training_data_path is required") for p in problems)
    assert "--model_type is required for the linear learner: classification or regression." in problems


def test_objective_and_model_type_must_agree():
    _, problems = parse_args(
        BOOSTED_TREES, ["--training_data_path=d", "--model_type=classification", "--objective=reg:squarederror"]
    )
    assert problems == [
        "--objective reg:squarederror does not fit --model_type classification: use a binary: or multi: objective."
    ]


def test_metrics_per_model_type():
    assert algos.metrics_for("classification") == ("accuracy", "auc", "log_loss")
    assert algos.metrics_for("regression") == ("rmse", "mae", "r2")
    assert algos.primary_metric("regression") == "rmse"
