"""Benchmarks of live logs, against a real ``aiconsole up`` on a free port (embedded mode).

1. Submit → first log line received by a WebSocket client: the client notes the time just before
   POSTing the job, opens the job's log socket as soon as the POST returns, and stops the clock
   when the trainer's first line (its first statement prints it) arrives.
2. Fan-out: a trainer prints 1,000 lines/s, each carrying its own ``time.time()``, to N viewers
   connected before it starts (a separate process holds the sockets). Print-to-receive latency
   over every line and viewer; each viewer must get every line exactly once, in order; the
   stored log (read back through the REST API) must hold them all too.
3. Ingest: a trainer prints at a fixed 20,000 lines/s, then flat out. Lines/s from the trainer's
   first line until the last one is in SQLite, lines dropped, and the trainer's own print time
   through the platform against the same trainer run directly with its output read from a pipe.
4. A ten-million-line log: the newest page and the oldest page, through the REST API, the console
   page and the socket's backlog, to show keyset paging costs the same at either end.

Run: ``.venv/bin/python bench/logs.py`` (about 10 minutes; ``--help`` for sizes; ``--big-log-lines 0``
skips 4).
"""

from __future__ import annotations

import argparse
import asyncio
import http.cookiejar
import json
import os
import re
import sqlite3
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from collections import deque
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch, wait_until  # noqa: E402
from bench.run import PROJECT, Console, percentile  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

FIRST_LINE_TASK = """\
import time; print("first line", time.time(), flush=True)
"""

PACED_TASK = """\
import json, os, sys, time
rate, seconds = int(sys.argv[1]), float(sys.argv[2])
job_dir = sys.argv[-1]
while not os.path.exists(os.path.join(job_dir, "go")):  # wait for the viewers
    time.sleep(0.005)
per_tick, total = max(1, rate // 1000), int(rate * seconds)
start = time.time()
write, n, tick = sys.stdout.write, 0, start
while n < total:
    for _ in range(min(per_tick, total - n)):
        write(f"L {n} {time.time():.6f}\\n")
        n += 1
    tick += per_tick / rate
    delay = tick - time.time()
    if delay > 0:
        time.sleep(delay)
end = time.time()
print("END", flush=True)
with open(os.path.join(job_dir, "timing.json"), "w") as handle:
    json.dump({"start": start, "end": end, "lines": total, "python": sys.executable}, handle)
"""

FLAT_OUT_TASK = """\
import json, os, sys, time
total, job_dir = int(sys.argv[1]), sys.argv[-1]
write = sys.stdout.write
start = time.time()
for n in range(total):
    write(f"ingest line {n} with some payload to make it a realistic length: loss=0.123456\\n")
end = time.time()
with open(os.path.join(job_dir, "timing.json"), "w") as handle:
    json.dump({"start": start, "end": end, "lines": total, "python": sys.executable}, handle)
"""


# --- the console, signed in ----------------------------------------------------------------------


class Session:
    """The admin signed in through the login form: a session cookie for sockets and pages."""

    def __init__(self, console: Console):
        self.console = console
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        self.opener.open(console.url + "/login/").read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode(
            {"username": "admin", "password": "bench-password-1", "csrfmiddlewaretoken": csrf}
        ).encode()
        self.opener.open(
            urllib.request.Request(console.url + "/login/", data=form, headers={"Referer": console.url + "/login/"})
        ).read()
        self.cookie = next(c.value for c in jar if c.name == "sessionid")

    def socket_url(self, job_id: str, **query) -> str:
        base = self.console.url.replace("http://", "ws://")
        return f"{base}/ws/projects/{PROJECT}/jobs/{job_id}/logs/?" + urllib.parse.urlencode(query)

    def socket(self, job_id: str, **query):
        from websockets.asyncio.client import connect

        return connect(
            self.socket_url(job_id, **query),
            origin=self.console.url,
            max_size=None,
            additional_headers={"Cookie": f"sessionid={self.cookie}"},
        )

    def page(self, path: str) -> bytes:
        return self.opener.open(self.console.url + path).read()


def entries(frame: dict) -> list[dict]:
    return frame.get("entries", []) if frame["type"] in ("backlog", "lines") else []


