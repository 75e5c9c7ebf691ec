"""Without a browser: "Clone" prefills the form, the equivalent command
and REST body, machine descriptions and the ML-unit estimate from the catalogue."""

from __future__ import annotations

import json
import re
import shlex
from html import unescape
from pathlib import Path

import pytest
import yaml
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from bench.support.packages import build_package
from jobs import catalogue, services
from jobs.models import Job
from jobs.training import equivalent
from jobs.web.forms import JobSubmitForm, machine_help
from tests.helpers.jobs import PACKAGE

SUBMIT = "/projects/project-a/jobs/new/"
PREVIEW = "/projects/project-a/jobs/new/preview/"

CUSTOM_INPUT = {
    "scaleTier": "CUSTOM",
    "masterType": "n1-standard-8",
    "workerType": "n1-standard-4",
    "workerCount": "2",
    "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
    "packageUris": [PACKAGE],
    "pythonModule": "trainer.task",
    "region": "us-central1",
    "runtimeVersion": "2.11",
    "pythonVersion": "3.7",
    "args": ["--epochs", "5", "--name=a b"],
    "jobDir": "gs://bucket/out",
    "scheduling": {"maxRunningTime": "7200s"},
    "hyperparameters": {
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "accuracy",
        "maxTrials": 4,
        "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1}],
    },
}


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_text(response) -> str:
    return unescape(response.content.decode())


# --- the command line and REST body (pure) -----------------------------------------------------


def test_a_basic_job_needs_no_config_file():
    ti = {
        "scaleTier": "BASIC_GPU",
        "packageUris": [PACKAGE],
        "pythonModule": "trainer.task",
        "region": "us-east1",
        "runtimeVersion": "2.11",
        "pythonVersion": "3.7",
        "args": ["--lr", "0.1"],
    }
    built = equivalent.build("project-a", "job_1", ti, {"team": "ml"})
    assert built.config_yaml is None
    assert shlex.split(built.command) == [
        "aiconsole",
        "jobs",
        "submit",
        "training",
        "job_1",
        "--region",
        "us-east1",
        "--module-name",
        "trainer.task",
        "--runtime-version",
        "2.11",
        "--python-version",
        "3.7",
        "--scale-tier",
        "basic-gpu",
        "--packages",
        PACKAGE,
        "--labels",
        "team=ml",
        "--",
        "--lr",
        "0.1",
    ]
    assert json.loads(built.rest_body) == {"jobId": "job_1", "labels": {"team": "ml"}, "trainingInput": ti}
    assert built.rest_path == "/v1/projects/project-a/jobs"


def test_custom_machines_and_tuning_go_in_the_config_file():
    built = equivalent.build("project-a", "job_2", CUSTOM_INPUT)
    words = shlex.split(built.command)
    assert words[words.index("--config") + 1] == "config.yaml" and "--scale-tier" not in words
    assert words[words.index("--") + 1 :] == ["--epochs", "5", "--name=a b"]
    config = yaml.safe_load(built.config_yaml)["trainingInput"]
    assert config["scaleTier"] == "CUSTOM" and config["workerCount"] == "2"
    assert config["hyperparameters"] == CUSTOM_INPUT["hyperparameters"]
    assert "region" not in config and "packageUris" not in config  # given as flags


def test_an_uploaded_package_is_named_by_its_file_never_its_server_path():
    stored = "/srv/aiconsole/storage/packages/project-a/0123456789abcdef/trainer-0.1.tar.gz"
    ti = {"scaleTier": "BASIC", "packageUris": [stored], "pythonModule": "trainer.task", "region": "us-central1"}
    built = equivalent.build("project-a", "job_3", ti, uploaded={stored: "trainer-0.1.tar.gz"})
    assert "--packages trainer-0.1.tar.gz" in built.command
    assert stored not in built.command + built.rest_body
    assert built.uploads == ["trainer-0.1.tar.gz"]
    assert json.loads(built.rest_body)["trainingInput"]["packageUris"] == [
        equivalent.upload_placeholder("trainer-0.1.tar.gz")
    ]


def test_the_estimate_is_the_catalogues_rate_for_every_replica():
    two_workers = equivalent.units_per_hour(CUSTOM_INPUT)
    three_workers = equivalent.units_per_hour({**CUSTOM_INPUT, "workerCount": "3"})
    n1_4 = catalogue.MACHINE_TYPES["n1-standard-4"].units_per_hour
    assert three_workers - two_workers == pytest.approx(n1_4)
    t4 = catalogue.ACCELERATORS["NVIDIA_TESLA_T4"].units_per_hour
    assert two_workers == pytest.approx(
        catalogue.MACHINE_TYPES["n1-standard-8"].units_per_hour + t4 + 2 * n1_4, abs=1e-4
    )
    assert equivalent.units_per_hour({"scaleTier": "CUSTOM"}) is None  # no master yet


