"""The New job form's starting point: the newest runtime on its default Python, a job dir of its own
named after the job, and the project's uploaded packages to pick from instead of uploading again."""

from __future__ import annotations

import html
import re
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile

from bench.support.packages import build_package
from jobs import runtimes, services
from jobs.models import Job
from tests.jobs.test_views import Page, form_data

SUBMIT = "/projects/project-a/jobs/new/"
PREVIEW = "/projects/project-a/jobs/new/preview/"


def upload(project, admin, folder: Path, name: str = "trainer") -> dict:
    """A package stored as the console stores an upload (the REST upload and the form both call this)."""
    package = build_package(folder / name, {"trainer/task.py": "print('hello')\n"}, name=name)
    with package.open("rb") as stream:
        return services.upload_package(project, package.name, stream, actor=admin)


def options(page: str, select_id: str) -> list[tuple[str, str, bool]]:
    """(value, text, selected) of each option of a select."""
    body = re.search(rf'<select [^>]*id="{select_id}".*?</select>', page, re.S)[0]
    return [
        (html.unescape(value), html.unescape(text).strip(), bool(selected))
        for value, selected, text in re.findall(r'<option value="([^"]*)"( selected)?>([^<]*)</option>', body)
    ]


def test_a_new_job_defaults_to_the_newest_runtime_on_its_default_python(client, admin):
    client.force_login(admin)

    page = client.get(SUBMIT).content.decode()

    newest = runtimes.RUNTIMES[runtimes.CURRENT]
    assert [value for value, _, selected in options(page, "id_runtime_version") if selected] == ["current"]
    assert options(page, "id_python_version")[0] == (
        "",
        f"{runtimes.default_python(newest)} (the runtime's default)",
        True,
    )
    assert "--runtime-version current" in html.unescape(page)  # the equivalent command says so
    assert "--runtime-version 2.11" not in html.unescape(page)


def test_a_clone_of_a_job_that_named_no_runtime_keeps_the_one_it_ran_on(client, project, admin):
    Job.objects.create(
        project=project,
        job_id="old_default",
        created_by=admin,
        training_input={"scaleTier": "BASIC", "packageUris": ["gs://b/t.tar.gz"], "pythonModule": "trainer.task"},
    )
    client.force_login(admin)

    page = client.get(SUBMIT, {"clone": "old_default"}).content.decode()

    assert [value for value, _, selected in options(page, "id_runtime_version") if selected] == ["2.11"]


def test_a_new_job_dir_is_named_after_the_job_in_the_projects_own_folder(client, admin):
    client.force_login(admin)

    page = Page(client.get(SUBMIT).content.decode())

    job_id = page.value("id_job_id")
    folder = str(settings.STORAGE_DIR / "job-dirs" / "project-a")
    assert page.value("id_job_dir") == f"{folder}/{job_id}"
    assert page.controls["id_job_dir"]["data-folder"] == folder  # jobform.js follows the id from there
    assert page.controls["id_job_dir"]["data-suggested"] == f"{folder}/{job_id}"


def test_a_new_job_dir_goes_in_the_folder_of_the_users_last_job_dir(client, project, admin, developer):
    def job(job_id, user, job_dir):
        Job.objects.create(
            project=project, job_id=job_id, created_by=user, training_input={"scaleTier": "BASIC", "jobDir": job_dir}
        )

    job("mine", admin, "gs://team-bucket/runs/mine/")
    job("theirs", developer, "gs://their-bucket/elsewhere/theirs")  # someone else's habit is not hers
    client.force_login(admin)

    page = Page(client.get(SUBMIT).content.decode())

    assert page.value("id_job_dir") == f"gs://team-bucket/runs/{page.value('id_job_id')}"
    assert page.controls["id_job_dir"]["data-folder"] == "gs://team-bucket/runs"


def test_a_clone_of_a_job_without_a_job_dir_is_given_none(client, project, admin):
    Job.objects.create(project=project, job_id="no_dir", created_by=admin, training_input={"scaleTier": "BASIC"})
    client.force_login(admin)

    page = Page(client.get(SUBMIT, {"clone": "no_dir"}).content.decode())

    assert page.value("id_job_dir") == ""  # a clone submits as its source was
    assert "data-folder" not in page.controls["id_job_dir"]


def test_a_job_dir_the_user_wrote_is_not_followed(client, admin):
    client.force_login(admin)

    answer = client.post(SUBMIT, form_data(job_id="1 bad", job_dir="gs://bucket/mine/somewhere"))

    page = Page(answer.content.decode())
    assert page.value("id_job_dir") == "gs://bucket/mine/somewhere"
    assert "data-folder" not in page.controls["id_job_dir"]


