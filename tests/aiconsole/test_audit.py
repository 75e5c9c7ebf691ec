"""Audit entries: what submit, cancel and reads record, and the tamper-evident chain."""

from __future__ import annotations

import hashlib
import json
import threading
from datetime import timedelta
from unittest.mock import patch

import pytest
from django.conf import settings as settings_module
from django.db import connection
from django.utils import timezone

from aiconsole import accounts, audit, cloud_logging, iam, policies
from aiconsole.models import ApiToken, AuditChain, AuditEntry
from aiconsole.tokens import create_token, revoke_token
from bench.support.waiting import wait_for
from jobs import services
from jobs.models import Job, JobState
from tests.helpers.identity import tamper

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
    response = client.post(
        "/v1/projects/project-a/jobs", body("audited"), content_type="application/json", **bearer(admin)
    )
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
    response = client.post(
        "/v1/projects/project-a/jobs",
        body("traced"),
        content_type="application/json",
        HTTP_X_REQUEST_ID="trace-1234",
        **bearer(admin),
    )

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
    response = client.post(
        "/v1/projects/project-a/jobs", body("nope"), content_type="application/json", **bearer(viewer)
    )
    assert response.status_code == 403

    entry = only_entry(method_name=CREATE_JOB)
    assert (entry.granted, entry.permission, entry.resource_name) == (False, "ml.jobs.create", "projects/project-a")
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
        "projects/project-a/jobs/loud",
        "ml.jobs.get",
        True,
    )
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


# --- the chains -----------------------------------------------------------------------------------


@pytest.fixture
def three_entries(project, admin):
    for job_id in ("one", "two", "three"):
        services.submit_job(project, body(job_id), actor=admin)
    return list(AuditEntry.objects.filter(method_name=CREATE_JOB).order_by("id"))


def only_break() -> audit.ChainBreak:
    breaks = audit.verify_chain()
    assert len(breaks) == 1, breaks
    return breaks[0]


def test_intact_log_verifies(three_entries):
    assert len(three_entries) == 3
    assert audit.verify_chain() == []


def test_entries_are_linked_to_their_predecessor(three_entries):
    first, second, third = three_entries

    assert first.prev_hash == audit.genesis_hash("activity")
    assert second.prev_hash == first.entry_hash
    assert third.prev_hash == second.entry_hash
    assert [e.seq for e in three_entries] == [1, 2, 3]


def test_admin_activity_and_data_access_are_separate_chains(project, admin):
    project.data_access_logs = True
    project.save()
    job = services.submit_job(project, body("both"), actor=admin)
    services.get_job(project, "both", actor=admin)
    services.cancel_job(job, actor=admin)

    create, cancel = AuditEntry.objects.filter(log_type="activity").order_by("seq")
    (get,) = AuditEntry.objects.filter(log_type="data_access")
    assert cancel.prev_hash == create.entry_hash
    assert (get.seq, get.prev_hash) == (1, audit.genesis_hash("data_access"))
    assert audit.verify_chain() == []


def test_editing_a_row_with_raw_sql_is_reported_as_altered(three_entries):
    tampered = three_entries[1]
    tamper("UPDATE aiconsole_auditentry SET principal = %s WHERE id = %s", ["someone-else@example.com", tampered.id])

    found = only_break()
    assert (found.kind, found.entry_id, found.log_type) == ("altered", tampered.id, "activity")
    assert f"entry #{tampered.id}" in str(found)


def test_only_the_first_broken_entry_is_reported(three_entries):
    tamper(
        "UPDATE aiconsole_auditentry SET granted = %s WHERE id IN (%s, %s)",
        [False, three_entries[0].id, three_entries[2].id],
    )

    assert only_break().entry_id == three_entries[0].id


def test_rewriting_a_row_and_its_hash_is_reported_as_that_row_altered(three_entries):
    # Even someone holding the key, who re-hashes the row, cannot fix the next entry's link.
    first, second, third = three_entries
    second.principal = "someone-else@example.com"
    forged_hash = second.compute_hash()
    tamper(
        "UPDATE aiconsole_auditentry SET principal = %s, entry_hash = %s WHERE id = %s",
        [second.principal, forged_hash, second.id],
    )

    found = only_break()
    assert (found.kind, found.entry_id) == ("altered", second.id)


