"""A real console for the client commands: one ``aiconsole up`` per test session, on a free port.

Client commands run in-process through ``console.cli.main`` (``cli`` fixture, output captured)
or as the installed ``aiconsole`` program (``run_aiconsole``), with the console's address and an
admin token in the environment and a config file of their own, never the real home's.
"""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from console.cli import main
from tests.helpers.cli import Console, Result
from tests.helpers.console import AICONSOLE, Server, token_for


@pytest.fixture(scope="session")
def console(tmp_path_factory, gcs_emulator):
    """The console, able to read the session's GCS emulator (its address is inherited)."""
    server = Server(tmp_path_factory.mktemp("cli-console") / "data")
    try:
        yield Console(server, token_for(server.data_dir))
    finally:
        server.stop()


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
        result = subprocess.run(
            [AICONSOLE, *argv],
            capture_output=True,
            text=True,
            timeout=timeout,
            env={**os.environ, **(env or {})},
            cwd=cwd,
        )
        return Result(result.returncode, result.stdout, result.stderr)

    return run
