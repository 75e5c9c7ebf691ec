"""A real console for the client commands: one ``aiconsole up`` per test session, on a free port.

Client commands run in-process through ``aiconsole.cli.main`` (``cli`` fixture, output captured)
or as the installed ``aiconsole`` program (``run_aiconsole``), with the console's address and an
admin token in the environment and a config file of their own, never the real home's.
"""

from __future__ import annotations

import json
import os
import subprocess
import textwrap
from dataclasses import dataclass
from pathlib import Path

import pytest

from aiconsole.cli import main
from tests.aiconsole.test_cli import AICONSOLE, Server, token_for
from tests.conftest import wait_for

TERMINAL = {"SUCCEEDED", "FAILED", "CANCELLED"}


@dataclass
class Console:
    server: Server
    token: str

    @property
    def url(self) -> str:
        return self.server.url

    @property
    def storage(self) -> Path:
        return self.server.data_dir / "storage"

    def job(self, job_id: str) -> dict:
        status, body = self.server.api("GET", f"/v1/projects/default-project/jobs/{job_id}", self.token)
        return body if status == 200 else {"status": status, **body}

    def wait(self, job_id: str, states=TERMINAL, timeout: float = 240) -> dict:
        wait_for(lambda: self.job(job_id).get("state") in states, timeout, interval=0.2,
                 message=f"job {job_id} to reach {sorted(states)}")
        return self.job(job_id)

    def uploaded(self) -> list[Path]:
        return sorted((self.storage / "packages").rglob("*.*")) if (self.storage / "packages").exists() else []


@pytest.fixture(scope="session")
def console(tmp_path_factory, gcs_emulator):
    """The console, able to read the session's GCS emulator (its address is inherited)."""
    server = Server(tmp_path_factory.mktemp("cli-console") / "data")
    try:
        yield Console(server, token_for(server.data_dir))
    finally:
        server.stop()


@dataclass
class Result:
    code: int
    out: str
    err: str


@pytest.fixture
def client_env(console, monkeypatch, tmp_path):
    """The environment a user's shell would have: the console's address and a token."""
    for name in ("AICONSOLE_PROJECT", "AICONSOLE_REGION", "XDG_CONFIG_HOME"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AICONSOLE_URL", console.url)
    monkeypatch.setenv("AICONSOLE_TOKEN", console.token)
    monkeypatch.setenv("AICONSOLE_CONFIG", str(tmp_path / "aiconsole-config.json"))
    return os.environ


@pytest.fixture
def cli(client_env, capsys):
    """Run ``aiconsole ARGS`` in this process and return its exit status and output."""

    def run(*argv: str) -> Result:
        capsys.readouterr()
        try:
            code = main(list(argv))
        except SystemExit as exit_:
            code = exit_.code if isinstance(exit_.code, int) else 1
        out, err = capsys.readouterr()
        return Result(code, out, err)

    return run


@pytest.fixture
def run_aiconsole(client_env):
    """Run the installed ``aiconsole`` program, as a user's shell would."""

    def run(*argv: str, env: dict | None = None, cwd: Path | None = None, timeout: float = 300) -> Result:
        result = subprocess.run([AICONSOLE, *argv], capture_output=True, text=True, timeout=timeout,
                                env={**os.environ, **(env or {})}, cwd=cwd)
        return Result(result.returncode, result.stdout, result.stderr)

    return run


TRAINER = """\
import json, os, sys
job_dir = sys.argv[sys.argv.index("--job-dir") + 1] if "--job-dir" in sys.argv else None
print("trainer started", flush=True)
print("warning: this goes to stderr", file=sys.stderr, flush=True)
if job_dir:
    os.makedirs(job_dir, exist_ok=True)
    with open(os.path.join(job_dir, "seen.json"), "w") as handle:
        json.dump({"argv": sys.argv[1:], "tf_config": json.loads(os.environ.get("TF_CONFIG", "{}"))}, handle)
if "--fail" in sys.argv:
    raise SystemExit("asked to fail")
if "--sleep" in sys.argv:
    import time
    time.sleep(float(sys.argv[sys.argv.index("--sleep") + 1]))
print("trainer done", flush=True)
"""


def write_trainer(root: Path, source: str = TRAINER, *, package: str = "trainer") -> Path:
    """A plain package folder ``root/package`` with ``task.py``; returns the folder."""
    folder = root / package
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "__init__.py").write_text("")
    (folder / "task.py").write_text(textwrap.dedent(source))
    return folder


def read_seen(job_dir: Path) -> dict:
    return json.loads((job_dir / "seen.json").read_text())
