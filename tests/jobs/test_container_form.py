"""On the console's job form, clone and job page: "Custom container" beside "Python
package", the project's images to pick from, the service's refusals on the fields, the live
command, and a clone that keeps the images instead of dropping them."""

from __future__ import annotations

import re
import shlex
from html import unescape

import pytest
import yaml
from django.test import Client

from bench.support.images import make_image
from jobs import services
from jobs.containers import choices
from jobs.models import ContainerImage, Job
from jobs.training import equivalent
from jobs.web.forms import JobSubmitForm
from tests.helpers.images import require_engine
from tests.helpers.jobs import submit

SUBMIT = "/projects/project-a/jobs/new/"
PREVIEW = "/projects/project-a/jobs/new/preview/"
HELLO = "echo hello from $0 $*\n"
# What a browser without JavaScript sends besides the container fields: the package section's
# values, which a container job must not carry.
PACKAGE_FIELDS = {
    "package_uris": "gs://bucket/trainer-0.1.tar.gz",
    "python_module": "trainer.task",
    "runtime_version": "2.11",
    "python_version": "3.7",
}


@pytest.fixture
def image():
    return make_image(require_engine(), HELLO)


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def page_text(response) -> str:
    return unescape(response.content.decode())


def container_form(**overrides) -> dict:
    data = {"job_id": "boxed_1", "code": "container", "region": "us-central1", "scale_tier": "BASIC"}
    return {**data, **overrides}


def errors_of(response, field: str) -> str:
    return " ".join(response.context["form"].errors.get(field, []))


# --- submitting ---------------------------------------------------------------------------------


@pytest.mark.parametrize("browser", ["with JavaScript", "without JavaScript"])
def test_the_form_submits_a_container_job_with_no_package_or_runtime(project, developer, image, browser):
    data = container_form(master_image=image, args="--epochs 3 '--name=a b'", use_chief_in_tf_config="on")
    if browser == "without JavaScript":  # the hidden package fields are sent too, and ignored
        data.update(PACKAGE_FIELDS)
    answer = signed_in(developer).post(SUBMIT, data)
    assert answer.status_code == 302, page_text(answer)[-3000:]
    assert answer["Location"] == "/projects/project-a/jobs/boxed_1/"
    ti = Job.objects.get(job_id="boxed_1").training_input
    assert ti["masterConfig"] == {"imageUri": image}
    assert ti["args"] == ["--epochs", "3", "--name=a b"] and ti["useChiefInTfConfig"] is True
    for absent in ("packageUris", "pythonModule", "runtimeVersion", "pythonVersion"):
        assert absent not in ti


def test_a_container_job_without_a_master_image_is_refused_on_the_image_field(project, developer):
    answer = signed_in(developer).post(SUBMIT, container_form(master_image=""))
    assert answer.status_code == 200 and not Job.objects.exists()
    assert "Name the image the master runs (masterConfig.imageUri)" in errors_of(answer, "master_image")
    html = page_text(answer)
    assert 'id="id_master_image_errors"' in html and 'aria-invalid="true"' in html
    assert not answer.context["form"].errors.get("python_module")  # not asked of a container job


def test_an_image_that_is_not_here_is_refused_on_the_image_field_in_the_services_words(project, developer):
    require_engine()
    answer = signed_in(developer).post(SUBMIT, container_form(master_image="localhost/aic-test/absent:nowhere"))
    assert answer.status_code == 200 and not Job.objects.exists()
    message = errors_of(answer, "master_image")
    assert "The image localhost/aic-test/absent:nowhere is not on this server, and images are never pulled" in message


def test_a_worker_image_that_is_not_here_is_refused_on_the_workers_image_field(project, developer, image):
    data = container_form(master_image=image, scale_tier="STANDARD_1", worker_image="localhost/aic-test/gone:1")
    answer = signed_in(developer).post(SUBMIT, data)
    assert answer.status_code == 200
    assert "localhost/aic-test/gone:1 is not on this server" in errors_of(answer, "worker_image")
    assert not errors_of(answer, "master_image")


def test_container_args_and_arguments_together_are_refused_on_the_container_args_field(project, developer):
    data = container_form(master_image="localhost/aic-test/any:1", args="--a", container_args="--b")
    answer = signed_in(developer).post(SUBMIT, data)
    assert answer.status_code == 200 and not Job.objects.exists()
    assert "containerArgs cannot be combined with trainingInput.args" in errors_of(answer, "container_args")


