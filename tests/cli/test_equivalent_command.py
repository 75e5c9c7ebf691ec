"""The command line and REST body the console shows for a job (``jobs.training.equivalent``) really submit
that job: run through the real CLI, or posted as is, against a running console."""

from __future__ import annotations

import hashlib
import json
import shlex
from pathlib import Path

import pytest

from bench.support.packages import build_package
from jobs.training import equivalent
from tests.helpers.cli import TRAINER

pytestmark = pytest.mark.executor

PROJECT = "default-project"


@pytest.fixture(scope="module")
def gcs_package(gcs_emulator, tmp_path_factory):
    path = build_package(tmp_path_factory.mktemp("eq-pkg"), {"trainer/task.py": TRAINER}, name="eqtrainer")
    return gcs_emulator.upload("eq-packages", "eqtrainer-0.1.tar.gz", path.read_bytes())


def tuned_custom_input(package: str) -> dict:
    return {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4",
        "workerType": "n1-standard-4",
        "workerCount": "1",
        "parameterServerType": "n1-highmem-2",
        "parameterServerCount": "1",
        "packageUris": [package],
        "pythonModule": "trainer.task",
        "region": "us-central1",
        "runtimeVersion": "2.11",
        "pythonVersion": "3.7",
        "args": ["--sleep", "30", "--name=a b", "it's"],
        "scheduling": {"maxRunningTime": "3600s"},
        "hyperparameters": {
            "goal": "MAXIMIZE",
            "hyperparameterMetricTag": "accuracy",
            "maxTrials": 2,
            "maxParallelTrials": 1,
            "params": [
                {
                    "parameterName": "lr",
                    "type": "DOUBLE",
                    "minValue": 0.001,
                    "maxValue": 0.1,
                    "scaleType": "UNIT_LOG_SCALE",
                },
                {"parameterName": "opt", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
            ],
        },
    }


def run_command(cli, built: equivalent.Equivalent, folder: Path, monkeypatch):
    """What a user does with the page's text: save config.yaml beside them, paste the command."""
    if built.config_yaml:
        (folder / "config.yaml").write_text(built.config_yaml)
    monkeypatch.chdir(folder)
    words = shlex.split(built.command)
    assert words[:4] == ["aiconsole", "jobs", "submit", "training"]
    return cli(*words[1:])


def test_the_shown_command_submits_the_same_training_input(cli, console, gcs_package, tmp_path, monkeypatch):
    original = tuned_custom_input(gcs_package)
    status, source = console.server.api(
        "POST",
        f"/v1/projects/{PROJECT}/jobs",
        console.token,
        {"jobId": "eq_source", "labels": {"team": "ml"}, "trainingInput": original},
    )
    assert status == 200, source
    built = equivalent.build(PROJECT, "eq_by_cli", source["trainingInput"], source["labels"])
    result = run_command(cli, built, tmp_path, monkeypatch)
    assert result.code == 0, result.err
    copy = console.job("eq_by_cli")
    assert copy["trainingInput"] == source["trainingInput"]
    assert copy["labels"] == {"team": "ml"}
    for job_id in ("eq_source", "eq_by_cli"):
        cli("jobs", "cancel", job_id)


def test_the_shown_rest_body_posted_as_is_submits_the_same_job(cli, console, gcs_package):
    status, source = console.server.api(
        "POST",
        f"/v1/projects/{PROJECT}/jobs",
        console.token,
        {"jobId": "eq_rest_source", "trainingInput": tuned_custom_input(gcs_package)},
    )
    assert status == 200, source
    built = equivalent.build(PROJECT, "eq_by_rest", source["trainingInput"], source.get("labels"))
    status, copy = console.server.api("POST", built.rest_path, console.token, json.loads(built.rest_body))
    assert status == 200, copy
    assert copy["trainingInput"] == source["trainingInput"] and copy["jobId"] == "eq_by_rest"
    for job_id in ("eq_rest_source", "eq_by_rest"):
        cli("jobs", "cancel", job_id)


def test_an_uploaded_package_is_uploaded_again_by_its_file_name(cli, console, tmp_path, monkeypatch):
    sdist = build_package(tmp_path, {"trainer/task.py": TRAINER}, name="equp")
    result = cli(
        "jobs",
        "submit",
        "training",
        "eq_up_source",
        "--packages",
        str(sdist),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--runtime-version",
        "2.11",
        "--python-version",
        "3.7",
    )
    assert result.code == 0, result.err
    source = console.job("eq_up_source")["trainingInput"]
    [stored] = source["packageUris"]
    built = equivalent.build(PROJECT, "eq_up_copy", source, uploaded={stored: sdist.name})
    assert stored not in built.command + built.rest_body
    result = run_command(cli, built, tmp_path, monkeypatch)  # the sdist is in this folder
    assert result.code == 0, result.err
    copy = console.job("eq_up_copy")["trainingInput"]
    [again] = copy["packageUris"]
    assert {**copy, "packageUris": []} == {**source, "packageUris": []}
    assert Path(again).name == sdist.name and again != stored
    assert hashlib.sha256(Path(again).read_bytes()).digest() == hashlib.sha256(Path(stored).read_bytes()).digest()
