"""``aiconsole up`` as processes with one job each: a web process and a worker process under a
parent that starts again whichever dies. A real console, real trainers, real signals."""

from __future__ import annotations

import json
import os
import re
import signal
import socket
import subprocess
from pathlib import Path

import pytest
import requests
from websockets.sync.client import connect

from bench.support.packages import build_package
from bench.support.waiting import wait_for
from tests.helpers.console import AICONSOLE, Server, console_env, token_for

pytestmark = pytest.mark.executor

PROJECT = "default-project"

# Prints its pid, then a numbered line every 50 ms until a "finish" file appears in its job dir.
CHATTY_TASK = """
import os, sys, time
job_dir = sys.argv[-1]
open(os.path.join(job_dir, "pid"), "w").write(str(os.getpid()))
n = 0
while not os.path.exists(os.path.join(job_dir, "finish")):
    print("tick", n, flush=True)
    n += 1
    time.sleep(0.05)
print("finished after", n, flush=True)
"""


def _children(console: Server) -> dict[str, int]:
    """The parent's live children by role, from their command lines."""
    found = {}
    for task in Path(f"/proc/{console.process.pid}/task").iterdir():
        for pid in (task / "children").read_text().split():
            try:
                command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
            except FileNotFoundError:
                continue
            if b"--process" in command:
                found[command[command.index(b"--process") + 1].decode()] = int(pid)
    return found


def _alive(pid: int) -> bool:
    try:
        return Path(f"/proc/{pid}/stat").read_text().split()[2] != "Z"
    except FileNotFoundError:
        return False


def _submit(console: Server, token: str, job_id: str, package: Path) -> Path:
    job_dir = console.data_dir / "storage" / "out" / PROJECT / job_id
    status, job = console.api(
        "POST",
        f"/v1/projects/{PROJECT}/jobs",
        token,
        {
            "jobId": job_id,
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": [str(package)],
                "pythonModule": "trainer.task",
                "region": "us-central1",
                "jobDir": str(job_dir),
            },
        },
    )
    assert status == 200, job
    return job_dir


def _state(console: Server, token: str, job_id: str) -> str:
    return console.api("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}", token)[1].get("state")


def _live_lines(console: Server, job_id: str, wanted: int) -> list[str]:
    """Sign in as the admin, open the job's log socket and collect ``wanted`` lines that arrive
    live (after the backlog)."""
    session = requests.Session()
    session.get(console.url + "/login/", timeout=30)
    session.post(
        console.url + "/login/",
        timeout=30,
        data={"username": "admin", "password": "processes-pass-1", "csrfmiddlewaretoken": session.cookies["csrftoken"]},
        headers={"Referer": console.url + "/login/"},
    )
    url = console.url.replace("http://", "ws://") + f"/ws/projects/{PROJECT}/jobs/{job_id}/logs/?tail=0"
    live: list[str] = []
    with connect(
        url,
        origin=console.url,
        additional_headers={"Cookie": f"sessionid={session.cookies['sessionid']}"},
        open_timeout=30,
    ) as socket:
        while len(live) < wanted:
            frame = json.loads(socket.recv(timeout=30))
            if frame["type"] == "lines":
                live += [entry["message"] for entry in frame["entries"] if entry["message"].startswith("tick")]
    return live


@pytest.fixture
def console(tmp_path):
    server = Server(tmp_path / "data", AICONSOLE_ADMIN_PASSWORD="processes-pass-1")
    yield server
    server.stop()


