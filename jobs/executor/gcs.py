"""A job's ``/gcs/`` view of Cloud Storage, while its replicas run (``aiconsole.gcsview``).

Vertex AI gives every replica ``/gcs/<bucket>/<path>`` for ``gs://<bucket>/<path>``; trainers and
the Vertex SDK's ``from_local_script`` command use it. For a job that names Cloud Storage (a
``gs://`` or ``/gcs/`` anywhere in its request) on a console whose trainers can reach it
(``STORAGE_EMULATOR_HOST`` or ``GOOGLE_APPLICATION_CREDENTIALS`` among the variables trainers
inherit), the runner starts one view for the job before its replicas: a FUSE file system mounted
at ``DATA_DIR/gcs/job-<id>/``, serving as the project's account with the trainers' own
credentials, so it reaches what their ``gs://`` reaches and nothing else. A container sees it at
``/gcs``; a package trainer too, in a mount namespace of its own (``reaper.py --gcs``). It is
unmounted when the job's replicas are done.

Where it cannot be (no root, no FUSE, Cloud Storage not set up for trainers) the job runs without
one, and its log says why, once.
"""

from __future__ import annotations

import ctypes
import json
import logging
import os
import subprocess
import sys
import time
from pathlib import Path

from django.conf import settings

from aiconsole import trainer_user
from jobs.executor.preparing import passthrough_env

logger = logging.getLogger(__name__)

FOLDER = "gcs"
MOUNT_SECONDS = 15.0
MNT_DETACH = 2
CREDENTIALS = ("STORAGE_EMULATOR_HOST", "GOOGLE_APPLICATION_CREDENTIALS")


def wanted(training_input: dict) -> bool:
    """Whether a job names Cloud Storage anywhere in its request (its Vertex AI base output
    directory is its ``jobDir`` here)."""
    text = json.dumps(training_input)
    return "gs://" in text or "/gcs/" in text


def unavailable(account: trainer_user.TrainerUser | None) -> str | None:
    """Why no view can be given here, None when one can."""
    env = passthrough_env()
    if not any(env.get(name) for name in CREDENTIALS):
        return (
            "Cloud Storage is not set up for trainers on this console (no STORAGE_EMULATOR_HOST or "
            "GOOGLE_APPLICATION_CREDENTIALS among AICONSOLE_TRAINER_ENV_PASSTHROUGH)"
        )
    if account is None or os.geteuid() != 0:
        return "the console does not run as root, which mounting it needs"
    if not os.path.exists("/dev/fuse"):
        return "this machine has no /dev/fuse"
    try:
        ctypes.CDLL("libfuse.so.2")
    except OSError:
        return "libfuse2 is not installed (apt install libfuse2)"
    return None


class View:
    """One job's mounted view; ``path`` is what replicas see at ``/gcs``."""

    def __init__(self, path: Path, process: subprocess.Popen):
        self.path = path
        self.process = process

    def stop(self) -> None:
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.umount2(str(self.path).encode(), MNT_DETACH) != 0 and os.path.ismount(self.path):
            logger.warning("Could not unmount %s: %s", self.path, os.strerror(ctypes.get_errno()))
        try:
            self.process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.process.kill()
            self.process.wait()
        try:
            self.path.rmdir()
        except OSError:
            pass


def start(job, account: trainer_user.TrainerUser | None, log) -> View | None:
    """The job's view, mounted, when it names Cloud Storage and one can be given; else None (and
    the log says why, when the job named Cloud Storage)."""
    if not wanted(job.training_input or {}):
        return None
    why = unavailable(account)
    if why:
        log(f"Replicas have no /gcs/ view of Cloud Storage: {why}.", severity="WARNING")
        return None
    assert account is not None
    folder = settings.DATA_DIR / FOLDER
    folder.mkdir(mode=0o711, exist_ok=True)
    path = folder / f"job-{job.pk}"
    if os.path.ismount(path):  # left by a console that was killed
        ctypes.CDLL(None).umount2(str(path).encode(), MNT_DETACH)
    path.mkdir(mode=0o755, exist_ok=True)
    env = {**passthrough_env(), "PATH": os.environ.get("PATH", os.defpath)}
    process = subprocess.Popen(
        [sys.executable, "-m", "aiconsole.gcsview", str(path), str(account.uid), str(account.gid)],
        env=env,
        cwd="/",
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=None,  # the console's log: a failed request says why there
        start_new_session=True,
    )
    deadline = time.monotonic() + MOUNT_SECONDS
    while not os.path.ismount(path):
        if process.poll() is not None or time.monotonic() > deadline:
            if process.poll() is None:
                process.kill()
            process.wait()
            log("Replicas have no /gcs/ view of Cloud Storage: its file system did not start.", severity="WARNING")
            return None
        time.sleep(0.02)
    log("Replicas see Cloud Storage at /gcs/<bucket>/ (with the trainers' credentials).")
    return View(path, process)