def test_machine_descriptions_name_vcpus_memory_and_the_accelerators_allowed():
    assert machine_help("n1-standard-96").startswith("n1-standard-96: 96 vCPUs, 360 GB. Accelerators: ")
    assert "NVIDIA_TESLA_K80" not in machine_help("n1-standard-96")  # 96 vCPUs is over every K80 limit
    assert "NVIDIA_TESLA_K80 × 1/2/4/8" in machine_help("n1-standard-4")
    assert "NVIDIA_TESLA_A100 × 2 only" in machine_help("a2-highgpu-2g")
    assert "built in" in machine_help("standard_gpu") and "TPU_V2 or TPU_V3" in machine_help("cloud_tpu")
    form = JobSubmitForm()
    assert dict(form.fields["worker_type"].choices)["Compute Engine"][0][1].endswith("vCPUs, 15 GB")


# --- Clone ----------------------------------------------------------------------------------------


def test_clone_prefills_the_form_with_a_new_id_and_the_jobs_input(project, developer):
    source = services.submit_job(
        project, {"jobId": "census_1", "labels": {"team": "ml"}, "trainingInput": CUSTOM_INPUT}, actor=developer
    )
    response = signed_in(developer).get(SUBMIT, {"clone": source.job_id})
    assert response.status_code == 200
    form = response.context["form"]
    assert re.fullmatch(r"trainer_\d{8}_\d{6}", form.initial["job_id"])
    # A job dir of its own beside the original's, never the original's (its curves would be drawn as the clone's).
    assert form.initial["job_dir"] == f"gs://bucket/{form.initial['job_id']}"
    assert form.initial["package_uris"] == PACKAGE and form.initial["worker_count"] == "2"
    assert form.initial["master_accelerator_type"] == "NVIDIA_TESLA_T4"
    assert form.initial["args"] == "--epochs 5 '--name=a b'"
    assert yaml.safe_load(form.initial["hyperparameters"]) == CUSTOM_INPUT["hyperparameters"]
    assert 'data-cloned-from="census_1"' in response.content.decode()
    # What the fresh form holds is what the job had: the live command shows it already.
    preview = response.context["preview"]
    assert yaml.safe_load(preview.config_yaml)["trainingInput"]["workerCount"] == "2"


def test_a_cloned_upload_is_kept_by_reference_and_reused(project, developer, tmp_path):
    sdist = build_package(tmp_path, {"trainer/task.py": "print('hi')\n"}, name="keepme")
    client = signed_in(developer)
    uploaded = services.upload_package(project, sdist.name, sdist.open("rb"), actor=developer)["uri"]
    services.submit_job(
        project,
        {
            "jobId": "up_1",
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": [uploaded],
                "pythonModule": "trainer.task",
                "region": "us-central1",
                "runtimeVersion": "2.11",
                "pythonVersion": "3.7",
            },
        },
        actor=developer,
    )
    response = client.get(SUBMIT, {"clone": "up_1"})
    html = page_text(response)
    assert response.context["form"].kept["name"] == sdist.name
    assert uploaded not in html and str(tmp_path) not in html  # no server path on the page
    assert f"--packages {sdist.name}" in html
    data = {name: value for name, value in response.context["form"].initial.items()}
    data.update(kept_package=response.context["form"].kept["ref"], job_id="up_2", args="--changed")
    answer = client.post(SUBMIT, data)
    assert answer.status_code == 302, page_text(answer)[-3000:]
    clone = Job.objects.get(job_id="up_2")
    assert clone.training_input["packageUris"] == [uploaded]
    assert clone.training_input["args"] == ["--changed"]


def test_clone_needs_to_see_the_job_and_to_create_jobs(project, developer, viewer, outsider):
    services.submit_job(project, {"jobId": "private_1", "trainingInput": CUSTOM_INPUT}, actor=developer)
    assert signed_in(viewer).get(SUBMIT, {"clone": "private_1"}).status_code == 403
    assert signed_in(outsider).get(SUBMIT, {"clone": "private_1"}).status_code == 404
    assert signed_in(developer).get(SUBMIT, {"clone": "missing"}).status_code == 404


