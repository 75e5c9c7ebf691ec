"""TensorBoard's environment: a virtual environment from the hash-locked ``requirements.txt``.

Built once per machine (per lock and interpreter) under ``settings.ENV_DIR`` with the executor's
builder (``jobs.executor.environments``): uv, a file lock, a completion marker, shared with the
trainer user when TensorBoard runs as that user.
"""

from __future__ import annotations

import hashlib
import json
import logging
import sys
from pathlib import Path

from django.conf import settings

from aiconsole import storage
from jobs.executor import environments
from jobs.executor.environments import Environment
from jobs.runtimes import pythons

logger = logging.getLogger(__name__)

LOCK = Path(__file__).with_name("requirements.txt")


def tensorboard_environment(log=logger.info) -> Environment:
    """The cached environment with TensorBoard, built from :data:`LOCK` on first use.

    Raises ``environments.EnvironmentError_`` with uv's message when it cannot be built."""
    python = f"{sys.version_info.major}.{sys.version_info.minor}"  # the lock is resolved for >= 3.11
    interpreter = environments.for_trainers(environments.interpreter_for(python, log), log)
    lock = LOCK.read_text()
    identity = {"python": pythons.interpreter_version(interpreter), "lock": lock, "interpreter": interpreter}
    key = hashlib.sha256(json.dumps(identity).encode()).hexdigest()
    path = settings.ENV_DIR / f"tensorboard-{key[:16]}"
    if (path / environments.COMPLETE_MARKER).is_file():
        return environments.shared(Environment(path=path, key=key))
    log(f"Building TensorBoard's environment in {path}; this happens once per machine.")

    def build(target: Path) -> dict:
        environments.run_uv(
            ["venv", "--quiet", "--python", interpreter, str(target)], what="Creating TensorBoard's environment"
        )
        python = str(target / "bin" / "python")
        environments.run_uv(
            ["pip", "sync", "--quiet", "--require-hashes", environments.COMPILE, "--python", python, str(LOCK)],
            what="Installing TensorBoard",
        )
        return {
            "kind": "tensorboard",
            "python": identity["python"],
            "lockSha256": storage.file_digest(LOCK),
            environments.BYTECODE: True,
        }

    return environments.shared(environments.build_once(path, key, build))