def test_rewriting_the_newest_row_and_its_hash_is_reported(three_entries):
    newest = three_entries[2]
    newest.principal = "someone-else@example.com"
    tamper(
        "UPDATE aiconsole_auditentry SET principal = %s, entry_hash = %s WHERE id = %s",
        [newest.principal, newest.compute_hash(), newest.id],
    )

    assert (only_break().kind, only_break().entry_id) == ("altered", newest.id)


def test_deleting_a_row_with_raw_sql_is_reported_as_removed_before_the_next(three_entries):
    first, second, third = three_entries
    tamper("DELETE FROM aiconsole_auditentry WHERE id = %s", [second.id])

    found = only_break()
    assert (found.kind, found.entry_id, found.seq) == ("removed", third.id, 2)
    assert "position 2" in found.message


def test_deleting_the_oldest_row_is_reported(three_entries):
    tamper("DELETE FROM aiconsole_auditentry WHERE id = %s", [three_entries[0].id])

    found = only_break()
    assert (found.kind, found.entry_id, found.seq) == ("removed", three_entries[1].id, 1)


def test_deleting_the_newest_rows_is_reported(three_entries):
    # A plain chain cannot show this; the sealed head record can.
    tamper("DELETE FROM aiconsole_auditentry WHERE id IN (%s, %s)", [three_entries[1].id, three_entries[2].id])

    found = only_break()
    assert (found.kind, found.entry_id, found.seq) == ("removed", None, 2)
    assert "newest entries (position 2–3)" in found.message


def _forge(seq: int, prev_hash: str, **fields) -> AuditEntry:
    """What someone without the key can add: a plausible row with a plain (unkeyed) hash."""
    entry = AuditEntry(
        timestamp=timezone.now(),
        log_type="activity",
        seq=seq,
        project_id="project-a",
        principal="alice_admin@example.com",
        method_name=CANCEL_JOB,
        resource_name="projects/project-a/jobs/one",
        permission="ml.jobs.cancel",
        granted=True,
        prev_hash=prev_hash,
        **fields,
    )
    entry.entry_hash = hashlib.sha256((prev_hash + entry.canonical()).encode()).hexdigest()
    entry.save()
    return entry


def test_inserting_a_row_at_the_end_is_reported(three_entries):
    forged = _forge(4, three_entries[2].entry_hash)

    found = only_break()
    assert (found.kind, found.entry_id, found.seq) == ("inserted", forged.id, 4)


def test_inserting_a_row_in_the_middle_is_reported(three_entries):
    first, second, third = three_entries
    # Make room at position 2.
    tamper("UPDATE aiconsole_auditentry SET seq = seq + 1000 WHERE seq >= 2 AND log_type = 'activity'")
    tamper("UPDATE aiconsole_auditentry SET seq = seq - 999 WHERE seq >= 1000 AND log_type = 'activity'")
    forged = _forge(2, first.entry_hash)

    found = only_break()
    assert (found.kind, found.entry_id) == ("inserted", forged.id)


def test_tampering_with_the_chain_record_is_reported(three_entries):
    tamper("UPDATE aiconsole_auditchain SET head_seq = 2 WHERE log_type = 'activity'")

    found = only_break()
    assert found.kind == "altered"
    assert "sealed" in found.message


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
                audit.record(
                    actor=admin,
                    project=target,
                    method=CREATE_JOB,
                    resource_name=target.resource_name,
                    permission="ml.jobs.create",
                    request={"n": n},
                )
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
    assert sorted(AuditEntry.objects.values_list("seq", flat=True)) == list(range(1, 81))
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


# --- retention ------------------------------------------------------------------------------------


def _entries_at(project, admin, when, *, data_access: bool, count: int = 2) -> list[AuditEntry]:
    project.data_access_logs = True
    with patch("django.utils.timezone.now", return_value=when):
        return [
            audit.record(
                actor=admin,
                project=project,
                method=GET_JOB if data_access else CREATE_JOB,
                resource_name=project.resource_name,
                permission="ml.jobs.get",
                data_access=data_access,
                request={"n": n},
            )
            for n in range(count)
        ]


