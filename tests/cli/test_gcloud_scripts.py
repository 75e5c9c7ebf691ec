"""The samples' own shell scripts (train-cloud.sh, deploy.sh) through ``aiconsole gcloud-wrapper``,
as a former user runs them: the installed programs in a shell with no Django settings, packages
staged to Cloud Storage (the session's emulator), gcloud's dialect (``beta``, ``--region``,
``--framework SCIKIT_LEARN``, ``--quiet``)."""

from __future__ import annotations

import io
import json
import os
import shutil
import subprocess
import tarfile

import pytest
import yaml

from bench.support.packages import build_package
from bench.support.waiting import wait_for
from console.cli import gcloud
from tests.helpers.cli import Result, write_trainer
from tests.helpers.console import AICONSOLE, Server, token_for

pytestmark = pytest.mark.executor


def test_gclouds_release_tracks_translate_as_the_ga_commands_do():
    ga = gcloud.translate(["ai-platform", "versions", "create", "v1", "--model", "m", "--region", "us-central1"])
    assert ga == ["versions", "create", "v1", "--model", "m", "--region", "us-central1"]
    for track in ("beta", "alpha"):
        assert (
            gcloud.translate(
                [track, "ai-platform", "versions", "create", "v1", "--model", "m", "--region", "us-central1"]
            )
            == ga
        )
        assert gcloud.translate(["--project", "p", track, "ml-engine", "jobs", "list"]) == [
            "jobs",
            "list",
            "--project",
            "p",
        ]
        assert gcloud.translate([track, "compute", "instances", "list"]) is None
    assert gcloud.translate(["beta", "beta", "ai-platform", "jobs", "list"]) is None


@pytest.fixture
def shell(console, tmp_path):
    """A user's shell: the console's address and token, the wrapper first on PATH, and none of the
    test process's Django settings (a user's shell has none: that is what hid the staging bug)."""
    wrapper = gcloud.write_wrapper(tmp_path / "wrapper")
    # Google's gcloud may be installed here, and would call Google: a stand-in takes its place
    # further along PATH, and fails any command the wrapper should have kept.
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

    def run(*argv: str, timeout: float = 300, **more_env: str) -> Result:
        done = subprocess.run(
            list(argv), capture_output=True, text=True, env={**env, **more_env}, cwd=tmp_path, timeout=timeout
        )
        return Result(done.returncode, done.stdout, done.stderr)

    return run


def _staged_files(gcs_emulator, bucket: str, prefix: str) -> dict[str, list[str]]:
    """Each staged archive under gs://bucket/prefix and the names inside it."""
    found = {}
    for blob in gcs_emulator.client.list_blobs(bucket, prefix=prefix):
        names = tarfile.open(fileobj=io.BytesIO(blob.download_as_bytes())).getnames()
        found[blob.name] = names
    return found


def test_staging_bucket_works_from_a_shell_without_django_settings(shell, console, tmp_path, gcs_emulator):
    gcs_emulator.make_bucket("shell-staging")
    folder = write_trainer(tmp_path / "src")
    result = shell(
        "aiconsole",
        "jobs",
        "submit",
        "training",
        "staged_shell",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--staging-bucket",
        "gs://shell-staging",
    )
    assert result.code == 0, result.err
    assert "ImproperlyConfigured" not in result.err
    staged = _staged_files(gcs_emulator, "shell-staging", "staged_shell/packages/")
    [(name, inside)] = staged.items()
    assert name.endswith("/trainer-0.0.0.tar.gz") and "trainer-0.0.0/trainer/task.py" in inside
    assert console.job("staged_shell")["trainingInput"]["packageUris"] == [f"gs://shell-staging/{name}"]
    assert console.wait("staged_shell")["state"] == "SUCCEEDED"


def test_train_cloud_sh_through_the_wrapper_stages_under_a_gs_job_dir(shell, console, tmp_path, gcs_emulator):
    gcs_emulator.make_bucket("shell-jobs")
    folder = write_trainer(tmp_path / "src")
    # train-cloud.sh, as the samples write it (a gs:// job dir and no --staging-bucket).
    result = shell(
        "gcloud",
        "ai-platform",
        "jobs",
        "submit",
        "training",
        "cloud_sh_1",
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--region",
        "us-central1",
        "--job-dir",
        "gs://shell-jobs/cloud_sh_1",
        "--scale-tier",
        "BASIC",
        "--runtime-version",
        "2.11",
        "--python-version",
        "3.7",
        "--stream-logs",
        "--",
        "--epochs",
        "1",
    )
    assert result.code == 0, result.err
    assert "trainer done" in result.out
    staged = _staged_files(gcs_emulator, "shell-jobs", "cloud_sh_1/packages/")
    assert [name.rsplit("/", 1)[-1] for name in staged] == ["trainer-0.0.0.tar.gz"]


