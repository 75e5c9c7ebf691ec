"""Does the console hold while one user abuses it? Against a real ``aiconsole up`` (issue 25).

Seven abuses, each bounded in count and time, all on 127.0.0.1:

- ``log-flood``: a trainer prints short lines flat out.
- ``long-lines``: a trainer prints lines of 40 KB flat out (each is cut at 32 KB), watched live.
- ``metrics``: a trainer appends two million cloudml-hypertune reports and writes a million
  TensorFlow summary scalars.
- ``analysis``: the data analysis page, asked for four different 10,000-column CSVs at once.
- ``sockets``: 500 live-log WebSockets watching a chatty job.
- ``slow-clients``: 800 connections that send a request's head a byte every 3 s, and 20 that ask
  for a big answer and never read it.
- ``tensorboard``: one user holds a request open on a TensorBoard of each of their jobs; another
  user then opens one of their own.

For each: ``jobs.get`` through the REST API with a bearer token at a fixed open-loop rate (each
request is due at its own time whether or not the previous one answered; its latency counts from
when it was due), first quiet, then under the abuse; the peak RSS of the web and worker processes
in each phase (and of the web process with its children: TensorBoards, analyses); and what was
kept (log lines stored or said dropped against what the trainer printed, metric points stored or
said cut, the job's outcome, the other user's answer). The figure of merit is the abused p99 over
the quiet p99 just before it (goal: at most 3×).

The console runs with the soft limit on open files that systemd gives a service (1,024; the hard
limit as it is), ``--nofile`` to change it. Viewers and slow clients run in processes of their
own, so their work does not hold up the bench's measuring threads.

Run: ``.venv/bin/python bench/abuse.py`` (about 8 minutes once the runtime is built; a first run
builds it, minutes more). ``--cases log-flood,sockets`` for some; ``--help`` for the rest.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import http.client
import http.cookiejar
import json
import os
import re
import resource
import socket
import sqlite3
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, log_tail, say, scratch, wait_until  # noqa: E402
from bench.support.harness import interrupt  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))
PROJECT = "default-project"
PASSWORD = "bench-password-1"
CASES = ("log-flood", "long-lines", "metrics", "analysis", "sockets", "slow-clients", "tensorboard")

# --- trainers -------------------------------------------------------------------------------------

# Prints bursts of lines (with a pause after each) until the bench leaves a "stop" file in the
# job dir, then says how many lines it printed.
FLOOD_TASK = """\
import os, sys, time
job_dir = sys.argv[-1]
stop = os.path.join(job_dir, "stop")
size = int(sys.argv[sys.argv.index("--line-bytes") + 1])
burst = int(sys.argv[sys.argv.index("--burst") + 1])
pause = float(sys.argv[sys.argv.index("--pause") + 1])
write, n = sys.stdout.write, 0
pad = "x" * max(0, size - 40)
while not os.path.exists(stop):
    for _ in range(burst):
        write(f"flood line {n:>12} {pad}\\n")
        n += 1
    if pause:
        sys.stdout.flush()
        time.sleep(pause)
sys.stdout.flush()
import time; time.sleep(2)  # the console's buffer drains: this line is not among those dropped
print("flood done", n, flush=True)
"""

# Hypertune reports appended (not rewritten as the library does: a trainer may write anything) and
# TensorFlow summary scalars as raw TFRecords, then it ends.
METRICS_TASK = """\
import os, struct, sys, time
import google_crc32c
reports = int(sys.argv[sys.argv.index("--reports") + 1])
scalars = int(sys.argv[sys.argv.index("--scalars") + 1])
job_dir = sys.argv[-1]
now = time.time()
os.makedirs(os.path.dirname(os.environ["CLOUD_ML_HP_METRIC_FILE"]), exist_ok=True)
with open(os.environ["CLOUD_ML_HP_METRIC_FILE"], "a") as metric_file:
    for start in range(0, reports, 10_000):
        metric_file.write("".join(f'{{"timestamp": {now + i * 1e-3}, "trial": "0", "global_step": "{i}", '
                                  f'"loss": "{1.0 / (i + 1)}", "checkpoint_path": ""}}\\n'
                                  for i in range(start, min(reports, start + 10_000))))
        metric_file.flush()

def masked(data):
    crc = google_crc32c.value(data)
    return (((crc >> 15) | (crc << 17)) + 0xA282EAD8) & 0xFFFFFFFF

def varint(n):
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)

def record(step, tag, value):
    v = b"\\x0a" + varint(len(tag)) + tag + b"\\x15" + struct.pack("<f", value)
    s = b"\\x0a" + varint(len(v)) + v
    e = b"\\x09" + struct.pack("<d", now + step) + b"\\x10" + varint(step) + b"\\x2a" + varint(len(s)) + s
    head = struct.pack("<Q", len(e))
    return head + struct.pack("<I", masked(head)) + e + struct.pack("<I", masked(e))

