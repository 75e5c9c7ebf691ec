"""A built-in algorithm from the command line, as gcloud ran one: ``--master-image-uri`` and args."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.helpers.algorithms import BOOSTED_TREES, classification_rows

pytestmark = pytest.mark.executor


def test_builtin_algorithm_job_from_the_cli_trains_a_model(cli, console):
    data = console.storage / "datasets" / "default-project" / "cli-classes.csv"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("\n".join(classification_rows(200)) + "\n")
    job_dir = console.storage / "jobs" / "default-project" / "cli_builtin"
    result = cli(
        "jobs",
        "submit",
        "training",
        "cli_builtin",
        "--master-image-uri",
        BOOSTED_TREES,
        "--region",
        "us-central1",
        "--job-dir",
        str(job_dir),
        "--",
        f"--training_data_path={data}",
        "--preprocess",
        "--model_type=classification",
        "--num_round=5",
    )
    assert result.code == 0, result.err

    job = console.wait("cli_builtin")
    assert job["state"] == "SUCCEEDED", job
    output = job["trainingOutput"]
    assert output["isBuiltInAlgorithmJob"] is True
    assert output["builtInAlgorithmOutput"]["modelPath"] == f"{job_dir}/model/"
    assert Path(job_dir, "model", "model.bst").is_file()


def test_bad_data_is_refused_by_the_cli_before_anything_runs(cli, console):
    data = console.storage / "datasets" / "default-project" / "cli-ragged.csv"
    data.parent.mkdir(parents=True, exist_ok=True)
    data.write_text("1,2,3\n0,1\n")
    result = cli(
        "jobs",
        "submit",
        "training",
        "cli_ragged",
        "--master-image-uri",
        BOOSTED_TREES,
        "--region",
        "us-central1",
        "--job-dir",
        str(console.storage / "jobs" / "default-project" / "cli_ragged"),
        "--",
        f"--training_data_path={data}",
        "--model_type=classification",
    )
    assert result.code != 0
    assert "--training_data_path:" in result.err and "line 2 has 2 columns" in result.err
