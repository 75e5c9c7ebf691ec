"""GET /v1/projects/{p}/jobs/{j}/logs: the long-poll endpoint `aiconsole jobs stream-logs` reads."""

from __future__ import annotations

import re
import threading
import time
from datetime import timedelta

import pytest
from django.utils import timezone

from aiconsole import iam
from aiconsole.tokens import create_token
from jobs.executor.sink import LogSink
from jobs.logs import api as log_api
from jobs.models import Job, JobState
from tests.helpers.jobs import submit
from tests.helpers.logs import store

TIMESTAMP = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{6}Z$")


@pytest.fixture
def job(project, admin):
    return submit(project, "logged", admin)


@pytest.fixture
def get_logs(client, admin):
    _, raw = create_token(admin)

    def get(job, **params):
        return client.get(
            f"/v1/projects/{job.project.project_id}/jobs/{job.job_id}/logs", params, HTTP_AUTHORIZATION=f"Bearer {raw}"
        )

    return get


def finish(job, state=JobState.SUCCEEDED, ended_ago: float = 5.0) -> None:
    Job.objects.filter(pk=job.pk).update(state=state, end_time=timezone.now() - timedelta(seconds=ended_ago))


def test_entries_come_in_stored_order_in_the_contract_form(get_logs, job):
    first, second = store(job, "hello", "WARNING: careful", severity="INFO")

    body = get_logs(job).json()

    assert body == {
        "entries": [
            {
                "id": str(first.pk),
                "timestamp": body["entries"][0]["timestamp"],
                "severity": "INFO",
                "taskName": "master-replica-0",
                "trialId": "",
                "seq": "1",
                "stream": "stdout",
                "message": "hello",
            },
            {
                "id": str(second.pk),
                "timestamp": body["entries"][1]["timestamp"],
                "severity": "INFO",
                "taskName": "master-replica-0",
                "trialId": "",
                "seq": "2",
                "stream": "stdout",
                "message": "WARNING: careful",
            },
        ],
        "nextCursor": str(second.pk),
        "jobState": "QUEUED",
        "jobEnded": False,
    }
    assert TIMESTAMP.match(body["entries"][0]["timestamp"])
    assert body["entries"][0]["timestamp"] == "2026-11-21T16:00:00.001000Z"


def test_paging_with_the_cursor_returns_every_line_once(get_logs, job):
    store(job, *[f"line {n}" for n in range(1200)])
    seen, cursor, sizes = [], "", []
    while True:
        body = get_logs(job, after=cursor).json() if cursor else get_logs(job).json()
        if not body["entries"]:
            break
        sizes.append(len(body["entries"]))
        seen += [e["message"] for e in body["entries"]]
        cursor = body["nextCursor"]

    assert sizes == [500, 500, 200]
    assert seen == [f"line {n}" for n in range(1200)]
    assert body["nextCursor"] == cursor  # nothing new: the cursor stays


def test_page_size_is_capped_at_1000(get_logs, job):
    store(job, *[f"line {n}" for n in range(1100)])
    assert len(get_logs(job, pageSize=5000).json()["entries"]) == 1000
    assert len(get_logs(job, pageSize=3).json()["entries"]) == 3


def test_filters_by_task_trial_minimum_severity_and_text(get_logs, job):
    store(job, "chatty", severity="INFO")
    store(job, "careful", severity="WARNING")
    store(job, "worker broke", task="worker-replica-1", severity="ERROR")
    store(job, "trial 3 says Hello", trial="3", severity="INFO")

    def messages(**params):
        return [e["message"] for e in get_logs(job, **params).json()["entries"]]

    assert messages(taskName="worker-replica-1") == ["worker broke"]
    assert messages(severity="WARNING") == ["careful", "worker broke"]
    assert messages(severity="error") == ["worker broke"]
    assert messages(trialId="3") == ["trial 3 says Hello"]
    assert messages(text="hello") == ["trial 3 says Hello"]


def test_a_filtered_answer_with_nothing_moves_past_the_lines_it_skipped(get_logs, job):
    (only,) = store(job, "just info")
    body = get_logs(job, severity="ERROR").json()
    assert body["entries"] == [] and body["nextCursor"] == str(only.pk)
    assert get_logs(job, after=only.pk).json()["nextCursor"] == str(only.pk)