def test_gcloud_beta_jobs_submit_training_with_a_config_file(shell, console, tmp_path):
    folder = write_trainer(tmp_path / "src")
    config = tmp_path / "hptuning_config.yaml"
    config.write_text(
        yaml.safe_dump({"trainingInput": {"scaleTier": "BASIC", "runtimeVersion": "2.11", "pythonVersion": "3.7"}})
    )
    result = shell(
        "gcloud",
        "beta",
        "ai-platform",
        "jobs",
        "submit",
        "training",
        "beta_submit",
        "--region",
        "us-central1",
        "--config",
        str(config),
        "--package-path",
        str(folder),
        "--module-name",
        "trainer.task",
        "--quiet",
        "--format",
        "json",
    )
    assert result.code == 0, result.err
    assert json.loads(result.out)["jobId"] == "beta_submit"
    # What to run next is said as the script's user would type it, as gcloud says it.
    assert "  $ gcloud beta ai-platform jobs describe beta_submit\n" in result.err
    assert "  $ gcloud beta ai-platform jobs stream-logs beta_submit" in result.err
    assert "aiconsole" not in result.err
    assert console.wait("beta_submit")["state"] == "SUCCEEDED"


@pytest.fixture(scope="module")
def sklearn_model(console, trained):
    target = console.storage / "script-models" / "default-project" / "sklearn"
    shutil.rmtree(target, ignore_errors=True)
    shutil.copytree(trained["sklearn"], target)
    return target


def test_deploy_sh_through_the_wrapper(shell, console, sklearn_model, trained, tmp_path, gcs_emulator):
    # ai-platform-samples' deploy.sh and its cousins: --regions on create, --region (a regional
    # endpoint) elsewhere, the framework as the API's enum name, --quiet on deletes, the beta track.
    created = shell("gcloud", "ai-platform", "models", "create", "deploy_sh", "--regions=us-central1")
    assert created.code == 0, created.err
    version = shell(
        "gcloud",
        "beta",
        "ai-platform",
        "versions",
        "create",
        "v1",
        "--model",
        "deploy_sh",
        "--origin",
        str(sklearn_model),
        "--framework",
        "SCIKIT_LEARN",
        "--runtime-version=2.11",
        "--python-version=3.7",
        "--region",
        "us-central1",
        "--machine-type",
        "n1-standard-2",
    )
    assert version.code == 0, version.err
    described = yaml.safe_load(
        shell(
            "gcloud", "ai-platform", "versions", "describe", "v1", "--model", "deploy_sh", "--region", "us-central1"
        ).out
    )
    assert described["framework"] == "SCIKIT_LEARN" and described["state"] == "READY"

    instances = tmp_path / "instances.json"
    instances.write_text("\n".join(json.dumps(row) for row in trained["probe"]) + "\n")
    predicted = shell(
        "gcloud",
        "ai-platform",
        "predict",
        "--model",
        "deploy_sh",
        "--version",
        "v1",
        "--region",
        "us-central1",
        "--json-instances",
        str(instances),
        "--format",
        "json",
    )
    assert predicted.code == 0, predicted.err
    assert json.loads(predicted.out) == {"predictions": trained["expected"]["sklearn"]}

    # A local --origin with --staging-bucket goes to Cloud Storage first, from this shell.
    gcs_emulator.make_bucket("deploy-staging")
    staged = shell(
        "gcloud",
        "ai-platform",
        "versions",
        "create",
        "v2",
        "--model",
        "deploy_sh",
        "--origin",
        str(sklearn_model),
        "--staging-bucket",
        "gs://deploy-staging",
        "--framework",
        "scikit-learn",
        "--runtime-version",
        "2.11",
        "--region",
        "us-central1",
        "--format",
        "json",
    )
    assert staged.code == 0, staged.err
    assert json.loads(staged.out)["deploymentUri"] == "gs://deploy-staging/deploy_sh/v2/"
    assert gcs_emulator.client.bucket("deploy-staging").blob("deploy_sh/v2/model.joblib").exists()

    for version in ("v2", "v1"):  # the default goes last
        deleted = shell(
            "gcloud",
            "ai-platform",
            "versions",
            "delete",
            version,
            "--model",
            "deploy_sh",
            "--region",
            "us-central1",
            "--quiet",
        )
        assert deleted.code == 0, deleted.err
    gone = shell("gcloud", "ai-platform", "models", "delete", "deploy_sh", "--region=global", "--quiet")
    assert gone.code == 0, gone.err
    assert "Deleted model [deploy_sh]." in gone.err