def test_the_images_command_and_args_go_to_every_replica_that_runs():
    form = JobSubmitForm(
        container_form(
            master_image="gcr.io/p/trainer:v1",
            worker_image="gcr.io/p/worker:v1",
            scale_tier="STANDARD_1",  # master, workers, parameter servers; no evaluators
            container_command="python -m trainer.task",
            container_args="--epochs 3",
            **PACKAGE_FIELDS,
        )
    )
    assert form.is_valid(), form.errors
    ti = form.job_body()["trainingInput"]
    command = {"containerCommand": ["python", "-m", "trainer.task"], "containerArgs": ["--epochs", "3"]}
    assert ti["masterConfig"] == {"imageUri": "gcr.io/p/trainer:v1", **command}
    assert ti["workerConfig"] == {"imageUri": "gcr.io/p/worker:v1", **command}
    assert ti["parameterServerConfig"] == command  # the master's image
    assert "evaluatorConfig" not in ti and "useChiefInTfConfig" not in ti


def test_a_custom_container_keeps_its_accelerators_beside_its_image():
    form = JobSubmitForm(
        container_form(
            master_image="gcr.io/p/trainer:v1",
            scale_tier="CUSTOM",
            master_type="n1-standard-8",
            master_accelerator_type="NVIDIA_TESLA_T4",
            master_accelerator_count="1",
        )
    )
    assert form.is_valid(), form.errors
    assert form.job_body()["trainingInput"]["masterConfig"] == {
        "acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"},
        "imageUri": "gcr.io/p/trainer:v1",
    }


# --- the page and its live command -----------------------------------------------------------------


def test_the_choice_is_a_labelled_group_and_package_is_the_default(project, developer):
    response = signed_in(developer).get(SUBMIT)
    html = page_text(response)
    assert "<legend>Trainer code</legend>" in html
    assert re.search(r'<label class="tier"><input type="radio" name="code" value="package"[^>]*checked', html)
    assert re.search(r'<input type="radio" name="code" value="container"', html)
    assert '<label for="id_master_image">Master image</label>' in html
    assert 'list="image-choices"' in html and '<datalist id="image-choices">' in html
    assert '<label for="id_worker_image">Workers: image</label>' in html


def test_the_image_list_offers_the_projects_uploads_and_the_hosts_images_but_not_another_projects(
    project, other_project, developer
):
    engine = require_engine()
    host = make_image(engine, HELLO)
    theirs = make_image(engine, "echo another project's image\n", name="localhost/aic-test/theirs:1")
    ContainerImage.objects.create(
        project=other_project, name=theirs, image_id=engine.inspect_image(theirs)["Id"].removeprefix("sha256:")
    )
    ContainerImage.objects.create(project=project, name="gcr.io/project-a/uploaded:v1", image_id="0" * 64)
    # A pod's pause image, which podman builds in the host's store, is no image a job runs.
    engine.call("tag", host, "localhost/podman-pause:4.3.1-0000000000")
    try:
        offered = choices.offered_images(project)
    finally:
        engine.call("untag", host, "localhost/podman-pause:4.3.1-0000000000")
    assert offered[0] == "gcr.io/project-a/uploaded:v1" and host in offered and theirs not in offered
    assert not any("pause" in name for name in offered)
    html = page_text(signed_in(developer).get(SUBMIT))
    assert f'<option value="{host}">' in html and f'<option value="{theirs}">' not in html


def test_a_docker_listing_is_read_as_well_as_podmans():
    docker = (
        '{"ID":"0123456789ab","Repository":"gcr.io/p/trainer","Tag":"v3"}\n'
        '{"ID":"ba9876543210","Repository":"<none>","Tag":"<none>"}\n'
    )
    assert choices.parse_listing(docker) == [("0123456789ab", "gcr.io/p/trainer:v3")]
    podman = '[{"Id":"abc","Names":["localhost/x:1","localhost/y:2"]},{"Id":"def"}]'
    assert choices.parse_listing(podman) == [("abc", "localhost/x:1"), ("abc", "localhost/y:2")]


def test_the_live_command_of_a_container_job_names_its_images_and_args(project, developer):
    data = container_form(
        master_image="gcr.io/p/trainer:v1",
        scale_tier="STANDARD_1",
        worker_image="gcr.io/p/worker:v1",
        use_chief_in_tf_config="on",
        args="--epochs 3",
        **PACKAGE_FIELDS,
    )
    html = page_text(signed_in(developer).post(PREVIEW, data))
    command = re.search(r'<pre id="form-cli"[^>]*>(.*?)</pre>', html, re.S).group(1)
    words = shlex.split(command)
    assert words[:5] == ["aiconsole", "jobs", "submit", "training", "boxed_1"]
    assert words[words.index("--master-image-uri") + 1] == "gcr.io/p/trainer:v1"
    assert words[words.index("--worker-image-uri") + 1] == "gcr.io/p/worker:v1"
    assert words[words.index("--use-chief-in-tf-config") + 1] == "true"
    assert words[words.index("--") :] == ["--", "--epochs", "3"]
    for flag in ("--module-name", "--runtime-version", "--python-version", "--packages", "--config"):
        assert flag not in words


