"""A real ``aiconsole up`` and Debian's Chromium, shared by the browser tests and bench scripts.

The console runs as a subprocess on a free port with a data dir of its own (embedded mode: SQLite,
the in-process executor, the in-memory channel layer); accounts and roles are set up through its
own CLI, jobs through its REST API, as a user would. Chromium is ``/usr/bin/chromium`` driven by
Playwright, started with the flags that keep it from reaching any other host.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
AICONSOLE = str(Path(sys.executable).with_name("aiconsole"))
CHROMIUM = "/usr/bin/chromium"
PROJECT = "default-project"
ADMIN_PASSWORD = "browser-admin-password-1"
# Without these Chromium tries to reach Google's hosts at start and while it runs.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-default-apps",
    "--disable-features=Translate,OptimizationHints,MediaRouter",
]
TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


def in_ci() -> bool:
    return os.environ.get("CI", "").lower() in {"1", "true", "yes"}


def ensure_chromium() -> str | None:
    """Install Debian's chromium when it is missing (scripts/install-chromium); None says why not."""
    if not os.access(CHROMIUM, os.X_OK):
        subprocess.run([str(ROOT / "scripts" / "install-chromium")], check=False)
    return CHROMIUM if os.access(CHROMIUM, os.X_OK) else None


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def launch_chromium(playwright, user_data_dir: Path, **context_options):
    """A persistent context in a fresh profile folder (the browser and its one context)."""
    return playwright.chromium.launch_persistent_context(
        str(user_data_dir), executable_path=CHROMIUM, headless=True, args=CHROMIUM_ARGS, **context_options
    )


class LiveConsole:
    """``aiconsole up`` on a free port; ``stop()`` ends it (SIGINT, as Ctrl+C would)."""

    def __init__(self, data_dir: Path, env_dir: Path | None = None, code: Path | None = None):
        """``code``: another checkout to run instead of this one (its packages ahead of the installed
        ones), as bench/pages.py's ``--baseline`` does."""
        self.data_dir = data_dir
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
        self.env.update(
            {
                "AICONSOLE_DATA_DIR": str(data_dir),
                "AICONSOLE_ADMIN_PASSWORD": ADMIN_PASSWORD,
                "AICONSOLE_STOP_GRACE_SECONDS": "2",
                "AICONSOLE_GRPC_PORT": "off",  # the pages need no gRPC; several consoles would all ask for 8443
            }
        )
        if env_dir is not None:
            self.env["AICONSOLE_ENV_DIR"] = str(env_dir)
        if code is not None:
            self.env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(code), self.env.get("PYTHONPATH")]))
        data_dir.mkdir(parents=True, exist_ok=True)
        self.log_path = data_dir / "console.log"
        self._log = self.log_path.open("wb")
        self.process = subprocess.Popen(
            [AICONSOLE, "up", "--port", str(self.port)],
            env=self.env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            cwd=code or ROOT,
        )
        deadline = time.monotonic() + 120
        while not self._up():
            if time.monotonic() > deadline or self.process.poll() is not None:
                self.stop()
                raise RuntimeError(f"the console did not start:\n{self.log_path.read_text()[-3000:]}")
            time.sleep(0.1)
        self.token = self.cli("token", "create", "admin").strip()

    @property
    def storage(self) -> Path:
        return self.data_dir / "storage"

    @property
    def database(self) -> Path:
        return self.data_dir / "aiconsole.sqlite3"

    def _up(self) -> bool:
        try:
            return urllib.request.urlopen(self.url + "/login/", timeout=1).status == 200
        except OSError:
            return False

    def cli(self, *args: str, stdin: str | None = None) -> str:
        done = subprocess.run(
            [AICONSOLE, *args], env=self.env, input=stdin, capture_output=True, text=True, check=False
        )
        if done.returncode:
            raise RuntimeError(f"aiconsole {' '.join(args)} failed: {done.stderr or done.stdout}")
        return done.stdout

    def add_user(self, username: str, password: str, role: str | None = None) -> None:
        self.cli(
            "users", "create", username, "--email", f"{username}@example.com", "--password-stdin", stdin=password + "\n"
        )
        if role:
            self.cli("projects", "add-iam-policy-binding", PROJECT, f"--member=user:{username}", f"--role={role}")

    def call(self, method: str, path: str, body: dict | None = None) -> dict:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as error:
            raise RuntimeError(f"{method} {path}: {error.code} {error.read()[:2000]!r}") from None

    def submit(self, job_id: str, package: Path | str, **training_input) -> dict:
        return self.call(
            "POST",
            f"/v1/projects/{PROJECT}/jobs",
            {
                "jobId": job_id,
                "trainingInput": {
                    "scaleTier": "BASIC",
                    "packageUris": [str(package)],
                    "pythonModule": "trainer.task",
                    "region": "us-central1",
                    "runtimeVersion": "2.11",
                    **training_input,
                },
            },
        )

    def job(self, job_id: str) -> dict:
        return self.call("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}")

    def wait(self, job_id: str, states=TERMINAL, timeout: float = 300) -> dict:
        deadline = time.monotonic() + timeout
        while (job := self.job(job_id))["state"] not in states:
            if time.monotonic() > deadline:
                raise AssertionError(f"{job_id} is still {job['state']} after {timeout} s")
            time.sleep(0.2)
        return job

    def stop(self) -> None:
        interrupt(self.process, 30)
        self._log.close()


def interrupt(process: subprocess.Popen, timeout: float) -> None:
    """Stop a console as Ctrl+C does (SIGINT); killed if it has not ended after ``timeout`` s."""
    if process.poll() is not None:
        return
    process.send_signal(signal.SIGINT)
    try:
        process.wait(timeout=timeout)
    except subprocess.TimeoutExpired:
        process.kill()
        process.wait(timeout=10)


def remove(path: Path, env_dirs: list[Path] = ()) -> None:
    """Remove a console's scratch folder and, as root, the trainer accounts its console made (and
    their job environments in ``env_dirs``): they would outlive it on the host."""
    shutil.rmtree(path, ignore_errors=True)
    if os.geteuid() == 0:
        from aiconsole import trainer_user

        trainer_user.remove_accounts([path], list(env_dirs))
