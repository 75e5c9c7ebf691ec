"""The outputs browser on the server: who may read a job's files (viewer yes, outsider 404), the
Data Access entry each read writes, the bounds (a page of entries, the start of a file), and that
nothing leads out of the job's folder (``..``, absolute paths, links)."""

from __future__ import annotations

import os
import re
from html import unescape

import pytest
from django.conf import settings
from django.contrib.auth import get_user_model
from django.test import Client

from aiconsole import iam
from aiconsole.models import AuditEntry
from jobs import services
from jobs.models import Job, JobState, Trial
from jobs.outputs import files
from tests.helpers.jobs import body

OUTPUTS = "/projects/project-a/jobs/trained/outputs/"


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


@pytest.fixture
def job_dir(project):
    folder = settings.STORAGE_DIR / "job-dirs" / project.project_id / "trained"
    (folder / "model").mkdir(parents=True, exist_ok=True)
    (folder / "model" / "model.joblib").write_bytes(b"\x00\x01binary")
    (folder / "metrics.csv").write_text("step,loss,accuracy\n1,0.9,0.5\n2,0.5,0.7\n3,0.25,0.8\n")
    (folder / "notes.txt").write_text("hello outputs\n")
    (folder / "summary.json").write_text('{"accuracy": 0.8, "classes": ["a", "b"]}')
    return folder


