"""``aiconsole jobs metrics``: a job's metrics as CSV or JSON, from a real console."""

from __future__ import annotations

import csv
import io
import json

import pytest

from tests.helpers.cli import write_trainer

pytestmark = pytest.mark.executor

REPORTING_TRAINER = """\
import hypertune
reporter = hypertune.HyperTune()
for step in (1, 2, 3):
    reporter.report_hyperparameter_tuning_metric("accuracy", step / 4, global_step=step)
reporter.report_hyperparameter_tuning_metric("loss", 0.125, global_step=3)
"""


@pytest.fixture(scope="module")
def reported(console, tmp_path_factory):
    """A job that reported two metrics through cloudml-hypertune, run to the end."""
    import os
    import subprocess

    from tests.helpers.console import AICONSOLE

    folder = write_trainer(tmp_path_factory.mktemp("metrics-src"), REPORTING_TRAINER)
    env = {
        **os.environ,
        "AICONSOLE_URL": console.url,
        "AICONSOLE_TOKEN": console.token,
        "AICONSOLE_CONFIG": str(folder.parent / "none.json"),
    }
    subprocess.run(
        [
            AICONSOLE,
            "jobs",
            "submit",
            "training",
            "reporting",
            "--package-path",
            str(folder),
            "--module-name",
            "trainer.task",
            "--region",
            "us-central1",
        ],
        env=env,
        check=True,
        capture_output=True,
        timeout=300,
    )
    return console.wait("reporting")


def test_metrics_print_as_csv_by_default(cli, reported):
    assert reported["state"] == "SUCCEEDED", reported.get("errorMessage")
    result = cli("jobs", "metrics", "reporting")
    assert result.code == 0, result.err
    rows = list(csv.DictReader(io.StringIO(result.out)))
    assert list(rows[0]) == ["tag", "step", "value", "time", "trialId", "source", "run"]
    rows = [r for r in rows if r["source"] != "system"]  # what the console sampled of its replica
    assert sorted((r["tag"], r["step"], r["value"]) for r in rows) == [
        ("accuracy", "1", "0.25"),
        ("accuracy", "2", "0.5"),
        ("accuracy", "3", "0.75"),
        ("loss", "3", "0.125"),
    ]
    assert {r["source"] for r in rows} == {"hypertune"}


def test_metrics_json_for_one_tag(cli, reported):
    result = cli("jobs", "metrics", "reporting", "--tag", "loss", "--format", "json")
    assert result.code == 0, result.err
    (point,) = json.loads(result.out)
    assert (point["tag"], point["step"], point["value"], point["source"]) == ("loss", "3", 0.125, "hypertune")


def test_metrics_of_one_source_the_replicas_sampled_use(cli, reported):
    result = cli("jobs", "metrics", "reporting", "--source", "system", "--format", "json")
    assert result.code == 0, result.err
    points = json.loads(result.out)
    assert points and {(p["source"], p["run"]) for p in points} == {("system", "master-replica-0")}
    assert "system/memory_bytes_used" in {p["tag"] for p in points}
    hypertune = json.loads(cli("jobs", "metrics", "reporting", "--source", "hypertune", "--format", "json").out)
    assert len(hypertune) == 4 and {p["source"] for p in hypertune} == {"hypertune"}


def test_metrics_of_a_missing_job_is_not_found(cli, console):
    result = cli("jobs", "metrics", "no_such_job")
    assert result.code == 1 and "NOT_FOUND" in result.err
