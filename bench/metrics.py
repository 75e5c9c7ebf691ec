"""A job's metrics at 100,000 points: collected from event files, then listed over REST.

1. Collecting: event files under a job dir (2 tags × train/validation × 25,000 steps) read by the
   executor's collector (``jobs.metrics.points.Collector``: the one TF event reader, then bulk inserts),
   side by side with the reader alone, so the ratio is what storing the points adds.
2. Listing through a real ``aiconsole up``: every point of the job over
   ``GET …/jobs/J/metrics`` at the largest page size (10,000) and at the default (1,000), one tag's
   points, the CSV download and the job page's metrics panel; and the first page against the last
   one (keyset pages: the ratio should stay near 1). Times are medians of several rounds, alternated.

Run: ``.venv/bin/python bench/metrics.py [--points 100000] [--rounds 5]`` (about a minute).
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.api_list import Server, free_port  # noqa: E402
from bench.common import say, scratch  # noqa: E402

JOB = "metrics_100k"
BASE = f"/v1/projects/default-project/jobs/{JOB}/metrics"


def seed(data_dir: Path, points: int) -> dict:
    """Write the event files, collect them into the database as the executor does; the timings."""
    code = f"""
import json, os, time
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
from aiconsole import datadir; datadir.prepare()
import django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from pathlib import Path
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from aiconsole.bootstrap import ensure_admin_and_project
from jobs.metrics import points as metrics, tfevents
from jobs.models import Job, JobState, MetricPoint

project = ensure_admin_and_project().project
job = Job.objects.create(project=project, job_id="{JOB}", state=JobState.SUCCEEDED, training_input={{}})
# Where a real job's dir lies (the project's storage area): the console reads trainers' files there only.
from django.conf import settings
job_dir = settings.STORAGE_DIR / "jobs" / project.project_id / "{JOB}"
steps = {points} // 4
for run in ("train", "validation"):
    writer = EventFileWriter(str(job_dir / run))
    for step in range(steps):
        values = [summary_pb2.Summary.Value(tag="epoch_loss", simple_value=1.0 / (step + 1)),
                  summary_pb2.Summary.Value(tag="epoch_accuracy", simple_value=step / steps)]
        writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step, summary=summary_pb2.Summary(value=values)))
    writer.close()
read, collect = [], []
for _ in range(3):
    started = time.perf_counter()
    count = len(tfevents.scalars_under(job_dir))
    read.append(time.perf_counter() - started)
    started = time.perf_counter()
    collector = metrics.Collector(job.pk, job_dir=str(job_dir))  # drops the previous round's points
    stored = collector.poll(final=True)
    collect.append(time.perf_counter() - started)
    assert stored == count == MetricPoint.objects.filter(job=job).count(), (stored, count)