@pytest.fixture
def trained(project, admin, job_dir):
    job = services.submit_job(project, body("trained", jobDir=str(job_dir)), actor=admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    job.refresh_from_db()
    return job


def names(html: str) -> list[str]:
    return re.findall(r'data-entry="([^"]+)"', html)


def test_a_viewer_lists_a_jobs_folder_folders_first_with_sizes(trained, viewer):
    answer = signed_in(viewer).get(OUTPUTS)
    assert answer.status_code == 200
    html = answer.content.decode()
    assert names(html) == ["model", "metrics.csv", "notes.txt", "summary.json"]
    assert 'data-kind="folder"' in html and "50\xa0bytes" in html  # metrics.csv's size
    inside = signed_in(viewer).get(OUTPUTS, {"path": "model"}).content.decode()
    assert names(inside) == ["model.joblib"]


def test_an_outsider_gets_404_and_a_member_without_a_role_too(trained, outsider, client):
    assert signed_in(outsider).get(OUTPUTS).status_code == 404
    assert signed_in(outsider).get(f"{OUTPUTS}file/", {"path": "notes.txt"}).status_code == 404
    assert signed_in(outsider).get(f"{OUTPUTS}download/", {"path": "notes.txt"}).status_code == 404


def test_each_read_is_a_data_access_entry(trained, viewer, project):
    project.data_access_logs = True
    project.save(update_fields=["data_access_logs"])
    client = signed_in(viewer)
    client.get(OUTPUTS, {"path": "model"})
    client.get(f"{OUTPUTS}file/", {"path": "notes.txt"})
    b"".join(client.get(f"{OUTPUTS}download/", {"path": "notes.txt"}).streaming_content)
    entries = AuditEntry.objects.filter(method_name__startswith=files.OUTPUT_SERVICE).order_by("pk")
    assert [(e.method_name.rsplit(".", 1)[1], e.resource_name, e.permission) for e in entries] == [
        ("ListOutputs", "projects/project-a/jobs/trained/outputs/model", "ml.jobs.get"),
        ("GetOutput", "projects/project-a/jobs/trained/outputs/notes.txt", "ml.jobs.get"),
        ("DownloadOutput", "projects/project-a/jobs/trained/outputs/notes.txt", "ml.jobs.get"),
    ]
    assert all(e.principal == viewer.email for e in entries)


def test_a_csv_previews_as_a_table_and_json_and_text_as_text(trained, viewer):
    client = signed_in(viewer)
    csv_page = client.get(f"{OUTPUTS}file/", {"path": "metrics.csv"}).content.decode()
    assert 'data-preview="table"' in csv_page
    assert re.findall(r"<th scope=\"col\">(\w+)</th>", csv_page) == ["step", "loss", "accuracy"]
    assert "<td>0.25</td>" in csv_page
    json_page = unescape(client.get(f"{OUTPUTS}file/", {"path": "summary.json"}).content.decode())
    assert 'data-preview="json"' in json_page and '"accuracy": 0.8' in json_page
    binary = client.get(f"{OUTPUTS}file/", {"path": "model/model.joblib"}).content.decode()
    assert 'data-preview="binary"' in binary
    download = client.get(f"{OUTPUTS}download/", {"path": "notes.txt"})
    assert b"".join(download.streaming_content) == b"hello outputs\n"
    assert download["Content-Disposition"] == 'attachment; filename="notes.txt"'


def test_a_large_csv_previews_its_first_rows_reading_only_its_start(trained, job_dir, viewer):
    with open(job_dir / "big.csv", "w") as handle:
        handle.write("a,b\n")
        for n in range(200_000):  # about 2.5 MB
            handle.write(f"{n},{n * n}\n")
    preview = files.preview_file(trained, "big.csv", actor=viewer)
    assert preview.kind == "table" and preview.truncated
    assert preview.bytes_read == files.PREVIEW_BYTES
    assert preview.columns == ["a", "b"] and len(preview.rows) == files.PREVIEW_ROWS
    assert preview.rows[0] == ["0", "0"] and preview.rows[-1] == ["49", "2401"]


def test_a_folder_is_shown_a_page_at_a_time(trained, job_dir, viewer, monkeypatch):
    monkeypatch.setattr(files, "PAGE_ENTRIES", 3)
    crowded = job_dir / "many"
    crowded.mkdir()
    for n in range(8):
        (crowded / f"f{n}.txt").write_text(str(n))
    first = files.list_folder(trained, "many", actor=viewer, limit=3)
    assert [e.name for e in first.entries] == ["f0.txt", "f1.txt", "f2.txt"] and first.more_after == "f2.txt"
    last = files.list_folder(trained, "many", actor=viewer, after="f5.txt", limit=3)
    assert [e.name for e in last.entries] == ["f6.txt", "f7.txt"] and last.more_after == ""
    html = signed_in(viewer).get(OUTPUTS, {"path": "many"}).content.decode()
    assert names(html) == ["f0.txt", "f1.txt", "f2.txt"]
    assert "after=f2.txt" in html and "Next 3 entries" in html
    monkeypatch.setattr(files, "SCAN_ENTRIES", 5)
    assert not files.list_folder(trained, "many", actor=viewer).scanned_all


@pytest.mark.parametrize("path", ["../other", "model/../../trained", "/etc", "./notes.txt", "a//b"])
def test_a_path_out_of_the_folder_is_refused(trained, viewer, path):
    client = signed_in(viewer)
    for view in ("", "file/"):
        answer = client.get(f"{OUTPUTS}{view}", {"path": path})
        assert answer.status_code == 400, (view, path)
        assert "not a path inside the job" in unescape(answer.content.decode())
    assert client.get(f"{OUTPUTS}download/", {"path": path}).status_code == 400


def test_a_link_out_of_the_folder_is_listed_never_followed(trained, job_dir, viewer, project, tmp_path):
    secret = settings.STORAGE_DIR / "job-dirs" / project.project_id / "secret.txt"
    secret.write_text("another job's file")
    os.symlink(secret, job_dir / "escape.txt")
    os.symlink(secret.parent, job_dir / "escape_dir")
    client = signed_in(viewer)
    html = client.get(OUTPUTS).content.decode()
    assert '<tr data-entry="escape.txt" data-kind="link">' in html and "link, not followed" in html
    for view, path in [
        ("file/", "escape.txt"),
        ("download/", "escape.txt"),
        ("", "escape_dir"),
        ("file/", "escape_dir/secret.txt"),
    ]:
        answer = client.get(f"{OUTPUTS}{view}", {"path": path})
        assert answer.status_code == 400, (view, path)
        assert b"another job's file" not in (b"".join(answer.streaming_content) if answer.streaming else answer.content)


def test_a_trials_folder_is_its_own_root(project, admin, viewer, job_dir):
    spec = {
        "goal": "MAXIMIZE",
        "maxTrials": 2,
        "params": [{"parameterName": "x", "type": "INTEGER", "minValue": 1, "maxValue": 2}],
    }
    job = services.submit_job(project, body("tuned", jobDir=str(job_dir), hyperparameters=spec), actor=admin)
    Trial.objects.create(job=job, trial_id="1", number=1)
    (job_dir / "1").mkdir()
    (job_dir / "1" / "trial.txt").write_text("trial one")
    listing = files.list_folder(job, actor=viewer, trial_id="1")
    assert listing.root == f"{job_dir}/1" and [e.name for e in listing.entries] == ["trial.txt"]
    html = signed_in(viewer).get("/projects/project-a/jobs/tuned/outputs/", {"trial": "1"}).content.decode()
    assert names(html) == ["trial.txt"] and "Trials:" in html
    assert signed_in(viewer).get("/projects/project-a/jobs/tuned/outputs/", {"trial": "9"}).status_code == 404


def test_a_job_without_a_job_dir_says_so(project, admin, viewer):
    services.submit_job(project, body("nodir"), actor=admin)
    html = signed_in(viewer).get("/projects/project-a/jobs/nodir/outputs/").content.decode()
    assert "names no job directory (trainingInput.jobDir)" in html
    # A fact about the job, not an error: said plainly, without a folder heading that has no folder.
    assert 'role="alert"' not in html and "Folder:" not in html and "data-outputs-none" in html


def test_a_gcs_job_dir_is_listed_and_previewed(project, admin, viewer, gcs_emulator):
    gcs_emulator.upload("out-bucket", "runs/r1/metrics.csv", b"step,loss\n1,0.5\n")
    gcs_emulator.upload("out-bucket", "runs/r1/model/saved_model.pb", b"\x00pb")
    gcs_emulator.upload("out-bucket", "runs/r10/other.txt", b"not this job's")
    job = services.submit_job(project, body("cloudy", jobDir="gs://out-bucket/runs/r1"), actor=admin)
    listing = files.list_folder(job, actor=viewer)
    assert [(e.name, e.kind) for e in listing.entries] == [("metrics.csv", "file"), ("model", "folder")]  # by name
    assert listing.entries[0].size == 16
    preview = files.preview_file(job, "metrics.csv", actor=viewer)
    assert preview.kind == "table" and preview.rows == [["1", "0.5"]]
    assert b"".join(files.download(job, "model/saved_model.pb", actor=viewer).chunks) == b"\x00pb"
    for n in range(4):
        gcs_emulator.upload("out-bucket", f"runs/r1/ckpt-{n}", b"x")
    first = files.list_folder(job, actor=viewer, limit=3)
    assert [e.name for e in first.entries] == ["ckpt-0", "ckpt-1", "ckpt-2"] and first.more_after == "ckpt-2"
    rest = files.list_folder(job, actor=viewer, after=first.more_after, limit=3)
    assert [e.name for e in rest.entries] == ["ckpt-3", "metrics.csv", "model"] and rest.more_after == ""


@pytest.fixture
def owner_of_another_job(project, admin):
    """A member of the project only through ``roles/ml.jobOwner`` on one job, not ``trained``."""
    theirs = services.submit_job(project, body("theirs"), actor=admin)
    user = get_user_model().objects.create_user(username="jo_owner", email="jo@example.com", password="pw-jo")
    iam.grant(user, "roles/ml.jobOwner", theirs)
    return user


@pytest.mark.parametrize("path", ["", "../secret", "a//b"])
def test_someone_who_cannot_read_the_job_gets_404_whatever_path_they_name(trained, owner_of_another_job, path):
    project = trained.project
    project.data_access_logs = True
    project.save(update_fields=["data_access_logs"])
    Trial.objects.create(job=trained, trial_id="7", number=7)
    client = signed_in(owner_of_another_job)
    for view in ("", "file/", "download/"):
        answer = client.get(f"{OUTPUTS}{view}", {"path": path})
        assert answer.status_code == 404, (view, path)
        if not answer.streaming:
            assert "trial=7" not in answer.content.decode()  # nothing of the job's page is drawn
    refused = AuditEntry.objects.filter(method_name__startswith=files.OUTPUT_SERVICE, granted=False)
    assert refused.count() == 3 and all(e.principal == "jo@example.com" for e in refused)


def test_a_file_with_a_name_in_any_script_downloads_under_that_name(trained, job_dir, viewer):
    (job_dir / "résumé 漢字.txt").write_text("x")
    download = signed_in(viewer).get(f"{OUTPUTS}download/", {"path": "résumé 漢字.txt"})
    assert download.status_code == 200
    # RFC 6266's filename*: what browsers save under (a MIME-encoded header is saved as "=?utf-8?b?…").
    assert download["Content-Disposition"] == "attachment; filename*=utf-8''r%C3%A9sum%C3%A9%20%E6%BC%A2%E5%AD%97.txt"


def test_a_name_with_spaces_at_its_ends_opens_that_file_not_its_trimmed_namesake(trained, job_dir, viewer):
    (job_dir / "notes.txt ").write_text("the spaced one")
    client = signed_in(viewer)
    html = unescape(client.get(OUTPUTS).content.decode())
    assert "notes.txt " in names(html)
    preview = unescape(client.get(f"{OUTPUTS}file/", {"path": "notes.txt "}).content.decode())
    assert "the spaced one" in preview and "hello outputs" not in preview
    download = client.get(f"{OUTPUTS}download/", {"path": "notes.txt "})
    assert b"".join(download.streaming_content) == b"the spaced one"


def test_a_socket_a_trainer_left_is_said_to_be_no_plain_file(trained, job_dir, viewer):
    import socket

    with socket.socket(socket.AF_UNIX) as listening:
        listening.bind(str(job_dir / "trainer.sock"))
        client = signed_in(viewer)
        page = unescape(client.get(f"{OUTPUTS}file/", {"path": "trainer.sock"}).content.decode())
        assert "not a plain file" in page and "No such device" not in page
        download = client.get(f"{OUTPUTS}download/", {"path": "trainer.sock"})
        assert download.status_code == 400 and b"not a plain file" in download.content


def test_a_fifo_is_listed_as_no_plain_file_with_nothing_to_open(trained, job_dir, viewer):
    os.mkfifo(job_dir / "pipe")
    html = signed_in(viewer).get(OUTPUTS).content.decode()
    row = re.search(r'<tr data-entry="pipe".*?</tr>', html, re.S).group(0)
    assert 'data-kind="other"' in row and "not a plain file" in row
    assert "href" not in row  # neither a preview nor a download that could only fail


def test_a_table_preview_says_whether_it_shows_every_row_or_the_first(trained, job_dir, viewer):
    client = signed_in(viewer)
    whole = unescape(client.get(f"{OUTPUTS}file/", {"path": "metrics.csv"}).content.decode())
    assert "The whole file: 3 rows." in whole and "The first" not in whole
    (job_dir / "long.jsonl").write_text("".join(f'{{"n": {n}}}\n' for n in range(files.PREVIEW_ROWS + 1)))
    first = unescape(client.get(f"{OUTPUTS}file/", {"path": "long.jsonl"}).content.decode())
    assert f"The first {files.PREVIEW_ROWS} rows." in first and "The whole file" not in first


def test_a_refused_entry_still_says_which_folder_it_was_refused_in(trained, job_dir, viewer):
    os.symlink("/etc/passwd", job_dir / "escape")
    client = signed_in(viewer)
    for view, path in [("file/", "escape"), ("", "escape")]:
        answer = client.get(f"{OUTPUTS}{view}", {"path": path})
        assert answer.status_code == 400
        assert f"Folder: <code>{job_dir}</code>" in answer.content.decode(), view


def test_a_file_that_grows_while_it_downloads_sends_what_its_length_promised(trained, job_dir, viewer):
    # A trainer still writing its log or checkpoint: more bytes than Content-Length said broke the
    # answer (the server cuts the connection), and a browser kept a broken file.
    growing = job_dir / "train.log"
    growing.write_bytes(b"a" * 300_000)
    download = signed_in(viewer).get(f"{OUTPUTS}download/", {"path": "train.log"})
    with growing.open("ab") as handle:
        handle.write(b"b" * 300_000)
    body = b"".join(download.streaming_content)
    assert int(download["Content-Length"]) == len(body) == 300_000 and set(body) == {ord("a")}