def test_the_picker_lists_the_projects_packages_newest_first_without_their_paths(
    client, project, other_project, admin, outsider, tmp_path
):
    first = upload(project, admin, tmp_path, "first")
    second = upload(project, admin, tmp_path, "second")
    Path(first["uri"]).touch()  # uploaded again later: the newest
    with (tmp_path / "data.csv").open("wb+") as csv:
        csv.write(b"1,2\n")
        csv.seek(0)
        services.upload_data_file(project, "data.csv", csv, actor=admin)  # a data file is no package
    upload(other_project, outsider, tmp_path / "other", "elsewhere")
    client.force_login(admin)

    page = client.get(SUBMIT).content.decode()

    offered = options(page, "id_uploaded_package")  # (the storage folder outlives each test: earlier ones' come after)
    assert [value for value, _, _ in offered[:3]] == [
        "",
        services.upload_ref(first["uri"]),
        services.upload_ref(second["uri"]),
    ]
    assert re.fullmatch(
        r"first-0\.1\.tar\.gz \(\d+(\.\d)?\s(bytes|KB), uploaded \d{4}-\d\d-\d\d \d\d:\d\d UTC\)", offered[1][1]
    )
    assert not [text for _, text, _ in offered if text.startswith(("data.csv", "elsewhere"))]
    assert str(settings.STORAGE_DIR / "packages") not in page  # the picker names a package, never its path
    assert '<label for="id_uploaded_package">Or a package uploaded before</label>' in page


def test_a_picked_package_is_the_jobs_package_used_in_place(client, project, admin, tmp_path):
    stored = upload(project, admin, tmp_path)
    client.force_login(admin)
    ref = services.upload_ref(stored["uri"])
    uploads = len(services.uploaded_packages(project))

    preview = client.post(PREVIEW, form_data(job_id="picked", uploaded_package=ref)).content.decode()
    answer = client.post(SUBMIT, form_data(job_id="picked", uploaded_package=ref))

    assert f"--packages {stored['name']}" in html.unescape(preview)  # the command names it, not its path
    assert answer.status_code == 302
    assert Job.objects.get(job_id="picked").training_input["packageUris"] == [stored["uri"]]
    assert len(services.uploaded_packages(project)) == uploads  # nothing stored again


def test_a_file_chosen_beside_a_picked_package_replaces_it(client, project, admin, tmp_path):
    stored = upload(project, admin, tmp_path)
    fresh = build_package(tmp_path / "fresh", {"trainer/task.py": "print(1)\n"}, name="fresh")
    client.force_login(admin)

    client.post(
        SUBMIT,
        {
            **form_data(job_id="replaced", uploaded_package=services.upload_ref(stored["uri"])),
            "package_file": SimpleUploadedFile(fresh.name, fresh.read_bytes()),
        },
    )

    (uri,) = Job.objects.get(job_id="replaced").training_input["packageUris"]
    assert Path(uri).name == fresh.name


@pytest.mark.parametrize("ref", ["0123456789abcdef/gone-0.1.tar.gz", "../../etc/passwd", "not a ref"])
def test_a_picked_package_that_is_not_stored_is_refused_at_its_field(client, project, admin, ref):
    client.force_login(admin)

    answer = client.post(SUBMIT, form_data(job_id="gone", uploaded_package=ref))

    page = Page(answer.content.decode())
    name = ref.rpartition("/")[2]
    assert f"“{name}” is no longer stored in this project" in html.unescape(page.errors("uploaded_package"))
    assert re.search(r"Or a package uploaded before: .*no longer stored", html.unescape(answer.content.decode()))
    assert not Job.objects.exists()


def test_another_projects_upload_cannot_be_picked(client, project, other_project, admin, outsider, tmp_path):
    theirs = upload(other_project, outsider, tmp_path)
    client.force_login(admin)

    answer = client.post(SUBMIT, form_data(job_id="borrowed", uploaded_package=services.upload_ref(theirs["uri"])))

    assert "no longer stored in this project" in html.unescape(Page(answer.content.decode()).errors("uploaded_package"))
    assert not Job.objects.exists()


def test_the_uploads_offered_and_the_folders_read_are_bounded(project, admin, tmp_path, monkeypatch, settings):
    settings.STORAGE_DIR = tmp_path / "storage"  # a storage folder of its own, to count in
    for n in range(4):
        upload(project, admin, tmp_path / str(n), f"pkg{n}")

    assert len(services.uploaded_packages(project, limit=2)) == 2
    monkeypatch.setattr(services, "UPLOADS_SCANNED", 3)
    assert len(services.uploaded_packages(project)) == 3
