"""The audit viewer: who may read it, filters, keyset paging, entry detail and the JSON-lines export."""

from __future__ import annotations

import json
import re
from datetime import timedelta
from unittest.mock import patch

import pytest
from django.utils import timezone

from aiconsole import audit, iam
from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from jobs import services
from tests.helpers.identity import make_user
from tests.helpers.jobs import submit

AUDIT = "/projects/project-a/audit/"
CREATE_JOB = "google.cloud.ml.v1.JobService.CreateJob"
CANCEL_JOB = "google.cloud.ml.v1.JobService.CancelJob"


def signed_in(client, user):
    client.force_login(user)
    return client


def shown_ids(response) -> list[int]:
    return [int(i) for i in re.findall(r'href="/(?:projects/[^/]+/)?audit/(\d+)/"', response.content.decode())]


@pytest.fixture
def history(project, other_project, admin, developer, viewer, outsider):
    """A morning's activity: two jobs, a refused cancel, and a job in another project."""
    first = submit(project, "first", admin)
    submit(project, "second", developer)
    with pytest.raises(iam.PermissionDenied):
        services.cancel_job(first, actor=viewer)
    submit(other_project, "elsewhere", outsider)
    return AuditEntry.objects.filter(project_id="project-a").order_by("-id")


@pytest.mark.parametrize("persona, status", [("admin", 200), ("developer", 403), ("viewer", 403), ("outsider", 404)])
def test_only_project_admins_read_the_audit_log(client, history, request, persona, status):
    response = signed_in(client, request.getfixturevalue(persona)).get(AUDIT)

    assert response.status_code == status


def test_audit_log_shows_the_projects_entries_newest_first(client, history, admin):
    response = signed_in(client, admin).get(AUDIT)

    assert shown_ids(response) == [e.pk for e in history]
    html = response.content.decode()
    assert "elsewhere" not in html
    assert "vera_viewer@example.com" in html and "Denied" in html


@pytest.mark.parametrize(
    "query, expected",
    [
        ("outcome=denied", [CANCEL_JOB]),
        ("outcome=granted", [CREATE_JOB, CREATE_JOB]),
        ("principal=dave", [CREATE_JOB]),
        ("method=CancelJob", [CANCEL_JOB]),
        ("resource=projects/project-a/jobs/first", [CANCEL_JOB]),
        ("log_type=data_access", []),
        ("log_type=activity", [CANCEL_JOB, CREATE_JOB, CREATE_JOB]),
    ],
)
def test_filters(client, history, admin, query, expected):
    response = signed_in(client, admin).get(f"{AUDIT}?{query}")

    methods = [AuditEntry.objects.get(pk=pk).method_name for pk in shown_ids(response)]
    assert methods == expected


def test_time_range_filter(client, project, admin):
    now = timezone.now()
    with patch("django.utils.timezone.now", return_value=now - timedelta(days=3)):
        old = submit(project, "old", admin)
    submit(project, "new", admin)
    since = (now - timedelta(days=1)).strftime("%Y-%m-%dT%H:%M")
    until = (now - timedelta(days=2)).strftime("%Y-%m-%dT%H:%M")
    client = signed_in(client, admin)

    recent = [AuditEntry.objects.get(pk=pk).response["jobId"] for pk in shown_ids(client.get(f"{AUDIT}?since={since}"))]
    older = [AuditEntry.objects.get(pk=pk).response["jobId"] for pk in shown_ids(client.get(f"{AUDIT}?until={until}"))]

    assert recent == ["new"]
    assert older == [old.job_id]


def test_backwards_time_range_is_an_error_not_everything(client, history, admin):
    response = signed_in(client, admin).get(f"{AUDIT}?since=2026-01-02T00:00&until=2026-01-01T00:00")

    assert "The start of the time range is after its end." in response.content.decode()
    assert shown_ids(response) == []


def test_keyset_paging_walks_every_entry_once(client, project, admin, settings):
    for n in range(60):
        audit.record(
            actor=admin,
            project=project,
            method=CREATE_JOB,
            resource_name=project.resource_name,
            permission="ml.jobs.create",
            request={"n": n},
        )
    client = signed_in(client, admin)

    seen, url = [], AUDIT + "?method=CreateJob"
    while url:
        response = client.get(url)
        seen += shown_ids(response)
        older = re.search(r'href="\?([^"]*before=\d+)"', response.content.decode())
        url = AUDIT + "?" + older.group(1).replace("&amp;", "&") if older else None
        assert url is None or "method=CreateJob" in url

    assert seen == list(AuditEntry.objects.order_by("-id").values_list("pk", flat=True))
    assert len(seen) == 60