def test_purge_removes_data_access_after_30_days_and_admin_activity_after_400(project, admin):
    now = timezone.now()
    old_reads = _entries_at(project, admin, now - timedelta(days=31), data_access=True)
    recent_reads = _entries_at(project, admin, now - timedelta(days=29), data_access=True)
    year_old_changes = _entries_at(project, admin, now - timedelta(days=365), data_access=False)

    removed = audit.purge(now=now)

    assert removed == {"activity": 0, "data_access": 2}
    remaining = set(AuditEntry.objects.values_list("pk", flat=True))
    assert not {e.pk for e in old_reads} & remaining
    assert {e.pk for e in recent_reads + year_old_changes} <= remaining
    assert audit.verify_chain() == []


def test_purge_keeps_the_remaining_chain_verifiable_and_records_itself(project, admin):
    now = timezone.now()
    ancient = _entries_at(project, admin, now - timedelta(days=401), data_access=False, count=3)
    kept = _entries_at(project, admin, now - timedelta(days=10), data_access=False)

    audit.purge(now=now)

    chain = AuditChain.objects.get(log_type="activity")
    assert (chain.anchor_seq, chain.anchor_hash) == (3, ancient[-1].entry_hash)
    assert set(AuditEntry.objects.filter(seq__lte=3, log_type="activity")) == set()
    assert audit.verify_chain() == []
    purge_entry = only_entry(method_name=audit.PURGE_METHOD)
    assert purge_entry.response == {"removedEntries": {"activity": 3, "data_access": 0}}
    assert purge_entry.principal == "system"
    assert kept[0].pk in set(AuditEntry.objects.values_list("pk", flat=True))


def test_purge_then_tampering_is_still_caught(project, admin):
    now = timezone.now()
    _entries_at(project, admin, now - timedelta(days=401), data_access=False)
    kept = _entries_at(project, admin, now - timedelta(days=1), data_access=False, count=3)
    audit.purge(now=now)
    tamper("DELETE FROM aiconsole_auditentry WHERE id = %s", [kept[0].id])

    found = only_break()
    assert (found.kind, found.entry_id) == ("removed", kept[1].id)


def test_purge_refuses_to_run_over_a_broken_chain(project, admin):
    now = timezone.now()
    old = _entries_at(project, admin, now - timedelta(days=401), data_access=False)
    tamper("UPDATE aiconsole_auditentry SET principal = 'x' WHERE id = %s", [old[0].id])

    with pytest.raises(audit.ChainBroken):
        audit.purge(now=now)
    assert AuditEntry.objects.filter(pk=old[0].pk).exists()


def test_purge_dry_run_counts_without_removing(project, admin):
    now = timezone.now()
    _entries_at(project, admin, now - timedelta(days=40), data_access=True, count=3)

    assert audit.purge(now=now, dry_run=True) == {"activity": 0, "data_access": 3}
    assert AuditEntry.objects.count() == 3


def test_retention_is_configurable(project, admin, settings):
    settings.AUDIT_DATA_ACCESS_RETENTION_DAYS = 7
    now = timezone.now()
    _entries_at(project, admin, now - timedelta(days=8), data_access=True)

    assert audit.purge(now=now)["data_access"] == 2


# --- secrets, token and account services -------------------------------------------------------


def test_secrets_in_requests_are_redacted(client, project, admin):
    job = body("secretive")
    job["trainingInput"]["args"] = ["--epochs=3", "--api-key=abc123", "--password", "hunter2", "--lr", "0.1"]
    job["labels"] = {"team": "ml"}

    response = client.post("/v1/projects/project-a/jobs", job, content_type="application/json", **bearer(admin))
    assert response.status_code == 200

    entry = only_entry(method_name=CREATE_JOB)
    args = entry.request["job"]["trainingInput"]["args"]
    assert args == ["--epochs=3", "--api-key=[REDACTED]", "--password", "[REDACTED]", "--lr", "0.1"]
    assert "hunter2" not in json.dumps(entry.request) and "abc123" not in json.dumps(entry.response)
    assert entry.request["job"]["labels"] == {"team": "ml"}


