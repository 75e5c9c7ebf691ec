"""Audit entries: what submit, cancel and reads record, and the tamper-evident chain."""

from __future__ import annotations

import threading

import pytest
from django.db import connection

from aiconsole import audit
from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from jobs import services
from jobs.models import Job, JobState

PACKAGE = "gs://trainer-bucket/trainer-0.1.tar.gz"
USER_AGENT = "google-api-python-client/2.0 (gzip)"
CREATE_JOB = "google.cloud.ml.v1.JobService.CreateJob"
CANCEL_JOB = "google.cloud.ml.v1.JobService.CancelJob"
GET_JOB = "google.cloud.ml.v1.JobService.GetJob"
LIST_JOBS = "google.cloud.ml.v1.JobService.ListJobs"


def body(job_id: str) -> dict:
    return {
        "jobId": job_id,
        "trainingInput": {
            "scaleTier": "BASIC",
            "packageUris": [PACKAGE],
            "pythonModule": "trainer.task",
            "region": "us-central1",
            "runtimeVersion": "2.11",
            "pythonVersion": "3.7",
        },
    }


def bearer(user) -> dict:
    _, raw = create_token(user)
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}", "HTTP_USER_AGENT": USER_AGENT}


def only_entry(**filters) -> AuditEntry:
    entries = list(AuditEntry.objects.filter(**filters))
    assert len(entries) == 1, entries
    return entries[0]


# --- Admin Activity -----------------------------------------------------------------------------


def test_submitting_through_rest_writes_a_create_job_entry_with_request_metadata(client, project, admin):
    response = client.post("/v1/projects/project-a/jobs", body("audited"), content_type="application/json",
                           **bearer(admin))
    assert response.status_code == 200

    entry = only_entry(method_name=CREATE_JOB)
    assert entry.log_type == AuditEntry.LogType.ADMIN_ACTIVITY
    assert entry.project_id == "project-a"
    assert entry.principal == "alice_admin@example.com"
    assert entry.resource_name == "projects/project-a"
    assert entry.permission == "ml.jobs.create"
    assert entry.granted is True
    assert entry.status_code == 0
    assert entry.request_id and entry.request_id == response["X-Request-Id"]
    assert entry.caller_ip == "127.0.0.1"
    assert entry.user_agent == USER_AGENT
    assert entry.request["parent"] == "projects/project-a"
    assert entry.request["job"]["jobId"] == "audited"
    assert entry.response["jobId"] == "audited"
    assert entry.response["state"] == "QUEUED"


def test_callers_request_id_is_kept_in_the_entry_and_echoed(client, project, admin):
    response = client.post("/v1/projects/project-a/jobs", body("traced"), content_type="application/json",
                           HTTP_X_REQUEST_ID="trace-1234", **bearer(admin))

    assert response["X-Request-Id"] == "trace-1234"
    assert only_entry(method_name=CREATE_JOB).request_id == "trace-1234"


def test_cancelling_from_the_console_writes_a_cancel_job_entry(client, project, admin):
    job = services.submit_job(project, body("to_cancel"), actor=admin)
    client.force_login(admin)

    response = client.post("/projects/project-a/jobs/to_cancel/cancel/", HTTP_USER_AGENT="Mozilla/5.0 test")
    assert response.status_code == 302

    entry = only_entry(method_name=CANCEL_JOB)
    assert entry.log_type == AuditEntry.LogType.ADMIN_ACTIVITY
    assert entry.principal == "alice_admin@example.com"
    assert entry.resource_name == "projects/project-a/jobs/to_cancel"
    assert entry.permission == "ml.jobs.cancel"
    assert entry.granted is True
    assert entry.request_id == response["X-Request-Id"]
    assert entry.user_agent == "Mozilla/5.0 test"
    assert entry.caller_ip == "127.0.0.1"
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED


def test_denied_cancel_writes_an_entry_with_granted_false(client, project, admin, viewer):
    services.submit_job(project, body("protected"), actor=admin)

    response = client.post("/v1/projects/project-a/jobs/protected:cancel", **bearer(viewer))
    assert response.status_code == 403

    entry = only_entry(method_name=CANCEL_JOB)
    assert entry.granted is False
    assert entry.principal == "vera_viewer@example.com"
    assert entry.permission == "ml.jobs.cancel"
    assert entry.resource_name == "projects/project-a/jobs/protected"
    assert entry.status_code == audit.CODE_PERMISSION_DENIED
    assert entry.request_id == response["X-Request-Id"]


def test_denied_submit_writes_an_entry_with_granted_false_and_creates_nothing(client, project, viewer):
    response = client.post("/v1/projects/project-a/jobs", body("nope"), content_type="application/json",
                           **bearer(viewer))
    assert response.status_code == 403

    entry = only_entry(method_name=CREATE_JOB)
    assert (entry.granted, entry.permission, entry.resource_name) == (
        False, "ml.jobs.create", "projects/project-a")
    assert not Job.objects.exists()


def test_rejected_spec_writes_no_create_entry(client, project, admin):
    bad = body("bad")
    bad["trainingInput"]["region"] = "mars-north1"

    response = client.post("/v1/projects/project-a/jobs", bad, content_type="application/json", **bearer(admin))

    assert response.status_code == 400
    assert not AuditEntry.objects.filter(method_name=CREATE_JOB, granted=True).exists()


# --- Data Access --------------------------------------------------------------------------------