folder = os.path.join(job_dir, "train")
os.makedirs(folder, exist_ok=True)
with open(os.path.join(folder, f"events.out.tfevents.{int(now)}.bench"), "wb") as events:
    for start in range(0, scalars, 10_000):
        stop = min(scalars, start + 10_000)
        events.write(b"".join(record(i, b"epoch_loss", 1.0 / (i + 1)) for i in range(start, stop)))
        events.flush()
print("metrics done", reports, scalars, flush=True)
"""

QUICK_TASK = 'print("hello from the reference job", flush=True)\n'


# --- the console ------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


class Console:
    """A real ``aiconsole up`` on a free port of 127.0.0.1, with its own data dir."""

    def __init__(self, data_dir: Path, env_dir: Path, nofile: int, **extra: str):
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {
            k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"
        }
        self.env.update(
            {
                "AICONSOLE_DATA_DIR": str(data_dir),
                "AICONSOLE_ENV_DIR": str(env_dir),
                "AICONSOLE_ADMIN_PASSWORD": PASSWORD,
                **extra,
            }
        )
        self.log = data_dir.parent / f"console-{self.port}.log"
        data_dir.parent.mkdir(parents=True, exist_ok=True)

        def limits() -> None:
            hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
            resource.setrlimit(resource.RLIMIT_NOFILE, (min(nofile, hard), hard))

        say(f"starting a console on port {self.port} (open files soft limit {nofile})")
        with self.log.open("wb") as log:
            self.process = subprocess.Popen(
                [AICONSOLE, "up", "--port", str(self.port)],
                env=self.env,
                stdout=log,
                stderr=subprocess.STDOUT,
                preexec_fn=limits,
            )
        try:
            wait_until(lambda: self._up() or self.process.poll() is not None, 120, "the console to answer")
            if self.process.poll() is not None:
                raise SystemExit(f"the console ended:\n{log_tail(self.log)}")
            self.token = self.cli("token", "create", "admin")
        except BaseException:
            self.stop()
            raise

    def cli(self, *args: str, stdin: str | None = None) -> str:
        return subprocess.run(
            [AICONSOLE, *args], env=self.env, check=True, capture_output=True, text=True, input=stdin, timeout=120
        ).stdout.strip()

    def _up(self) -> bool:
        try:
            return urllib.request.urlopen(self.url + "/login/", timeout=2).status == 200
        except OSError:
            return False

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        with urllib.request.urlopen(request, timeout=60) as response:
            return json.loads(response.read())

    def submit(self, job_id: str, package: Path, args: list[str] | None = None) -> Path:
        job_dir = self.data_dir / "storage" / "out" / PROJECT / job_id
        self.call(
            "POST",
            f"/v1/projects/{PROJECT}/jobs",
            {
                "jobId": job_id,
                "trainingInput": {
                    "scaleTier": "BASIC",
                    "packageUris": [str(package)],
                    "pythonModule": "trainer.task",
                    "args": args or [],
                    "region": "us-central1",
                    "runtimeVersion": "2.11",
                    "jobDir": str(job_dir),
                },
            },
        )
        return job_dir

    def state(self, job_id: str) -> str:
        return self.call("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}")["state"]

    def wait_state(self, job_id: str, states: set[str], timeout: float = 300) -> str:
        return wait_until(lambda: (s := self.state(job_id)) in states and s, timeout, f"{job_id} to be {states}", 0.2)

    def package(self, name: str, task: str) -> Path:
        return build_package(self.data_dir / "storage" / "pkg" / PROJECT / name, {"trainer/task.py": task})

    def query(self, sql: str, args: tuple = ()) -> list[tuple]:
        """What the console stored, read from its database (read-only)."""
        with contextlib.closing(
            sqlite3.connect(f"file:{self.data_dir / 'aiconsole.sqlite3'}?mode=ro", uri=True, timeout=30)
        ) as db:
            return db.execute(sql, args).fetchall()

    def job_pk(self, job_id: str) -> int:
        return self.query("SELECT id FROM jobs_job WHERE job_id = ?", (job_id,))[0][0]

    def processes(self) -> dict[str, int]:
        """The web and worker processes' pids."""
        found = {}
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                if _parent(entry) != self.process.pid:
                    continue
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError):
                continue
            if b"--process" in argv:
                found[argv[argv.index(b"--process") + 1].decode()] = int(entry.name)
        return found

    def stop(self) -> None:
        interrupt(self.process, 90)


def _parent(entry: Path) -> int:
    return int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])