def test_redaction_covers_secret_keys_and_name_value_pairs():
    cleaned = audit.redact(
        {
            "password": "p",
            "clientSecret": "s",
            "pageToken": "t",
            "env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "k"}, {"name": "MODE", "value": "fast"}],
        }
    )

    assert cleaned == {
        "password": "[REDACTED]",
        "clientSecret": "[REDACTED]",
        "pageToken": "t",
        "env": [{"name": "AWS_SECRET_ACCESS_KEY", "value": "[REDACTED]"}, {"name": "MODE", "value": "fast"}],
    }


def test_creating_and_revoking_a_token_is_audited_without_the_key(admin):
    token, raw = create_token(admin, name="ci", actor=admin)
    revoke_token(token, actor=admin)
    revoke_token(token, actor=admin)  # already revoked: nothing more is recorded

    created = only_entry(method_name="aiconsole.TokenService.CreateToken")
    assert (created.principal, created.project_id, created.log_type) == ("alice_admin@example.com", "", "activity")
    assert created.resource_name == f"users/alice_admin/tokens/{token.pk}"
    assert created.service_name == "aiconsole"
    assert raw not in json.dumps([created.request, created.response])
    assert created.response["hint"] == raw[:12]
    revoked = only_entry(method_name="aiconsole.TokenService.RevokeToken")
    assert (revoked.resource_name, revoked.granted) == (created.resource_name, True)


def test_token_created_without_an_actor_is_the_systems(admin):
    create_token(admin)

    assert only_entry(method_name="aiconsole.TokenService.CreateToken").principal == "system"


def test_a_user_cannot_create_or_revoke_someone_elses_token(admin, viewer):
    token, _ = create_token(admin, actor=admin)

    with pytest.raises(iam.PermissionDenied):
        create_token(admin, actor=viewer)
    with pytest.raises(iam.PermissionDenied):
        revoke_token(token, actor=viewer)

    assert ApiToken.objects.get(pk=token.pk).revoked is None
    denied = AuditEntry.objects.filter(granted=False).order_by("id")
    assert [e.method_name for e in denied] == [
        "aiconsole.TokenService.CreateToken",
        "aiconsole.TokenService.RevokeToken",
    ]
    assert {e.principal for e in denied} == {"vera_viewer@example.com"}


def test_creating_projects_and_users_is_audited(db):
    project = accounts.create_project("new-project", actor=iam.SYSTEM, display_name="New")
    user, password = accounts.create_user("nina", actor=iam.SYSTEM, email="nina@example.com")

    created = only_entry(method_name=accounts.CREATE_PROJECT)
    assert (created.project_id, created.resource_name, created.service_name) == (
        "new-project",
        "projects/new-project",
        "cloudresourcemanager.googleapis.com",
    )
    made = only_entry(method_name=accounts.CREATE_USER)
    assert (made.resource_name, made.principal) == ("users/nina", "system")
    assert password not in json.dumps([made.request, made.response])
    assert user.check_password(password)
    assert project.display_name == "New"


# --- LogEntry shape and the Cloud Logging export ------------------------------------------------


def test_log_entry_has_the_cloud_audit_logs_shape(client, project, admin):
    client.post("/v1/projects/project-a/jobs", body("shaped"), content_type="application/json", **bearer(admin))
    entry = only_entry(method_name=CREATE_JOB)

    rendered = cloud_logging.log_entry(entry)

    payload = rendered["protoPayload"]
    assert payload["@type"] == "type.googleapis.com/google.cloud.audit.AuditLog"
    assert payload["authenticationInfo"] == {"principalEmail": "alice_admin@example.com"}
    assert payload["requestMetadata"]["callerIp"] == "127.0.0.1"
    assert payload["requestMetadata"]["callerSuppliedUserAgent"] == USER_AGENT
    assert (payload["serviceName"], payload["methodName"]) == ("ml.googleapis.com", CREATE_JOB)
    assert payload["authorizationInfo"] == [
        {"resource": "projects/project-a", "permission": "ml.jobs.create", "granted": True, "resourceAttributes": {}}
    ]
    assert payload["resourceName"] == "projects/project-a"
    assert payload["request"]["@type"] == "type.googleapis.com/google.cloud.ml.v1.CreateJobRequest"
    assert payload["request"]["job"]["jobId"] == "shaped"
    assert payload["response"]["jobId"] == "shaped"
    assert payload["status"] == {}
    assert rendered["resource"] == {
        "type": "audited_resource",
        "labels": {"method": CREATE_JOB, "project_id": "project-a", "service": "ml.googleapis.com"},
    }
    assert rendered["severity"] == "NOTICE"
    assert rendered["logName"] == "projects/project-a/logs/cloudaudit.googleapis.com%2Factivity"
    assert rendered["timestamp"].endswith("Z") and rendered["insertId"]


