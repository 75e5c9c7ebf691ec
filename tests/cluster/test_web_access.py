"""Web access in scaled mode: a shell into a replica that runs on an ``aiconsole worker`` process,
opened through the ``aiconsole web`` process's own WebSocket, on the real PostgreSQL and Redis.

The web process and the worker are separate processes: the worker offers the shell on its own
address and records the port on the replica's row; the web process reads the row, connects there
and shows a token it signed, which the worker must accept.

Without PostgreSQL or Redis these tests skip, except in CI (``CI=true``), where that is a failure.
"""

from __future__ import annotations

import json
import re
import time
from pathlib import Path

import pytest
import requests
from websockets.exceptions import ConnectionClosed
from websockets.sync.client import connect

from bench.support.cluster import TERMINAL, Cluster, cluster_env
from bench.support.packages import build_package
from bench.support.waiting import wait_for
from tests.cluster.harness import scratch_services

pytest.importorskip("psycopg")
pytest.importorskip("redis")

pytestmark = pytest.mark.executor  # a real worker runs a real trainer: not the fast lane

# Leaves a file in its working folder, then runs until its shell touches ``release`` there (two
# minutes at most).
WAITING_TASK = """
import os, sys, time
with open("left-by-the-trainer", "w") as note:
    note.write(f"trainer-{os.getpid()}")
print("waiting for release in", os.getcwd(), flush=True)
deadline = time.time() + 120
while not os.path.exists("release") and time.time() < deadline:
    time.sleep(0.05)
sys.exit(0 if os.path.exists("release") else 3)
"""


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    with scratch_services() as (database_url, redis_url):
        data_dir = tmp_path_factory.mktemp("scaled-shell")
        instance = Cluster(cluster_env(data_dir, database_url, redis_url), data_dir, database_url)
        try:
            instance.start_web()
            done = instance.cli("token", "create", "admin")
            assert done.returncode == 0, done.stderr
            instance.token = done.stdout.strip()
            instance.start_worker("shells", "--region", "us-central1", "--capacity", "cpus=8,memory=32")
            yield instance
        finally:
            instance.stop()


def shell_socket(cluster: Cluster, path: str, cookie: str):
    """The web process's shell socket, opened as a browser on its own page would: same origin, signed in."""
    return connect(
        cluster.base.replace("http://", "ws://") + path,
        origin=cluster.base,
        additional_headers={"Cookie": f"sessionid={cookie}"},
        open_timeout=30,
    )


class Terminal:
    """A browser tab's terminal on the web process's shell socket: what it shows, what it is told."""

    def __init__(self, socket):
        self.socket = socket
        self.screen = ""
        self.said: list[dict] = []

    def type(self, text: str) -> None:
        self.socket.send(json.dumps({"type": "input", "data": text}))

    def told(self, kind: str) -> list[dict]:
        return [message for message in self.said if message.get("type") == kind]

    def until(self, predicate, timeout: float = 30) -> None:
        deadline = time.monotonic() + timeout
        while not predicate(self):
            remaining = deadline - time.monotonic()
            if remaining <= 0 or self.told("closed"):
                raise AssertionError(f"Not seen in {timeout}s; screen: {self.screen[-2000:]!r}, said {self.said}")
            try:
                message = self.socket.recv(timeout=remaining)
            except TimeoutError:
                continue  # said above, with what it showed
            except ConnectionClosed as closed:
                self.said.append({"type": "closed", "code": closed.rcvd.code if closed.rcvd else None})
                continue
            if isinstance(message, bytes):
                self.screen += message.decode("utf-8", "replace")
            else:
                self.said.append(json.loads(message))


