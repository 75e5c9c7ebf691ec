"""``aiconsole jobs submit training`` against a real console: packages, config files, bad input."""

from __future__ import annotations

import os
import subprocess
import tarfile
import textwrap

import pytest
import yaml

from bench.support.packages import build_package
from tests.helpers.cli import read_seen, write_trainer
from tests.helpers.console import AICONSOLE

pytestmark = pytest.mark.executor


@pytest.fixture(scope="module")
def gcs_package(gcs_emulator, tmp_path_factory):
    """A trainer sdist already in Cloud Storage, for jobs that need no upload."""
    from tests.helpers.cli import TRAINER

    path = build_package(tmp_path_factory.mktemp("gcs-pkg"), {"trainer/task.py": TRAINER}, name="gcstrainer")
    return gcs_emulator.upload("cli-packages", "gcstrainer-0.1.tar.gz", path.read_bytes())


def test_package_path_without_setup_py_is_built_uploaded_and_runs(cli, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    job_dir = console.storage / "jobs" / "default-project" / "plain_pkg"
    result = cli(
        "jobs",
        "submit",
        "training",
        "plain_pkg",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--job-dir",
        str(job_dir),
        "--",
        "--epochs",
        "3",
        "--name=x y",
    )
    assert result.code == 0, result.err
    assert "Job [plain_pkg] submitted successfully." in result.err
    assert "Built trainer-0.0.0.tar.gz" in result.err and "Uploading trainer-0.0.0.tar.gz" in result.err
    assert "aiconsole jobs stream-logs plain_pkg" in result.err
    assert yaml.safe_load(result.out) == {"jobId": "plain_pkg", "state": "QUEUED"}

    job = console.wait("plain_pkg")
    assert job["state"] == "SUCCEEDED", job
    [uri] = job["trainingInput"]["packageUris"]
    assert uri.endswith("/trainer-0.0.0.tar.gz") and os.path.isfile(uri)
    # The user's arguments come first, then --job-dir, as the original ran trainers.
    assert read_seen(job_dir)["argv"] == ["--epochs", "3", "--name=x y", "--job-dir", str(job_dir)]
    assert not list(folder.parent.glob("*.egg-info")) and not (folder / "__pycache__").exists()


@pytest.mark.parametrize("layout", ["setup.py in the parent (gcloud's rule)", "the folder's own setup.py"])
def test_package_path_with_a_setup_py_uses_it(cli, console, tmp_path, layout):
    project = tmp_path / "project"
    write_trainer(project)
    (project / "setup.py").write_text(
        textwrap.dedent("""\
        from setuptools import find_packages, setup
        setup(name="custom_trainer", version="1.2.3", packages=find_packages())
        """)
    )
    package_path = project / "trainer" if layout.startswith("setup.py in the parent") else project
    job_id = "own_setup_parent" if package_path.name == "trainer" else "own_setup_root"
    result = cli(
        "jobs",
        "submit",
        "training",
        job_id,
        "--package-path",
        str(package_path),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
    )
    assert result.code == 0, result.err
    assert "Built custom_trainer-1.2.3.tar.gz" in result.err
    job = console.wait(job_id)
    assert job["state"] == "SUCCEEDED", job
    assert job["trainingInput"]["packageUris"][0].endswith("/custom_trainer-1.2.3.tar.gz")
    assert not list(project.glob("*.egg-info"))  # the user's folder is left as it was


def test_gclouds_own_config_example_with_flags_overriding_it(cli, console, tmp_path, gcs_package):
    config = tmp_path / "config.yaml"
    config.write_text(
        textwrap.dedent(f"""\
        jobId: my_job
        labels:
          type: prod
          owner: alice
        trainingInput:
          scaleTier: BASIC
          packageUris: [{gcs_package}]
          pythonModule: trainer.task
          region: us-east1
        """)
    )
    result = cli(
        "jobs",
        "submit",
        "training",
        "config_example",
        "--config",
        str(config),
        "--region",
        "us-central1",
        "--labels",
        "owner=bob,team=ml",
        "--runtime-version",
        "2.11",
        "--format",
        "json",
        "--",
        "--sleep",
        "0",
    )
    assert result.code == 0, result.err
    job = console.job("config_example")
    assert job["jobId"] == "config_example"  # the JOB argument wins over the file's jobId
    assert job["labels"] == {"type": "prod", "owner": "bob", "team": "ml"}
    training_input = job["trainingInput"]
    assert training_input["region"] == "us-central1"
    assert training_input["packageUris"] == [gcs_package]
    assert training_input["args"] == ["--sleep", "0"]
    assert training_input["runtimeVersion"] == "2.11"
    assert console.wait("config_example")["state"] == "SUCCEEDED"


def test_custom_cluster_and_hyperparameters_from_config(cli, console, tmp_path, gcs_package):
    config = tmp_path / "hptuning_config.yaml"
    config.write_text(
        textwrap.dedent(f"""\
        trainingInput:
          scaleTier: CUSTOM
          masterType: complex_model_m
          workerType: complex_model_m
          parameterServerType: large_model
          workerCount: 9
          parameterServerCount: 3
          packageUris: [{gcs_package}]
          scheduling: {{maxRunningTime: 7200s}}
          hyperparameters:
            goal: MAXIMIZE
            hyperparameterMetricTag: accuracy
            maxTrials: 30
            maxParallelTrials: 1
            enableTrialEarlyStopping: True
            algorithm: ALGORITHM_UNSPECIFIED
            params:
            - {{parameterName: hidden1, type: INTEGER, minValue: 40, maxValue: 400, scaleType: UNIT_LINEAR_SCALE}}
            - {{parameterName: learning_rate, type: DOUBLE, minValue: 0.0001, maxValue: 0.1, scaleType: UNIT_LOG_SCALE}}
            - {{parameterName: numRnnCells, type: DISCRETE, discreteValues: [1, 2, 3, 4]}}
            - {{parameterName: rnnCellType, type: CATEGORICAL, categoricalValues: [BasicLSTMCell, GRUCell, LSTMCell]}}
        """)
    )
    result = cli(
        "jobs",
        "submit",
        "training",
        "hp_config",
        "--config",
        str(config),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--worker-count",
        "1",
        "--parameter-server-machine-type",
        "standard",
        "--parameter-server-count",
        "1",
        "--",
        "--sleep",
        "300",
    )
    assert result.code == 0, result.err
    training_input = console.job("hp_config")["trainingInput"]
    assert training_input["masterType"] == "complex_model_m"
    assert (training_input["workerType"], training_input["workerCount"]) == ("complex_model_m", "1")
    assert (training_input["parameterServerType"], training_input["parameterServerCount"]) == ("standard", "1")
    hp = training_input["hyperparameters"]
    assert (hp["goal"], hp["maxTrials"], hp["enableTrialEarlyStopping"]) == ("MAXIMIZE", 30, True)
    assert [p["parameterName"] for p in hp["params"]] == ["hidden1", "learning_rate", "numRnnCells", "rnnCellType"]
    assert hp["params"][3]["categoricalValues"] == ["BasicLSTMCell", "GRUCell", "LSTMCell"]
    assert cli("jobs", "cancel", "hp_config").code == 0


def test_accelerator_and_tier_flags_become_api_enums(cli, console, gcs_package):
    result = cli(
        "jobs",
        "submit",
        "training",
        "gpu_flags",
        "--packages",
        gcs_package,
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--scale-tier",
        "custom",
        "--master-machine-type",
        "n1-standard-8",
        "--master-accelerator",
        "type=nvidia-tesla-t4,count=2",
        "--worker-machine-type",
        "n1-standard-8",
        "--worker-count",
        "1",
        "--worker-accelerator",
        "count=1,type=NVIDIA_TESLA_T4",
        "--labels",
        "a=1",
        "--labels",
        "b=2",
        "--format",
        "json",
    )
    assert result.code == 0, result.err
    training_input = console.job("gpu_flags")["trainingInput"]
    assert training_input["scaleTier"] == "CUSTOM"
    assert training_input["masterConfig"]["acceleratorConfig"] == {"count": "2", "type": "NVIDIA_TESLA_T4"}
    assert training_input["workerConfig"]["acceleratorConfig"] == {"count": "1", "type": "NVIDIA_TESLA_T4"}
    assert console.job("gpu_flags")["labels"] == {"a": "1", "b": "2"}
    cli("jobs", "cancel", "gpu_flags")


# --- bad input: a clear message, and nothing uploaded or created ---------------------------------


def test_invalid_yaml_config_names_the_file_and_nothing_is_uploaded(cli, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    config = tmp_path / "broken.yaml"
    config.write_text("trainingInput:\n  scaleTier: BASIC\n  args: [--epochs, 3\n")
    before = console.uploaded()
    result = cli(
        "jobs",
        "submit",
        "training",
        "bad_yaml",
        "--config",
        str(config),
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
    )
    assert result.code == 2
    assert f"--config {config} is not valid YAML at line" in result.err
    assert "Building" not in result.err and "Uploading" not in result.err
    assert console.uploaded() == before
    assert console.job("bad_yaml")["status"] == 404


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("- just\n- a list\n", "must hold a Job"),
        ("trainingInputs: {}\n", "unknown Job field 'trainingInputs'"),
        ("trainingInput: {scaletier: BASIC}\n", 'Unknown name "scaletier"'),
        ("trainingInput: {workerCount: many}\n", "Invalid value at 'job.training_input.worker_count'"),
    ],
)
def test_config_that_does_not_fit_the_job_schema_is_refused_before_upload(cli, console, tmp_path, text, message):
    folder = write_trainer(tmp_path / "src")
    config = tmp_path / "config.yaml"
    config.write_text(text)
    before = console.uploaded()
    result = cli(
        "jobs",
        "submit",
        "training",
        "bad_schema",
        "--config",
        str(config),
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
    )
    assert result.code == 2, result.err
    assert message in result.err
    assert console.uploaded() == before


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("count=2", "names no accelerator type"),
        ("count=1,type=nvidia-tesla-x1", "invalid accelerator type 'nvidia-tesla-x1'"),
        ("count=0,type=nvidia-tesla-t4", "count must be a positive whole number"),
        ("colour=red,type=nvidia-tesla-t4", "unknown key 'colour'"),
        ("nvidia-tesla-t4", "expected KEY=VALUE"),
    ],
)
def test_bad_accelerator_syntax_names_the_flag(cli, value, message):
    result = cli(
        "jobs",
        "submit",
        "training",
        "bad_acc",
        "--packages",
        "gs://b/p.tar.gz",
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--master-accelerator",
        value,
    )
    assert result.code == 2
    assert "argument --master-accelerator:" in result.err and message in result.err


