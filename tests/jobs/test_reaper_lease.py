"""A scaled-mode replica's reaper enforces its worker's lease on its own (``reaper.py --lease``):
when the file the worker touches at each renewal grows older than the deadline, the trainer and
everything it started stop within a second, whatever the worker is doing; the command given with
``--on-stop`` (a container's ``podman stop``) runs first, on that stop and on the worker's death
signal, never on the trainer's own exit."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from jobs.executor.replicas import reaped

# A trainer that starts a grandchild in a session of its own, prints both pids, then runs on.
TRAINER = """
import os, subprocess, sys, time
child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(120)"], start_new_session=True)
print(os.getpid(), child.pid, flush=True)
time.sleep(120)
"""


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _start(tmp_path: Path, *options: str, code: str = TRAINER) -> tuple[subprocess.Popen, list[int]]:
    process = subprocess.Popen(
        reaped([sys.executable, "-c", code], 10.0, list(options)),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )
    assert process.stdout is not None
    pids = [int(pid) for pid in process.stdout.readline().split()]
    return process, pids


@pytest.mark.slow
def test_a_trainer_stops_itself_soon_after_its_workers_lease_goes_stale(tmp_path):
    lease = tmp_path / "lease"
    lease.touch()
    stopped_by = tmp_path / "on-stop"
    on_stop = json.dumps(["/bin/sh", "-c", f"echo stopped > {stopped_by}"])
    process, pids = _start(tmp_path, "--lease", f"{lease}:1.5", "--on-stop", on_stop)
    # Renewed in time, it runs on well past the deadline.
    for _ in range(6):
        time.sleep(0.5)
        lease.touch()
    assert process.poll() is None and all(_alive(pid) for pid in pids)
    renewed_last = time.monotonic()
    process.wait(timeout=10)
    took = time.monotonic() - renewed_last
    # The deadline (1.5 s), a poll (0.2 s) and the short grace (1 s, not the 10 s asked for a stop).
    assert 1.5 <= took < 4.0, took
    assert not any(_alive(pid) for pid in pids)  # the grandchild in its own session too
    assert process.returncode == -signal.SIGTERM
    assert "could not renew this replica's lease" in process.stderr.read()
    assert stopped_by.read_text().strip() == "stopped"  # its on-stop command ran first


def test_a_lease_file_that_is_gone_stops_the_trainer(tmp_path):
    process, pids = _start(tmp_path, "--lease", f"{tmp_path / 'never-made'}:30")
    process.wait(timeout=10)
    assert not any(_alive(pid) for pid in pids)


def test_the_on_stop_command_runs_on_a_stop_and_never_on_the_trainers_own_exit(tmp_path):
    marker = tmp_path / "on-stop"
    on_stop = json.dumps(["/bin/sh", "-c", f"echo ran >> {marker}"])
    done = subprocess.run(
        reaped([sys.executable, "-c", "print('done')"], 5.0, ["--on-stop", on_stop]),
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0 and done.stdout == "done\n"
    assert not marker.exists()
    process, pids = _start(tmp_path, "--on-stop", on_stop)
    os.kill(process.pid, signal.SIGTERM)  # what the worker's death signal sends a container's reaper
    process.wait(timeout=20)
    assert marker.read_text() == "ran\n"
    assert not any(_alive(pid) for pid in pids)


def test_bad_options_get_the_usage(tmp_path):
    done = subprocess.run(
        reaped(["true"], 1.0, ["--lease"]), capture_output=True, text=True, timeout=30
    )  # --lease without its value: "--" taken as the value leaves no command
    assert done.returncode == 2 and "usage: reaper.py GRACE" in done.stderr
