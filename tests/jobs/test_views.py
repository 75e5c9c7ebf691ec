"""Console pages for training jobs: list, detail, logs, submit and cancel."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime, timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from django.conf import settings
from django.core.files.uploadedfile import SimpleUploadedFile
from django.utils import timezone

from bench.support.packages import build_package
from jobs import services
from jobs.models import Job, JobState, LogLine, Replica
from tests.helpers.jobs import PACKAGE, submit


def add_lines(job: Job, *lines: tuple[str, str, str]) -> list[LogLine]:
    """Store (task, severity, message) lines, one second apart."""
    start = datetime(2024, 3, 1, 12, 0, 0, tzinfo=UTC)
    return [
        LogLine.objects.create(
            job=job,
            task_name=task,
            seq=n,
            stream="stdout",
            severity=severity,
            message=message,
            time=start + timedelta(seconds=n),
        )
        for n, (task, severity, message) in enumerate(lines, 1)
    ]


class Page(HTMLParser):
    """Just enough of a page: form controls by id, labels, and element text by id."""

    def __init__(self, html: str):
        super().__init__()
        self.controls: dict[str, dict] = {}  # id -> attrs (+ "text" for textareas)
        self.wrapped: set[str] = set()  # ids of controls inside a <label>
        self.label_for: set[str] = set()
        self.text: dict[str, str] = {}  # id -> text of elements with an id
        self._open: list[tuple[str, str | None]] = []
        self._label_depth = 0
        self._select: str | None = None
        self.feed(html)

    def handle_starttag(self, tag, attrs):
        attrs = dict(attrs)
        element_id = attrs.get("id")
        if tag == "label":
            self._label_depth += 1
            if attrs.get("for"):
                self.label_for.add(attrs["for"])
        if tag in ("input", "select", "textarea") and element_id:
            self.controls[element_id] = {**attrs, "tag": tag, "text": ""}
            if self._label_depth:
                self.wrapped.add(element_id)
        if tag == "select":
            self._select = element_id
        if tag == "option" and self._select and "selected" in attrs:
            self.controls[self._select]["value"] = attrs.get("value")
        if tag not in ("input", "br", "meta", "link", "img"):
            self._open.append((tag, element_id))
            if element_id:
                self.text.setdefault(element_id, "")

    def handle_endtag(self, tag):
        if tag == "label":
            self._label_depth -= 1
        if tag == "select":
            self._select = None
        for index in range(len(self._open) - 1, -1, -1):
            if self._open[index][0] == tag:
                del self._open[index:]
                break

    def handle_data(self, data):
        for tag, element_id in self._open:
            if element_id:
                self.text[element_id] += data
                if tag == "textarea":
                    self.controls[element_id]["text"] += data

    def value(self, element_id: str) -> str:
        control = self.controls[element_id]
        if control["tag"] == "textarea":
            return control["text"].strip()
        return control.get("value") or ""

    def errors(self, field: str) -> str:
        return self.text.get(f"id_{field}_errors", "").strip()


# --- login --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "path",
    [
        "/projects/project-a/jobs/",
        "/projects/project-a/jobs/new/",
        "/projects/project-a/jobs/some_job/",
        "/projects/project-a/jobs/some_job/logs/download/",
    ],
)
def test_anonymous_visitor_is_sent_to_login(client, project, path):
    response = client.get(path)

    assert response.status_code == 302
    assert response["Location"].startswith(f"/login/?next={path}")


def test_anonymous_cancel_does_nothing(client, project, admin):
    job = submit(project, "safe", admin)

    response = client.post("/projects/project-a/jobs/safe/cancel/")

    assert response.status_code == 302
    assert response["Location"].startswith("/login/")
    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED


# --- job list -----------------------------------------------------------------------------------


@pytest.fixture
def three_jobs(project, admin):
    queued = submit(project, "queued_job", admin)
    cancelled = submit(project, "cancelled_job", admin)
    services.cancel_job(cancelled, actor=admin)
    failed = submit(project, "failed_job", admin)
    Job.objects.filter(pk=failed.pk).update(state=JobState.FAILED, error_message="boom")
    return queued, cancelled, failed


def test_job_list_shows_the_projects_jobs(client, admin, three_jobs):
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/").content.decode()

    for job_id in ("queued_job", "cancelled_job", "failed_job"):
        assert f'href="/projects/project-a/jobs/{job_id}/"' in html
    assert html.index("failed_job") < html.index("cancelled_job") < html.index("queued_job")


def test_job_list_filters_by_state(client, admin, three_jobs):
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/", {"state": "CANCELLED"}).content.decode()

    assert "cancelled_job" in html
    assert "queued_job" not in html
    assert "failed_job" not in html


def test_job_list_does_not_show_other_projects_jobs(client, project, other_project, admin, outsider):
    submit(other_project, "elsewhere", outsider)
    client.force_login(admin)

    assert "elsewhere" not in client.get("/projects/project-a/jobs/").content.decode()


def test_htmx_list_request_returns_only_the_rows_fragment(client, admin, three_jobs):
    client.force_login(admin)

    response = client.get("/projects/project-a/jobs/", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert 'id="job-rows"' in html
    assert "queued_job" in html
    assert "New training job" not in html


def test_job_list_polls_only_while_a_job_is_active(client, project, admin, three_jobs):
    queued = three_jobs[0]
    client.force_login(admin)

    active = client.get("/projects/project-a/jobs/", HTTP_HX_REQUEST="true").content.decode()
    services.cancel_job(queued, actor=admin)
    settled = client.get("/projects/project-a/jobs/", HTTP_HX_REQUEST="true").content.decode()

    assert active.strip().startswith('<div id="job-rows" hx-get=')
    assert 'hx-trigger="every' in active
    assert "hx-trigger" not in settled


def test_empty_project_says_there_are_no_jobs_yet(client, project, admin):
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/").content.decode()

    assert "No training jobs yet." in html
    assert "Submit your first training job" in html


def test_empty_state_filter_names_the_state(client, admin, three_jobs):
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/", {"state": "SUCCEEDED"}).content.decode()

    assert "No SUCCEEDED jobs." in html


def test_viewer_does_not_see_the_new_job_button(client, project, admin, viewer):
    submit(project, "some_job", admin)
    client.force_login(viewer)

    html = client.get("/projects/project-a/jobs/").content.decode()

    assert "some_job" in html
    assert "New training job" not in html
    assert "/projects/project-a/jobs/new/" not in html


def test_admin_sees_the_new_job_button(client, project, admin):
    client.force_login(admin)

    assert "New training job" in client.get("/projects/project-a/jobs/").content.decode()


# --- job detail ---------------------------------------------------------------------------------


def test_job_detail_shows_state_replicas_error_and_logs(client, project, admin):
    job = submit(project, "broken", admin)
    Job.objects.filter(pk=job.pk).update(
        state=JobState.FAILED, error_message="The replica master 0 exited with a non-zero status of 1."
    )
    Replica.objects.create(
        job=job,
        task_type="master",
        task_index=0,
        label="master-replica-0",
        machine_type="n1-standard-4",
        state="FAILED",
        host="127.0.0.1",
        port=2222,
        exit_code=1,
    )
    add_lines(job, ("master-replica-0", "INFO", "epoch 1 done"), ("master-replica-0", "ERROR", "ValueError: bad input"))
    client.force_login(admin)

    response = client.get("/projects/project-a/jobs/broken/")

    assert response.status_code == 200
    page = Page(response.content.decode())
    assert "FAILED" in page.text["job-status"]
    assert "The replica master 0 exited with a non-zero status of 1." in page.text["job-status"]
    assert "master-replica-0" in page.text["job-replicas"]  # the Replicas tab
    assert "n1-standard-4" in page.text["job-replicas"]
    assert "127.0.0.1:2222" in page.text["job-replicas"]
    assert "epoch 1 done" in page.text["log-lines"]
    assert "ValueError: bad input" in page.text["log-lines"]
    assert "no-logs" not in page.text
    assert "Cancel job" not in response.content.decode()


def test_queued_job_detail_shows_its_place_in_line(client, project, admin):
    submit(project, "waiting", admin)
    client.force_login(admin)

    page = Page(client.get("/projects/project-a/jobs/waiting/").content.decode())

    assert "QUEUED" in page.text["job-status"]
    assert "Position in queue: 1" in page.text["job-status"]
    assert "No log lines yet." in page.text["no-logs"]


def test_log_messages_are_escaped(client, project, admin):
    job = submit(project, "noisy", admin)
    add_lines(job, ("master-replica-0", "INFO", "<script>alert(1)</script>"))
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/noisy/").content.decode()

    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html


def test_log_filters_by_minimum_severity_and_replica(client, project, admin):
    job = submit(project, "filtered", admin)
    add_lines(
        job,
        ("master-replica-0", "INFO", "chatty"),
        ("master-replica-0", "WARNING", "careful"),
        ("worker-replica-0", "ERROR", "worker broke"),
    )
    client.force_login(admin)

    by_severity = Page(client.get("/projects/project-a/jobs/filtered/", {"severity": "WARNING"}).content.decode()).text[
        "log-lines"
    ]
    by_task = Page(
        client.get("/projects/project-a/jobs/filtered/", {"task": "worker-replica-0"}).content.decode()
    ).text["log-lines"]

    assert "chatty" not in by_severity and "careful" in by_severity and "worker broke" in by_severity
    assert "worker broke" in by_task and "careful" not in by_task


def test_status_fragment_for_htmx(client, project, admin):
    job = submit(project, "polled", admin)
    add_lines(job, ("master-replica-0", "INFO", "a log line"))
    client.force_login(admin)

    response = client.get("/projects/project-a/jobs/polled/fragments/status/", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert "<html" not in html
    assert html.strip().startswith('<section id="job-status"')
    assert 'data-state="QUEUED"' in html
    assert "a log line" not in html


def test_status_fragment_reflects_a_state_change(client, project, admin):
    job = submit(project, "changing", admin)
    client.force_login(admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.RUNNING, start_time=timezone.now())

    html = client.get("/projects/project-a/jobs/changing/fragments/status/", HTTP_HX_REQUEST="true").content.decode()

    assert 'data-state="RUNNING"' in html


def test_logs_after_an_id_returns_only_newer_lines(client, project, admin):
    job = submit(project, "streaming", admin)
    old, newer, newest = add_lines(
        job,
        ("master-replica-0", "INFO", "old line"),
        ("master-replica-0", "INFO", "newer line"),
        ("master-replica-0", "INFO", "newest line"),
    )
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/streaming/logs/", {"after": old.pk}).content.decode()

    assert "old line" not in html
    assert "newer line" in html and "newest line" in html
    assert "<html" not in html
    # The poller comes back pointing after the last line sent, so nothing repeats next time.
    assert f"after={newest.pk}" in html


def test_logs_after_the_last_line_returns_no_rows_and_keeps_the_cursor(client, project, admin):
    job = submit(project, "quiet", admin)
    (only,) = add_lines(job, ("master-replica-0", "INFO", "only line"))
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/quiet/logs/", {"after": only.pk}).content.decode()

    assert "only line" not in html
    assert f"after={only.pk}" in html


def test_log_download_as_text(client, project, admin):
    job = submit(project, "dl", admin)
    add_lines(job, ("master-replica-0", "INFO", "first"), ("service", "WARNING", "second"))
    client.force_login(admin)

    response = client.get("/projects/project-a/jobs/dl/logs/download/")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    assert response["Content-Disposition"] == 'attachment; filename="dl.log"'
    text = b"".join(response).decode()
    assert text.splitlines() == [
        "2024-03-01 12:00:01 INFO     master-replica-0 first",
        "2024-03-01 12:00:02 WARNING  service second",
    ]


def test_log_download_as_json_lines(client, project, admin):
    job = submit(project, "dlj", admin)
    add_lines(job, ("master-replica-0", "INFO", "first"), ("master-replica-0", "ERROR", 'second "quoted"'))
    client.force_login(admin)

    response = client.get("/projects/project-a/jobs/dlj/logs/download/", {"format": "json"})

    assert response.status_code == 200
    assert response["Content-Disposition"] == 'attachment; filename="dlj.jsonl"'
    rows = [json.loads(line) for line in b"".join(response).decode().splitlines()]
    assert [(r["task"], r["severity"], r["seq"], r["message"]) for r in rows] == [
        ("master-replica-0", "INFO", 1, "first"),
        ("master-replica-0", "ERROR", 2, 'second "quoted"'),
    ]
    assert rows[0]["timestamp"].startswith("2024-03-01T12:00:01")
    assert rows[0]["trial"] is None
    assert rows[0]["stream"] == "stdout"


def test_outsider_gets_404_for_job_logs(client, project, admin, outsider):
    job = submit(project, "secret", admin)
    add_lines(job, ("master-replica-0", "INFO", "confidential"))
    client.force_login(outsider)

    for path in (
        "/projects/project-a/jobs/secret/",
        "/projects/project-a/jobs/secret/logs/",
        "/projects/project-a/jobs/secret/logs/download/",
    ):
        response = client.get(path)
        assert response.status_code == 404
        assert b"confidential" not in b"".join(getattr(response, "streaming_content", [response.content]))


# --- cancel -------------------------------------------------------------------------------------


def test_viewer_does_not_see_the_cancel_button(client, project, admin, viewer):
    submit(project, "running_job", admin)
    client.force_login(viewer)

    html = client.get("/projects/project-a/jobs/running_job/").content.decode()

    assert "QUEUED" in html
    assert "Cancel job" not in html
    assert "/projects/project-a/jobs/running_job/cancel/" not in html


def test_admin_sees_the_cancel_button_on_an_active_job(client, project, admin):
    submit(project, "running_job", admin)
    client.force_login(admin)

    assert "Cancel job" in client.get("/projects/project-a/jobs/running_job/").content.decode()


def test_viewer_cannot_cancel_job(client, project, admin, viewer):
    job = submit(project, "keep", admin)
    client.force_login(viewer)

    assert client.post("/projects/project-a/jobs/keep/cancel/").status_code == 403
    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED


def test_cancel_as_admin_moves_a_queued_job_to_cancelled(client, project, admin):
    job = submit(project, "stop_me", admin)
    client.force_login(admin)

    response = client.post("/projects/project-a/jobs/stop_me/cancel/")

    assert response.status_code == 302
    assert response["Location"] == "/projects/project-a/jobs/stop_me/"
    job.refresh_from_db()
    assert job.state == JobState.CANCELLED
    assert job.error_message == "Job is cancelled by the user."


def test_cancel_with_htmx_returns_the_updated_status(client, project, admin):
    submit(project, "stop_me", admin)
    client.force_login(admin)

    response = client.post("/projects/project-a/jobs/stop_me/cancel/", HTTP_HX_REQUEST="true")

    html = response.content.decode()
    assert response.status_code == 200
    assert 'data-state="CANCELLED"' in html
    assert "Cancel job" not in html


def test_cancel_of_a_finished_job_says_why(client, project, admin):
    job = submit(project, "finished", admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, end_time=timezone.now())
    client.force_login(admin)

    response = client.post("/projects/project-a/jobs/finished/cancel/", follow=True)

    assert response.status_code == 200
    assert "cannot be cancelled" in response.content.decode()
    assert Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED


def test_cancel_by_get_is_not_allowed(client, project, admin):
    job = submit(project, "stop_me", admin)
    client.force_login(admin)

    assert client.get("/projects/project-a/jobs/stop_me/cancel/").status_code == 405
    assert Job.objects.get(pk=job.pk).state == JobState.QUEUED


# --- submit form --------------------------------------------------------------------------------

SUBMIT_URL = "/projects/project-a/jobs/new/"


def form_data(**overrides) -> dict:
    data = {
        "job_id": "form_job",
        "package_uris": "",
        "python_module": "trainer.task",
        "args": "",
        "region": "us-central1",
        "runtime_version": "2.11",
        "python_version": "3.7",
        "scale_tier": "BASIC",
        "job_dir": "",
        "labels": "",
        "max_running_time": "",
        "max_wait_time": "",
        "priority": "",
    }
    data.update(overrides)
    return data


def sdist_upload(tmp_path: Path) -> SimpleUploadedFile:
    package = build_package(tmp_path / "pkg", {"trainer/task.py": "print('hello')\n"})
    return SimpleUploadedFile(package.name, package.read_bytes(), content_type="application/gzip")


def test_submit_form_renders_every_field_with_a_label(client, project, admin):
    client.force_login(admin)

    response = client.get(SUBMIT_URL)

    assert response.status_code == 200
    page = Page(response.content.decode())
    form = response.context["form"]
    for name in form.fields:
        if name in ("scale_tier", "code", "kept_package", "remove_kept_package", "cloned_from", "uploaded_package"):
            continue  # radios are checked below; the kept upload's controls show only after a form error kept
            # one; the clone's source is a hidden field; the uploads' picker shows once there is an upload
        assert f"id_{name}" in page.controls, name
        assert f"id_{name}" in page.label_for, f"{name} has no label"
    for group in ("scale_tier", "code"):
        radios = [i for i, c in page.controls.items() if c.get("name") == group]
        assert len(radios) == len(form.fields[group].choices)
        assert all(radio in page.wrapped or radio in page.label_for for radio in radios)
    unlabelled = [
        i
        for i, c in page.controls.items()
        if c.get("type") != "hidden" and i not in page.label_for and i not in page.wrapped
    ]
    assert unlabelled == []


def test_submit_form_posts_an_uploaded_package_and_redirects_to_the_job(client, project, admin, tmp_path):
    client.force_login(admin)
    upload = sdist_upload(tmp_path)
    original = (tmp_path / "pkg" / upload.name).read_bytes()

    response = client.post(SUBMIT_URL, {**form_data(job_id="uploaded_job", args="--epochs 3"), "package_file": upload})

    assert response.status_code == 302
    assert response["Location"] == "/projects/project-a/jobs/uploaded_job/"
    job = Job.objects.get(job_id="uploaded_job")
    assert job.state == JobState.QUEUED
    assert job.created_by == admin
    stored = Path(job.training_input["packageUris"][0])
    assert stored.resolve().is_relative_to(settings.STORAGE_DIR)
    assert stored.read_bytes() == original
    assert job.training_input["args"] == ["--epochs", "3"]


def test_bad_job_id_is_shown_next_to_the_field_and_other_values_are_kept(client, project, admin):
    client.force_login(admin)

    response = client.post(
        SUBMIT_URL,
        form_data(
            job_id="1 bad id",
            package_uris=PACKAGE,
            python_module="my.trainer",
            args="--lr 0.1",
            labels="team=vision",
            region="europe-west4",
        ),
    )

    assert response.status_code == 200
    page = Page(response.content.decode())
    assert "is invalid" in page.errors("job_id")
    assert page.value("id_job_id") == "1 bad id"
    assert page.value("id_package_uris") == PACKAGE
    assert page.value("id_python_module") == "my.trainer"
    assert page.value("id_args") == "--lr 0.1"
    assert page.value("id_labels") == "team=vision"
    assert page.value("id_region") == "europe-west4"
    assert page.errors("python_module") == ""
    assert not Job.objects.exists()


def test_invalid_custom_config_with_an_upload_keeps_the_stored_package(client, project, admin, tmp_path):
    client.force_login(admin)

    response = client.post(
        SUBMIT_URL,
        {
            **form_data(job_id="custom_job", scale_tier="CUSTOM", master_type="n1-standard-4", worker_count="2"),
            "package_file": sdist_upload(tmp_path),
        },
    )

    assert response.status_code == 200
    page = Page(response.content.decode())
    # The rule is about the missing worker machine type, so it shows at that input.
    assert "workerType must be specified when workerCount > 0" in page.errors("worker_type")
    assert page.value("id_worker_count") == "2"
    assert not Job.objects.exists()
    kept = _kept_upload(response)
    assert kept, "the stored upload was lost"
    assert not page.value("id_package_uris")  # no server path put where the user types URIs
    assert str(settings.STORAGE_DIR) not in response.content.decode()

    # Fixing the form and submitting again uses the stored package once, without uploading it again.
    fixed = client.post(
        SUBMIT_URL,
        form_data(
            job_id="custom_job",
            scale_tier="CUSTOM",
            master_type="n1-standard-4",
            worker_type="n1-standard-4",
            worker_count="2",
            kept_package=kept,
        ),
    )
    assert fixed.status_code == 302
    (stored,) = Job.objects.get(job_id="custom_job").training_input["packageUris"]
    assert Path(stored).resolve().is_relative_to(settings.STORAGE_DIR) and Path(stored).is_file()


def _kept_upload(response) -> str:
    """The reference to an upload the re-shown form keeps (never a server path)."""
    match = re.search(r'name="kept_package" value="([^"]*)"', response.content.decode())
    return match.group(1) if match else ""


def test_upload_is_kept_when_another_field_fails_form_validation(client, project, admin, tmp_path):
    client.force_login(admin)

    response = client.post(
        SUBMIT_URL, {**form_data(job_id="labelled", labels="no equals sign"), "package_file": sdist_upload(tmp_path)}
    )

    assert response.status_code == 200
    page = Page(response.content.decode())
    assert "key=value" in page.errors("labels")
    assert _kept_upload(response), "the uploaded package was lost; the user must upload again"


def test_submit_without_any_package_says_so_at_the_package_field(client, project, admin):
    client.force_login(admin)

    response = client.post(SUBMIT_URL, form_data(job_id="no_package"))

    assert response.status_code == 200
    assert Page(response.content.decode()).errors("package_uris")
    assert not Job.objects.exists()


def test_duplicate_job_id_in_the_form_is_shown_at_the_job_id(client, project, admin):
    submit(project, "taken", admin)
    client.force_login(admin)

    response = client.post(SUBMIT_URL, form_data(job_id="taken", package_uris=PACKAGE))

    assert response.status_code == 200
    assert "already exists" in Page(response.content.decode()).errors("job_id")
    assert Job.objects.filter(job_id="taken").count() == 1


def test_viewer_cannot_open_the_submit_form(client, project, viewer):
    client.force_login(viewer)

    assert client.get(SUBMIT_URL).status_code == 403


def test_a_pages_fragments_are_refreshes_of_an_audited_read_and_refused_to_outsiders(
    client, project, admin, viewer, outsider
):
    from aiconsole.models import AuditEntry

    project.data_access_logs = True
    project.save()
    submit(project, "watched", admin)
    client.force_login(viewer)
    reads = AuditEntry.objects.filter(method_name="google.cloud.ml.v1.JobService.GetJob")
    before = reads.count()

    assert client.get("/projects/project-a/jobs/watched/").status_code == 200
    for name in ("status", "replicas", "logs"):
        response = client.get(f"/projects/project-a/jobs/watched/fragments/{name}/", HTTP_HX_REQUEST="true")
        assert response.status_code == 200, name
    missing = client.get("/projects/project-a/jobs/watched/fragments/trials/", HTTP_HX_REQUEST="true")

    assert reads.count() == before + 1  # the page's read, once; its refreshes are not reads of their own
    assert missing.status_code == 404  # a plain training job has no trial table
    client.force_login(outsider)
    assert client.get("/projects/project-a/jobs/watched/fragments/status/").status_code == 404
