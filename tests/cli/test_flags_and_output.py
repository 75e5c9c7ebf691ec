"""How the CLI reads flags and config files and prints errors, log lines and tables as gcloud did (no console)."""

from __future__ import annotations

import argparse
import textwrap
from datetime import UTC, datetime

import pytest

from console.cli import logs, output, training
from console.cli.client import ApiError, Violation
from console.cli.jobs import summary


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("count=1,type=nvidia-tesla-t4", {"count": "1", "type": "NVIDIA_TESLA_T4"}),
        ("type=tpu-v3,count=8", {"count": "8", "type": "TPU_V3"}),
        ("type=nvidia-tesla-a100", {"count": "1", "type": "NVIDIA_TESLA_A100"}),
    ],
)
def test_accelerator_flag_values(text, expected):
    assert training.accelerator(text) == expected


def test_scale_tiers_labels_and_booleans():
    assert training.scale_tier("standard-1") == "STANDARD_1"
    assert training.scale_tier("BASIC_GPU") == "BASIC_GPU"
    assert training.labels("a=1, b=two") == {"a": "1", "b": "two"}
    assert training.boolean("True") is True and training.boolean("no") is False
    with pytest.raises(argparse.ArgumentTypeError):
        training.labels("novalue")


def test_yaml_dates_and_json_configs_load(tmp_path):
    as_json = tmp_path / "config.json"
    as_json.write_text('{"trainingInput": {"scaleTier": "BASIC", "region": "us-central1"}}')
    assert training.load_config(str(as_json))["trainingInput"]["scaleTier"] == "BASIC"
    dated = tmp_path / "dated.yaml"
    dated.write_text("labels: {day: 2024-01-02}\n")
    assert training.load_config(str(dated)) == {"labels": {"day": "2024-01-02"}}
    empty = tmp_path / "empty.yaml"
    empty.write_text("")
    assert training.load_config(str(empty)) == {}


def test_api_errors_render_each_field_violation():
    error = ApiError(
        400,
        "INVALID_ARGUMENT",
        "Field: a Error: b",
        [Violation("job.a", "b is wrong."), Violation("job.c", "d is missing.")],
    )
    assert error.message == (
        "INVALID_ARGUMENT: the request has 2 invalid fields:\n  - job.a: b is wrong.\n  - job.c: d is missing."
    )
    assert ApiError(404, "NOT_FOUND", "Job x not found.").message == "NOT_FOUND: Job x not found."


def test_log_entries_print_in_gclouds_stream_logs_format():
    entry = {
        "severity": "ERROR",
        "timestamp": "2024-03-05T10:11:12.345Z",
        "taskName": "worker-replica-1",
        "trialId": "2",
        "message": "line one\nline two",
    }
    local = datetime(2024, 3, 5, 10, 11, 12, 345000, tzinfo=UTC).astimezone().strftime("%Y-%m-%d %H:%M:%S %z")
    assert logs.format_entry(entry) == [
        f"ERROR\t{local}\tworker-replica-1\t2\tline one",
        f"ERROR\t{local}\tworker-replica-1\t2\tline two",
    ]
    assert logs.format_entry(entry, multiline=True)[0].endswith("\tline one\nline two")
    assert logs.format_entry({"message": "m"})[0].split("\t")[2] == "unknown_task"


def test_summary_tables_for_a_tuning_job():
    job = {
        "jobId": "hp",
        "state": "SUCCEEDED",
        "createTime": "2024-01-01T00:00:00Z",
        "trainingInput": {
            "scaleTier": "BASIC",
            "pythonModule": "trainer.task",
            "hyperparameters": {"goal": "MAXIMIZE"},
        },
        "trainingOutput": {
            "completedTrialCount": "2",
            "consumedMLUnits": 0.07,
            "isHyperparameterTuningJob": True,
            "trials": [
                {"trialId": "10", "hyperparameters": {"lr": "0.1"}},
                {
                    "trialId": "2",
                    "finalMetric": {"objectiveValue": 0.9, "trainingStep": "5"},
                    "hyperparameters": {"lr": "0.01", "depth": "3"},
                },
            ],
        },
    }
    text = summary(job)
    assert "Training Output Trials" in text and "ML_UNITS" in text and "TRIALS" in text
    trials = text.split("Training Output Trials")[1]
    trial_rows = [line for line in trials.splitlines() if line.startswith(("│ 2 ", "│ 10 "))]
    assert [row.split()[1] for row in trial_rows] == ["2", "10"]  # sorted by trial number
    assert "depth=3" in text and "lr=0.01" in text


def test_box_table_shape():
    text = output.box("Title", ["A", "BB"], [["x", "yy\nzz"]])
    assert text == textwrap.dedent("""\
        ┌────────┐
        │ Title  │
        ├───┬────┤
        │ A │ BB │
        ├───┼────┤
        │ x │ yy │
        │   │ zz │
        └───┴────┘
        """)