@pytest.mark.parametrize(
    "argv, flag, rule",
    [
        (
            ["versions", "create", "v1", "--model", "m", "--origin", "gs://b/m", "--framework", "pytorch"],
            "--framework",
            "choose from: scikit-learn, tensorflow, xgboost",
        ),
        (
            ["versions", "delete", "v1", "--model", "m", "--region", "mars-west1"],
            "--region",
            "choose from: global, asia-east1",
        ),
        (
            ["versions", "create", "v1", "--model", "m", "--origin", "gs://b/m", "--prediction-class", "my.Predictor"],
            "--prediction-class",
            "Custom prediction routines (packageUris, predictionClass) are not supported",
        ),
        (["explain", "--model", "m", "--json-instances", "x.json"], "'explain'", "explanations"),
    ],
)
def test_gcloud_input_this_console_refuses_names_the_flag_and_the_rule(shell, argv, flag, rule):
    result = shell("gcloud", "ai-platform", *argv)
    assert result.code == 2
    assert flag in result.err and rule in result.err, result.err


def test_the_rest_of_the_model_surface(shell, console):
    assert shell("gcloud", "ai-platform", "models", "create", "surface_m", "--region", "europe-west4").code == 0
    described = yaml.safe_load(shell("gcloud", "ai-platform", "models", "describe", "surface_m").out)
    assert described["regions"] == ["europe-west4"]

    updated = shell(
        "gcloud",
        "ai-platform",
        "models",
        "update",
        "surface_m",
        "--update-labels",
        "team=ml",
        "--description",
        "census",
    )
    assert updated.code == 0, updated.err
    described = yaml.safe_load(shell("gcloud", "ai-platform", "models", "describe", "surface_m").out)
    assert described["labels"] == {"team": "ml"} and described["description"] == "census"

    bound = shell(
        "gcloud",
        "ai-platform",
        "models",
        "add-iam-policy-binding",
        "surface_m",
        "--member",
        "user:admin",
        "--role",
        "roles/ml.modelUser",
        "--format",
        "json",
    )
    assert bound.code == 0, bound.err
    policy = json.loads(shell("gcloud", "ai-platform", "models", "get-iam-policy", "surface_m", "--format", "json").out)
    assert {"role": "roles/ml.modelUser", "members": ["user:admin"]} in policy["bindings"]
    unbound = shell(
        "gcloud",
        "ai-platform",
        "models",
        "remove-iam-policy-binding",
        "surface_m",
        "--member",
        "user:admin",
        "--role",
        "roles/ml.modelUser",
        "--format",
        "json",
    )
    assert unbound.code == 0, unbound.err
    assert "roles/ml.modelUser" not in json.dumps(json.loads(unbound.out).get("bindings", []))

    operations = json.loads(shell("gcloud", "ai-platform", "operations", "list", "--format", "json").out)
    update = next(op for op in operations if op["metadata"]["modelName"].endswith("/surface_m"))
    waited = shell("gcloud", "ai-platform", "operations", "wait", update["name"], "--format", "json")
    assert waited.code == 0 and json.loads(waited.out)["name"].endswith("/models/surface_m")
    assert "us-central1" in shell("gcloud", "ai-platform", "locations", "list").out
    assert shell("gcloud", "ai-platform", "locations", "describe", "us-central1", "--format", "json").code == 0
    assert shell("gcloud", "ai-platform", "models", "delete", "surface_m", "--quiet").code == 0


def test_train_local_sh_checks_the_model_with_local_predict(shell, trained, runtime_python, tmp_path):
    # census/estimator/scripts/train-local.sh: the model just trained, predicted in this machine's Python.
    instances = tmp_path / "instances.json"
    instances.write_text("\n".join(json.dumps(row) for row in trained["probe"]) + "\n")
    python = str(runtime_python)  # an environment that has the framework, as the user's own would
    predicted = shell(
        "gcloud",
        "ai-platform",
        "local",
        "predict",
        f"--model-dir={trained['sklearn']}",
        f"--json-instances={instances}",
        "--verbosity",
        "debug",
        "--format",
        "json",
        AICONSOLE_LOCAL_PYTHON=python,
    )
    missing = shell(
        "gcloud",
        "ai-platform",
        "local",
        "predict",
        f"--model-dir={trained['empty']}",
        f"--json-instances={instances}",
        AICONSOLE_LOCAL_PYTHON=python,
    )
    assert predicted.code == 0, predicted.err
    assert json.loads(predicted.out) == {"predictions": trained["expected"]["sklearn"]}
    assert missing.code == 1 and "holds no model file" in missing.err and "model.joblib" in missing.err


