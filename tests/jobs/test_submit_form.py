"""On the new-job form and job page: the kept upload, accelerator counts, the audit name,
the "Permission denied" page and the deploy link."""

from __future__ import annotations

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.test import Client

from aiconsole.models import AuditEntry
from jobs import services
from jobs.models import Job, JobState
from jobs.web.forms import JobSubmitForm
from tests.helpers.jobs import body, submit

SUBMIT = "/projects/project-a/jobs/new/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def form_data(**overrides) -> dict:
    data = {
        "job_id": "job_1",
        "python_module": "trainer.task",
        "region": "us-central1",
        "runtime_version": "2.11",
        "python_version": "3.7",
        "scale_tier": "BASIC",
    }
    return {**data, **overrides}


def custom(**fields) -> JobSubmitForm:
    form = JobSubmitForm(
        form_data(scale_tier="CUSTOM", master_type="n1-standard-8", package_uris="gs://b/t.tar.gz", **fields)
    )
    form.is_valid()
    return form


def test_an_empty_accelerator_count_without_an_accelerator_means_none():
    form = custom(master_accelerator_count="")
    assert form.is_valid(), form.errors
    assert "masterConfig" not in form.job_body()["trainingInput"]


def test_an_accelerator_with_an_empty_count_asks_for_the_count_in_words():
    form = custom(master_accelerator_type="NVIDIA_TESLA_T4", master_accelerator_count="")
    message = " ".join(form.errors["master_accelerator_count"])
    assert "how many NVIDIA_TESLA_T4 accelerators each machine gets" in message
    assert "acceleratorConfig" not in message and "greater than 0" not in message


def test_a_count_without_an_accelerator_type_asks_for_the_type():
    form = custom(master_accelerator_count="2")
    assert "choose the accelerator type" in " ".join(form.errors["master_accelerator_type"])


def test_the_audit_log_names_the_job_a_create_job_entry_made(client, project, developer, admin):
    job = submit(project, "named_job", developer)
    entry = AuditEntry.objects.filter(method_name__endswith="CreateJob", granted=True).latest("pk")
    # The wire entry keeps the original's shape (resourceName is the parent project) ...
    assert entry.resource_name == "projects/project-a"
    assert entry.created_resource == job.resource_name == "projects/project-a/jobs/named_job"
    # ... and the console's audit log says which job was created.
    client.force_login(admin)
    page = client.get("/projects/project-a/audit/").content.decode()
    assert "created projects/project-a/jobs/named_job" in page


def test_a_kept_upload_is_shown_by_name_and_used_once(project, developer, package_factory):
    sdist = package_factory("print('hi')\n")
    client = signed_in(developer)
    upload = SimpleUploadedFile(sdist.name, sdist.read_bytes())
    page = client.post(SUBMIT, {**form_data(job_id="bad id"), "package_file": upload})
    html = page.content.decode()
    assert page.status_code == 200 and sdist.name in html
    assert str(settings.STORAGE_DIR) not in html  # no server path anywhere on the form
    ref = page.context["form"].kept["ref"]
    assert f'name="kept_package" value="{ref}"' in html
    answer = client.post(SUBMIT, {**form_data(job_id="good_id"), "kept_package": ref})
    assert answer.status_code == 302
    uris = Job.objects.get(job_id="good_id").training_input["packageUris"]
    assert len(uris) == 1 and uris[0].endswith(f"/{ref}")
    job_page = client.get("/projects/project-a/jobs/good_id/").content.decode()
    assert sdist.name in job_page and str(settings.STORAGE_DIR) not in job_page


def test_a_removed_kept_upload_is_not_used(project, developer, package_factory):
    sdist = package_factory("print('hi')\n")
    client = signed_in(developer)
    page = client.post(
        SUBMIT, {**form_data(job_id="bad id"), "package_file": SimpleUploadedFile(sdist.name, sdist.read_bytes())}
    )
    ref = page.context["form"].kept["ref"]
    answer = client.post(SUBMIT, {**form_data(job_id="good_id"), "kept_package": ref, "remove_kept_package": "1"})
    assert answer.status_code == 200 and not Job.objects.filter(job_id="good_id").exists()


@pytest.mark.parametrize("ref", ["../../etc/passwd", "0123456789abcdef/../../x.tar.gz", "/etc/passwd"])
def test_a_forged_kept_reference_names_nothing(project, ref):
    assert services.kept_upload(project, ref) is None


def test_permission_denied_names_the_role_and_the_projects_admins(project, admin, viewer):
    page = signed_in(viewer).post("/projects/project-a/jobs/new/", form_data())
    html = page.content.decode()
    assert page.status_code == 403
    assert "AI Platform Developer" in html and "AI Platform Admin" in html
    assert admin.username in html


def test_nothing_to_deploy_is_said_only_where_a_model_could_be(project, developer, settings):
    job = submit(project, "no_dir", developer)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    html = signed_in(developer).get("/projects/project-a/jobs/no_dir/").content.decode()
    assert "Deploy as model version" not in html and "Nothing to deploy" not in html  # no job dir: no model

    folder = settings.STORAGE_DIR / "job-dirs" / "project-a" / "empty_dir"
    folder.mkdir(parents=True)
    job = services.submit_job(project, body("empty_dir", jobDir=str(folder)), actor=developer)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    html = signed_in(developer).get("/projects/project-a/jobs/empty_dir/").content.decode()
    assert "Deploy as model version" not in html
    assert "Nothing to deploy" in html and "no model file" in html


def test_warning_kinds_read_as_words():
    from jobs.templatetags.job_format import words

    assert words("missing_features") == "Missing features"


def test_the_web_access_checkbox_asks_for_shells_and_a_clone_keeps_it(project, developer):
    from jobs.web.forms import initial_from_job

    form = JobSubmitForm(form_data(package_uris="gs://my-bucket/t.tar.gz", enable_web_access="on"))
    assert form.is_valid(), form.errors
    assert form.job_body()["trainingInput"]["enableWebAccess"] is True
    plain = JobSubmitForm(form_data(package_uris="gs://b/t.tar.gz"))
    assert plain.is_valid() and "enableWebAccess" not in plain.job_body()["trainingInput"]
    job = services.submit_job(project, form.job_body(), actor=developer)
    assert initial_from_job(job)["enable_web_access"] is True
