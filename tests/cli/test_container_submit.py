"""from the command line: ``jobs submit training --master-image-uri`` (and ``--config``
with masterConfig.imageUri) submits a custom container job that runs in the console's engine, and
an unchanged ``gcloud ai-platform jobs submit training --master-image-uri`` line does the same
through the wrapper. A container with a package, module or runtime version is refused up front."""

from __future__ import annotations

import os
import subprocess

import pytest
import yaml

from bench.support.images import make_image
from console.cli import gcloud
from tests.helpers.cli import Result, write_trainer
from tests.helpers.console import AICONSOLE
from tests.helpers.images import require_engine

pytestmark = pytest.mark.executor

HELLO = "echo hello from $0 $*\n"


@pytest.fixture
def image():
    return make_image(require_engine(), HELLO)


def test_the_cli_submits_a_container_job_that_runs_to_succeeded(cli, console, image):
    result = cli(
        "jobs",
        "submit",
        "training",
        "cli_box",
        "--master-image-uri",
        image,
        "--region",
        "us-central1",
        "--use-chief-in-tf-config",  # bare, as the flag reads: true
        "--stream-logs",
        "--",
        "--epochs",
        "3",
    )
    assert result.code == 0, result.err
    assert "Job [cli_box] submitted successfully." in result.err
    assert "hello from /trainer.sh --epochs 3" in result.out
    job = console.wait("cli_box")
    assert job["state"] == "SUCCEEDED", job
    ti = job["trainingInput"]
    assert ti["masterConfig"] == {"imageUri": image} and ti["useChiefInTfConfig"] is True
    assert ti["args"] == ["--epochs", "3"]
    assert not {"packageUris", "pythonModule", "runtimeVersion", "pythonVersion"} & set(ti)


def test_a_config_file_naming_the_image_submits_a_container_job(cli, console, image, tmp_path):
    config = tmp_path / "config.yaml"
    config.write_text(
        yaml.safe_dump(
            {
                "trainingInput": {
                    "scaleTier": "BASIC",
                    "region": "us-central1",
                    "masterConfig": {"imageUri": image, "containerArgs": ["--from-config", "yes"]},
                    "useChiefInTfConfig": False,
                }
            }
        )
    )
    result = cli("jobs", "submit", "training", "cli_box_config", "--config", str(config), "--format", "json")
    assert result.code == 0, result.err
    job = console.wait("cli_box_config")
    assert job["state"] == "SUCCEEDED", job
    assert job["trainingInput"]["masterConfig"]["imageUri"] == image
    logs = cli("jobs", "stream-logs", "cli_box_config")
    assert logs.code == 0 and "hello from /trainer.sh --from-config yes" in logs.out


def test_a_container_with_a_package_module_or_runtime_is_refused_before_anything_is_sent(cli, console, image, tmp_path):
    folder = write_trainer(tmp_path / "src")
    with_package = cli(
        "jobs",
        "submit",
        "training",
        "cli_box_both",
        "--master-image-uri",
        image,
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
    )
    assert with_package.code == 2
    assert "Only one of --master-image-uri, --package-path can be set." in with_package.err
    assert "Only one of --master-image-uri, --module-name can be set." in with_package.err
    with_runtime = cli(
        "jobs",
        "submit",
        "training",
        "cli_box_both",
        "--master-image-uri",
        image,
        "--runtime-version",
        "2.11",
        "--region",
        "us-central1",
    )
    assert with_runtime.code == 2
    assert "Only one of --master-image-uri, --runtime-version can be set." in with_runtime.err  # gcloud's words
    assert "Uploading" not in with_package.err + with_runtime.err
    assert console.job("cli_box_both")["status"] == 404


@pytest.fixture
def shell(console, tmp_path):
    """A user's shell with the wrapper first on PATH, no Django settings, and a stand-in for
    Google's gcloud that fails whatever the wrapper should have kept."""
    wrapper = gcloud.write_wrapper(tmp_path / "wrapper")
    real = tmp_path / "google-cloud-sdk"
    real.mkdir()
    (real / "gcloud").write_text('#!/bin/sh\necho "reached Google\'s gcloud: $*" >&2\nexit 99\n')
    (real / "gcloud").chmod(0o755)
    env = {key: value for key, value in os.environ.items() if key != "DJANGO_SETTINGS_MODULE"}
    env.update(
        {
            "AICONSOLE_URL": console.url,
            "AICONSOLE_TOKEN": console.token,
            "AICONSOLE_CONFIG": str(tmp_path / "aiconsole-config.json"),
            "PATH": f"{wrapper.parent}:{os.path.dirname(AICONSOLE)}:{real}",
        }
    )
    for name in ("AICONSOLE_PROJECT", "AICONSOLE_REGION"):
        env.pop(name, None)

    def run(*argv: str) -> Result:
        done = subprocess.run(list(argv), capture_output=True, text=True, env=env, cwd=tmp_path, timeout=300)
        return Result(done.returncode, done.stdout, done.stderr)

    return run


def test_an_unchanged_gcloud_container_submit_runs_through_the_wrapper(shell, console, image):
    result = shell(
        "gcloud",
        "ai-platform",
        "jobs",
        "submit",
        "training",
        "gcloud_box",
        "--master-image-uri",
        image,
        "--region",
        "us-central1",
        "--",
        "--epochs",
        "3",
    )
    assert result.code == 0, result.err
    assert "Job [gcloud_box] submitted successfully." in result.err
    job = console.wait("gcloud_box")
    assert job["state"] == "SUCCEEDED", job
    assert job["trainingInput"]["masterConfig"] == {"imageUri": image}
    logs = shell("gcloud", "ai-platform", "jobs", "stream-logs", "gcloud_box")
    assert logs.code == 0, logs.err
    assert "hello from /trainer.sh --epochs 3" in logs.out


def test_gcloud_refuses_a_container_with_a_package_in_its_own_words(shell, console, image, tmp_path):
    folder = write_trainer(tmp_path / "src")
    result = shell(
        "gcloud",
        "ai-platform",
        "jobs",
        "submit",
        "training",
        "gcloud_box_pkg",
        "--master-image-uri",
        image,
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
    )
    assert result.code == 2
    assert "Only one of --master-image-uri, --package-path can be set." in result.err
    assert "reached Google's gcloud" not in result.err
    assert console.job("gcloud_box_pkg")["status"] == 404


def test_a_package_in_one_of_googles_pre_built_images_is_the_servers_to_judge(cli, console, tmp_path):
    """AI Platform's pre-built PyTorch images were submitted with a package (``--master-image-uri``
    with ``--package-path``): the CLI sends such a job, and the server says what it cannot build."""
    folder = write_trainer(tmp_path / "src")
    result = cli(
        "jobs",
        "submit",
        "training",
        "cli_torch_gpu",
        "--master-image-uri",
        "gcr.io/cloud-ml-public/training/pytorch-gpu.1-13",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
    )
    assert result.code != 0
    assert "Only one of" not in result.err
    assert "needs NVIDIA GPUs and CUDA" in result.err and "pytorch-cpu.1-4, 1-6" in result.err, result.err
    assert console.job("cli_torch_gpu")["status"] == 404