def test_denied_data_access_entry_is_an_error_in_the_data_access_log(project, admin, viewer):
    project.data_access_logs = True
    project.save()
    job = services.submit_job(project, body("guarded"), actor=admin)
    with pytest.raises(iam.PermissionDenied):
        policies.get_policy(job, actor=viewer)

    rendered = cloud_logging.log_entry(only_entry(granted=False))

    assert rendered["severity"] == "ERROR"
    assert rendered["logName"].endswith("cloudaudit.googleapis.com%2Fdata_access")
    assert rendered["protoPayload"]["status"]["code"] == audit.CODE_PERMISSION_DENIED


class FakeLoggingApi:
    """Stands in for Google's entries.write; the real client builds the entries."""

    def __init__(self):
        self.written: list[tuple[dict, dict]] = []

    def write_entries(self, entries, **kwargs):
        self.written += [(entry, kwargs) for entry in entries]


@pytest.fixture
def google(monkeypatch, settings):
    from google.auth.credentials import AnonymousCredentials
    from google.cloud.logging import Client

    settings.CLOUD_LOGGING_PROJECT = "gcp-audit-sink"
    api = FakeLoggingApi()

    def make_client():
        client = Client(project="gcp-audit-sink", credentials=AnonymousCredentials(), _use_grpc=False)
        client._logging_api = api
        return client

    monkeypatch.setattr(cloud_logging, "_make_client", make_client)
    monkeypatch.setattr(cloud_logging, "_client", None)
    return api


def test_entries_go_to_cloud_logging_after_commit(project, admin, google, django_capture_on_commit_callbacks):
    with django_capture_on_commit_callbacks(execute=True):
        services.submit_job(project, body("exported"), actor=admin)
        assert google.written == []  # nothing leaves before the commit

    wait_for(
        lambda: any(e["jsonPayload"].get("methodName") == CREATE_JOB for e, _ in google.written),
        10,
        message="the entry to reach Cloud Logging",
    )
    entry, kwargs = next((e, k) for e, k in google.written if e["jsonPayload"].get("methodName") == CREATE_JOB)
    assert kwargs["logger_name"] == "projects/gcp-audit-sink/logs/aiconsole-audit-activity"
    assert entry["severity"] == "NOTICE"
    assert entry["jsonPayload"]["authorizationInfo"][0]["permission"] == "ml.jobs.create"
    assert entry["labels"]["aiconsole/project_id"] == "project-a"
    assert entry["insertId"] == only_entry(method_name=CREATE_JOB).entry_hash[:16]


def test_job_log_lines_go_to_cloud_logging(project, admin, google, django_capture_on_commit_callbacks):
    job = services.submit_job(project, body("noisy"), actor=admin)
    rows = [
        {
            "task_name": "master-replica-0",
            "trial_id": "",
            "severity": "WARNING",
            "message": "loss is nan",
            "time": timezone.now(),
        }
    ]

    with django_capture_on_commit_callbacks(execute=True):
        cloud_logging.export_job_log_lines(job, rows)

    def job_lines():
        return [(e, k) for e, k in google.written if k["logger_name"].endswith("/master-replica-0")]

    wait_for(job_lines, 10, message="the line to reach Cloud Logging")
    entry, kwargs = job_lines()[0]
    assert kwargs["logger_name"] == "projects/gcp-audit-sink/logs/master-replica-0"
    assert entry["jsonPayload"]["message"] == "loss is nan"
    assert entry["severity"] == "WARNING"
    assert entry["resource"] == {
        "type": "ml_job",
        "labels": {"job_id": "noisy", "project_id": "gcp-audit-sink", "task_name": "master-replica-0"},
    }