def test_job_ended_once_terminal_and_every_line_returned(get_logs, job):
    store(job, *[f"line {n}" for n in range(600)])
    assert get_logs(job).json()["jobEnded"] is False  # still queued
    finish(job, JobState.FAILED)

    first = get_logs(job).json()
    last = get_logs(job, after=first["nextCursor"]).json()

    assert (first["jobEnded"], first["jobState"]) == (False, "FAILED")  # 100 lines still to come
    assert len(last["entries"]) == 100 and last["jobEnded"] is True


def test_job_that_just_ended_is_not_reported_ended_before_its_last_lines_settle(get_logs, job):
    finish(job, ended_ago=0)
    assert get_logs(job).json()["jobEnded"] is False
    finish(job, ended_ago=log_api.SETTLE_SECONDS + 1)
    assert get_logs(job).json()["jobEnded"] is True


@pytest.mark.parametrize(
    "params, message",
    [
        ({"severity": "LOUD"}, "Invalid severity"),
        ({"after": "abc"}, "cursor"),
        ({"waitSeconds": "31"}, "waitSeconds"),
        ({"pageSize": "-1"}, "pageSize"),
    ],
)
def test_invalid_parameters_are_rejected_in_the_google_error_form(get_logs, job, params, message):
    response = get_logs(job, **params)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["status"] == "INVALID_ARGUMENT" and message in error["message"]


def test_outsider_gets_404(client, job, outsider):
    _, raw = create_token(outsider)
    response = client.get("/v1/projects/project-a/jobs/logged/logs", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 404 and response.json()["error"]["status"] == "NOT_FOUND"


def test_member_without_jobs_get_gets_403(client, job, project, django_user_model):
    user = django_user_model.objects.create_user("mona_model_user", password="pw-mona")
    iam.grant(user, "roles/ml.modelUser", project)
    _, raw = create_token(user)
    response = client.get("/v1/projects/project-a/jobs/logged/logs", HTTP_AUTHORIZATION=f"Bearer {raw}")
    assert response.status_code == 403 and "ml.jobs.get" in response.json()["error"]["message"]


def test_anonymous_caller_gets_401(client, job):
    response = client.get("/v1/projects/project-a/jobs/logged/logs")
    assert response.status_code == 401 and response.json()["error"]["status"] == "UNAUTHENTICATED"


def test_signed_in_console_session_works_too(client, job, viewer):
    store(job, "for the viewer")
    client.force_login(viewer)
    body = client.get("/v1/projects/project-a/jobs/logged/logs").json()
    assert [e["message"] for e in body["entries"]] == ["for the viewer"]


# --- long-poll ----------------------------------------------------------------------------------


def _in_background(call):
    result = {}
    thread = threading.Thread(target=lambda: result.update(response=call(), done=time.monotonic()))
    thread.start()
    return thread, result


@pytest.mark.django_db(transaction=True)
def test_long_poll_wakes_on_new_lines_not_on_a_timer(get_logs, job, long_poll_waiting):
    thread, result = _in_background(lambda: get_logs(job, waitSeconds=30))
    assert long_poll_waiting.wait(10), "the request never started waiting"

    written = time.monotonic()
    sink = LogSink(job.pk)
    sink.emit("master-replica-0", "stdout", "worth the wait")
    sink.close()
    thread.join(10)

    assert "response" in result, "the long-poll did not answer when the line was stored"
    body = result["response"].json()
    assert [e["message"] for e in body["entries"]] == ["worth the wait"]
    assert result["done"] - written < 5
    assert body["jobEnded"] is False


@pytest.mark.django_db(transaction=True)
def test_long_poll_returns_when_the_job_ends(get_logs, job):
    (line,) = store(job, "the only line")
    started = time.monotonic()
    thread, result = _in_background(lambda: get_logs(job, after=line.pk, waitSeconds=30))
    finish(job)
    thread.join(15)

    assert "response" in result, "the long-poll did not answer when the job ended"
    body = result["response"].json()
    assert body == {"entries": [], "nextCursor": str(line.pk), "jobState": "SUCCEEDED", "jobEnded": True}
    assert result["done"] - started < 10


@pytest.mark.django_db(transaction=True)
def test_long_poll_with_nothing_new_answers_after_the_wait(get_logs, job):
    started = time.monotonic()
    body = get_logs(job, waitSeconds=1).json()
    assert time.monotonic() - started >= 1
    assert body == {"entries": [], "nextCursor": "", "jobState": "QUEUED", "jobEnded": False}
