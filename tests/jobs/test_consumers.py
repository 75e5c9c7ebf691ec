"""The live log WebSocket, as the job page uses it: backlog, live lines, resume, filters, refusals."""

from __future__ import annotations

import asyncio
import threading
import time

import pytest
from channels.db import database_sync_to_async

from aiconsole import iam
from aiconsole.events import group_for_job
from console.routing import same_origin
from jobs.executor.sink import LogSink
from jobs.logs import consumers
from jobs.logs import stream as logstream
from jobs.logs.consumers import CLOSE_BAD_REQUEST, CLOSE_FORBIDDEN, CLOSE_NOT_FOUND, CLOSE_UNAUTHENTICATED
from jobs.models import LogLine
from tests.helpers.jobs import submit
from tests.helpers.logs import socket_path, store, until_true

pytestmark = [pytest.mark.asyncio, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def job(project, admin):
    return submit(project, "live_job", admin)


def messages(frames: list[dict]) -> list[str]:
    return [e["message"] for f in frames if f["type"] in ("backlog", "lines", "earlier") for e in f["entries"]]


def has_message(text: str):
    return lambda frame: frame["type"] in ("backlog", "lines") and any(e["message"] == text for e in frame["entries"])


def write_live(job, *lines: str, task: str = "master-replica-0", stream: str = "stdout") -> None:
    """Lines through the real log writer, which stores and publishes them in batches."""
    sink = LogSink(job.pk)
    for line in lines:
        sink.emit(task, stream, line)
    sink.close()


async def test_backlog_first_then_live_lines(open_socket, job, admin):
    await database_sync_to_async(store)(job, "epoch 1", "epoch 2")
    sock = await open_socket(admin, socket_path(job))

    backlog = await sock.next()
    assert backlog["type"] == "backlog"
    assert [e["message"] for e in backlog["entries"]] == ["epoch 1", "epoch 2"]
    assert backlog["jobState"] == "QUEUED" and backlog["jobEnded"] is False
    assert (await sock.next()) == {"type": "count", "stored": 2}

    await database_sync_to_async(write_live)(job, "epoch 3", "epoch 4")
    frames = await sock.until(has_message("epoch 4"))
    assert messages(frames) == ["epoch 3", "epoch 4"]
    entry = frames[-1]["entries"][-1]
    assert entry["taskName"] == "master-replica-0" and entry["seq"] == "4" and entry["severity"] == "INFO"
    assert frames[-1]["stored"] == 4
    assert frames[-1]["cursor"] == entry["id"]


async def test_lines_printed_while_connecting_arrive_once_and_in_order(open_socket, job, admin):
    sink = LogSink(job.pk)
    total = 3000

    def trainer():
        for n in range(total):
            sink.emit("master-replica-0", "stdout", f"line {n}")
            if n % 50 == 0:
                time.sleep(0.002)
        sink.close()

    printer = threading.Thread(target=trainer)
    printer.start()
    try:
        await until_true(lambda: LogLine.objects.filter(job=job).count() > 300, message="lines stored")
        sock = await open_socket(admin, socket_path(job, tail=5000))
        frames = await sock.until(has_message(f"line {total - 1}"))
    finally:
        printer.join()

    assert messages(frames) == [f"line {n}" for n in range(total)]


async def test_a_line_stored_while_the_backlog_is_read_is_sent_once(open_socket, job, admin, monkeypatch):
    read_backlog = consumers._opening

    def backlog_read_while_the_trainer_prints(*args):
        write_live(job, "stored as the backlog is read")  # stored, and published to the live feed
        return read_backlog(*args)

    monkeypatch.setattr(consumers, "_opening", backlog_read_while_the_trainer_prints)
    sock = await open_socket(admin, socket_path(job))
    await database_sync_to_async(write_live)(job, "printed after")

    frames = await sock.until(has_message("printed after"))
    assert messages(frames) == ["stored as the backlog is read", "printed after"]


async def test_reconnect_resumes_after_the_last_line_seen(open_socket, job, admin):
    await database_sync_to_async(store)(job, "before the drop")
    first = await open_socket(admin, socket_path(job))
    cursor = (await first.next())["cursor"]
    await first.disconnect()

    await database_sync_to_async(write_live)(job, "while away 1", "while away 2")
    second = await open_socket(admin, socket_path(job, after=cursor))

    backlog = await second.next()
    assert [e["message"] for e in backlog["entries"]] == ["while away 1", "while away 2"]
    assert backlog["earlier"] is False
    assert await second.next() == {"type": "count", "stored": 3}
    await database_sync_to_async(write_live)(job, "after the return")
    frames = await second.until(has_message("after the return"))
    assert messages(frames) == ["after the return"]


async def test_resume_after_a_long_absence_says_lines_were_skipped(open_socket, job, admin):
    await database_sync_to_async(store)(job, *[f"old {n}" for n in range(3)])
    cursor = str(await database_sync_to_async(logstream.last_id)(job.pk))
    await database_sync_to_async(store)(job, *[f"new {n}" for n in range(30)])

    sock = await open_socket(admin, socket_path(job, after=cursor, tail=10))

    backlog = await sock.next()
    assert [e["message"] for e in backlog["entries"]] == [f"new {n}" for n in range(20, 30)]
    assert backlog["earlier"] is True


async def test_a_batch_that_never_arrived_is_read_back_from_the_database(open_socket, job, admin):
    sock = await open_socket(admin, socket_path(job))
    await sock.next()  # the (empty) backlog

    def lost_then_live():
        # A writer whose messages never reached this process, then a new one (a restart) that does.
        silent = LogSink(job.pk, publish=False)
        silent.emit("master-replica-0", "stdout", "written, never published")
        silent.close()
        write_live(job, "published")

    await database_sync_to_async(lost_then_live)()
    frames = await sock.until(has_message("published"))
    assert messages(frames) == ["written, never published", "published"]


async def test_two_viewers_of_a_job_both_follow_and_one_leaving_does_not_stop_the_other(
    open_socket, job, admin, viewer
):
    first = await open_socket(admin, socket_path(job))
    second = await open_socket(viewer, socket_path(job))
    await database_sync_to_async(write_live)(job, "to both")
    assert messages(await first.until(has_message("to both"))) == ["to both"]
    assert messages(await second.until(has_message("to both"))) == ["to both"]

    await first.disconnect()
    await database_sync_to_async(write_live)(job, "to the one left")
    assert messages(await second.until(has_message("to the one left"))) == ["to the one left"]


async def test_filters_apply_to_backlog_and_live_lines(open_socket, job, admin):
    def lines():
        store(job, "chatty", "Connection to the data lake lost", severity="INFO")
        store(job, "careful: low disk", severity="WARNING")
        store(job, "worker broke", task="worker-replica-1", severity="ERROR")

    await database_sync_to_async(lines)()

    by_severity = await open_socket(admin, socket_path(job, severity="WARNING"))
    by_task = await open_socket(admin, socket_path(job, task="worker-replica-1"))
    by_text = await open_socket(admin, socket_path(job, text="DATA%20LAKE"))

    assert messages([await by_severity.next()]) == ["careful: low disk", "worker broke"]
    assert messages([await by_task.next()]) == ["worker broke"]
    assert messages([await by_text.next()]) == ["Connection to the data lake lost"]

    def live():
        sink = LogSink(job.pk)
        sink.emit("master-replica-0", "stdout", "INFO still chatty")
        sink.emit("worker-replica-1", "stderr", "the data lake is back")  # plain stderr: INFO, not an error
        sink.emit("master-replica-0", "stdout", "WARNING: the last line")
        sink.close()

    await database_sync_to_async(live)()
    assert messages(await by_severity.until(has_message("WARNING: the last line"))) == ["WARNING: the last line"]
    assert messages(await by_task.until(has_message("the data lake is back"))) == ["the data lake is back"]
    assert messages(await by_text.until(has_message("the data lake is back"))) == ["the data lake is back"]


async def test_trial_filter(open_socket, job, admin):
    def lines():
        store(job, "trial one speaks", trial="1")
        store(job, "trial two speaks", trial="2")

    await database_sync_to_async(lines)()

    sock = await open_socket(admin, socket_path(job, trial="2"))

    backlog = await sock.next()
    assert messages([backlog]) == ["trial two speaks"]
    assert backlog["entries"][0]["trialId"] == "2"


async def test_earlier_lines_are_fetched_a_page_at_a_time(open_socket, job, admin):
    await database_sync_to_async(store)(job, *[f"line {n}" for n in range(2500)])
    sock = await open_socket(admin, socket_path(job))

    backlog = await sock.next()
    await sock.next()  # count
    assert backlog["earlier"] is True and messages([backlog])[0] == "line 1500"
    await sock.send_json_to({"action": "earlier", "before": backlog["entries"][0]["id"]})
    page = await sock.next()
    assert page["type"] == "earlier" and page["earlier"] is True
    assert messages([page]) == [f"line {n}" for n in range(500, 1500)]
    await sock.send_json_to({"action": "earlier", "before": page["entries"][0]["id"]})
    last = await sock.next()
    assert messages([last]) == [f"line {n}" for n in range(500)] and last["earlier"] is False


async def test_jump_to_the_first_error(open_socket, job, admin):
    def lines():
        store(job, "fine")
        return store(job, "Traceback (most recent call last):", "boom", severity="ERROR")

    error, _ = await database_sync_to_async(lines)()
    sock = await open_socket(admin, socket_path(job))
    await sock.until(lambda frame: frame["type"] == "count")

    await sock.send_json_to({"action": "firstError"})

    assert await sock.next() == {"type": "firstError", "id": str(error.pk)}


async def test_progress_bar_shows_as_one_updating_row_and_only_its_end_is_stored(open_socket, job, admin):
    sock = await open_socket(admin, socket_path(job))
    await sock.until(lambda frame: frame["type"] == "count")
    sink = LogSink(job.pk)

    sink.progress("master-replica-0", "stderr", " 40%|████      | 4/10")
    first = await sock.until(lambda frame: frame["type"] == "progress")
    sink.progress("master-replica-0", "stderr", " 90%|█████████ | 9/10")
    second = await sock.until(lambda frame: frame["type"] == "progress")
    sink.emit("master-replica-0", "stderr", "100%|██████████| 10/10")
    await database_sync_to_async(sink.close)()
    await sock.until(has_message("100%|██████████| 10/10"))

    assert first[-1]["entries"][0]["message"] == " 40%|████      | 4/10"
    assert second[-1]["entries"][0] | {"timestamp": ""} == {
        "taskName": "master-replica-0",
        "trialId": "",
        "stream": "stderr",
        "severity": "INFO",
        "message": " 90%|█████████ | 9/10",
        "timestamp": "",
    }
    stored = await database_sync_to_async(lambda: list(job.log_lines.values_list("message", flat=True)))()
    assert stored == ["100%|██████████| 10/10"]


async def test_job_state_changes_are_forwarded_and_other_events_ignored(open_socket, job, admin):
    sock = await open_socket(admin, socket_path(job))
    await sock.until(lambda frame: frame["type"] == "count")

    logstream.send_to_group(group_for_job(job.pk), {"type": "job.metrics", "job": job.pk})
    logstream.send_to_group(group_for_job(job.pk), {"type": "job.state", "job": job.pk, "state": "SUCCEEDED"})

    assert await sock.next() == {"type": "state", "jobState": "SUCCEEDED", "jobEnded": True}


# --- refusals -----------------------------------------------------------------------------------


async def _closed_with(sock) -> int:
    output = await sock.receive_output(5)
    assert output["type"] == "websocket.close"
    return output["code"]


async def test_outsider_gets_404(open_socket, job, outsider):
    sock = await open_socket(outsider, socket_path(job))
    assert await _closed_with(sock) == CLOSE_NOT_FOUND


async def test_unknown_job_gets_404(open_socket, project, admin, job):
    sock = await open_socket(admin, f"/ws/projects/{project.project_id}/jobs/no_such_job/logs/")
    assert await _closed_with(sock) == CLOSE_NOT_FOUND


async def test_a_nul_in_the_address_closes_with_4400_before_any_query(open_socket, project, admin, job):
    # PostgreSQL stores no NUL: a name or a filter holding one reached a query and the socket
    # ended with a server error (1011) there; HTTP answers the same address 400.
    for path in (
        f"/ws/projects/{project.project_id}/jobs/live%00job/logs/",
        f"/ws/projects/{project.project_id}%00/jobs/live_job/logs/",
        f"/ws/projects/{project.project_id}/jobs/live_job/logs/?text=a%00b",
    ):
        sock = await open_socket(admin, path)
        assert await _closed_with(sock) == CLOSE_BAD_REQUEST, path


async def test_member_without_jobs_get_gets_403(open_socket, job, project, django_user_model):
    def model_user():
        user = django_user_model.objects.create_user("mona_model_user", password="pw-mona")
        iam.grant(user, "roles/ml.modelUser", project)
        return user

    user = await database_sync_to_async(model_user)()
    sock = await open_socket(user, socket_path(job))
    assert await _closed_with(sock) == CLOSE_FORBIDDEN


async def test_anonymous_visitor_is_told_to_sign_in(open_socket, job):
    sock = await open_socket(None, socket_path(job))
    assert await _closed_with(sock) == CLOSE_UNAUTHENTICATED


async def test_viewer_can_watch(open_socket, job, viewer):
    await database_sync_to_async(store)(job, "visible to viewers")
    sock = await open_socket(viewer, socket_path(job))
    assert messages([await sock.next()]) == ["visible to viewers"]


@pytest.mark.parametrize(
    "origin",
    [
        "http://evil.example",  # another site
        "http://localhost:9999",  # another port on an allowed host: another origin
        "http://testserver.evil.example",  # a look-alike
        "",  # none at all
    ],
)
async def test_socket_from_a_foreign_origin_is_refused(open_socket, job, admin, origin):
    await open_socket(
        admin,
        socket_path(job),
        origin=origin,
        host="localhost:8000" if "localhost" in origin else "testserver",
        refused=True,
    )


async def test_socket_from_the_console_own_origin_is_accepted(open_socket, job, admin):
    sock = await open_socket(admin, socket_path(job), origin="http://localhost:8000", host="localhost:8000")
    assert (await sock.next())["type"] == "backlog"


async def test_origin_listed_in_csrf_trusted_origins_is_accepted_behind_a_proxy(settings):
    settings.CSRF_TRUSTED_ORIGINS = ["https://console.example.com"]
    scope = {"headers": [(b"origin", b"https://console.example.com"), (b"host", b"10.0.0.7:8000")]}
    assert same_origin(scope)
    assert not same_origin({"headers": [(b"origin", b"https://other.example.com"), (b"host", b"10.0.0.7:8000")]})


# --- an open socket is asked again ----------------------------------------------------------------


@pytest.fixture
def quick_recheck(settings):
    settings.STREAM_RECHECK_SECONDS = 0.1


@pytest.fixture
def platform_admin(django_user_model):
    return django_user_model.objects.create_superuser("pat_platform", password="pw-pat-platform-1")


async def _opened(sock) -> None:
    assert (await sock.next())["type"] == "backlog"
    assert (await sock.next())["type"] == "count"


async def test_deactivating_a_viewer_closes_their_open_log(open_socket, job, viewer, platform_admin, quick_recheck):
    from aiconsole import accounts

    sock = await open_socket(viewer, socket_path(job))
    await _opened(sock)
    await database_sync_to_async(accounts.deactivate_user)(viewer, actor=platform_admin)
    assert await _closed_with(sock) == CLOSE_UNAUTHENTICATED


async def test_a_new_password_set_by_an_admin_closes_the_users_open_log(
    open_socket, job, viewer, platform_admin, quick_recheck
):
    from aiconsole import accounts

    sock = await open_socket(viewer, socket_path(job))
    await _opened(sock)
    await database_sync_to_async(accounts.set_password)(viewer, "a-new-Passw0rd-for-vera", actor=platform_admin)
    assert await _closed_with(sock) == CLOSE_UNAUTHENTICATED


async def test_removing_a_viewers_role_closes_their_open_log_and_sends_no_more_lines(
    open_socket, job, viewer, quick_recheck
):
    from aiconsole.models import RoleBinding

    sock = await open_socket(viewer, socket_path(job))
    await _opened(sock)
    await database_sync_to_async(lambda: RoleBinding.objects.filter(user=viewer).delete())()
    # The project is not theirs any more: not found, as a new request would be told.
    assert await _closed_with(sock) == CLOSE_NOT_FOUND


async def test_a_viewer_who_may_still_watch_keeps_getting_lines_across_rechecks(
    open_socket, job, viewer, quick_recheck
):
    sock = await open_socket(viewer, socket_path(job))
    await _opened(sock)
    for n in range(3):
        await asyncio.sleep(0.3)  # several rechecks pass between the lines
        await database_sync_to_async(write_live)(job, f"still here {n}")
        await sock.until(has_message(f"still here {n}"), timeout=10)
