"""A reaper started ahead of its replica (jobs/executor/replicas.py Spares, ``reaper.py --ready``):
it runs the trainer it is told as a reaper started for it would, sees none of the console's
environment itself, and is still found and stopped as an orphan after a restart."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.support.waiting import wait_for
from jobs.executor.replicas import REAPER, SPARES, Spares, stop_orphan

PROBE = """
import json, os, sys
print(json.dumps({"args": sys.argv[1:], "cwd": os.getcwd(), "env": dict(os.environ), "nice": os.nice(0),
                  "stdin": os.readlink("/proc/self/fd/0")}))
"""


def _ready(**popen) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-I", "-S", str(REAPER), "--ready"],
        env={},
        cwd="/",
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        start_new_session=True,
        **popen,
    )


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def test_a_spare_runs_the_trainer_it_is_told_with_its_environment_folder_and_arguments(tmp_path):
    spares = Spares()
    spares.prepare()
    spare = wait_for(lambda: spares.take(), 30, interval=0.05, message="a spare reaper")
    env = {"PATH": os.defpath, "CLOUD_ML_JOB_ID": "told", "TF_CONFIG": '{"task": {"type": "master"}}'}
    argument = 'line one\nline "two" ünïcode'

    assert spares.tell(spare, [sys.executable, "-c", PROBE, argument], env, tmp_path, 3.0, None)
    out, err = spare.stdout.read(), spare.stderr.read()
    spare.wait(timeout=60)
    spares.close()

    assert spare.returncode == 0, err
    seen = json.loads(out)
    assert seen["args"] == [argument]
    assert seen["cwd"] == str(tmp_path)
    assert {k: seen["env"][k] for k in env} == env
    assert seen["stdin"] == "/dev/null"


def test_a_spare_holds_none_of_the_consoles_environment(monkeypatch):
    monkeypatch.setenv("AICONSOLE_DATABASE_URL", "postgres://console:hunter2@db/aiconsole")
    spares = Spares()
    spares.prepare()
    spare = wait_for(lambda: spares.take(), 30, interval=0.05, message="a spare reaper")
    try:
        assert Path(f"/proc/{spare.pid}/environ").read_bytes() == b""
    finally:
        spares.close()
        Spares._close_one(spare)


def test_a_spare_whose_input_ends_exits_and_one_told_a_missing_folder_says_so(tmp_path):
    idle = _ready()
    idle.stdin.close()
    assert idle.wait(timeout=30) == 0

    told = _ready()
    line = {"command": ["true"], "env": {}, "cwd": str(tmp_path / "gone"), "grace": 1, "user": None}
    out, err = told.communicate(json.dumps(line).encode() + b"\n", timeout=30)
    assert told.returncode == 127
    assert b"No such file or directory" in err


@pytest.mark.skipif(not Path("/proc/self/autogroup").exists(), reason="scheduler autogroups")
def test_a_spare_started_by_a_niced_executor_gives_its_trainer_the_nice(tmp_path):
    spare = _ready(preexec_fn=lambda: os.nice(10))
    line = {"command": [sys.executable, "-c", PROBE], "env": {}, "cwd": str(tmp_path), "grace": 1, "user": None}
    out, _ = spare.communicate(json.dumps(line).encode() + b"\n", timeout=60)
    assert json.loads(out)["nice"] == 10


def test_a_spare_left_running_by_an_earlier_console_is_stopped_as_its_replicas_orphan(tmp_path):
    spare = _ready()
    marker = {"AICONSOLE_REPLICA": "424242", "PATH": os.defpath}
    sleeper = [sys.executable, "-c", "import time; print('up', flush=True); time.sleep(600)"]
    line = {"command": sleeper, "env": marker, "cwd": str(tmp_path), "grace": 1, "user": None}
    spare.stdin.write(json.dumps(line).encode() + b"\n")
    spare.stdin.close()
    assert spare.stdout.readline() == b"up\n"
    trainer = next(int(p.name) for p in Path("/proc").glob("[0-9]*") if _child_of(int(p.name), spare.pid))

    assert not stop_orphan(spare.pid, 4242)  # another replica's id: not this one's
    assert stop_orphan(spare.pid, 424242)

    spare.wait(timeout=30)
    assert spare.returncode == -signal.SIGKILL
    wait_for(lambda: not _alive(trainer), 10, message="the trainer to be stopped")


def test_the_executors_spare_is_ready_and_replaced_once_taken():
    SPARES.prepare()
    first = wait_for(lambda: SPARES.take(), 30, interval=0.05, message="a spare reaper")
    second = wait_for(lambda: SPARES.take(), 30, interval=0.05, message="the next spare reaper")
    assert first.pid != second.pid
    for spare in (first, second):
        Spares._close_one(spare)
        assert spare.returncode == 0


def _child_of(pid: int, parent: int) -> bool:
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return False
    return int(stat[stat.rfind(b")") + 2 :].split()[1]) == parent
