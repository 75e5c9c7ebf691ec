"""projects.jobs.list with many jobs in the database, through a real ``aiconsole up``.

1. Throughput: closed loop, several keep-alive connections, authenticated requests for the first
   page and for pages deep in the list (following real nextPageTokens), for a fixed time.
2. Latency at a fixed rate: 100 requests/s, open loop (requests are sent on schedule whatever the
   previous ones do), p50/p99 (the goal: p99 ≤ 50 ms).

Uses ``wrk`` when installed (it costs the 2-core machine least); otherwise a Python client.
Run: ``.venv/bin/python bench/api_list.py [--jobs 200000] [--seconds 10]`` (about 2 minutes). With
``--baseline OTHER/.venv/bin/aiconsole`` it compares another version instead (before and after
a change): both serve one seeded database at once, and wrk rounds alternate between them. With
``--database-url postgresql://USER@HOST:PORT/`` the jobs live in a scratch database made on that
PostgreSQL server (and dropped afterwards) instead of the embedded SQLite.
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))
# Seeding imports the settings before any ``aiconsole`` command has made the data dir ready.
SECRET_KEY = os.urandom(24).hex()
ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import log_tail, say, scratch, wait_until  # noqa: E402
from bench.support.harness import interrupt  # noqa: E402


def seed(data_dir: Path, count: int, database_url: str | None = None) -> None:
    """Migrate and insert jobs in bulk, in a child process so this one stays free of Django."""
    code = f"""
import os, random
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
import django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from aiconsole.bootstrap import ensure_admin_and_project
from jobs.models import Job, JobState
project = ensure_admin_and_project().project
states = [JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED, JobState.SUCCEEDED]
ti = {{"scaleTier": "BASIC", "packageUris": ["gs://b/trainer-0.1.tar.gz"], "pythonModule": "trainer.task",
      "region": "us-central1", "runtimeVersion": "2.11", "pythonVersion": "3.7"}}
batch = []
for i in range({count}):
    batch.append(Job(project=project, job_id=f"job_{{i:07d}}", training_input=ti, state=states[i % 4],
                     labels={{"team": "t" + str(i % 10)}}, training_output={{"consumedMLUnits": 0.39}}))
    if len(batch) == 5000:
        Job.objects.bulk_create(batch); batch = []