# The emulator takes any token; this one never expires, so no client ever asks Google for another.
EMULATOR_CREDENTIALS = {
    "type": "authorized_user",
    "client_id": "emulator",
    "client_secret": "emulator",
    "refresh_token": "emulator",
    "token": "emulator",
    "expiry": "2099-01-01T00:00:00Z",
}
READS_GCS = """
import os, sys
from google.cloud import storage
data = storage.Client().bucket("old-gcs").blob("data.txt").download_as_string()
print("read from Cloud Storage:", data.decode(), flush=True)
"""


def test_an_old_runtimes_trainer_reads_gs_with_the_credentials_the_readme_says_to_pass(console, gcs_emulator, tmp_path):
    """Runtime 2.1's google-cloud-storage 1.23 asks for credentials even with STORAGE_EMULATOR_HOST:
    without them the job fails saying so; given as the README says, it reads the object."""
    gcs_emulator.upload("old-gcs", "data.txt", b"census rows")
    credentials = tmp_path / "emulator-credentials.json"
    credentials.write_text(json.dumps(EMULATOR_CREDENTIALS))
    credentials.chmod(0o644)  # the trainers' accounts read it
    passthrough = (
        "HOME,LANG,LC_ALL,TZ,USER,LOGNAME,STORAGE_EMULATOR_HOST,GOOGLE_APPLICATION_CREDENTIALS,GOOGLE_CLOUD_PROJECT"
    )
    given = Server(
        tmp_path / "data",
        AICONSOLE_TRAINER_ENV_PASSTHROUGH=passthrough,
        GOOGLE_APPLICATION_CREDENTIALS=str(credentials),
        GOOGLE_CLOUD_PROJECT="aiconsole",
    )
    try:
        results = {}
        for name, server, token in (
            ("without", console.server, console.token),
            ("with", given, token_for(given.data_dir)),
        ):
            package = build_package(
                server.data_dir / "storage" / "packages" / "default-project" / name, {"trainer/task.py": READS_GCS}
            )
            job_id = f"old_gcs_{name}"
            status, body = server.api(
                "POST",
                "/v1/projects/default-project/jobs",
                token,
                {
                    "jobId": job_id,
                    "trainingInput": {
                        "scaleTier": "BASIC",
                        "packageUris": [str(package)],
                        "pythonModule": "trainer.task",
                        "region": "us-central1",
                        "runtimeVersion": "2.1",
                        "pythonVersion": "3.7",
                    },
                },
            )
            assert status == 200, body
            path = f"/v1/projects/default-project/jobs/{job_id}"
            wait_for(
                lambda path=path, server=server, token=token: (
                    server.api("GET", path, token)[1].get("state") in {"SUCCEEDED", "FAILED"}
                ),
                300,
                0.2,
                f"{job_id} to end",
            )
            log = server.api("GET", path + "/logs?pageSize=1000", token)[1]
            results[name] = (server.api("GET", path, token)[1], "\n".join(e["message"] for e in log["entries"]))
    finally:
        given.stop()
    (without, without_log), (with_, with_log) = results["without"], results["with"]
    assert without["state"] == "FAILED" and "DefaultCredentialsError" in without_log
    assert with_["state"] == "SUCCEEDED", with_log
    assert "read from Cloud Storage: census rows" in with_log


def test_a_build_script_names_its_image_from_gclouds_project(shell, tmp_path):
    """Container samples start ``PROJECT_ID=$(gcloud config get-value project)`` and tag
    ``gcr.io/$PROJECT_ID/…``: the wrapper answers with the console's project, and ``config set``
    changes what every later command uses, without reaching Google's gcloud."""
    script = tmp_path / "build.sh"
    script.write_text(
        "set -e\n"
        "PROJECT_ID=$(gcloud config get-value project)\n"
        'echo "IMAGE_URI=gcr.io/$PROJECT_ID/mnist:v1"\n'
        "gcloud config list --format 'value(core.project)'\n"
    )
    result = shell("/bin/sh", str(script), AICONSOLE_PROJECT="team-vision")
    assert result.code == 0, result.err
    assert result.out.splitlines() == ["IMAGE_URI=gcr.io/team-vision/mnist:v1", "team-vision"]

    assert shell("gcloud", "config", "get-value", "project").out == "default-project\n"
    region = shell("gcloud", "config", "get-value", "ai_platform/region")
    assert (region.code, region.out, region.err) == (0, "", "(unset)\n")
    updated = shell("gcloud", "config", "set", "project", "team-speech")
    assert (updated.code, updated.err) == (0, "Updated property [core/project].\n")
    shell("gcloud", "config", "set", "ai_platform/region", "europe-west4")
    listed = shell("gcloud", "config", "list")
    assert listed.out == "[core]\nproject = team-speech\n\n[ai_platform]\nregion = europe-west4\n\n"
    assert "Your active configuration is" in listed.err
    # The CLI's own commands use what was set, and a flag still wins for one command.
    assert shell("aiconsole", "auth", "status").out.count("team-speech") >= 1
    assert shell("gcloud", "config", "get-value", "project", "--project", "once").out == "once\n"
    # Any other property is Google's gcloud's business (the stand-in refuses it loudly).
    other = shell("gcloud", "config", "get-value", "compute/zone")
    assert other.code == 99 and "reached Google's gcloud" in other.err


