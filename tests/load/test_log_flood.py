"""A trainer printing long lines faster than they can be stored, watched live: the console's
memory stays bounded (the log writer's buffer and each live feed are bounded in bytes, not only in
lines), and every line is stored or counted in the log's "dropped" line."""

from __future__ import annotations

import asyncio
import json
import threading

import pytest

from jobs.executor.sink import LogSink
from jobs.logs.lines import SERVICE_TASK
from jobs.models import LogLine
from tests.helpers.jobs import submit
from tests.helpers.memory import PeakRss


def said_dropped(messages) -> int:
    return sum(int(m.split()[0]) for m in messages if " log lines from " in m and " were dropped" in m)


@pytest.mark.django_db(transaction=True)
def test_long_lines_printed_faster_than_they_are_stored_cost_bounded_memory_and_each_is_stored_or_counted(
    project, admin
):
    job = submit(project, "long_lines", admin)
    sink = LogSink(job.pk, publish=False)
    printed = 20_000  # 640 MB of distinct 32 KB lines, handed over as a replica's reader does

    with PeakRss() as peak:
        for number in range(printed):
            sink.emit_lines("master-replica-0", "stdout", [f"{number:08d} " + "x" * 32_000])
        sink.close()

    stored = LogLine.objects.filter(job=job, task_name="master-replica-0").count()
    dropped = said_dropped(LogLine.objects.filter(job=job, task_name=SERVICE_TASK).values_list("message", flat=True))
    assert dropped > 0 and stored + dropped == printed
    assert peak.growth_mb < 250, f"{peak.growth_mb:.0f} MB more while {printed:,} long lines waited"


# Lines of 40,000 bytes (each cut at 32 KB) for a few seconds, then how many it printed.
LONG_LINES = """
line = "x" * 40_000
printed, until = 0, time.time() + 6
while time.time() < until:
    for _ in range(200):
        sys.stdout.write(f"long line {printed} {line}\\n")
        printed += 1
sys.stdout.flush()
time.sleep(2)  # the console's buffer drains: this line is not among any dropped
print("printed", printed, flush=True)
"""


@pytest.mark.executor
def test_a_watched_trainer_printing_long_lines_flat_out_leaves_both_processes_memory_bounded(live_console):
    console = live_console()
    console.submit("long_lines", LONG_LINES)
    console.wait_state("long_lines", {"RUNNING"})
    processes = console.processes()
    seen = {"start": 0, "cursor": 0, "received": 0, "skipped": 0}
    stop = threading.Event()

    async def watch() -> None:
        from websockets.asyncio.client import connect

        url = f"ws://127.0.0.1:{console.port}/ws/projects/default-project/jobs/long_lines/logs/?tail=0"
        async with connect(
            url,
            origin=console.url,
            max_size=None,
            open_timeout=30,
            additional_headers={"Cookie": f"sessionid={console.cookie}"},
        ) as ws:
            while not stop.is_set():
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
                except TimeoutError:
                    continue
                if frame["type"] == "backlog":
                    seen["start"] = seen["cursor"] = int(frame["cursor"])
                elif frame["type"] in ("lines", "skipped"):
                    seen["cursor"] = int(frame["cursor"])
                    seen["received"] += len(frame["entries"]) if frame["type"] == "lines" else 0
                    seen["skipped"] += frame.get("count", 0)

    viewer = threading.Thread(target=asyncio.run, args=(watch(),), daemon=True)
    viewer.start()
    with PeakRss(processes["web"]) as web, PeakRss(processes["worker"]) as worker:
        state = console.wait_state("long_lines", {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=120)
    stop.set()
    viewer.join(30)

    assert state == "SUCCEEDED"
    pk = console.job_pk("long_lines")
    printed = int(
        console.query("SELECT message FROM jobs_logline WHERE job_id = ? AND message LIKE 'printed %'", (pk,))[0][
            0
        ].split()[1]
    )
    stored = console.query("SELECT count(*) FROM jobs_logline WHERE job_id = ? AND message LIKE 'long line %'", (pk,))[
        0
    ][0]
    dropped = said_dropped(
        m
        for (m,) in console.query("SELECT message FROM jobs_logline WHERE job_id = ? AND task_name = 'service'", (pk,))
    )
    assert stored + dropped == printed
    # The viewer got 2 MB a second of them and was told how many went by: each line once.
    watched = console.query(
        "SELECT count(*) FROM jobs_logline WHERE job_id = ? AND id > ? AND id <= ?", (pk, seen["start"], seen["cursor"])
    )[0][0]
    assert seen["received"] > 0 and seen["skipped"] > 0 and seen["received"] + seen["skipped"] == watched
    # Unbounded, both passed 1 GB within seconds.
    assert web.mb < 450 and worker.mb < 450, f"web {web.mb:.0f} MB, worker {worker.mb:.0f} MB"
