"""Secrets given as environment variables never stay in the console's initial environment.

A trainer runs as the console's user and can read ``/proc/<console pid>/environ``: the
environment a process was started with, whatever it later removes from ``os.environ``. So the
long-running commands (``aiconsole up``, ``web``, ``worker``) read the secret variables at once,
hand them to a fresh exec of themselves through an inherited pipe, and start again with an
environment that no longer holds them (same pid, new ``/proc/<pid>/environ``). Settings read
them through ``lookup`` (``_FILE`` variants are better still: nothing to hide).
"""

from __future__ import annotations

import json
import os
import sys

SECRET_VARIABLES = (
    "AICONSOLE_SECRET_KEY",
    "AICONSOLE_ADMIN_PASSWORD",
    "AICONSOLE_DATABASE_URL",
    "AICONSOLE_REDIS_URL",
    "AICONSOLE_EMAIL_PASSWORD",
)
FD_VARIABLE = "AICONSOLE_SECRETS_FD"

_received: dict[str, str] | None = None


def reexec_without_secrets() -> None:
    """Exec this command again without the secret variables (they travel through a pipe)."""
    secrets = {name: os.environ[name] for name in SECRET_VARIABLES if os.environ.get(name)}
    if not secrets:
        return
    read_end, write_end = os.pipe()
    os.write(write_end, json.dumps(secrets).encode())  # far below a pipe's buffer
    os.close(write_end)
    os.set_inheritable(read_end, True)
    env = {name: value for name, value in os.environ.items() if name not in SECRET_VARIABLES}
    env[FD_VARIABLE] = str(read_end)
    sys.stdout.flush()
    sys.stderr.flush()
    os.execve(sys.executable, [sys.executable, *sys.argv], env)


def _receive() -> dict[str, str]:
    global _received
    if _received is None:
        _received = {}
        fd = os.environ.pop(FD_VARIABLE, None)
        if fd:
            with os.fdopen(int(fd), "rb") as pipe:
                _received = json.loads(pipe.read() or b"{}")
    return _received


def lookup(name: str) -> str | None:
    """A variable's value: from the pipe for the secrets handed over, else the environment."""
    return _receive().get(name) or os.environ.get(name)