def rss_mb(pid: int) -> float:
    try:
        for line in Path(f"/proc/{pid}/status").read_text().splitlines():
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    return 0.0


def descendants(pid: int) -> list[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            children.setdefault(_parent(entry), []).append(int(entry.name))
        except (OSError, ValueError):
            continue
    found, todo = [], [pid]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


class Peaks:
    """The peak RSS of the web and worker processes (and the web process with its children) while
    a phase runs, sampled every 0.2 s."""

    def __init__(self, console: Console):
        self.console = console
        self.peak = {"web": 0.0, "worker": 0.0, "web+children": 0.0}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._sample, daemon=True)

    def __enter__(self) -> Peaks:
        self._thread.start()
        return self

    def __exit__(self, *exc) -> None:
        self._stop.set()
        self._thread.join()

    def _sample(self) -> None:
        pids = self.console.processes()
        while True:
            web, worker = rss_mb(pids.get("web", 0)), rss_mb(pids.get("worker", 0))
            tree = web + sum(rss_mb(pid) for pid in descendants(pids["web"])) if "web" in pids else 0.0
            for name, value in (("web", web), ("worker", worker), ("web+children", tree)):
                self.peak[name] = max(self.peak[name], value)
            if self._stop.wait(0.2):
                return


class Getter:
    """Open-loop ``jobs.get`` at ``rate`` per second; each thread keeps one connection."""

    def __init__(self, console: Console, job_id: str, threads: int = 8):
        self.console, self.path = console, f"/v1/projects/{PROJECT}/jobs/{job_id}"
        self.local = threading.local()
        self.pool = ThreadPoolExecutor(threads)
        self.failures = 0

    def _get(self, due: float) -> float:
        for _attempt in (1, 2):  # a kept-alive connection the server closed while idle: reconnect once
            connection = getattr(self.local, "connection", None)
            if connection is None:
                connection = self.local.connection = http.client.HTTPConnection(
                    "127.0.0.1", self.console.port, timeout=30
                )
            try:
                connection.request("GET", self.path, headers={"Authorization": f"Bearer {self.console.token}"})
                response = connection.getresponse()
                response.read()
                if response.status == 200:
                    return (time.perf_counter() - due) * 1000
                break
            except (OSError, http.client.HTTPException):
                connection.close()
                self.local.connection = None
        self.failures += 1  # refused, reset, timed out, or not 200: counted as the slowest possible
        return 30_000.0

    def run(self, rate: float, seconds: float) -> list[float]:
        start, futures = time.perf_counter() + 0.05, []
        for index in range(int(rate * seconds)):
            due = start + index / rate
            delay = due - time.perf_counter()
            if delay > 0:
                time.sleep(delay)
            futures.append(self.pool.submit(self._get, due))
        return [future.result() for future in futures]


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))]


class Session:
    """A user signed in through the login form: a session cookie for sockets and pages."""

    def __init__(self, console: Console, username: str = "admin", password: str = PASSWORD):
        self.console = console
        jar = http.cookiejar.CookieJar()
        self.opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        self.opener.open(console.url + "/login/", timeout=30).read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode(
            {"username": username, "password": password, "csrfmiddlewaretoken": csrf}
        ).encode()
        self.opener.open(
            urllib.request.Request(console.url + "/login/", data=form, headers={"Referer": console.url + "/login/"}),
            timeout=30,
        ).read()
        self.cookie = next(c.value for c in jar if c.name == "sessionid")

    def get(self, path: str, timeout: float = 120) -> tuple[int, bytes]:
        try:
            with self.opener.open(self.console.url + path, timeout=timeout) as response:
                return response.status, response.read()
        except urllib.error.HTTPError as error:
            return error.code, error.read()

    def socket(self, job_id: str, **query):
        from websockets.asyncio.client import connect

        url = (
            self.console.url.replace("http://", "ws://")
            + f"/ws/projects/{PROJECT}/jobs/{job_id}/logs/?"
            + urllib.parse.urlencode(query)
        )
        return connect(
            url,
            origin=self.console.url,
            max_size=None,
            open_timeout=60,
            additional_headers={"Cookie": f"sessionid={self.cookie}"},
        )