def test_gcloud_ai_custom_jobs_create_stream_logs_describe_list_and_cancel(shell, console, tmp_path):
    """Vertex AI's gcloud commands through the wrapper: a job from a --config file with a package,
    followed to its end, described and listed; another cancelled; any other `gcloud ai` group still
    goes to Google's gcloud."""
    package = build_package(
        console.storage / "packages" / "default-project" / "vertex-gcloud",
        {
            "trainer/__init__.py": "",
            "trainer/task.py": "import sys, time\nprint('vertex via gcloud', sys.argv[1:], flush=True)\n"
            "if '--sleep' in sys.argv:\n    time.sleep(120)\n",
        },
    )
    config = tmp_path / "config.yaml"
    pool = {
        "machineSpec": {"machineType": "n1-standard-4"},
        "replicaCount": 1,
        "pythonPackageSpec": {
            "executorImageUri": "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest",
            "packageUris": [str(package)],
            "pythonModule": "trainer.task",
        },
    }
    config.write_text(yaml.safe_dump({"workerPoolSpecs": [pool]}))
    created = shell(
        "gcloud", "ai", "custom-jobs", "create", "--region=us-central1", "--display-name=from-gcloud",
        f"--config={config}", "--args=--epochs=2", "--format=json",
    )  # fmt: skip
    assert created.code == 0, created.err
    name = json.loads(created.out)["name"]
    assert name.startswith("projects/default-project/locations/us-central1/customJobs/")
    assert f"CustomJob [{name}] is submitted successfully." in created.err
    assert f"  $ gcloud ai custom-jobs stream-logs {name}" in created.err and "aiconsole" not in created.err

    followed = shell("gcloud", "ai", "custom-jobs", "stream-logs", name, "--region", "us-central1")
    assert followed.code == 0, followed.err
    assert "vertex via gcloud ['--epochs=2']" in followed.out
    described = shell("gcloud", "ai", "custom-jobs", "describe", name.rsplit("/", 1)[1], "--region=us-central1")
    assert described.code == 0 and yaml.safe_load(described.out)["state"] == "JOB_STATE_SUCCEEDED"
    listed = shell("gcloud", "ai", "custom-jobs", "list", "--region=us-central1", '--filter=display_name="from-gcloud"')
    assert listed.code == 0 and name.rsplit("/", 1)[1] in listed.out and "from-gcloud" in listed.out

    held = {**pool, "pythonPackageSpec": {**pool["pythonPackageSpec"], "args": ["--sleep"]}}
    config.write_text(yaml.safe_dump({"workerPoolSpecs": [held]}))
    second = shell(
        "gcloud", "ai", "custom-jobs", "create", "--region=us-central1", "--display-name=to-cancel",
        f"--config={config}", "--format=json",
    )  # fmt: skip
    number = json.loads(second.out)["name"].rsplit("/", 1)[1]
    cancelled = shell("gcloud", "ai", "custom-jobs", "cancel", number, "--region=us-central1")
    assert cancelled.code == 0 and f"Request to cancel CustomJob [{number}] has been sent" in cancelled.err
    wait_for(
        lambda: (
            "JOB_STATE_CANCELLED"
            in shell("gcloud", "ai", "custom-jobs", "describe", number, "--region=us-central1").out
        ),
        60,
        0.5,
        "the job to be cancelled",
    )

    refused = shell("gcloud", "ai", "custom-jobs", "create", "--region=us-central1", "--display-name=x",
                    "--worker-pool-spec=machine-type=n1-standard-4,local-package-path=.")  # fmt: skip
    assert refused.code == 2 and "local-package-path" in refused.err
    elsewhere = shell("gcloud", "ai", "endpoints", "list", "--region=us-central1")
    assert elsewhere.code == 99 and "reached Google's gcloud: ai endpoints list" in elsewhere.err
