"""A trainer started by a niced executor yields the CPU to the console (jobs/executor/reaper.py):
'aiconsole up' runs its worker at nice 10 so that a trainer printing flat out leaves the web
process its CPU. Real reaper, real trainer processes, started the way the executor starts them."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from jobs.executor.replicas import reaped

# What the trainer sees of its own scheduling: class, niceness, and its autogroup's line.
PROBE = """
import os
from pathlib import Path
group = Path("/proc/self/autogroup")
print(os.sched_getscheduler(0), os.nice(0), group.read_text().split()[-1] if group.exists() else "-")
"""


def _trainer_scheduling(niceness: int) -> tuple[int, int, str]:
    """Start a probe under the reaper from a process at ``niceness``, in a new session, as
    jobs.executor.replicas does; return what the probe reports."""
    result = subprocess.run(
        reaped([sys.executable, "-c", PROBE], 3),
        capture_output=True,
        text=True,
        timeout=60,
        check=True,
        start_new_session=True,
        preexec_fn=(lambda: os.nice(niceness)) if niceness else None,
    )
    policy, nice, group_nice = result.stdout.split()
    return int(policy), int(nice), group_nice


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling classes")
def test_a_trainer_of_a_niced_executor_keeps_the_nice_in_its_own_session():
    policy, nice, group_nice = _trainer_scheduling(10)
    assert policy == os.SCHED_OTHER  # not the idle class: that would starve it on a busy machine
    assert nice == 10
    if Path("/proc/self/autogroup").exists():  # the reaper's new session must not undo the nice
        assert group_nice == "10"


@pytest.mark.skipif(not hasattr(os, "SCHED_IDLE"), reason="Linux scheduling classes")
def test_a_trainer_of_an_executor_that_was_not_niced_keeps_the_normal_class():
    policy, nice, group_nice = _trainer_scheduling(0)
    assert policy == os.SCHED_OTHER
    assert nice == 0
    if Path("/proc/self/autogroup").exists():
        assert group_nice == "0"