def test_a_container_command_goes_in_the_config_file_beside_the_image_flags():
    ti = {
        "scaleTier": "BASIC",
        "region": "us-central1",
        "masterConfig": {"imageUri": "gcr.io/p/t:1", "containerCommand": ["sh", "-c"], "containerArgs": ["echo hi"]},
        "evaluatorConfig": {"imageUri": "gcr.io/p/eval:1"},  # gcloud has no flag for it
    }
    built = equivalent.build("project-a", "cmd_1", ti)
    words = shlex.split(built.command)
    assert words[words.index("--master-image-uri") + 1] == "gcr.io/p/t:1"
    assert yaml.safe_load(built.config_yaml)["trainingInput"] == {
        "masterConfig": {"containerCommand": ["sh", "-c"], "containerArgs": ["echo hi"]},
        "evaluatorConfig": {"imageUri": "gcr.io/p/eval:1"},
    }


# --- clone and the job page ----------------------------------------------------------------------


def container_job(project, actor, image: str, job_id: str = "boxed_src") -> Job:
    training_input = {
        "scaleTier": "CUSTOM",
        "masterType": "n1-standard-4",
        "workerType": "n1-standard-4",
        "workerCount": "1",
        "region": "us-central1",
        "masterConfig": {"imageUri": image, "containerCommand": ["/trainer.sh"], "containerArgs": ["--epochs", "2"]},
        "workerConfig": {"imageUri": image, "containerCommand": ["/trainer.sh"], "containerArgs": ["--epochs", "2"]},
        "useChiefInTfConfig": True,
    }
    return services.submit_job(project, {"jobId": job_id, "trainingInput": training_input}, actor=actor)


def test_clone_keeps_the_images_and_prefills_the_container_fields(project, developer, image):
    source = container_job(project, developer, image)
    client = signed_in(developer)
    response = client.get(SUBMIT, {"clone": source.job_id})
    initial = response.context["form"].initial
    assert initial["code"] == "container"
    assert initial["master_image"] == image and initial["worker_image"] == image
    assert initial["container_command"] == "/trainer.sh" and initial["container_args"] == "--epochs 2"
    assert initial["use_chief_in_tf_config"] is True
    assert initial["job_id"].startswith("busybox_")  # named after the image, as a module names a package job
    html = page_text(response)
    assert re.search(r'<input type="radio" name="code" value="container"[^>]*checked', html)
    assert "Not carried over" not in html
    assert f"--master-image-uri {image}" in html  # the fresh form's live command

    data = {name: value for name, value in initial.items()}
    data["use_chief_in_tf_config"] = "on"
    answer = client.post(SUBMIT, data)
    assert answer.status_code == 302, page_text(answer)[-3000:]
    assert Job.objects.get(job_id=initial["job_id"]).training_input == source.training_input


def test_clone_names_a_roles_own_container_command_the_form_cannot_hold(project, developer, image):
    source = container_job(project, developer, image)
    source.training_input["workerConfig"]["containerCommand"] = ["/bin/sh"]
    Job.objects.filter(pk=source.pk).update(training_input=source.training_input)
    html = page_text(signed_in(developer).get(SUBMIT, {"clone": source.job_id}))
    assert "Not carried over (the form has no place for them): workerConfig.containerCommand." in html


def test_the_job_page_shows_the_image_per_role_and_no_runtime(project, developer, image):
    container_job(project, developer, image, job_id="boxed_page")
    html = page_text(signed_in(developer).get("/projects/project-a/jobs/boxed_page/"))
    images = re.search(r"<dd data-container-images>(.*?)</dd>", html, re.S).group(1)
    assert f"Master: <code>{image}</code>" in images and f"Worker: <code>{image}</code>" in images
    assert "Master: <code>/trainer.sh</code>" in html and "Worker: <code>--epochs 2</code>" in html
    assert "chief <small>(useChiefInTfConfig: true)</small>" in html
    assert "data-runtime" not in html and "<dt>Module</dt>" not in html
    assert f"--master-image-uri {image} --worker-image-uri {image}" in html  # submit it again


def test_a_package_jobs_page_still_shows_its_runtime(project, developer):
    submit(project, "plain_page", developer)
    html = page_text(signed_in(developer).get("/projects/project-a/jobs/plain_page/"))
    assert "data-runtime" in html and "data-python" in html and "data-container-images" not in html