def test_a_killed_worker_process_is_started_again_while_the_web_process_keeps_answering(console, tmp_path):
    token = token_for(console.data_dir)
    package = build_package(console.data_dir / "storage" / "pkgs" / PROJECT, {"trainer/task.py": CHATTY_TASK})
    children = _children(console)
    assert set(children) == {"web", "worker", "grpc"}, children  # Vertex AI over gRPC, beside the web port
    wait_for(lambda: "Vertex AI over gRPC at localhost:" in console.output(), 60, message="the gRPC banner")

    os.kill(children["worker"], signal.SIGKILL)
    wait_for(
        lambda: "the worker process was killed by SIGKILL" in console.output(),
        30,
        message="the parent to notice the worker died",
    )
    assert console.api("GET", f"/v1/projects/{PROJECT}/jobs", token)[0] == 200  # the web process is untouched
    assert _children(console).get("web") == children["web"]
    wait_for(
        lambda: _children(console).get("worker") not in (None, children["worker"]), 30, message="a new worker process"
    )

    job_dir = _submit(console, token, "after_the_crash", package)
    wait_for(lambda: (job_dir / "pid").exists(), 180, message="the job submitted afterwards to start")
    assert len(_live_lines(console, "after_the_crash", 3)) == 3  # its lines reach viewers live
    (job_dir / "finish").write_text("")
    wait_for(
        lambda: _state(console, token, "after_the_crash") == "SUCCEEDED", 60, interval=0.2, message="the job to succeed"
    )


def test_a_killed_web_process_leaves_the_running_trainer_alone_and_comes_back(console, tmp_path):
    token = token_for(console.data_dir)
    package = build_package(console.data_dir / "storage" / "pkgs" / PROJECT, {"trainer/task.py": CHATTY_TASK})
    job_dir = _submit(console, token, "through_a_web_crash", package)
    wait_for(lambda: (job_dir / "pid").exists() and (job_dir / "pid").read_text(), 180, message="the trainer")
    trainer = int((job_dir / "pid").read_text())
    web = _children(console)["web"]

    os.kill(web, signal.SIGKILL)
    wait_for(
        lambda: "the web process was killed by SIGKILL" in console.output(),
        30,
        message="the parent to notice the web process died",
    )
    wait_for(lambda: _children(console).get("web") not in (None, web), 30, message="a new web process")
    wait_for(console._answers, 60, interval=0.1, message="the console to answer again")
    assert _alive(trainer)  # the trainer never noticed
    assert _state(console, token, "through_a_web_crash") == "RUNNING"
    live = _live_lines(console, "through_a_web_crash", 3)  # the new web process gets the worker's lines
    numbers = [int(re.search(r"\d+", line).group()) for line in live]
    assert numbers == sorted(numbers) and len(set(numbers)) == 3, live
    (job_dir / "finish").write_text("")
    wait_for(
        lambda: _state(console, token, "through_a_web_crash") == "SUCCEEDED",
        60,
        interval=0.2,
        message="the job to succeed",
    )


def test_trainers_yield_the_cpu_to_the_web_process(console, tmp_path):
    """The worker's trainers run at nice 10, their own session (a scheduler autogroup) niced too,
    while the web process keeps nice 0: a trainer printing flat out leaves the console its CPU
    (bench/flood.py)."""
    token = token_for(console.data_dir)
    package = build_package(console.data_dir / "storage" / "pkgs" / PROJECT, {"trainer/task.py": CHATTY_TASK})
    job_dir = _submit(console, token, "yielding", package)
    wait_for(lambda: (job_dir / "pid").exists() and (job_dir / "pid").read_text(), 180, message="the trainer")
    trainer, web = int((job_dir / "pid").read_text()), _children(console)["web"]
    assert (os.sched_getscheduler(trainer), os.getpriority(os.PRIO_PROCESS, trainer)) == (os.SCHED_OTHER, 10)
    if Path(f"/proc/{trainer}/autogroup").exists():
        assert Path(f"/proc/{trainer}/autogroup").read_text().split()[-1] == "10"
    assert (os.sched_getscheduler(web), os.getpriority(os.PRIO_PROCESS, web)) == (os.SCHED_OTHER, 0)
    (job_dir / "finish").write_text("")
    wait_for(lambda: _state(console, token, "yielding") == "SUCCEEDED", 60, interval=0.2, message="the job to succeed")


def test_a_web_process_that_cannot_start_ends_the_command_instead_of_restarting_forever(tmp_path):
    """A port already taken: 'aiconsole up' says so and exits, as it did as one process."""
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        data_dir = tmp_path / "data"
        data_dir.mkdir()
        result = subprocess.run(
            [AICONSOLE, "up", "--port", str(port), "--data-dir", str(data_dir)],
            env=console_env(data_dir),
            capture_output=True,
            text=True,
            timeout=180,
        )
    assert result.returncode != 0
    assert "the web process could not start" in result.stderr, result.stderr
