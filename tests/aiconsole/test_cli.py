"""The ``aiconsole`` command as a user runs it: a real server process on a free port."""

from __future__ import annotations

import re
import signal
import subprocess
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from bench.support.packages import build_package
from bench.support.waiting import wait_for
from tests.helpers.console import AICONSOLE, Server, console_env, token_for

pytestmark = pytest.mark.slow  # starts servers and processes: left out of the fast lane


@pytest.fixture
def server(tmp_path):
    started = []

    def start(**env) -> Server:
        instance = Server(tmp_path / "data", **env)
        started.append(instance)
        return instance

    yield start
    for instance in started:
        instance.stop()


def test_up_creates_an_admin_prints_its_password_once_and_serves_the_console(server, tmp_path):
    first = server()
    match = re.search(r"Username: admin  Password: (\S+)", first.output())
    assert match, first.output()
    assert "default-project" in first.output()

    with urllib.request.urlopen(first.url + "/login/", timeout=60) as response:  # a loaded machine is slow
        assert b"Sign in" in response.read()
    first.stop()

    second = server()
    assert "Password:" not in second.output()  # printed once, on the first start only


def test_admin_credentials_come_from_the_environment(server):
    console = server(AICONSOLE_ADMIN_USER="root_user", AICONSOLE_ADMIN_PASSWORD="s3cret-pass-123")
    assert "Password:" not in console.output()
    token = token_for(console.data_dir, "root_user")
    status, body = console.api("GET", "/v1/projects/default-project/jobs", token)
    assert (status, body) == (200, {})


def test_token_create_rejects_an_unknown_user(tmp_path):
    data_dir = tmp_path / "data"
    result = subprocess.run(
        [AICONSOLE, "token", "create", "nobody"], capture_output=True, text=True, env=console_env(data_dir), timeout=60
    )
    assert result.returncode == 2
    assert "no active user named 'nobody'" in result.stderr


@pytest.mark.executor
def test_a_job_submitted_to_the_running_console_runs_and_survives_a_restart(server, tmp_path):
    """The whole embedded path: the server's own executor runs the job; a restart mid-run
    does not leave it RUNNING forever but starts it again."""
    console = server()
    token = token_for(console.data_dir)
    package = build_package(
        console.data_dir / "storage" / "pkgs" / "default-project",
        {
            "trainer/task.py": """
import os, sys, time
marker = os.path.join(sys.argv[-1], "attempts")
attempts = int(open(marker).read()) + 1 if os.path.exists(marker) else 1
open(marker, "w").write(str(attempts))
print("attempt", attempts, flush=True)
if attempts == 1:
    time.sleep(600)  # the first attempt is interrupted by the console restart
print("finished")
"""
        },
    )
    body = {
        "jobId": "restart_me",
        "trainingInput": {
            "scaleTier": "BASIC",
            "packageUris": [str(package)],
            "pythonModule": "trainer.task",
            "region": "us-central1",
            "jobDir": str(console.data_dir / "storage" / "out" / "default-project"),
        },
    }
    status, job = console.api("POST", "/v1/projects/default-project/jobs", token, body)
    assert status == 200, job
    marker = console.data_dir / "storage" / "out" / "default-project" / "attempts"
    wait_for(marker.exists, 180, message="the first attempt to start")
    console.stop()

    restarted = server()

    def state():
        return restarted.api("GET", "/v1/projects/default-project/jobs/restart_me", token)[1]["state"]

    wait_for(lambda: state() == "SUCCEEDED", 120, interval=0.2, message="the job to finish after the restart")
    assert marker.read_text() == "2"


@pytest.mark.executor
def test_sigterm_stops_the_running_trainers_before_the_console_exits(server):
    """docker stop and systemd send SIGTERM: the console stops its trainers, as on Ctrl+C, instead
    of dying at once and leaving them to the next start's orphan sweep."""
    console = server()
    token = token_for(console.data_dir)
    package = build_package(
        console.data_dir / "storage" / "pkgs" / "default-project",
        {
            "trainer/task.py": """
import os, sys, time
open(os.path.join(sys.argv[-1], "pid"), "w").write(str(os.getpid()))
time.sleep(600)
"""
        },
    )
    job_dir = console.data_dir / "storage" / "out" / "default-project" / "sigterm"
    status, job = console.api(
        "POST",
        "/v1/projects/default-project/jobs",
        token,
        {
            "jobId": "sigterm",
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
    wait_for(lambda: (job_dir / "pid").exists() and (job_dir / "pid").read_text(), 180, message="the trainer to start")
    trainer = int((job_dir / "pid").read_text())

    console.process.send_signal(signal.SIGTERM)
    assert console.process.wait(timeout=60) == 128 + signal.SIGTERM
    assert "Stopping running jobs" in console.output()
    assert not Path(f"/proc/{trainer}").exists()  # stopped by the console, not left running


def test_secrets_given_as_variables_are_not_in_the_consoles_initial_environment(server):
    console = server(AICONSOLE_ADMIN_PASSWORD="env-given-pass-8273", AICONSOLE_SECRET_KEY="env-given-key-5531")
    environ = Path(f"/proc/{console.process.pid}/environ").read_bytes()  # what a trainer could read
    assert b"env-given-pass-8273" not in environ and b"env-given-key-5531" not in environ
    assert b"AICONSOLE_DATA_DIR=" in environ  # the same process, started again without them
    # They were still applied: the admin signs in with the password from the variable.
    import requests

    session = requests.Session()
    session.get(console.url + "/login/", timeout=30)
    answer = session.post(
        console.url + "/login/",
        timeout=30,
        allow_redirects=False,
        data={
            "username": "admin",
            "password": "env-given-pass-8273",
            "csrfmiddlewaretoken": session.cookies["csrftoken"],
        },
        headers={"Referer": console.url + "/login/"},
    )
    assert answer.status_code == 302, answer.text[:500]