def test_reads_write_no_data_access_entries_by_default(client, project, admin):
    services.submit_job(project, body("quiet"), actor=admin)
    auth = bearer(admin)

    assert client.get("/v1/projects/project-a/jobs/quiet", **auth).status_code == 200
    assert client.get("/v1/projects/project-a/jobs", **auth).status_code == 200

    assert not AuditEntry.objects.filter(log_type=AuditEntry.LogType.DATA_ACCESS).exists()
    assert not AuditEntry.objects.filter(method_name__in=[GET_JOB, LIST_JOBS]).exists()


def test_reads_write_data_access_entries_when_the_project_enables_them(client, project, admin):
    project.data_access_logs = True
    project.save()
    services.submit_job(project, body("loud"), actor=admin)
    auth = bearer(admin)

    get_response = client.get("/v1/projects/project-a/jobs/loud", **auth)
    list_response = client.get("/v1/projects/project-a/jobs", **auth)

    get_entry = only_entry(method_name=GET_JOB)
    assert get_entry.log_type == AuditEntry.LogType.DATA_ACCESS
    assert (get_entry.resource_name, get_entry.permission, get_entry.granted) == (
        "projects/project-a/jobs/loud", "ml.jobs.get", True)
    assert get_entry.request_id == get_response["X-Request-Id"]
    list_entry = only_entry(method_name=LIST_JOBS)
    assert list_entry.log_type == AuditEntry.LogType.DATA_ACCESS
    assert (list_entry.resource_name, list_entry.permission) == ("projects/project-a", "ml.jobs.list")
    assert list_entry.request_id == list_response["X-Request-Id"]


def test_console_job_page_is_a_data_access_read_too(client, project, admin):
    project.data_access_logs = True
    project.save()
    services.submit_job(project, body("paged"), actor=admin)
    client.force_login(admin)

    assert client.get("/projects/project-a/jobs/paged/").status_code == 200

    assert only_entry(method_name=GET_JOB).log_type == AuditEntry.LogType.DATA_ACCESS


# --- the chain ----------------------------------------------------------------------------------


@pytest.fixture
def three_entries(project, admin):
    for job_id in ("one", "two", "three"):
        services.submit_job(project, body(job_id), actor=admin)
    return list(AuditEntry.objects.order_by("id"))


def test_intact_log_verifies(three_entries):
    assert len(three_entries) == 3
    assert audit.verify_chain() == []


def test_entries_are_linked_to_their_predecessor(three_entries):
    first, second, third = three_entries

    assert first.prev_hash == audit.GENESIS_HASH
    assert second.prev_hash == first.entry_hash
    assert third.prev_hash == second.entry_hash


def test_editing_a_row_with_raw_sql_is_reported(three_entries):
    tampered = three_entries[1]
    with connection.cursor() as cursor:
        cursor.execute("UPDATE aiconsole_auditentry SET principal = %s WHERE id = %s",
                       ["someone-else@example.com", tampered.id])

    assert audit.verify_chain() == [tampered.id]


def test_rewriting_a_row_and_its_hash_is_reported_by_the_next_entry(three_entries):
    first, second, third = three_entries
    second.principal = "someone-else@example.com"
    forged_hash = second.compute_hash()
    with connection.cursor() as cursor:
        cursor.execute("UPDATE aiconsole_auditentry SET principal = %s, entry_hash = %s WHERE id = %s",
                       [second.principal, forged_hash, second.id])

    assert audit.verify_chain() == [third.id]


def test_deleting_a_row_with_raw_sql_is_reported(three_entries):
    first, second, third = three_entries
    with connection.cursor() as cursor:
        cursor.execute("DELETE FROM aiconsole_auditentry WHERE id = %s", [second.id])

    assert audit.verify_chain() == [third.id]


@pytest.mark.django_db(transaction=True)
def test_concurrent_entries_in_two_projects_keep_one_unbroken_chain(project, other_project, admin):
    # Writers in different projects must not both link to the same predecessor (a fork reads as
    # tampering). SQLite serialises writers anyway; PostgreSQL shows whether record() does.
    start = threading.Barrier(2)
    failures: list[BaseException] = []

    def write(target):
        try:
            start.wait(timeout=10)
            for n in range(40):
                audit.record(actor=admin, project=target, method=CREATE_JOB,
                             resource_name=target.resource_name, permission="ml.jobs.create",
                             request={"n": n})
        except BaseException as error:  # surfaced by the assertion below
            failures.append(error)
        finally:
            connection.close()

    writers = [threading.Thread(target=write, args=(p,)) for p in (project, other_project)]
    for writer in writers:
        writer.start()
    for writer in writers:
        writer.join()

    assert failures == []
    assert AuditEntry.objects.count() == 80
    assert audit.verify_chain() == []


def test_entry_cannot_be_updated_through_the_orm(three_entries):
    entry = three_entries[0]
    entry.principal = "someone-else@example.com"

    with pytest.raises(ValueError):
        entry.save()
    assert AuditEntry.objects.get(pk=entry.pk).principal == "alice_admin@example.com"


def test_entry_cannot_be_deleted_through_the_orm(three_entries):
    with pytest.raises(ValueError):
        three_entries[0].delete()
    assert AuditEntry.objects.count() == 3


def test_entries_cannot_be_bulk_updated_through_the_orm(three_entries):
    with pytest.raises(ValueError):
        AuditEntry.objects.filter(pk=three_entries[0].pk).update(principal="someone-else@example.com")
    assert audit.verify_chain() == []


def test_entries_cannot_be_bulk_deleted_through_the_orm(three_entries):
    with pytest.raises(ValueError):
        AuditEntry.objects.all().delete()
    assert AuditEntry.objects.count() == 3
