"""``aiconsole models|versions|predict`` and ``jobs submit prediction`` against a live
``aiconsole up`` (the CLI suite's shared console)."""

from __future__ import annotations

import json
import shutil

import pytest
import yaml

pytestmark = pytest.mark.executor


@pytest.fixture(scope="module")
def models_dir(console, trained):  # noqa: F811
    """The trained models, copied into the live console's storage root."""
    target = console.storage / "cli-models" / "default-project"
    for name in ("sklearn", "xgboost", "broken"):
        shutil.rmtree(target / name, ignore_errors=True)
        shutil.copytree(trained[name], target / name)
    return target


def test_models_and_versions_from_create_to_delete(cli, models_dir, trained, tmp_path):  # noqa: F811
    created = cli("models", "create", "cli_census", "--region", "us-central1", "--description", "from the CLI")
    assert created.code == 0, created.err
    assert "Created ai platform model [projects/default-project/models/cli_census]." in created.err

    version = cli(
        "versions",
        "create",
        "v1",
        "--model",
        "cli_census",
        "--origin",
        str(models_dir / "sklearn"),
        "--runtime-version",
        "2.11",
        "--framework",
        "scikit-learn",
    )
    assert version.code == 0, version.err
    assert "Creating version (this might take a few minutes)......" in version.err and "done." in version.err

    listed = cli("versions", "list", "--model", "cli_census")
    assert listed.out.split("\n")[1].split()[0:1] == ["v1"] and "READY" in listed.out

    described = yaml.safe_load(cli("versions", "describe", "v1", "--model", "cli_census").out)
    assert described["framework"] == "SCIKIT_LEARN" and described["isDefault"] is True

    instances = tmp_path / "instances.json"
    instances.write_text("\n".join(json.dumps(row) for row in trained["probe"]) + "\n")
    predicted = cli("predict", "--model", "cli_census", "--json-instances", str(instances))
    assert predicted.code == 0, predicted.err
    assert [json.loads(line) for line in predicted.out.splitlines()] == trained["expected"]["sklearn"]
    as_json = cli(
        "predict", "--model", "cli_census", "--version", "v1", "--json-instances", str(instances), "--format", "json"
    )
    assert json.loads(as_json.out) == {"predictions": trained["expected"]["sklearn"]}

    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]\n")
    failed = cli("predict", "--model", "cli_census", "--json-instances", str(bad))
    assert failed.code == 1 and "Prediction failed" in failed.err

    second = cli("versions", "create", "v2", "--model", "cli_census", "--origin", str(models_dir / "xgboost"))
    assert second.code == 0, second.err
    assert (
        "cli_census  v1" in cli("models", "list").out and "v2" in cli("versions", "list", "--model", "cli_census").out
    )
    made_default = yaml.safe_load(cli("versions", "set-default", "v2", "--model", "cli_census").out)
    assert made_default["isDefault"] is True
    refused = cli("models", "delete", "cli_census")
    assert refused.code == 1 and "has versions" in refused.err
    assert cli("versions", "delete", "v1", "--model", "cli_census").code == 0
    assert cli("versions", "delete", "v2", "--model", "cli_census").code == 0
    deleted = cli("models", "delete", "cli_census")
    assert deleted.code == 0 and "Deleted model [cli_census]." in deleted.err


def test_a_version_that_fails_to_load_fails_the_command(cli, models_dir):  # noqa: F811
    cli("models", "create", "cli_broken")
    failed = cli("versions", "create", "v1", "--model", "cli_broken", "--origin", str(models_dir / "broken"))
    assert failed.code == 1 and "failed." in failed.err and "UnpicklingError" in failed.err


def test_jobs_submit_prediction(cli, console, models_dir, trained):  # noqa: F811
    inputs = console.storage / "cli-batch" / "default-project" / "in"
    inputs.mkdir(parents=True, exist_ok=True)
    (inputs / "a.json").write_text("\n".join(json.dumps(row) for row in trained["probe"]) + "\n")
    output = console.storage / "cli-batch" / "default-project" / "out"
    submitted = cli(
        "jobs",
        "submit",
        "prediction",
        "cli_batch",
        "--model-dir",
        str(models_dir / "sklearn"),
        "--input-paths",
        str(inputs / "*.json"),
        "--output-path",
        str(output),
        "--region",
        "us-central1",
        "--data-format",
        "json",
        "--max-worker-count",
        "1",
    )
    assert submitted.code == 0, submitted.err
    assert "Job [cli_batch] submitted successfully." in submitted.err
    job = console.wait("cli_batch")
    assert job["state"] == "SUCCEEDED", job
    assert job["predictionOutput"]["predictionCount"] == "3"
    results = (output / "prediction.results-00000-of-00001").read_text().splitlines()
    assert [json.loads(line)["prediction"] for line in results] == trained["expected"]["sklearn"]
    summary = cli("jobs", "describe", "cli_batch", "--summarize").out
    assert "Predict Input Summary" in summary and "Predict Output Summary" in summary
    refused = cli(
        "jobs",
        "submit",
        "prediction",
        "cli_batch2",
        "--model-dir",
        "gs://bucket/m",
        "--version",
        "v1",
        "--input-paths",
        "gs://bucket/in",
        "--output-path",
        "gs://bucket/out",
        "--region",
        "us-central1",
        "--data-format",
        "json",
    )
    assert refused.code == 2 and "--version cannot be used with --model-dir" in refused.err
