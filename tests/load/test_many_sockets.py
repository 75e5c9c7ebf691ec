"""500 live-log WebSockets on a job printing 20,000 lines a second: the web process's memory stays bounded, other users'
requests are answered, and each viewer gets every line or is told how many it skipped."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest

from bench.support.waiting import wait_for
from tests.helpers.memory import PeakRss

VIEWERS = 500

# 20,000 lines a second until the job dir holds "stop".
CHATTY = """
job_dir = sys.argv[-1]
printed = 0
while not os.path.exists(os.path.join(job_dir, "stop")):
    for _ in range(1000):
        print(f"chatty line {printed} with a little payload: loss=0.123456", flush=False)
        printed += 1
    sys.stdout.flush()
    time.sleep(0.05)
"""


@pytest.mark.executor
def test_500_viewers_of_a_chatty_job_leave_the_web_process_bounded_and_each_gets_every_line_or_its_count(live_console):
    console = live_console()
    job_dir = console.submit("chatty", CHATTY)
    console.wait_state("chatty", {"RUNNING"})
    web = console.processes()["web"]
    starts, cursors, received, skipped = ([0] * VIEWERS for _ in range(4))
    errors: list[str] = []
    stop = threading.Event()

    async def viewer(index: int, gate: asyncio.Semaphore) -> None:
        from websockets.asyncio.client import connect

        url = f"ws://127.0.0.1:{console.port}/ws/projects/default-project/jobs/chatty/logs/?tail=0"
        async with gate:
            ws = await connect(
                url,
                origin=console.url,
                max_size=None,
                open_timeout=60,
                additional_headers={"Cookie": f"sessionid={console.cookie}"},
            )
        async with ws:
            while not stop.is_set():
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
                except TimeoutError:
                    continue
                if frame["type"] == "backlog":
                    starts[index] = cursors[index] = int(frame["cursor"])
                elif frame["type"] in ("lines", "skipped"):
                    cursors[index] = int(frame["cursor"])
                    if frame["type"] == "lines":
                        received[index] += len(frame["entries"])
                    else:
                        skipped[index] += frame["count"]
                        assert "faster than this page can show them" in frame["message"]

    async def viewers() -> None:
        gate = asyncio.Semaphore(50)
        results = await asyncio.gather(*(viewer(i, gate) for i in range(VIEWERS)), return_exceptions=True)
        errors.extend(repr(r) for r in results if isinstance(r, BaseException))

    watching = threading.Thread(target=asyncio.run, args=(viewers(),), daemon=True)
    with PeakRss(web) as peak:
        watching.start()
        wait_for(lambda: all(starts) or errors, 90, interval=0.2, message="every viewer to have its backlog")
        answered = []
        until = time.monotonic() + 8  # all of them watching, while someone else uses the API
        while time.monotonic() < until:
            answered.append(console.server.api("GET", "/v1/projects/default-project/jobs/chatty", console.token)[0])
            time.sleep(0.2)
        stop.set()
        watching.join(60)
    (job_dir / "stop").write_text("")
    console.wait_state("chatty", {"SUCCEEDED", "FAILED", "CANCELLED"})

    assert not errors, errors[:3]  # unbounded, sockets died of missed pings while the process fell behind
    assert set(answered) == {200}
    pk = console.job_pk("chatty")
    for index in range(VIEWERS):
        stored = console.query(
            "SELECT count(*) FROM jobs_logline WHERE job_id = ? AND id > ? AND id <= ?",
            (pk, starts[index], cursors[index]),
        )[0][0]
        assert stored > 0 and received[index] + skipped[index] == stored, index
    # Unbounded, each viewer's frame held every line since its last (copied per viewer): once the
    # process fell behind it grew by 100 MB a second.
    assert peak.mb < 400, f"the web process reached {peak.mb:.0f} MB"