@pytest.mark.executor
def test_a_running_jobs_log_lines_reach_cloud_logging_as_they_are_stored(run_job, package_factory, google):
    job = run_job("exported_run", package_factory('print("epoch 1 loss 0.5", flush=True)'))
    assert job.state == "SUCCEEDED", job.error_message

    def trainer_lines():
        return [e for e, k in google.written if k["logger_name"].endswith("/master-replica-0") and "epoch 1" in str(e)]

    wait_for(trainer_lines, 10, message="the trainer's line to reach Cloud Logging")
    entry = trainer_lines()[0]
    assert entry["jsonPayload"]["message"] == "epoch 1 loss 0.5"
    assert entry["resource"]["labels"] == {
        "job_id": "exported_run",
        "project_id": "gcp-audit-sink",
        "task_name": "master-replica-0",
    }


def test_cloud_logging_failure_never_reaches_the_request(
    client, project, admin, monkeypatch, settings, django_capture_on_commit_callbacks
):
    settings.CLOUD_LOGGING_PROJECT = "gcp-audit-sink"
    attempts = []

    def broken_client():
        attempts.append(1)
        raise RuntimeError("Google is unreachable")

    monkeypatch.setattr(cloud_logging, "_make_client", broken_client)
    monkeypatch.setattr(cloud_logging, "_client", None)
    with django_capture_on_commit_callbacks(execute=True):
        response = client.post(
            "/v1/projects/project-a/jobs", body("fine"), content_type="application/json", **bearer(admin)
        )

    assert response.status_code == 200
    wait_for(lambda: attempts, 10, message="the export to be tried")
    assert Job.objects.filter(job_id="fine").exists()


def test_nothing_tries_to_reach_google_without_the_setting(
    project, admin, monkeypatch, django_capture_on_commit_callbacks
):
    assert not settings_module.CLOUD_LOGGING_PROJECT
    monkeypatch.setattr(cloud_logging, "_enqueue", lambda *a: pytest.fail("tried to export"))

    with django_capture_on_commit_callbacks(execute=True):
        job = services.submit_job(project, body("local_only"), actor=admin)
    cloud_logging.export_job_log_lines(job, [{"message": "hi"}])


# --- the one-time upgrade from a single chain ---------------------------------------------------


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_migration_splits_an_existing_single_chain_into_verified_chains():
    from django.db.migrations.executor import MigrationExecutor

    before = [("aiconsole", "0001_initial")]
    executor = MigrationExecutor(connection)
    executor.migrate(before)
    try:
        old = executor.loader.project_state(before).apps.get_model("aiconsole", "AuditEntry")
        for n, log_type in enumerate(["activity", "data_access", "activity", "data_access", "activity"]):
            old.objects.create(
                timestamp=timezone.now(),
                log_type=log_type,
                project_id="p",
                principal="a@example.com",
                method_name=CREATE_JOB,
                resource_name="projects/p",
                permission="ml.jobs.create",
                granted=True,
                prev_hash=f"{n}",
                entry_hash=f"old-{n}",
                request={"n": n},
            )
    finally:
        # Going back to aiconsole 0001 also unapplied every app that depends on it: restore the
        # whole schema, not only aiconsole's, or later tests find tables missing.
        executor = MigrationExecutor(connection)
        executor.loader.build_graph()
        executor.migrate(executor.loader.graph.leaf_nodes())

    assert audit.verify_chain() == []
    assert list(AuditEntry.objects.filter(log_type="activity").order_by("id").values_list("seq", flat=True)) == [
        1,
        2,
        3,
    ]
    assert list(AuditEntry.objects.filter(log_type="data_access").order_by("id").values_list("request", flat=True)) == [
        {"n": 1},
        {"n": 3},
    ]
    assert AuditChain.objects.get(log_type="activity").head_seq == 3