def test_unknown_flags_and_bad_enums_are_usage_errors(cli):
    unknown = cli("jobs", "submit", "training", "j", "--region", "us-central1", "--no-such-flag")
    assert unknown.code == 2 and "unrecognized arguments: --no-such-flag" in unknown.err
    tier = cli("jobs", "submit", "training", "j", "--scale-tier", "huge")
    assert tier.code == 2 and "argument --scale-tier: invalid choice 'huge'" in tier.err
    abbreviated = cli("jobs", "submit", "training", "j", "--module", "trainer.task")
    assert abbreviated.code == 2  # no abbreviations: --module is not --module-name


def test_missing_essentials_are_listed_before_anything_happens(cli, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    before = console.uploaded()
    result = cli("jobs", "submit", "training", "no_region", "--package-path", str(folder), "--scale-tier", "custom")
    assert result.code == 2
    assert "--region is required" in result.err
    assert "--module-name is required" in result.err
    assert "--master-machine-type is required with --scale-tier custom" in result.err
    assert console.uploaded() == before
    unpaired = cli(
        "jobs",
        "submit",
        "training",
        "j",
        "--packages",
        "gs://b/p.tar.gz",
        "--module-name",
        "m",
        "--region",
        "us-central1",
        "--worker-count",
        "2",
    )
    assert unpaired.code == 2 and "--worker-count needs --worker-machine-type" in unpaired.err
    missing = cli(
        "jobs",
        "submit",
        "training",
        "j",
        "--packages",
        str(tmp_path / "nope.tar.gz"),
        "--module-name",
        "m",
        "--region",
        "us-central1",
    )
    assert missing.code == 2 and "no such file" in missing.err


def test_server_invalid_argument_is_printed_field_by_field(run_aiconsole, console, gcs_package):
    result = run_aiconsole(
        "jobs",
        "submit",
        "training",
        "rejected_job",
        "--packages",
        gcs_package,
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--scale-tier",
        "custom",
        "--master-machine-type",
        "n1-fantasy-7",
        "--runtime-version",
        "0.1",
    )
    assert result.code == 1
    assert "ERROR: (aiconsole.jobs.submit.training) INVALID_ARGUMENT:" in result.err
    assert "  - job.training_input.master_type: " in result.err
    assert "  - job.training_input.runtime_version: " in result.err
    assert "Traceback" not in result.err


def test_duplicate_job_id_is_already_exists_and_nothing_is_uploaded(cli, console, gcs_package, tmp_path):
    args = ("jobs", "submit", "training", "twice", "--module-name", "trainer.task", "--region", "us-central1")
    assert cli(*args, "--packages", gcs_package).code == 0
    again = cli(*args, "--packages", gcs_package)
    assert again.code == 1 and "ALREADY_EXISTS" in again.err and "job.job_id" in again.err

    before = console.uploaded()
    with_upload = cli(*args, "--package-path", str(write_trainer(tmp_path / "src")))
    assert with_upload.code == 1 and "ALREADY_EXISTS" in with_upload.err
    assert "Uploading" not in with_upload.err and console.uploaded() == before


def test_a_refused_token_stops_the_submission_before_the_upload(cli, console, tmp_path, monkeypatch):
    monkeypatch.setenv("AICONSOLE_TOKEN", "aic_wrong")
    before = console.uploaded()
    result = cli(
        "jobs",
        "submit",
        "training",
        "bad_token",
        "--package-path",
        str(write_trainer(tmp_path / "src")),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
    )
    assert result.code == 1 and "UNAUTHENTICATED" in result.err and "Uploading" not in result.err
    assert console.uploaded() == before


def test_staging_bucket_uploads_to_cloud_storage(cli, console, tmp_path, gcs_emulator):
    gcs_emulator.make_bucket("cli-staging")
    folder = write_trainer(tmp_path / "src")
    result = cli(
        "jobs",
        "submit",
        "training",
        "staged_gcs",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--staging-bucket",
        "gs://cli-staging",
        "--format",
        "json",
    )
    assert result.code == 0, result.err
    [uri] = console.job("staged_gcs")["trainingInput"]["packageUris"]
    assert uri.startswith("gs://cli-staging/staged_gcs/packages/") and uri.endswith("/trainer-0.0.0.tar.gz")
    blob = gcs_emulator.client.bucket("cli-staging").blob(uri.removeprefix("gs://cli-staging/"))
    data = blob.download_as_bytes()
    names = tarfile.open(fileobj=__import__("io").BytesIO(data)).getnames()
    assert "trainer-0.0.0/trainer/task.py" in names
    assert console.wait("staged_gcs")["state"] == "SUCCEEDED"


def test_the_installed_program_submits_and_streams_to_the_end(run_aiconsole, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    result = run_aiconsole(
        "jobs",
        "submit",
        "training",
        "streamed_fail",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--stream-logs",
        "--",
        "--fail",
    )
    assert result.code == 1, result.err
    assert "trainer started" in result.out
    assert "Job [streamed_fail] finished with state FAILED" in result.err


def test_help_shows_the_user_args_convention():
    text = subprocess.run([AICONSOLE, "jobs", "submit", "training", "--help"], capture_output=True, text=True).stdout
    assert "-- USER_ARGS" in text and "--master-accelerator" in text


def test_a_runtime_python_pair_the_console_cannot_run_is_refused_before_anything_is_built(cli, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    uploaded = list(console.uploaded())
    result = cli(
        "jobs",
        "submit",
        "training",
        "py27_job",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--runtime-version",
        "1.15",
        "--python-version",
        "2.7",
    )
    assert result.code == 2
    assert "cannot submit the job: Python 2.7 for runtime version 1.15 cannot be provided" in result.err
    assert "set pythonVersion to 3.7" in result.err
    assert "Built" not in result.err and list(console.uploaded()) == uploaded


def test_a_failed_jobs_whole_error_is_printed(cli, console, tmp_path):
    folder = write_trainer(
        tmp_path / "src", "import sys\nprint('first', file=sys.stderr)\nraise SystemExit('second line of the reason')\n"
    )
    result = cli(
        "jobs",
        "submit",
        "training",
        "whole_error",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--stream-logs",
    )
    assert result.code == 1
    assert (
        "Job [whole_error] finished with state FAILED: The replica master 0 exited with a non-zero status of 1."
        in result.err
    )
    assert "second line of the reason" in result.err.split("finished with state FAILED", 1)[1]
