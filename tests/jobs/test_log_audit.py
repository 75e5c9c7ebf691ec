"""Reading a job's log is a Data Access read, recorded when the project enables those logs."""

from __future__ import annotations

import pytest
from channels.testing import WebsocketCommunicator

from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from console.asgi import application
from tests.helpers.jobs import submit

READ = "google.logging.v2.LoggingServiceV2.ListLogEntries"


@pytest.fixture
def logged_project(project):
    project.data_access_logs = True
    project.save(update_fields=["data_access_logs"])
    return project


def reads():
    return list(AuditEntry.objects.filter(method_name=READ).values_list("request", flat=True))


def test_download_and_api_reads_are_recorded_once_per_read(client, logged_project, admin):
    submit(logged_project, "logged", admin)
    client.force_login(admin)
    client.get("/projects/project-a/jobs/logged/logs/download/")
    _, raw = create_token(admin)
    client.get("/v1/projects/project-a/jobs/logged/logs", HTTP_AUTHORIZATION=f"Bearer {raw}")
    client.get("/v1/projects/project-a/jobs/logged/logs?after=5", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert [r["via"] for r in reads()] == ["api", "download"]  # newest first; the follow-up page is not


def test_no_entry_when_data_access_logs_are_off(client, project, admin):
    submit(project, "quiet", admin)
    client.force_login(admin)
    client.get("/projects/project-a/jobs/quiet/logs/download/")
    assert reads() == []


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_opening_the_live_stream_is_recorded(logged_project, admin):
    from asgiref.sync import sync_to_async
    from django.test import Client

    await sync_to_async(submit)(logged_project, "streamed", admin)
    client = Client()
    await sync_to_async(client.force_login)(admin)
    cookie = f"sessionid={client.cookies['sessionid'].value}"
    communicator = WebsocketCommunicator(
        application,
        "/ws/projects/project-a/jobs/streamed/logs/",
        headers=[(b"cookie", cookie.encode()), (b"origin", b"http://testserver"), (b"host", b"testserver")],
    )
    connected, _ = await communicator.connect()
    assert connected
    await communicator.disconnect()
    assert [r["via"] for r in await sync_to_async(reads)()] == ["stream"]