Job.objects.bulk_create(batch)
"""
    env = {
        **os.environ,
        "AICONSOLE_DATA_DIR": str(data_dir),
        "AICONSOLE_ADMIN_PASSWORD": "bench-password-1",
        "AICONSOLE_SECRET_KEY": SECRET_KEY,
        **({"AICONSOLE_DATABASE_URL": database_url} if database_url else {}),
    }
    say(f"seeding {count:,} jobs")
    data_dir.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-c", code], env=env, check=True, cwd=ROOT, timeout=1800)


class Server:
    """``aiconsole up`` (this checkout's, or ``aiconsole``: another version's) on one data dir."""

    def __init__(
        self, data_dir: Path, port: int, aiconsole: str = AICONSOLE, cwd: Path = ROOT, database_url: str | None = None
    ):
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
        self.env.update(
            {
                "AICONSOLE_DATA_DIR": str(data_dir),
                "AICONSOLE_ADMIN_PASSWORD": "bench-password-1",
                "AICONSOLE_SECRET_KEY": SECRET_KEY,
                **({"AICONSOLE_DATABASE_URL": database_url} if database_url else {}),
            }
        )
        self.port = port
        command = [aiconsole, "up", "--port", str(port)]
        self.log = data_dir.parent / f"server-{port}.log"
        say(f"starting {Path(aiconsole).name} up on port {port}")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(command, env=self.env, cwd=cwd, stdout=log, stderr=subprocess.STDOUT)
        try:
            wait_until(lambda: self._up() or self.process.poll() is not None, 120, f"the server on port {port}")
        except SystemExit:
            self.stop()
            raise SystemExit(f"the server did not start within 120 s; its output:\n{log_tail(self.log)}") from None
        if self.process.poll() is not None:
            raise SystemExit(
                f"the server did not start (exit status {self.process.returncode}); its output:\n{log_tail(self.log)}"
            )
        self.token = subprocess.run(
            [aiconsole, "token", "create", "admin"],
            env=self.env,
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.strip()

    def _up(self) -> bool:
        try:
            connection = http.client.HTTPConnection("127.0.0.1", self.port, timeout=1)
            connection.request("GET", "/login/")
            return connection.getresponse().status == 200
        except OSError:
            return False

    def stop(self) -> None:
        interrupt(self.process, 60)


def free_port() -> int:
    import socket

    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def request_paths(server: Server) -> list[str]:
    """The first page and pages 50 and 500 deep (as deep as the list goes), reached with real tokens."""
    base = "/v1/projects/default-project/jobs?pageSize=20"
    paths, token, page = [base], None, 0
    connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
    while page < 500:
        page += 1
        path = base + (f"&pageToken={token}" if token else "")
        connection.request("GET", path, headers={"Authorization": f"Bearer {server.token}"})
        response = connection.getresponse()
        answer = json.loads(response.read())
        if response.status != 200:
            raise SystemExit(f"jobs.list answered {response.status}: {answer}")
        token = answer.get("nextPageToken")
        if not token:
            break
        if page in (50, 500):
            paths.append(base + f"&pageToken={token}")
    return paths


def python_closed_loop(server: Server, paths: list[str], seconds: float, connections: int) -> dict:
    done, latencies, stop = [0] * connections, [], time.monotonic() + seconds
    lock = threading.Lock()

    def worker(slot: int) -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        headers = {"Authorization": f"Bearer {server.token}"}
        index = slot
        while time.monotonic() < stop:
            started = time.perf_counter()
            connection.request("GET", paths[index % len(paths)], headers=headers)
            response = connection.getresponse()
            response.read()
            assert response.status == 200, response.status
            with lock:
                latencies.append(time.perf_counter() - started)
            done[slot] += 1
            index += 1

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(connections)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    elapsed = time.monotonic() - started
    return {"requests_per_second": sum(done) / elapsed, "p50_ms": statistics.median(latencies) * 1000, "tool": "python"}


def wrk_closed_loop(server: Server, paths: list[str], seconds: float, connections: int) -> dict:
    script = Path(tempfile.mkstemp(suffix=".lua")[1])
    quoted = ", ".join(json.dumps(p) for p in paths)
    script.write_text(
        f"local paths = {{{quoted}}}\nlocal i = 0\n"
        f'wrk.headers["Authorization"] = "Bearer {server.token}"\n'
        'request = function() i = i + 1; return wrk.format("GET", paths[(i % #paths) + 1]) end\n'
        "done = function(summary, latency, requests)\n"
        '  io.write(string.format("RESULT %d %f %d\\n", summary.requests, summary.duration / 1e6, '
        "summary.errors.status))\nend\n"
    )
    output = subprocess.run(
        ["wrk", "-t1", f"-c{connections}", f"-d{int(seconds)}s", "-s", str(script), f"http://127.0.0.1:{server.port}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=seconds + 60,
    ).stdout
    script.unlink()
    line = next(line for line in output.splitlines() if line.startswith("RESULT"))
    _, requests, duration, errors = line.split()
    return {"requests_per_second": int(requests) / float(duration), "tool": "wrk", "errors": int(errors)}


def fixed_rate(server: Server, paths: list[str], seconds: float, rate: float) -> dict:
    """Open loop: request k is due at k/rate; its latency counts from when it was due."""
    total = int(seconds * rate)
    latencies: list[float] = []
    failed = [0]
    lock = threading.Lock()
    start = time.perf_counter() + 0.2
    next_index = [0]

    def worker() -> None:
        connection = http.client.HTTPConnection("127.0.0.1", server.port, timeout=60)
        headers = {"Authorization": f"Bearer {server.token}"}
        while True:
            with lock:
                index = next_index[0]
                next_index[0] += 1
            if index >= total:
                return
            due = start + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            connection.request("GET", paths[index % len(paths)], headers=headers)
            response = connection.getresponse()
            response.read()
            with lock:
                latencies.append(time.perf_counter() - due)
                failed[0] += response.status != 200

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    ordered = sorted(latencies)
    return {
        "rate": rate,
        "requests": total,
        "p50_ms": ordered[len(ordered) // 2] * 1000,
        "p99_ms": ordered[int(len(ordered) * 0.99) - 1] * 1000,
        "max_ms": ordered[-1] * 1000,
        "errors": failed[0],
    }


@contextlib.contextmanager
def database(server_url: str | None):
    """A scratch PostgreSQL database on ``server_url`` for the run (None: the embedded SQLite)."""
    if not server_url:
        yield None
        return
    import psycopg

    server_url = server_url.rstrip("/") + "/"
    name = f"aiconsole_bench_list_{os.getpid()}"
    with psycopg.connect(server_url + "postgres", autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
    try:
        yield server_url + name
    finally:
        with psycopg.connect(server_url + "postgres", autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=200_000)
    parser.add_argument("--seconds", type=float, default=10)
    parser.add_argument("--connections", type=int, default=8)
    parser.add_argument(
        "--baseline",
        metavar="AICONSOLE",
        help="another version's aiconsole command (say, an older checkout's .venv/bin/aiconsole): "
        "both serve one seeded data dir side by side, and wrk rounds alternate between them",
    )
    parser.add_argument("--rounds", type=int, default=4, help="with --baseline: rounds for each")
    parser.add_argument(
        "--database-url",
        metavar="URL",
        help="a PostgreSQL server (postgresql://USER@HOST:PORT/): the jobs live in a scratch database there",
    )
    args = parser.parse_args()
    if args.baseline:
        compare(args)
        return
    with scratch("aiconsole-bench-list-") as folder, database(args.database_url) as database_url:
        data_dir = folder / "data"
        started = time.monotonic()
        seed(data_dir, args.jobs, database_url)
        print(f"Seeded {args.jobs} jobs in {time.monotonic() - started:.1f} s")
        server = Server(data_dir, free_port(), database_url=database_url)
        try:
            paths = request_paths(server)
            loop = wrk_closed_loop if shutil.which("wrk") else python_closed_loop
            say(f"{args.seconds:.0f} s closed loop, then {args.seconds:.0f} s at 100 req/s")
            throughput = loop(server, paths, args.seconds, args.connections)
            latency = fixed_rate(server, paths, args.seconds, 100)
        finally:
            server.stop()
    print(f"jobs.list, {args.jobs} jobs on {'PostgreSQL' if database_url else 'SQLite'}, pages 1/50/500 in turn:")
    print(
        f"  throughput ({throughput['tool']}, {args.connections} connections): "
        f"{throughput['requests_per_second']:.0f} req/s"
    )
    print(
        f"  at 100 req/s: p50 {latency['p50_ms']:.1f} ms  p99 {latency['p99_ms']:.1f} ms  "
        f"max {latency['max_ms']:.1f} ms   (goal p99 ≤ 50 ms)"
    )
    if throughput.get("errors") or latency["errors"]:
        print(f"  answers that were not 2xx: {throughput.get('errors', 0) + latency['errors']}")


def compare(args) -> None:
    """As shipped against ``--baseline``, up at the same time on one data dir, throughput rounds
    alternating (A B, B A, ...) so that the machine's drift falls on both alike."""
    if not shutil.which("wrk"):
        raise SystemExit("--baseline measures with wrk: install it (Debian: apt install wrk)")
    baseline = str(Path(args.baseline).resolve())
    with scratch("aiconsole-bench-list-") as folder, database(args.database_url) as database_url:
        data_dir = folder / "data"
        seed(data_dir, args.jobs, database_url)
        servers = {
            "as shipped": Server(data_dir, free_port(), database_url=database_url),
            # Not run from this checkout: ``python -c`` children would import its packages.
            "baseline": Server(data_dir, free_port(), aiconsole=baseline, cwd=folder, database_url=database_url),
        }
        try:
            paths = request_paths(servers["as shipped"])
            results: dict[str, list[float]] = {name: [] for name in servers}
            errors = dict.fromkeys(servers, 0)
            for round_ in range(args.rounds):
                for name in list(servers) if round_ % 2 == 0 else list(servers)[::-1]:
                    rate = wrk_closed_loop(servers[name], paths, args.seconds, args.connections)
                    results[name].append(rate["requests_per_second"])
                    errors[name] += rate["errors"]
            latency = {name: fixed_rate(server, paths, args.seconds, 100) for name, server in servers.items()}
        finally:
            for server in servers.values():
                server.stop()
    where = "PostgreSQL" if database_url else "SQLite"
    print(f"jobs.list, {args.jobs} jobs on {where}, pages 1/50/500 in turn, bearer auth; baseline: {baseline}")
    for name, rates in results.items():
        print(
            f"  {name}: throughput (wrk, {args.connections} connections) per round "
            f"{', '.join(f'{r:.0f}' for r in rates)} req/s, median {statistics.median(rates):.0f}; "
            f"at 100 req/s p50 {latency[name]['p50_ms']:.1f} ms, p99 {latency[name]['p99_ms']:.1f} ms"
            + (f"; {errors[name] + latency[name]['errors']} answers that were not 2xx" if errors[name] else "")
        )
    ratio = statistics.median(results["as shipped"]) / statistics.median(results["baseline"])
    print(f"  throughput ratio, as shipped / baseline (medians): {ratio:.2f}")


if __name__ == "__main__":
    main()
