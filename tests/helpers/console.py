"""A real `aiconsole up` in a subprocess, and tokens for it."""

from __future__ import annotations

import json
import os
import resource
import signal
import subprocess
import sys
import urllib.error
import urllib.request
from pathlib import Path

from bench.support.waiting import wait_for
from jobs.executor.replicas import free_port

AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))


def console_env(data_dir: Path, **extra) -> dict:
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_") and k != "DJANGO_SETTINGS_MODULE"}
    env.update(
        {
            "AICONSOLE_DATA_DIR": str(data_dir),
            "AICONSOLE_ENV_DIR": os.environ["AICONSOLE_ENV_DIR"],
            "AICONSOLE_STOP_GRACE_SECONDS": "2",
            # Each console its own gRPC port: consoles of parallel tests would all ask for 8443.
            "AICONSOLE_GRPC_PORT": str(free_port()),
            **extra,
        }
    )
    return env


class Server:
    def __init__(self, data_dir: Path, *, nofile: int | None = None, **env):
        """``nofile``: the soft limit on open files it starts with (systemd gives services 1,024)."""
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = data_dir.parent / f"server-{self.port}.log"
        data_dir.mkdir(parents=True, exist_ok=True)
        self.process = subprocess.Popen(
            [AICONSOLE, "up", "--port", str(self.port), "--data-dir", str(data_dir)],
            stdout=open(self.log, "w"),
            stderr=subprocess.STDOUT,
            env=console_env(data_dir, **env),
            preexec_fn=(lambda: _limit_open_files(nofile)) if nofile else None,
        )
        wait_for(self._answers, 180, interval=0.1, message="the console to answer")

    def _answers(self) -> bool:
        assert self.process.poll() is None, self.log.read_text()
        try:
            return urllib.request.urlopen(self.url + "/login/", timeout=10).status == 200
        except (urllib.error.URLError, OSError):  # refused, reset, or slow to answer: try again
            return False

    def output(self) -> str:
        return self.log.read_text()

    def api(self, method: str, path: str, token: str, body: dict | None = None):
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=10) as response:
                return response.status, json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            self.process.wait(timeout=60)


def _limit_open_files(soft: int) -> None:
    hard = resource.getrlimit(resource.RLIMIT_NOFILE)[1]
    resource.setrlimit(resource.RLIMIT_NOFILE, (soft, hard))


def token_for(data_dir: Path, username: str = "admin") -> str:
    result = subprocess.run(
        [AICONSOLE, "token", "create", username],
        capture_output=True,
        text=True,
        env=console_env(data_dir),
        check=True,
        timeout=60,
    )
    return result.stdout.strip()