def test_entry_detail_shows_everything_recorded(client, history, admin):
    denied = history.get(granted=False)

    response = signed_in(client, admin).get(f"{AUDIT}{denied.pk}/")

    html = response.content.decode()
    assert response.status_code == 200
    for text in (
        "vera_viewer@example.com",
        CANCEL_JOB,
        "projects/project-a/jobs/first",
        "ml.jobs.cancel",
        "denied",
        "code 7",
        "cloudaudit.googleapis.com%2Factivity",
        denied.entry_hash,
    ):
        assert text in html


def test_entry_of_another_project_is_not_found_here(client, history, admin):
    elsewhere = AuditEntry.objects.get(project_id="project-b")

    assert signed_in(client, admin).get(f"{AUDIT}{elsewhere.pk}/").status_code == 404


def test_export_is_json_lines_of_log_entries(client, history, admin):
    response = signed_in(client, admin).get(f"{AUDIT}export/?outcome=denied")

    assert response["Content-Type"] == "application/x-ndjson"
    assert response["Content-Disposition"].startswith('attachment; filename="audit-project-a-')
    lines = [json.loads(line) for line in b"".join(response.streaming_content).decode().splitlines()]
    assert len(lines) == 1
    (entry,) = lines
    assert entry["protoPayload"]["methodName"] == CANCEL_JOB
    assert entry["protoPayload"]["authorizationInfo"][0]["granted"] is False
    assert entry["severity"] == "ERROR"
    assert entry["logName"] == "projects/project-a/logs/cloudaudit.googleapis.com%2Factivity"


def test_export_is_oldest_first_and_complete(client, history, admin):
    response = signed_in(client, admin).get(f"{AUDIT}export/")

    lines = b"".join(response.streaming_content).decode().splitlines()
    insert_ids = [json.loads(line)["insertId"] for line in lines]
    assert insert_ids == [e.entry_hash[:16] for e in reversed(history)]


def test_export_needs_the_same_permission(client, history, developer):
    assert signed_in(client, developer).get(f"{AUDIT}export/").status_code == 403


def test_reading_the_audit_log_is_itself_a_data_access_read(client, project, history, admin):
    project.data_access_logs = True
    project.save()

    signed_in(client, admin).get(AUDIT)

    read = AuditEntry.objects.get(method_name=audit.LIST_ENTRIES)
    assert (read.log_type, read.permission, read.service_name) == (
        "data_access",
        "logging.privateLogEntries.list",
        "logging.googleapis.com",
    )


def test_denied_attempt_to_read_the_audit_log_is_recorded_with_data_access(client, project, history, developer):
    # A refused read is a Data Access entry, as in the original: written when those logs are on.
    signed_in(client, developer).get(AUDIT)
    assert not AuditEntry.objects.filter(method_name=audit.LIST_ENTRIES).exists()
    project.data_access_logs = True
    project.save()

    client.get(AUDIT)

    denied = AuditEntry.objects.get(method_name=audit.LIST_ENTRIES)
    assert (denied.granted, denied.principal) == (False, "dave_dev@example.com")


def test_platform_admin_sees_all_projects_and_server_wide_entries(client, history, admin):
    root = make_user("root", is_superuser=True)
    create_token(admin, actor=admin)

    response = signed_in(client, root).get("/audit/")

    html = response.content.decode()
    assert response.status_code == 200
    assert "aiconsole.TokenService.CreateToken" in html
    assert "projects/project-b" in html
    token_entry = AuditEntry.objects.get(method_name="aiconsole.TokenService.CreateToken")
    detail = client.get(f"/audit/{token_entry.pk}/").content.decode()
    assert "organizations/aiconsole/logs/cloudaudit.googleapis.com%2Factivity" in detail


def test_project_admins_do_not_get_the_server_wide_view(client, history, admin):
    assert signed_in(client, admin).get("/audit/").status_code == 404
    assert client.get("/audit/export/").status_code == 404