print(json.dumps({{"points": count, "read": sorted(read)[1], "collect": sorted(collect)[1]}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    env.update({"AICONSOLE_DATA_DIR": str(data_dir), "AICONSOLE_ADMIN_PASSWORD": "bench-password-1"})
    say(f"writing {points:,} metric points as event files and collecting them")
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800
    )
    if result.returncode != 0:
        raise SystemExit(f"seeding the metrics failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


def get(connection: http.client.HTTPConnection, token: str, path: str) -> bytes:
    connection.request("GET", path, headers={"Authorization": f"Bearer {token}"})
    response = connection.getresponse()
    body = response.read()
    assert response.status == 200, (response.status, body[:300])
    return body


def list_all(connection, token: str, query: str) -> tuple[float, int, int]:
    """Seconds to read every page, the points read, and the requests made."""
    started = time.perf_counter()
    count, requests, page_token = 0, 0, ""
    while True:
        answer = json.loads(
            get(connection, token, f"{BASE}?{query}" + (f"&pageToken={page_token}" if page_token else ""))
        )
        requests += 1
        count += len(answer["metrics"])
        page_token = answer.get("nextPageToken", "")
        if not page_token:
            return time.perf_counter() - started, count, requests


def last_page_path(connection, token: str, size: int) -> str:
    page_token, previous = "", ""
    while True:
        answer = json.loads(
            get(connection, token, f"{BASE}?pageSize={size}" + (f"&pageToken={page_token}" if page_token else ""))
        )
        if not answer.get("nextPageToken"):
            return f"{BASE}?pageSize={size}" + (f"&pageToken={previous}" if previous else "")
        previous = page_token = answer["nextPageToken"]


def timed(connection, token: str, path: str) -> float:
    started = time.perf_counter()
    get(connection, token, path)
    return time.perf_counter() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--points", type=int, default=100_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    with scratch("aiconsole-bench-metrics-") as folder:
        data_dir = folder / "data"
        seeded = seed(data_dir, args.points)
        server = Server(data_dir, free_port())
        try:
            connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=120)
            token = server.token
            csv_path = f"/projects/default-project/jobs/{JOB}/metrics/download/"
            last = last_page_path(connection, token, 1000)
            first = f"{BASE}?pageSize=1000"
            timings: dict[str, list[float]] = {
                name: []
                for name in (
                    "all, 10,000 a page",
                    "all, 1,000 a page",
                    "one tag, 10,000 a page",
                    "first page (1,000)",
                    "last page (1,000)",
                )
            }
            counts = {}
            say(f"reading them back, {args.rounds} rounds")
            for _ in range(args.rounds):
                for name, query in (
                    ("all, 10,000 a page", "pageSize=10000"),
                    ("all, 1,000 a page", "pageSize=1000"),
                    ("one tag, 10,000 a page", "pageSize=10000&tag=epoch_loss"),
                ):
                    seconds, count, requests = list_all(connection, token, query)
                    timings[name].append(seconds)
                    counts[name] = (count, requests)
                for _ in range(5):
                    timings["first page (1,000)"].append(timed(connection, token, first))
                    timings["last page (1,000)"].append(timed(connection, token, last))
            csv_seconds, panel_seconds = console_pages(server, csv_path, args.rounds)
        finally:
            server.stop()
    median = {name: statistics.median(values) for name, values in timings.items()}
    print(f"Metrics of one job, {seeded['points']:,} points (2 tags × train/validation), SQLite, aiconsole up:")
    print(
        f"  collecting from event files: read alone {seeded['read']:.2f} s, read and stored "
        f"{seeded['collect']:.2f} s (ratio {seeded['collect'] / seeded['read']:.2f}; "
        f"{seeded['points'] / seeded['collect']:,.0f} points/s)"
    )
    for name in ("all, 10,000 a page", "all, 1,000 a page", "one tag, 10,000 a page"):
        count, requests = counts[name]
        print(
            f"  REST, {name}: {median[name]:.2f} s for {count:,} points in {requests} requests "
            f"({count / median[name]:,.0f} points/s)"
        )
    print(f"  CSV download of every point (console page): {csv_seconds:.2f} s")
    print(f"  the job page's metrics panel (2 charts, lines thinned to 2,000 points, tables): {panel_seconds:.2f} s")
    print(
        f"  first page {median['first page (1,000)'] * 1000:.1f} ms, last page "
        f"{median['last page (1,000)'] * 1000:.1f} ms (ratio last/first "
        f"{median['last page (1,000)'] / median['first page (1,000)']:.2f})"
    )
    print(
        f"  ratio all at 1,000 a page / all at 10,000 a page: "
        f"{median['all, 1,000 a page'] / median['all, 10,000 a page']:.2f}"
    )


def console_pages(server: Server, path: str, rounds: int) -> tuple[float, float]:
    """The console's CSV download and the job page's metrics panel, signed in with a session
    (median seconds of each)."""
    import http.cookiejar
    import urllib.parse
    import urllib.request

    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    base = f"http://127.0.0.1:{server.port}"
    page = opener.open(base + "/login/").read().decode()
    csrf = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    form = urllib.parse.urlencode(
        {"username": "admin", "password": "bench-password-1", "csrfmiddlewaretoken": csrf}
    ).encode()
    opener.open(urllib.request.Request(base + "/login/", data=form, headers={"Referer": base + "/login/"})).read()
    seconds, panel = [], []
    for _ in range(rounds):
        started = time.perf_counter()
        body = opener.open(base + path).read()
        seconds.append(time.perf_counter() - started)
        assert body.startswith(b"tag,step,value"), body[:200]
        started = time.perf_counter()
        body = opener.open(base + path.removesuffix("download/")).read()
        panel.append(time.perf_counter() - started)
        assert body.count(b'class="chart metric-chart"') == 2, body[:300]
    return statistics.median(seconds), statistics.median(panel)


if __name__ == "__main__":
    main()