class Feed:
    """A job's log socket read entry by entry: a frame holds a batch, and the entries after the one
    a wait was for stay for the next wait (a short job's first line and its end come in one)."""

    def __init__(self, ws):
        self.ws, self.pending = ws, deque()

    async def until(self, predicate, what: str, timeout: float = 300) -> dict:
        """The next entry ``predicate`` accepts; SystemExit when the job ends otherwise than
        SUCCEEDED first, or when none comes within ``timeout`` (a silent socket never hangs the bench)."""
        deadline = time.monotonic() + timeout
        while True:
            while self.pending:
                entry = self.pending.popleft()
                if predicate(entry):
                    return entry
            try:
                frame = json.loads(await asyncio.wait_for(self.ws.recv(), max(0.01, deadline - time.monotonic())))
            except TimeoutError:
                raise SystemExit(f"gave up after {timeout:.0f} s waiting on the log socket for {what}") from None
            self.pending.extend(entries(frame))
            if frame.get("jobEnded") and frame.get("jobState") != "SUCCEEDED" and not any(map(predicate, self.pending)):
                raise SystemExit(f"the job ended {frame.get('jobState')} before {what} arrived")


def submit(console: Console, job_id: str, package: Path, storage: Path, args: list[str] | None = None) -> Path:
    job_dir = storage / "out" / PROJECT / job_id
    console.submit(job_id, package, job_dir, args)
    return job_dir


# --- 1. submit → first line on the socket ------------------------------------------------------


async def bench_first_line(console: Console, session: Session, storage: Path, runs: int) -> dict:
    package = build_package(storage / "first-pkg" / PROJECT, {"trainer/task.py": FIRST_LINE_TASK})
    say("a first job builds the job's environment (on a new machine the runtime too: minutes)")
    submit(console, "first_warmup", package, storage)
    console.wait("first_warmup")
    say(f"submit → first log line on a WebSocket, {runs} runs")
    samples = []
    for index in range(runs):
        job_id = f"first_{index}"
        started = time.time()
        submit(console, job_id, package, storage)
        async with session.socket(job_id) as ws:
            feed = Feed(ws)
            await feed.until(lambda e: e["taskName"] == "master-replica-0", f"{job_id}'s first trainer line")
            samples.append((time.time() - started) * 1000)
            await feed.until(lambda e: e["message"] == "Job completed successfully.", f"{job_id}'s end")
    return {
        "runs": runs,
        "p50_ms": statistics.median(samples),
        "p90_ms": percentile(samples, 0.9),
        "p99_ms": percentile(samples, 0.99),
        "max_ms": max(samples),
    }


# --- 2. fan-out --------------------------------------------------------------------------------


# Pulls "L <number> <printed at>" out of a frame without decoding all of it: the viewers share
# this small machine with the console, and a full JSON decode per frame would be measured as if
# it were the console's latency.
_TRAINER_LINE = re.compile(
    r'"taskName": ?"master-replica-0", ?"trialId": ?"[^"]*", ?"seq": ?"\d+", ?'
    r'"stream": ?"stdout", ?"message": ?"L (\d+) ([\d.]+)"'
)


async def _viewer(url: str, origin: str, cookie: str, ready: list, lines: int, compression: str | None) -> dict:
    from websockets.asyncio.client import connect

    latencies, expected, problems = [], 0, 0
    async with connect(
        url, origin=origin, max_size=None, compression=compression, additional_headers={"Cookie": f"sessionid={cookie}"}
    ) as ws:
        deflate = bool(ws.protocol.extensions)
        while '"type":"count"' not in await ws.recv():  # connected once the backlog is in
            pass
        ready.append(1)
        while expected < lines:
            frame = await ws.recv()
            received = time.time()
            for number, printed in _TRAINER_LINE.findall(frame):
                if int(number) != expected:
                    problems += 1  # lost, repeated or out of order
                expected = int(number) + 1
                latencies.append(received - float(printed))
    return {"latencies": latencies, "problems": problems, "received": len(latencies), "deflate": deflate}


