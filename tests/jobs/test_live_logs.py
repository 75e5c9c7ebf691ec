"""Live logs end to end: a real trainer through the executor to a connected socket, the Redis
channel layer, the writer's progress and bounds, and the job page around the socket."""

from __future__ import annotations

import json
import threading

import pytest
from channels.db import database_sync_to_async

from jobs import services
from jobs.executor.sink import LogSink
from jobs.logs.lines import LineSplitter
from jobs.models import LogLine
from tests.helpers.jobs import submit
from tests.helpers.logs import socket_path, store


def entries(frames: list[dict]) -> list[dict]:
    return [e for f in frames if f["type"] in ("backlog", "lines") for e in f["entries"]]


def has_message(text: str):
    return lambda frame: frame["type"] in ("backlog", "lines") and any(e["message"] == text for e in frame["entries"])


# --- a real trainer -----------------------------------------------------------------------------

BURSTY_TRAINER = """
    for burst in range(5):
        for n in range(2000):
            print(f"burst {burst} line {n}")
        sys.stdout.flush()
        time.sleep(0.3)
    for percent in range(0, 101, 25):
        sys.stderr.write(f"\\rtraining {percent}%")
        sys.stderr.flush()
        time.sleep(0.3)
    sys.stderr.write("\\n")
    print("done", flush=True)
"""


@pytest.mark.executor
@pytest.mark.asyncio
async def test_trainer_printing_in_bursts_reaches_a_connected_viewer_whole(
    executor, package_factory, job_body, project, admin, open_socket
):
    package = package_factory(BURSTY_TRAINER)
    job = await database_sync_to_async(services.submit_job)(project, job_body("bursty", package), actor=admin)
    sock = await open_socket(admin, socket_path(job))

    frames = await sock.until(has_message("Job completed successfully."), timeout=240)

    trainer = [e for e in entries(frames) if e["taskName"] == "master-replica-0"]
    stdout = [e["message"] for e in trainer if e["stream"] == "stdout"]
    assert stdout == [f"burst {b} line {n}" for b in range(5) for n in range(2000)] + ["done"]
    assert [e["message"] for e in trainer if e["stream"] == "stderr"] == ["training 100%"]
    assert [int(e["seq"]) for e in trainer] == list(range(1, len(trainer) + 1))
    ids = [int(e["id"]) for e in entries(frames)]
    assert ids == sorted(set(ids))  # in stored order, each line once
    service = [e["message"] for e in entries(frames) if e["taskName"] == "service"]
    assert any(m.startswith("Started master-replica-0") for m in service)
    assert "master-replica-0 exited with status 0." in service
    progress = [e["message"] for f in frames if f["type"] == "progress" for e in f["entries"]]
    assert "training 25%" in progress and "training 75%" in progress  # shown while it ran…
    stored = await database_sync_to_async(
        lambda: list(job.log_lines.filter(message__startswith="training").values_list("message", flat=True))
    )()
    assert stored == ["training 100%"]  # …and only the final state kept


# --- the Redis channel layer (scaled mode) ------------------------------------------------------


@pytest.mark.asyncio
@pytest.mark.django_db(transaction=True)
async def test_backlog_then_live_lines_through_redis(redis_layer, open_socket, project, admin):
    from channels.layers import get_channel_layer

    assert type(get_channel_layer()).__name__ == "RedisPubSubChannelLayer"
    job = await database_sync_to_async(submit)(project, "over_redis", admin)
    await database_sync_to_async(store)(job, "stored before")
    sock = await open_socket(admin, socket_path(job))
    assert [e["message"] for e in (await sock.next())["entries"]] == ["stored before"]

    def trainer():
        sink = LogSink(job.pk)
        for n in range(500):
            sink.emit("master-replica-0", "stdout", f"live {n}")
        sink.close()

    await database_sync_to_async(trainer)()
    frames = await sock.until(has_message("live 499"))
    assert [e["message"] for e in entries(frames)] == [f"live {n}" for n in range(500)]


@pytest.mark.django_db(transaction=True)
def test_long_poll_wakes_through_redis(redis_layer, long_poll_waiting, client, project, admin):
    job = submit(project, "poll_redis", admin)
    client.force_login(admin)
    result = {}
    thread = threading.Thread(
        target=lambda: result.update(
            body=client.get(f"/v1/projects/project-a/jobs/{job.job_id}/logs", {"waitSeconds": 20}).json()
        )
    )
    thread.start()
    assert long_poll_waiting.wait(10), "the request never started waiting"
    sink = LogSink(job.pk)
    sink.emit("master-replica-0", "stdout", "over redis")
    sink.close()
    thread.join(10)
    assert "body" in result, "the long-poll did not wake on the Redis event"
    assert [e["message"] for e in result["body"]["entries"]] == ["over redis"]


# --- the writer: progress, bounds, ordering -----------------------------------------------------


