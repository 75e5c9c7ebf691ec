"""A real ``aiconsole up`` to abuse: its processes, a signed-in admin, jobs, and its database."""

from __future__ import annotations

import contextlib
import http.cookiejar
import sqlite3
import urllib.parse
import urllib.request
from pathlib import Path

import pytest

from bench.support.packages import TASK_HEADER, build_package
from bench.support.waiting import wait_for
from tests.helpers.console import Server, token_for
from tests.helpers.memory import rss_mb

PROJECT = "default-project"
PASSWORD = "load-test-password-1"
ENDED = {"SUCCEEDED", "FAILED", "CANCELLED"}


class LiveConsole:
    """A console started for one test, with the admin signed in (a token and a session cookie)."""

    def __init__(self, data_dir: Path, nofile: int | None = None, **env: str):
        self.server = Server(data_dir, nofile=nofile, AICONSOLE_ADMIN_PASSWORD=PASSWORD, **env)
        self.data_dir, self.url, self.port = data_dir, self.server.url, self.server.port
        self.token = token_for(data_dir)
        self.cookie = self.sign_in("admin", PASSWORD)

    def sign_in(self, username: str, password: str) -> str:
        """A session cookie, through the login form as a browser gets one."""
        jar = http.cookiejar.CookieJar()
        opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
        opener.open(self.url + "/login/", timeout=30).read()
        csrf = next(c.value for c in jar if c.name == "csrftoken")
        form = urllib.parse.urlencode({"username": username, "password": password, "csrfmiddlewaretoken": csrf})
        opener.open(
            urllib.request.Request(self.url + "/login/", data=form.encode(), headers={"Referer": self.url + "/login/"}),
            timeout=30,
        ).read()
        return next(c.value for c in jar if c.name == "sessionid")

    def submit(self, job_id: str, task: str, args: list[str] | None = None) -> Path:
        """A job running ``task`` (after the usual imports); returns its job dir."""
        package = build_package(
            self.data_dir / "storage" / "pkg" / PROJECT / job_id, {"trainer/task.py": TASK_HEADER + task}
        )
        job_dir = self.data_dir / "storage" / "out" / PROJECT / job_id
        status, answer = self.server.api(
            "POST",
            f"/v1/projects/{PROJECT}/jobs",
            self.token,
            {
                "jobId": job_id,
                "trainingInput": {
                    "scaleTier": "BASIC",
                    "packageUris": [str(package)],
                    "pythonModule": "trainer.task",
                    "args": args or [],
                    "region": "us-central1",
                    "runtimeVersion": "2.11",
                    "pythonVersion": "3.7",
                    "jobDir": str(job_dir),
                },
            },
        )
        assert status == 200, answer
        return job_dir

    def state(self, job_id: str) -> str:
        status, job = self.server.api("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}", self.token)
        assert status == 200, job
        return job["state"]

    def wait_state(self, job_id: str, states: set[str], timeout: float = 180) -> str:
        return wait_for(
            lambda: (state := self.state(job_id)) in states and state,
            timeout,
            interval=0.2,
            message=f"{job_id} to be one of {sorted(states)}",
        )

    def query(self, sql: str, args: tuple = ()) -> list[tuple]:
        """What the console stored, read from its database (read-only)."""
        with contextlib.closing(
            sqlite3.connect(f"file:{self.data_dir / 'aiconsole.sqlite3'}?mode=ro", uri=True, timeout=30)
        ) as db:
            return db.execute(sql, args).fetchall()

    def job_pk(self, job_id: str) -> int:
        return self.query("SELECT id FROM jobs_job WHERE job_id = ?", (job_id,))[0][0]

    def processes(self) -> dict[str, int]:
        """The pids of its web and worker processes."""
        found = {}
        for entry in Path("/proc").glob("[0-9]*"):
            try:
                parent = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
                argv = (entry / "cmdline").read_bytes().split(b"\0")
            except (OSError, ValueError, IndexError):
                continue
            if parent == self.server.process.pid and b"--process" in argv:
                found[argv[argv.index(b"--process") + 1].decode()] = int(entry.name)
        return found

    def rss_mb(self) -> dict[str, float]:
        return {role: rss_mb(pid) for role, pid in self.processes().items()}


@pytest.fixture
def live_console(tmp_path):
    """``live_console(nofile=None, **env)``: a console with these settings (and that soft limit on
    open files), stopped after the test."""
    started: list[LiveConsole] = []

    def start(nofile: int | None = None, **env: str) -> LiveConsole:
        started.append(LiveConsole(tmp_path / f"data-{len(started)}", nofile, **env))
        return started[-1]

    yield start
    for console in started:
        console.server.stop()