async def _viewers_main(
    url: str, origin: str, cookie: str, count: int, lines: int, out: Path, compression: str | None
) -> None:
    ready: list = []
    tasks = [asyncio.create_task(_viewer(url, origin, cookie, ready, lines, compression)) for _ in range(count)]
    deadline = time.monotonic() + 120
    while len(ready) < count:
        failed = next((task for task in tasks if task.done() and task.exception()), None)
        if failed is not None or time.monotonic() > deadline:
            print(
                f"only {len(ready)} of {count} viewers connected: {failed.exception() if failed else 'timed out'}",
                flush=True,
            )
            raise SystemExit(1)
        await asyncio.sleep(0.01)
    print("ready", flush=True)
    results = await asyncio.wait_for(asyncio.gather(*tasks), timeout=600)
    latencies = sorted(ms * 1000 for r in results for ms in r["latencies"])
    out.write_text(
        json.dumps(
            {
                "viewers": count,
                "lines_per_viewer_min": min(r["received"] for r in results),
                "problems": sum(r["problems"] for r in results),
                "samples": len(latencies),
                "deflate": all(r["deflate"] for r in results),
                "p50_ms": percentile(latencies, 0.5),
                "p99_ms": percentile(latencies, 0.99),
                "max_ms": latencies[-1],
            }
        )
    )


def stored_trainer_lines(console: Console, job_id: str) -> tuple[int, bool]:
    """Read the whole stored log back through the REST API: how many trainer lines, in order?"""
    cursor, expected, in_order = "", 0, True
    while True:
        body = console.call("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}/logs?pageSize=1000&after={cursor}")
        for entry in body["entries"]:
            if entry["message"].startswith("L "):
                in_order &= int(entry["message"].split()[1]) == expected
                expected += 1
        if not body["entries"]:
            return expected, in_order
        cursor = body["nextCursor"]


def bench_fanout(
    console: Console, session: Session, storage: Path, viewers: int, seconds: float, compression: str
) -> dict:
    package = build_package(storage / "paced-pkg" / PROJECT, {"trainer/task.py": PACED_TASK})
    job_id = f"fanout_{viewers}"
    lines = int(1000 * seconds)
    job_dir = submit(console, job_id, package, storage, ["1000", str(seconds)])
    out = storage / f"{job_id}.json"
    say(f"fan-out to {viewers} viewers, {lines:,} lines")
    worker = subprocess.Popen(
        [
            sys.executable,
            __file__,
            "--viewers-worker",
            session.socket_url(job_id, tail=5000),
            console.url,
            session.cookie,
            str(viewers),
            str(lines),
            str(out),
            compression,
        ],
        stdout=subprocess.PIPE,
        text=True,
    )
    said = worker.stdout.readline().strip()  # "ready", or why not (the worker gives up after 120 s)
    if said != "ready":
        worker.kill()
        raise SystemExit(f"the viewers did not connect: {said or 'their process ended'}")
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "go").touch()
    try:
        worker.wait(timeout=max(120, 10 * seconds))
    except subprocess.TimeoutExpired:
        worker.kill()
        raise SystemExit(
            f"the viewers did not receive all {lines:,} lines within {max(120, 10 * seconds):.0f} s"
        ) from None
    console.wait(job_id)
    result = json.loads(out.read_text())
    result["stored"], result["stored_in_order"] = stored_trainer_lines(console, job_id)
    result["lines"] = lines
    return result


# --- 3. ingest -----------------------------------------------------------------------------------