def signed_in(cluster: Cluster) -> str:
    """The admin's session cookie, from the web process's own login form."""
    session = requests.Session()
    session.get(cluster.base + "/login/", timeout=30)
    answer = session.post(
        cluster.base + "/login/",
        timeout=30,
        data={
            "username": "admin",
            "password": cluster.env["AICONSOLE_ADMIN_PASSWORD"],
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": cluster.base + "/login/"},
    )
    assert answer.ok and "sessionid" in session.cookies, answer.status_code
    return session.cookies["sessionid"]


def ancestors(pid: int) -> list[int]:
    """``pid``'s parents up to init, read from /proc (at most 64 of them)."""
    found = []
    for _ in range(64):
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            break
        pid = int(stat.rsplit(") ", 1)[1].split()[1])
        if pid <= 1:
            break
        found.append(pid)
    return found


def test_a_shell_into_a_replica_on_a_worker_runs_there_and_ends_with_it(cluster):
    folder = cluster.data_dir / "storage" / "packages" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    package = build_package(folder, {"trainer/task.py": WAITING_TASK}, name="shell_trainer")
    cluster.submit("shell_on_worker", package, enableWebAccess=True)

    # The API lists the shell once the replica runs on the worker (a first run builds its
    # environment: minutes).
    job = wait_for(
        lambda: (job := cluster.job("shell_on_worker")).get("trainingOutput", {}).get("webAccessUris") and job,
        300,
        0.2,
        "the job's webAccessUris",
    )
    assert job["state"] == "RUNNING"
    assert job["trainingOutput"]["webAccessUris"] == {
        "master-replica-0": f"{cluster.base}/projects/default-project/jobs/shell_on_worker/shell/master-replica-0/"
    }
    [(worker_pid, address, shell_port)] = cluster.sql(
        "SELECT w.pid, w.address, r.shell_port FROM jobs_replica r JOIN jobs_worker w ON w.id = r.worker_id "
        "WHERE r.job_id = %s",
        cluster.job_pk("shell_on_worker"),
    )
    assert worker_pid == cluster.workers["shells"].pid and address == "127.0.0.1" and shell_port

    path = "/ws/projects/default-project/jobs/shell_on_worker/shell/master-replica-0/?rows=24&cols=80"
    with shell_socket(cluster, path, signed_in(cluster)) as socket:
        terminal = Terminal(socket)
        terminal.until(lambda t: t.told("open"))
        terminal.type("cat left-by-the-trainer; echo; pwd; echo shell-pid-$$\n")
        terminal.until(lambda t: re.search(r"shell-pid-\d+", t.screen) and re.search(r"trainer-\d+", t.screen))
        # It runs on the worker (the worker process started it), in the replica's working folder,
        # where the trainer left its note.
        shell_pid = int(re.search(r"shell-pid-(\d+)", terminal.screen)[1])
        assert worker_pid in ancestors(shell_pid), (shell_pid, worker_pid)
        assert re.search(r"\n/\S+/shell_on_worker/replicas/master-replica-0\r", terminal.screen), terminal.screen
        # Touching the file ends the trainer: the shell is told its replica ended.
        terminal.type("touch release\n")
        terminal.until(lambda t: t.told("exit"), timeout=60)
        assert "master-replica-0 has ended" in terminal.told("exit")[0]["reason"]

    job = cluster.wait_state("shell_on_worker", TERMINAL, 60)
    assert job["state"] == "SUCCEEDED", cluster.log_text("shell_on_worker")
    assert "webAccessUris" not in job.get("trainingOutput", {})
    sessions = cluster.sql("SELECT principal, input_bytes, output_bytes FROM jobs_webaccesssession")
    assert len(sessions) == 1 and sessions[0][1] > 0 and sessions[0][2] > 0, sessions


# Leaves what went wrong beside it, then fails.
FAILING_TASK = """
import sys
with open("clue.txt", "w") as note:
    note.write("the-clue-is-here")
sys.exit(5)
"""


def test_a_failed_replica_on_a_worker_is_held_for_its_shell_until_the_job_is_cancelled(cluster):
    folder = cluster.data_dir / "storage" / "packages" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    package = build_package(folder, {"trainer/task.py": FAILING_TASK}, name="held_trainer")
    cluster.api(
        "POST",
        "/v1/projects/default-project/jobs",
        {
            "jobId": "held_on_worker",
            "labels": {"aiconsole-hold-failed-replica": "10"},
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": [str(package)],
                "pythonModule": "trainer.task",
                "region": "us-central1",
                "runtimeVersion": "2.11",
                "pythonVersion": "3.7",
                "enableWebAccess": True,
            },
        },
    )
    # It failed, and is held: the job still runs, its shell still listed.
    wait_for(lambda: "its shell stays open" in cluster.log_text("held_on_worker") or None, 300, 0.2, "the hold")
    job = cluster.job("held_on_worker")
    assert job["state"] == "RUNNING" and "master-replica-0" in job["trainingOutput"]["webAccessUris"]

    path = "/ws/projects/default-project/jobs/held_on_worker/shell/master-replica-0/?rows=24&cols=80"
    with shell_socket(cluster, path, signed_in(cluster)) as socket:
        terminal = Terminal(socket)
        terminal.until(lambda t: t.told("open"))
        terminal.type("cat clue.txt; echo\n")
        terminal.until(lambda t: "the-clue-is-here" in t.screen.split("cat clue.txt", 1)[-1].split("\n", 1)[-1])
        cluster.api("POST", "/v1/projects/default-project/jobs/held_on_worker:cancel", {})  # ends the hold
        terminal.until(lambda t: t.told("exit"), timeout=60)

    job = cluster.wait_state("held_on_worker", TERMINAL, 60)
    assert job["state"] in ("CANCELLED", "FAILED") and "webAccessUris" not in job.get("trainingOutput", {})