def test_progress_bar_reports_its_latest_state_while_it_is_redrawn():
    states = []
    splitter = LineSplitter(1000, on_progress=states.append)

    assert list(splitter.feed(b"\r 10%|#         |")) == []
    assert list(splitter.feed(b"\r 50%|#####     |\r 60%|######    |")) == []
    assert list(splitter.feed(b"\r100%|##########|\nnext\n")) == ["100%|##########|", "next"]
    assert states == [" 10%|#         |", " 60%|######    |"]


def test_print_with_end_carriage_return_counts_as_a_progress_bar():
    states = []
    splitter = LineSplitter(1000, on_progress=states.append)
    for step in (1, 2):
        list(splitter.feed(f"step {step}/2\r".encode()))
    assert states == ["step 1/2", "step 2/2"]


def test_a_line_arriving_in_pieces_is_not_a_progress_bar():
    states = []
    splitter = LineSplitter(1000, on_progress=states.append)
    assert list(splitter.feed(b"half a ")) == [] and list(splitter.feed(b"line\n")) == ["half a line"]
    assert states == []


@pytest.mark.django_db(transaction=True)
def test_a_flood_is_bounded_and_what_is_dropped_is_counted_in_the_log(project, admin):
    job = submit(project, "flood", admin)
    sink = LogSink(job.pk, max_pending=100, flush_interval=60)  # nothing is written while it floods
    for n in range(1000):
        sink.emit("master-replica-0", "stdout", f"line {n}")
    sink.close()

    messages = list(job.log_lines.values_list("message", flat=True))
    assert messages[:100] == [f"line {n}" for n in range(100)]
    assert messages[100] == (
        "900 log lines from master-replica-0 were dropped: the trainer printed faster than they could be stored."
    )


@pytest.mark.django_db(transaction=True)
def test_flush_returns_only_once_every_earlier_line_is_stored(project, admin):
    job = submit(project, "flushed", admin)
    sink = LogSink(job.pk)
    for n in range(20_000):
        sink.emit("master-replica-0", "stdout", f"line {n}")
        if n == 10_000:
            sink.service("halfway")
    sink.flush()  # the writer thread may be storing a batch right now
    assert LogLine.objects.filter(job=job).count() == 20_001
    sink.close()


# --- the page around the socket -----------------------------------------------------------------


def test_page_points_the_socket_at_the_newest_line_it_rendered(client, project, admin):
    job = submit(project, "paged", admin)
    lines = store(job, *[f"line {n}" for n in range(1500)])
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/paged/").content.decode()

    assert f'data-cursor="{lines[-1].pk}"' in html
    assert 'data-live="true"' in html
    assert ">line 1499<" in html and ">line 499<" not in html  # the newest thousand
    assert f'href="?before={lines[500].pk}"' in html  # and a way to the older ones
    assert 'data-socket-path="/ws/projects/project-a/jobs/paged/logs/"' in html


def test_first_error_link_opens_the_log_at_the_first_error(client, project, admin):
    job = submit(project, "erring", admin)
    store(job, *[f"fine {n}" for n in range(1200)])
    (error,) = store(job, "ValueError: bad input", severity="ERROR")
    store(job, "after the error")
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/erring/", {"first_error": "1"}).content.decode()

    assert f'id="line-{error.pk}"' in html and "first-error" in html
    assert "fine 1199" not in html and "after the error" in html
    assert 'data-live="false"' in html and "Back to live" in html and "Earlier lines" in html


def test_search_and_trial_filters_on_the_page(client, project, admin):
    job = submit(project, "searched", admin)
    store(job, "loss=0.5", "accuracy=0.9", trial="1")
    store(job, "loss=0.4", trial="2")
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/searched/", {"text": "LOSS", "trial": "2"}).content.decode()

    assert "loss=0.4" in html and "loss=0.5" not in html and "accuracy" not in html
    assert 'data-filters="trial=2&amp;text=LOSS"' in html


@pytest.mark.django_db(transaction=True)
def test_socket_and_rest_api_spell_a_line_the_same_way(project, admin, monkeypatch, client):
    from jobs.logs import stream as logstream

    published = []
    monkeypatch.setattr(logstream, "publish_lines", lambda job_pk, **message: published.append(message))
    job = submit(project, "spelled", admin)
    sink = LogSink(job.pk)
    sink.emit("master-replica-0", "stdout", 'quotes " and \\ backslash\tand tab, ünïcode ✓, \ufffd')
    sink.emit("worker-replica-1", "stderr", "WARNING:root:careful", trial_id="7")
    sink.close()
    client.force_login(admin)

    api = client.get("/v1/projects/project-a/jobs/spelled/logs").json()["entries"]

    assert [json.loads(m["entries_json"]) for m in published] == [api]
    assert api[1]["severity"] == "WARNING" and api[1]["trialId"] == "7"