def _job_pk(db: Path, job_id: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT id FROM jobs_job WHERE job_id = ?", (job_id,)).fetchone()[0]


def _wait_stored(db: Path, job_id: str, lines: int, timeout: float = 300) -> tuple[float, int]:
    """The time the trainer's last line was in the database, and how many were dropped."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            pk = _job_pk(db, job_id)
            with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
                count = conn.execute(
                    "SELECT COUNT(*) FROM jobs_logline WHERE job_id = ? AND task_name = 'master-replica-0'", (pk,)
                ).fetchone()[0]
                notes = conn.execute(
                    "SELECT message FROM jobs_logline WHERE job_id = ? AND message LIKE "
                    "'% log lines from % were dropped%'",
                    (pk,),
                ).fetchall()
        except (TypeError, sqlite3.OperationalError):
            count, notes = 0, []
        dropped = sum(int(note[0].split()[0]) for note in notes)
        if count + dropped >= lines:
            return time.time(), dropped
        if time.monotonic() > deadline:
            raise SystemExit(f"{job_id}: only {count} of {lines} lines stored")
        time.sleep(0.02)


def run_direct(python: str, args: list[str], job_dir: Path) -> dict:
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "go").touch()
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [python, "-m", "trainer.task", *args, str(job_dir)], stdout=subprocess.PIPE, cwd=job_dir, env=env
    )
    while process.stdout.read(65536):  # read the output as a log shipper would
        pass
    process.wait()
    return json.loads((job_dir / "timing.json").read_text())


def ingest_run(console: Console, storage: Path, db: Path, package: Path, job_id: str, args: list[str]) -> dict:
    job_dir = storage / "out" / PROJECT / job_id
    job_dir.mkdir(parents=True, exist_ok=True)
    (job_dir / "go").touch()
    submit(console, job_id, package, storage, args)
    timing_file = job_dir / "timing.json"
    wait_until(timing_file.exists, 600, f"{job_id}'s trainer to finish printing", 0.02)
    time.sleep(0.05)
    timing = json.loads(timing_file.read_text())
    stored_at, dropped = _wait_stored(db, job_id, timing["lines"])
    console.wait(job_id)
    elapsed = timing["end"] - timing["start"]
    return {
        "lines": timing["lines"],
        "trainer_s": elapsed,
        "printed_per_s": timing["lines"] / elapsed,
        "dropped": dropped,
        "stored_per_s": (timing["lines"] - dropped) / (stored_at - timing["start"]),
        "lag_after_last_print_s": stored_at - timing["end"],
        "python": timing["python"],
    }


def bench_ingest(
    console: Console, storage: Path, db: Path, rates: list[int], seconds: float, flat_lines: int, pairs: int
) -> dict:
    say(f"ingest: paced at {', '.join(f'{rate:,}' for rate in rates)} lines/s, then {pairs} pairs flat out")
    paced_pkg = build_package(storage / "ingest-paced-pkg" / PROJECT, {"trainer/task.py": PACED_TASK})
    flat_pkg = build_package(storage / "ingest-flat-pkg" / PROJECT, {"trainer/task.py": FLAT_OUT_TASK})
    paced = [
        {"rate": rate, **ingest_run(console, storage, db, paced_pkg, f"ingest_paced_{rate}", [str(rate), str(seconds)])}
        for rate in rates
    ]
    python = ingest_run(console, storage, db, flat_pkg, "ingest_flat_warmup", ["1000"])["python"]
    platform, direct = [], []
    for index in range(pairs):
        for kind in ("direct", "platform") if index % 2 == 0 else ("platform", "direct"):
            if kind == "platform":
                platform.append(ingest_run(console, storage, db, flat_pkg, f"ingest_flat_{index}", [str(flat_lines)]))
            else:
                timing = run_direct(python, [str(flat_lines)], storage / "direct" / str(index))
                direct.append(timing["end"] - timing["start"])
    med = statistics.median
    return {
        "paced": paced,
        "flat_lines": flat_lines,
        "pairs": pairs,
        "flat_stored_per_s": med(r["stored_per_s"] for r in platform),
        "flat_dropped": med(r["dropped"] for r in platform),
        "flat_trainer_s": med(r["trainer_s"] for r in platform),
        "direct_trainer_s": med(direct),
        "trainer_time_ratio": med(r["trainer_s"] for r in platform) / med(direct),
    }


# --- 4. a ten-million-line log -------------------------------------------------------------------


def fill_big_log(db: Path, job_pk: int, lines: int) -> float:
    started = time.perf_counter()
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(db, timeout=60) as conn:
        conn.execute("PRAGMA synchronous=OFF")
        for chunk in range(0, lines, 200_000):
            rows = (
                (
                    job_pk,
                    "master-replica-0",
                    "",
                    n + 1,
                    "stdout",
                    "ERROR" if n == lines // 2 else "INFO",
                    f"step {n} loss=0.{n % 1000:03d} accuracy=0.9",
                    now,
                )
                for n in range(chunk, min(lines, chunk + 200_000))
            )
            conn.executemany(
                "INSERT INTO jobs_logline (job_id, task_name, trial_id, seq, stream, severity, "
                "message, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.commit()
    return time.perf_counter() - started


def _timed(call, repeats: int = 5) -> float:
    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return statistics.median(samples)


async def _socket_open_ms(session: Session, job_id: str, **query) -> tuple[float, float]:
    started = time.perf_counter()

    async def frame(ws) -> str:
        try:
            return json.loads(await asyncio.wait_for(ws.recv(), 120))["type"]
        except TimeoutError:
            raise SystemExit(f"{job_id}'s log socket sent nothing for 120 s") from None

    async with session.socket(job_id, **query) as ws:
        while await frame(ws) != "backlog":
            pass
        backlog = (time.perf_counter() - started) * 1000
        while await frame(ws) != "count":
            pass
        return backlog, (time.perf_counter() - started) * 1000


def bench_big_log(console: Console, session: Session, storage: Path, db: Path, lines: int) -> dict:
    say(f"a {lines:,}-line log: filling the database, then reading its pages")
    package = build_package(storage / "first-pkg" / PROJECT, {"trainer/task.py": FIRST_LINE_TASK})
    submit(console, "big_log", package, storage)
    console.wait("big_log")
    fill_s = fill_big_log(db, _job_pk(db, "big_log"), lines)
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        first_id, last_id = conn.execute(
            "SELECT MIN(id), MAX(id) FROM jobs_logline WHERE job_id = ?", (_job_pk(db, "big_log"),)
        ).fetchone()
    api = f"/v1/projects/{PROJECT}/jobs/big_log/logs?pageSize=1000"
    page = f"/projects/{PROJECT}/jobs/big_log/"
    sockets = [asyncio.run(_socket_open_ms(session, "big_log")) for _ in range(3)]
    return {
        "lines": lines,
        "fill_s": fill_s,
        "api_first_page_ms": _timed(lambda: console.call("GET", api)),
        "api_last_page_ms": _timed(lambda: console.call("GET", f"{api}&after={last_id - 1000}")),
        "api_middle_page_ms": _timed(lambda: console.call("GET", f"{api}&after={(first_id + last_id) // 2}")),
        "page_newest_ms": _timed(lambda: session.page(page)),
        "page_oldest_ms": _timed(lambda: session.page(f"{page}?after=0")),
        "page_first_error_ms": _timed(lambda: session.page(f"{page}?first_error=1"), repeats=3),
        "socket_backlog_ms": statistics.median(s[0] for s in sockets),
        "socket_count_ms": statistics.median(s[1] for s in sockets),
    }


# --- the report ----------------------------------------------------------------------------------


def report(results: dict) -> None:
    first = results["first_line"]
    print(f"Submit → first log line on a WebSocket, {first['runs']} runs:")
    print(
        f"  p50 {first['p50_ms']:.0f} ms   p90 {first['p90_ms']:.0f} ms   p99 {first['p99_ms']:.0f} ms   "
        f"max {first['max_ms']:.0f} ms   (goal p50 ≤ 300 ms, p99 ≤ 1000 ms)"
    )
    for fan in results["fanout"]:
        goal = "≤ 100 ms" if fan["viewers"] <= 50 else "≤ 250 ms"
        print(
            f"Fan-out, 1,000 lines/s for {fan['lines'] / 1000:.0f} s to {fan['viewers']} viewers "
            f"({fan['samples']:,} line deliveries; permessage-deflate {'on' if fan['deflate'] else 'off'}):"
        )
        print(
            f"  print → receive p50 {fan['p50_ms']:.1f} ms   p99 {fan['p99_ms']:.1f} ms   max {fan['max_ms']:.0f} ms "
            f"(goal p99 {goal});  lost/repeated/reordered: {fan['problems']};  fewest lines a viewer got: "
            f"{fan['lines_per_viewer_min']:,}/{fan['lines']:,};  stored {fan['stored']:,}, in order: "
            f"{fan['stored_in_order']}"
        )
    ingest = results.get("ingest")
    if ingest:
        for run in ingest["paced"]:
            print(
                f"Ingest, a trainer printing {run['rate']:,} lines/s for {run['trainer_s']:.0f} s: it printed "
                f"{run['printed_per_s']:,.0f} lines/s through the platform; {run['stored_per_s']:,.0f} lines/s "
                f"stored in SQLite, the last {run['lag_after_last_print_s'] * 1000:.0f} ms after it was printed; "
                f"{run['dropped']:,} dropped (counted in the log)"
            )
        print(
            f"Ingest flat out ({ingest['flat_lines']:,} lines, {ingest['pairs']} alternated pairs, medians): "
            f"{ingest['flat_stored_per_s']:,.0f} lines/s stored, {ingest['flat_dropped']:,.0f} dropped;  "
            f"trainer's own print time direct {ingest['direct_trainer_s']:.2f} s, platform "
            f"{ingest['flat_trainer_s']:.2f} s, ratio {ingest['trainer_time_ratio']:.2f}"
        )
    big = results.get("big_log")
    if big:
        print(f"A {big['lines']:,}-line log (filled in {big['fill_s']:.0f} s), medians:")
        print(
            f"  REST first page {big['api_first_page_ms']:.1f} ms, middle {big['api_middle_page_ms']:.1f} ms, "
            f"last {big['api_last_page_ms']:.1f} ms (ratio last/first "
            f"{big['api_last_page_ms'] / big['api_first_page_ms']:.2f})"
        )
        print(
            f"  console page newest {big['page_newest_ms']:.1f} ms, oldest {big['page_oldest_ms']:.1f} ms, "
            f"from the first error {big['page_first_error_ms']:.1f} ms"
        )
        print(
            f"  socket: backlog after {big['socket_backlog_ms']:.1f} ms, stored count after "
            f"{big['socket_count_ms']:.1f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--latency-runs", type=int, default=30)
    parser.add_argument("--viewers", default="50,200", help="comma-separated viewer counts for fan-out")
    parser.add_argument("--fanout-seconds", type=float, default=15)
    parser.add_argument("--ingest-rates", default="20000,100000", help="comma-separated lines/s for paced trainers")
    parser.add_argument("--ingest-seconds", type=float, default=10)
    parser.add_argument("--flat-lines", type=int, default=1_000_000)
    parser.add_argument("--ingest-pairs", type=int, default=3)
    parser.add_argument("--big-log-lines", type=int, default=10_000_000)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument(
        "--client-compression",
        choices=["deflate", "none"],
        default="deflate",
        help="what the viewers offer: deflate, as browsers do, or none (as if the server "
        "had permessage-deflate turned off)",
    )
    parser.add_argument("--viewers-worker", nargs=7, help=argparse.SUPPRESS)
    add_env_dir_flag(parser)
    args = parser.parse_args()
    if args.viewers_worker:
        url, origin, cookie, count, lines, out, compression = args.viewers_worker
        asyncio.run(
            _viewers_main(
                url, origin, cookie, int(count), int(lines), Path(out), None if compression == "none" else compression
            )
        )
        return
    results: dict = {}
    with scratch("aiconsole-bench-logs-") as folder:
        data_dir = folder / "data"
        console = Console(data_dir, env_cache(args.env_dir))
        try:
            storage, db = data_dir / "storage", data_dir / "aiconsole.sqlite3"
            session = Session(console)
            results["first_line"] = asyncio.run(bench_first_line(console, session, storage, args.latency_runs))
            results["fanout"] = [
                bench_fanout(console, session, storage, int(n), args.fanout_seconds, args.client_compression)
                for n in args.viewers.split(",")
                if n
            ]
            if args.flat_lines:
                rates = [int(rate) for rate in args.ingest_rates.split(",") if rate]
                results["ingest"] = bench_ingest(
                    console, storage, db, rates, args.ingest_seconds, args.flat_lines, args.ingest_pairs
                )
            if args.big_log_lines:
                results["big_log"] = bench_big_log(console, session, storage, db, args.big_log_lines)
        finally:
            console.stop()
    report(results)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