class Bench:
    def __init__(self, console: Console, args):
        self.console, self.args = console, args
        self.round = 0
        self.admin = Session(console)
        package = console.package("quick", QUICK_TASK)
        console.submit("reference", package)
        say("the reference job runs (a first run builds the runtime environment: minutes)")
        console.wait_state("reference", {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=1800)
        self.getter = Getter(console, "reference")
        self.getter.run(args.rate, 2)  # warm connections and caches

    def measure(self) -> tuple[dict, dict]:
        failures = self.getter.failures
        with Peaks(self.console) as peaks:
            samples = self.getter.run(self.args.rate, self.args.seconds)
        return (
            {
                "p50_ms": statistics.median(samples),
                "p99_ms": percentile(samples, 0.99),
                "failed": self.getter.failures - failures,
            },
            peaks.peak,
        )

    def job_id(self, name: str) -> str:
        """A job (or file) name of this round's: each round abuses afresh."""
        return f"{name}_r{self.round}" if self.round else name

    def case(self, name: str, abuse: Callable[[Bench, dict], contextlib.AbstractContextManager]) -> dict:
        """``--rounds`` alternations of quiet and abused; the figures of the round with the median
        ratio, every round's ratio beside them (one slow moment decides a p99 on this box)."""
        rounds = []
        for number in range(self.args.rounds):
            self.round = number
            say(f"{name}, round {self.round + 1}: {self.args.seconds:g} s quiet")
            quiet, quiet_rss = self.measure()
            kept: dict = {}
            with abuse(self, kept):
                say(f"{name}, round {self.round + 1}: {self.args.seconds:g} s under the abuse")
                loud, loud_rss = self.measure()
            rounds.append(
                {
                    "quiet": quiet,
                    "abused": loud,
                    "ratio": loud["p99_ms"] / quiet["p99_ms"],
                    "rss_quiet_mb": quiet_rss,
                    "rss_abused_mb": loud_rss,
                    "kept": kept,
                }
            )
            say(
                f"{name}: quiet p50 {quiet['p50_ms']:.1f} p99 {quiet['p99_ms']:.1f} ms; abused p50 "
                f"{loud['p50_ms']:.1f} p99 {loud['p99_ms']:.1f} ms ({loud['failed']} failed); ratio "
                f"{rounds[-1]['ratio']:.2f}; peak RSS web {loud_rss['web']:.0f} MB (quiet {quiet_rss['web']:.0f}), "
                f"worker {loud_rss['worker']:.0f} MB (quiet {quiet_rss['worker']:.0f}), web+children "
                f"{loud_rss['web+children']:.0f} MB; kept: {kept.get('summary', '')}"
            )
        self.round = 0
        ratios = [r["ratio"] for r in rounds]
        median = sorted(rounds, key=lambda r: r["ratio"])[(len(rounds) - 1) // 2]
        return {
            **median,
            "ratios": ratios,
            "median_ratio": statistics.median(ratios),
            "rss_abused_mb": {k: max(r["rss_abused_mb"][k] for r in rounds) for k in median["rss_abused_mb"]},
        }


# --- the abuses -------------------------------------------------------------------------------------


def _printed(console: Console, job_pk: int) -> int:
    done = console.query("SELECT message FROM jobs_logline WHERE job_id = ? AND message LIKE 'flood done %'", (job_pk,))
    return int(done[0][0].split()[-1]) if done else -1


def _said_dropped(console: Console, job_pk: int) -> int:
    rows = console.query(
        "SELECT message FROM jobs_logline WHERE job_id = ? AND task_name = 'service' "
        "AND message LIKE '% log lines from % were dropped%'",
        (job_pk,),
    )
    return sum(int(message.split()[0]) for (message,) in rows)


@contextlib.contextmanager
def _flooding(
    bench: Bench, job_id: str, line_bytes: int, kept: dict, burst: int = 0, pause: float = 0.0
) -> Iterator[Path]:
    """A job printing ``burst`` lines of ``line_bytes`` then pausing, until the block ends (by
    default flat out: 20 MB between looks at the stop file)."""
    console = bench.console
    job_dir = console.submit(
        job_id,
        console.package("flood", FLOOD_TASK),
        [
            "--line-bytes",
            str(line_bytes),
            "--burst",
            str(burst or max(1, 20_000_000 // line_bytes)),
            "--pause",
            str(pause),
        ],
    )
    console.wait_state(job_id, {"RUNNING"})
    pk = console.job_pk(job_id)
    wait_until(
        lambda: console.query(
            "SELECT 1 FROM jobs_logline WHERE job_id = ? AND message LIKE 'flood line%' LIMIT 1", (pk,)
        ),
        120,
        "the first flood line",
    )
    try:
        yield job_dir
    finally:
        (job_dir / "stop").write_text("")
    state = console.wait_state(job_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=600)
    # The lines a job stored are all in once it has ended.
    stored = console.query("SELECT count(*) FROM jobs_logline WHERE job_id = ? AND message LIKE 'flood line%'", (pk,))[
        0
    ][0]
    printed, dropped = _printed(console, pk), _said_dropped(console, pk)
    longest = console.query("SELECT max(length(message)) FROM jobs_logline WHERE job_id = ?", (pk,))[0][0]
    kept.update(
        job=state,
        printed=printed,
        stored=stored,
        said_dropped=dropped,
        longest_stored_chars=longest,
        summary=f"job {state}; {stored:,} lines stored + {dropped:,} said dropped = {stored + dropped:,} "
        f"of {printed:,} printed; longest stored {longest:,} characters",
    )


@contextlib.contextmanager
def log_flood(bench: Bench, kept: dict):
    with _flooding(bench, bench.job_id("log_flood"), 90, kept):
        yield


@contextlib.contextmanager
def long_lines(bench: Bench, kept: dict):
    """Long lines flat out (4 MB by default), with a viewer on the job's live log (the web process holds its feed)."""

    async def watch(job_id: str, stop: asyncio.Event, seen: list[int]) -> None:
        async with bench.admin.socket(job_id, tail="0") as ws:
            while not stop.is_set():
                try:
                    frame = json.loads(await asyncio.wait_for(ws.recv(), 0.5))
                except TimeoutError:
                    continue
                seen[0] += len(frame.get("entries", [])) if frame["type"] == "lines" else 0

    stop, seen = asyncio.Event(), [0]
    loop = asyncio.new_event_loop()
    job_id = bench.job_id("long_lines")
    with _flooding(bench, job_id, bench.args.line_bytes, kept):
        watcher = threading.Thread(target=lambda: loop.run_until_complete(watch(job_id, stop, seen)), daemon=True)
        watcher.start()
        try:
            yield
        finally:
            loop.call_soon_threadsafe(stop.set)
            watcher.join(60)
    kept["viewer_received"] = seen[0]


@contextlib.contextmanager
def metrics_flood(bench: Bench, kept: dict):
    console, reports, scalars = bench.console, bench.args.reports, bench.args.scalars
    job_id = bench.job_id("metrics_flood")
    console.submit(
        job_id, console.package("metrics", METRICS_TASK), ["--reports", str(reports), "--scalars", str(scalars)]
    )
    # A small run's trainer can end between two looks (compiled, it starts fast): RUNNING unseen.
    console.wait_state(job_id, {"RUNNING", "SUCCEEDED", "FAILED", "CANCELLED"})
    pk = console.job_pk(job_id)
    wait_until(
        lambda: (
            console.query("SELECT 1 FROM jobs_metricpoint WHERE job_id = ? LIMIT 1", (pk,))
            or console.state(job_id) not in ("RUNNING", "PREPARING", "QUEUED")
        ),
        300,
        "the first point",
    )
    yield
    state = console.wait_state(job_id, {"SUCCEEDED", "FAILED", "CANCELLED"}, timeout=900)
    counts = dict(
        console.query("SELECT source, count(*) FROM jobs_metricpoint WHERE job_id = ? GROUP BY source", (pk,))
    )
    said = [
        m
        for (m,) in console.query(
            "SELECT message FROM jobs_logline WHERE job_id = ? AND task_name = 'service' "
            "AND message LIKE '%metric points%'",
            (pk,),
        )
    ]
    started = time.perf_counter()
    status, _ = bench.admin.get(f"/projects/{PROJECT}/jobs/{job_id}/metrics/")
    panel_ms = (time.perf_counter() - started) * 1000
    kept.update(
        job=state,
        reported=reports,
        scalars_written=scalars,
        stored=counts,
        said=said,
        panel_status=status,
        panel_ms=panel_ms,
        summary=f"job {state}; {counts.get('hypertune', 0):,} of {reports:,} reports and "
        f"{counts.get('tfevents', 0):,} of {scalars:,} scalars stored; said: {' | '.join(said) or '-'}; "
        f"metrics panel {status} in {panel_ms:.0f} ms",
    )


def wide_csv(path: Path, columns: int, target_bytes: int, salt: int) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    header = ",".join(f"c{i}" for i in range(columns)) + "\n"
    with path.open("w") as handle:
        handle.write(header)
        row, written = 0, len(header)
        while written < target_bytes:
            line = ",".join(str((row * 7 + i + salt) % 10) for i in range(columns)) + "\n"
            handle.write(line)
            written += len(line)
            row += 1
    path.chmod(0o644)


@contextlib.contextmanager
def analysis(bench: Bench, kept: dict):
    """Four different wide CSVs asked for at once, each asked again until it is analysed."""
    folder = bench.console.data_dir / "storage" / "data" / PROJECT
    paths = []
    for index in range(4):
        path = folder / f"{bench.job_id('wide')}-{index}.csv"  # new files each round: not analysed yet
        wide_csv(path, 10_000, bench.args.csv_mb * 1024 * 1024, bench.round * 10 + index)
        paths.append(path)
    outcomes: dict[str, str] = {}
    stop = threading.Event()

    def ask(path: Path) -> None:
        query = urllib.parse.urlencode({"path": str(path), "header": "on"})
        started = time.perf_counter()
        while not stop.is_set():
            status, page = bench.admin.get(f"/projects/{PROJECT}/data/analysis/?{query}")
            text = page.decode(errors="replace")
            if status != 200 or "being analysed" not in text:
                note = re.search(r"first [\d,]+ of [\d,]+ columns|took longer than|stopped unexpectedly", text)
                outcomes[path.name] = (
                    f"{status} after {time.perf_counter() - started:.1f} s: {note.group(0) if note else text[:80]!r}"
                )
                return
            stop.wait(1)
        outcomes[path.name] = "still being analysed"

    threads = [threading.Thread(target=ask, args=(path,), daemon=True) for path in paths]
    for thread in threads:
        thread.start()
    try:
        yield
    finally:
        for thread in threads:
            thread.join(120)
        stop.set()
    # Each view of a finished analysis (200 charts) is served by the web process, which serves
    # everyone: what six of them cost it (drawn in the child once, the views only show them).
    web = bench.console.processes()["web"]
    before = cpu_seconds(web)
    for _ in range(2):
        for path in paths[:3]:
            query = urllib.parse.urlencode({"path": str(path), "header": "on"})
            bench.admin.get(f"/projects/{PROJECT}/data/analysis/?{query}")
    views_cpu = cpu_seconds(web) - before
    kept.update(
        outcomes=outcomes,
        summary="; ".join(f"{k}: {v}" for k, v in sorted(outcomes.items()))
        + f"; 6 views of finished analyses took {views_cpu:.2f} s of the web process's CPU",
    )


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) a process has used, from /proc."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# The viewers, in a process of their own (decoding their frames would take the GIL from the
# bench's measuring threads): each opens the job's live log, counts the lines it gets and the
# lines it is told it skipped, and reports them as JSON once told to stop.
VIEWERS = """\
import asyncio, json, sys
from websockets.asyncio.client import connect
url, origin, cookie, count = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
starts, cursors, received, skipped, errors = [0] * count, [0] * count, [0] * count, [0] * count, []

async def viewer(index, gate, stop):
    try:
        async with gate:
            ws = await connect(url, origin=origin, max_size=None, open_timeout=60,
                               additional_headers={"Cookie": f"sessionid={cookie}"})
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
    except Exception as error:
        errors.append(repr(error)[:200])

async def main():
    stop, gate = asyncio.Event(), asyncio.Semaphore(50)
    tasks = [asyncio.create_task(viewer(i, gate, stop)) for i in range(count)]
    while sum(map(bool, starts)) + len(errors) < count:
        await asyncio.sleep(0.05)
    print("ready", flush=True)
    await asyncio.get_running_loop().run_in_executor(None, sys.stdin.read)
    await asyncio.sleep(1)  # the last frames arrive
    stop.set()
    await asyncio.gather(*tasks)
    print(json.dumps({"starts": starts, "cursors": cursors, "received": received, "skipped": skipped,
                      "errors": errors}), flush=True)

asyncio.run(main())
"""


@contextlib.contextmanager
def sockets(bench: Bench, kept: dict):
    """500 viewers of a job printing 2,000 lines a second; each must get every line after its start
    or be told it skipped it."""
    console, count = bench.console, bench.args.sockets
    job_id = bench.job_id("socket_feed")
    with _flooding(bench, job_id, 90, kept, burst=100, pause=0.05):
        pk = console.job_pk(job_id)
        url = console.url.replace("http://", "ws://") + f"/ws/projects/{PROJECT}/jobs/{job_id}/logs/?tail=0"
        child = subprocess.Popen(
            [sys.executable, "-c", VIEWERS, url, console.url, bench.admin.cookie, str(count)],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        try:
            if child.stdout.readline().strip() != "ready":
                raise SystemExit("the viewers did not start")
            yield
            out, _ = child.communicate("stop", timeout=120)
        finally:
            if child.poll() is None:
                child.kill()
        seen = json.loads(out.strip().splitlines()[-1])
        complete = 0
        for start, cursor, received, skipped in zip(
            seen["starts"], seen["cursors"], seen["received"], seen["skipped"], strict=True
        ):
            if start:
                expected = console.query(
                    "SELECT count(*) FROM jobs_logline WHERE job_id = ? AND id > ? AND id <= ?", (pk, start, cursor)
                )[0][0]
                complete += received + skipped == expected and expected > 0
        opened, errors = sum(map(bool, seen["starts"])), seen["errors"]
        kept["sockets"] = {
            "opened": opened,
            "every_line": complete,
            "errors": errors[:3],
            "received": sum(seen["received"]),
            "skipped": sum(seen["skipped"]),
        }
    kept["summary"] = (
        f"{opened} of {count} sockets opened, {complete} got every line stored while they watched "
        f"or were told they skipped it ({sum(seen['received']):,} received, "
        f"{sum(seen['skipped']):,} said skipped); {len(errors)} errors {errors[:1]}; " + kept["summary"]
    )


# Run apart from the bench (its sends would hold up the bench's own measuring threads): opens the
# connections, says so, sends a byte of head on each slow one every 3 s until told to stop.
SLOW_CLIENTS = """\
import socket, sys, threading
port, slow_count, reader_count, cookie, path = sys.argv[1:]
slow, readers = [], []
for _ in range(int(slow_count)):
    client = socket.create_connection(("127.0.0.1", int(port)), timeout=10)
    client.sendall(b"GET /v1/projects/default-project/jobs HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\n")
    slow.append(client)
for _ in range(int(reader_count)):
    client = socket.socket()
    client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    client.connect(("127.0.0.1", int(port)))
    client.sendall(f"GET {path} HTTP/1.1\\r\\nHost: 127.0.0.1\\r\\nCookie: sessionid={cookie}\\r\\n\\r\\n".encode())
    readers.append(client)
print("open", flush=True)
stop = threading.Event()
threading.Thread(target=lambda: (sys.stdin.read(), stop.set()), daemon=True).start()
while not stop.wait(3):
    for client in slow:
        try:
            client.send(b"X")
        except OSError:
            pass
"""


def sockets_held(pid: int) -> int:
    """The sockets (connections, listeners) a process holds open."""
    held = 0
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        try:
            held += os.readlink(fd).startswith("socket:")
        except OSError:
            continue
    return held


@contextlib.contextmanager
def slow_clients(bench: Bench, kept: dict):
    """Connections that send a request's head a byte every 3 s (slowloris), and ones that ask for
    a big answer (a flooded job's log download) and read none of it, from another process."""
    console, count, readers = bench.console, bench.args.slow, 20
    web = console.processes()["web"]
    before = sockets_held(web)
    big = "log_flood" if console.query("SELECT 1 FROM jobs_job WHERE job_id = 'log_flood'") else "reference"
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            SLOW_CLIENTS,
            str(console.port),
            str(count),
            str(readers),
            bench.admin.cookie,
            f"/projects/{PROJECT}/jobs/{big}/logs/download/",
        ],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        if child.stdout.readline().strip() != "open":
            raise SystemExit("the slow clients could not connect")
        taken = time.monotonic() + 60  # until the console took every connection (or could take no more)
        while (held := sockets_held(web) - before) < count + readers and time.monotonic() < taken:
            time.sleep(0.2)
        yield
        ended = time.monotonic()
        deadline = ended + bench.args.client_timeout + 30
        while (left := sockets_held(web) - before) > 5 and time.monotonic() < deadline:
            time.sleep(0.2)
        released = time.monotonic()
    finally:
        child.communicate("stop", timeout=30)
    let_go = (
        f"let them go {released - ended:.0f} s after the phase"
        if left <= 5
        else f"still held {left} of them {released - ended:.0f} s after the phase"
    )
    kept.update(
        opened=count + readers,
        held_while_abused=held,
        still_held=left,
        released_after_s=released - ended,
        summary=f"{count} slow heads and {readers} clients reading nothing of {big}'s log download: the "
        f"console held {held} more sockets while they hung on, and {let_go} "
        f"(AICONSOLE_CLIENT_TIMEOUT_SECONDS {bench.args.client_timeout:g})",
    )


@contextlib.contextmanager
def tensorboard(bench: Bench, kept: dict):
    """The admin holds a request open on a TensorBoard of each of four jobs (reading nothing of
    TensorBoard's 6 MB script); then another project member opens one for a fifth job."""
    console = bench.console
    boards = bench.args.tensorboards
    package = console.package("events", METRICS_TASK)
    names = [bench.job_id(f"board_{i}") for i in range(boards + 1)]
    for name in names:
        console.submit(name, package, ["--reports", "3", "--scalars", "3"])
    for name in names:
        console.wait_state(name, {"SUCCEEDED"})
    if not bench.round:
        console.cli("users", "create", "other", "--password-stdin", stdin=PASSWORD + "\n")
        console.cli(
            "projects", "add-iam-policy-binding", PROJECT, "--member", "user:other", "--role", "roles/ml.viewer"
        )
    other = Session(console, "other")
    held = []
    for name in names[:-1]:
        # A first request starts the board and waits for it; the held one reads one byte and no more.
        status, _ = bench.admin.get(f"/projects/{PROJECT}/jobs/{name}/tensorboard/data/runs", timeout=180)
        client = socket.create_connection(("127.0.0.1", console.port), timeout=30)
        client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        client.sendall(
            f"GET /projects/{PROJECT}/jobs/{name}/tensorboard/index.js HTTP/1.1\r\nHost: 127.0.0.1\r\n"
            f"Cookie: sessionid={bench.admin.cookie}\r\n\r\n".encode()
        )
        client.recv(1)
        held.append(client)
    try:
        started = time.perf_counter()
        status, page = other.get(f"/projects/{PROJECT}/jobs/{names[-1]}/tensorboard/data/runs", timeout=180)
        seconds = time.perf_counter() - started
        yield
    finally:
        for client in held:
            client.close()
    said = re.search(r"[^<>]*AICONSOLE_TENSORBOARD[^<>]*", page.decode(errors="replace"))
    kept.update(
        other_status=status,
        other_seconds=seconds,
        summary=f"{len(held)} boards held by one user; another user's board: {status} in {seconds:.1f} s"
        + (f" ({said.group(0).strip()[:160]})" if said else ""),
    )


ABUSES = {
    "log-flood": log_flood,
    "long-lines": long_lines,
    "metrics": metrics_flood,
    "analysis": analysis,
    "sockets": sockets,
    "slow-clients": slow_clients,
    "tensorboard": tensorboard,
}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--cases", default=",".join(CASES), help=f"comma-separated, of {', '.join(CASES)}")
    parser.add_argument("--rate", type=float, default=20, help="jobs.get requests per second")
    parser.add_argument("--seconds", type=float, default=10, help="length of each quiet and abused phase")
    parser.add_argument("--rounds", type=int, default=1, help="quiet/abused alternations per case")
    parser.add_argument("--line-bytes", type=int, default=40_000, help="the long lines' length")
    parser.add_argument("--reports", type=int, default=2_000_000, help="hypertune reports the metrics trainer writes")
    parser.add_argument("--scalars", type=int, default=1_000_000, help="summary scalars the metrics trainer writes")
    parser.add_argument("--csv-mb", type=int, default=60, help="size of each wide CSV (the page reads 64 MB)")
    parser.add_argument("--sockets", type=int, default=500, help="live-log WebSockets")
    parser.add_argument("--slow", type=int, default=800, help="connections sending a request's head slowly")
    parser.add_argument(
        "--client-timeout", type=float, default=20, help="the console's AICONSOLE_CLIENT_TIMEOUT_SECONDS"
    )
    parser.add_argument("--tensorboards", type=int, default=4, help="boards one user holds (AICONSOLE_TENSORBOARD_MAX)")
    parser.add_argument("--nofile", type=int, default=1024, help="the console's soft limit on open files")
    add_env_dir_flag(parser)
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    cases = [c for c in args.cases.split(",") if c]
    unknown = set(cases) - set(CASES)
    if unknown:
        parser.error(f"unknown cases: {', '.join(sorted(unknown))}")
    with open("/proc/loadavg") as handle:
        results: dict = {"load_before": handle.read().split()[:3], "cases": {}}
    with scratch("aiconsole-bench-abuse-") as folder:
        console = Console(
            folder / "data",
            env_cache(args.env_dir),
            args.nofile,
            AICONSOLE_TENSORBOARD_MAX=str(args.tensorboards),
            AICONSOLE_CLIENT_TIMEOUT_SECONDS=f"{args.client_timeout:g}",
        )
        try:
            bench = Bench(console, args)
            for name in cases:
                results["cases"][name] = bench.case(name, ABUSES[name])
        finally:
            console.stop()
    with open("/proc/loadavg") as handle:
        results["load_after"] = handle.read().split()[:3]
    print(
        f"\n{'case':<13} {'quiet p99':>10} {'abused p99':>11} {'ratio':>6} {'failed':>6} {'web MB':>7} "
        f"{'worker MB':>9} {'web+children MB':>15}  rounds' ratios; kept (the median round)"
    )
    for name, case in results["cases"].items():
        rss = case["rss_abused_mb"]
        print(
            f"{name:<13} {case['quiet']['p99_ms']:>8.1f}ms {case['abused']['p99_ms']:>9.1f}ms {case['ratio']:>6.2f} "
            f"{case['abused']['failed']:>6} {rss['web']:>7.0f} {rss['worker']:>9.0f} {rss['web+children']:>15.0f}  "
            f"{', '.join(f'{r:.2f}' for r in case['ratios'])}; {case['kept'].get('summary', '')}"
        )
    print(
        f"p99 under abuse / quiet p99 (goal ≤ 3); load average before {' '.join(results['load_before'])}, "
        f"after {' '.join(results['load_after'])}"
    )
    if args.json:
        args.json.write_text(json.dumps(results, indent=2, default=str))


if __name__ == "__main__":
    main()