def test_the_job_page_offers_clone_and_the_equivalent_command(project, developer, viewer):
    services.submit_job(project, {"jobId": "shown_1", "trainingInput": CUSTOM_INPUT}, actor=developer)
    html = page_text(signed_in(developer).get("/projects/project-a/jobs/shown_1/"))
    assert f"{SUBMIT}?clone=shown_1" in html
    assert "aiconsole jobs submit training shown_1 --region us-central1" in html
    assert "POST /v1/projects/project-a/jobs" in html and "Copy REST body" in html
    assert "?clone=" not in page_text(signed_in(viewer).get("/projects/project-a/jobs/shown_1/"))


# --- the live preview ----------------------------------------------------------------------------


def form_data(**overrides) -> dict:
    data = {
        "job_id": "live_1",
        "python_module": "trainer.task",
        "region": "us-central1",
        "runtime_version": "2.11",
        "python_version": "3.7",
        "scale_tier": "CUSTOM",
        "master_type": "n1-standard-4",
        "worker_type": "n1-standard-4",
        "worker_count": "1",
        "package_uris": PACKAGE,
    }
    return {**data, **overrides}


def units(response) -> float:
    return float(re.search(r"data-units>([\d.]+)<", response.content.decode()).group(1))


def test_the_preview_follows_the_worker_count_and_reads_the_yaml(project, developer):
    client = signed_in(developer)
    one = client.post(PREVIEW, form_data())
    three = client.post(PREVIEW, form_data(worker_count="3"))
    rate = catalogue.MACHINE_TYPES["n1-standard-4"].units_per_hour
    assert units(three) - units(one) == pytest.approx(2 * rate, abs=0.01)
    assert "aiconsole jobs submit training live_1" in page_text(three)
    tuned = client.post(PREVIEW, form_data(hyperparameters="goal: MINIMIZE\nmaxTrials: 3\n"))
    parsed = json.loads(re.search(r'id="tuning-parsed"[^>]*>(.*?)</script>', tuned.content.decode()).group(1))
    assert parsed == {"spec": {"goal": "MINIMIZE", "maxTrials": 3}, "error": ""}
    broken = client.post(PREVIEW, form_data(hyperparameters="goal: [unclosed"))
    assert "cannot be parsed" in page_text(broken)
    assert Job.objects.count() == 0  # a preview submits nothing


def test_the_preview_names_a_chosen_file_not_yet_uploaded(project, developer):
    answer = signed_in(developer).post(PREVIEW, form_data(package_uris="", package_file_name="C:\\dev\\t-1.tar.gz"))
    assert "--packages t-1.tar.gz" in page_text(answer)


def test_a_viewer_gets_no_preview(project, viewer):
    assert signed_in(viewer).post(PREVIEW, form_data()).status_code == 403


def test_a_file_upload_still_submits_through_the_form(project, developer, tmp_path):
    sdist = build_package(tmp_path, {"trainer/task.py": "print('hi')\n"}, name="plainup")
    data = form_data(scale_tier="BASIC", package_uris="", job_id="plain_up")
    data["package_file"] = SimpleUploadedFile(sdist.name, sdist.read_bytes())
    assert signed_in(developer).post(SUBMIT, data).status_code == 302


def test_a_cloned_upload_that_is_gone_is_named_never_shown_by_path(project, developer, tmp_path):
    sdist = build_package(tmp_path, {"trainer/task.py": "print('hi')\n"}, name="goneaway")
    uploaded = services.upload_package(project, sdist.name, sdist.open("rb"), actor=developer)["uri"]
    services.submit_job(
        project,
        {
            "jobId": "gone_1",
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": [uploaded, PACKAGE],
                "pythonModule": "trainer.task",
                "region": "us-central1",
                "runtimeVersion": "2.11",
                "pythonVersion": "3.7",
            },
        },
        actor=developer,
    )
    Path(uploaded).unlink()
    response = signed_in(developer).get(SUBMIT, {"clone": "gone_1"})
    html = page_text(response)
    assert uploaded not in html
    assert response.context["form"].initial["package_uris"] == PACKAGE
    assert f"Upload again: {sdist.name}" in html


def test_clone_names_the_nested_fields_the_form_cannot_hold(project, developer):
    boot_disk = {
        **CUSTOM_INPUT,
        "masterConfig": {
            "diskConfig": {"bootDiskType": "pd-ssd", "bootDiskSizeGb": 200},
            "acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"},
        },
        "workerConfig": {"diskConfig": {"bootDiskSizeGb": 100}},
    }
    source = services.submit_job(project, {"jobId": "disks_1", "trainingInput": boot_disk}, actor=developer)
    response = signed_in(developer).get(SUBMIT, {"clone": source.job_id})
    assert response.context["form"].initial["master_accelerator_type"] == "NVIDIA_TESLA_T4"  # carried
    assert (
        "Not carried over (the form has no place for them): masterConfig.diskConfig, workerConfig.diskConfig."
    ) in page_text(response)
