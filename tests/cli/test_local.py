"""``aiconsole local train``: the trainer runs here, with gcloud's TF_CONFIG, no console needed."""

from __future__ import annotations

import json
import os
import re
import sys
import textwrap

import pytest

from console.cli import main

RECORDER = """\
import json, os, sys, time
job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
tf_config = json.loads(os.environ["TF_CONFIG"])
task = tf_config["task"] or {"type": "single", "index": 0}
with open(os.path.join(job_dir, f"{task['type']}-{task['index']}.json"), "w") as handle:
    json.dump({"argv": sys.argv[1:], "cwd": os.getcwd(), "tf_config": tf_config}, handle)
print("hello from", task["type"], task["index"], flush=True)
if task["type"] == "ps":
    time.sleep(600)  # parameter servers never exit by themselves
if task["type"] in ("chief", "master"):
    deadline = time.time() + 60
    # Every other task has started (and recorded itself) before the primary decides the outcome.
    others = len(tf_config["cluster"].get("worker", [])) + len(tf_config["cluster"].get("ps", []))
    while len([n for n in os.listdir(job_dir) if n.startswith(("worker-", "ps-"))]) < others and time.time() < deadline:
        time.sleep(0.05)
sys.exit(int(os.environ.get("EXIT_WITH", "0")))
"""


@pytest.fixture
def trainer(tmp_path, monkeypatch):
    folder = tmp_path / "project" / "trainer"
    folder.mkdir(parents=True)
    (folder / "__init__.py").write_text("")
    (folder / "task.py").write_text(textwrap.dedent(RECORDER))
    monkeypatch.setenv("AICONSOLE_LOCAL_PYTHON", sys.executable)
    monkeypatch.chdir(tmp_path)
    return folder


def _read(job_dir, name):
    return json.loads((job_dir / name).read_text())


def test_single_process_runs_as_gcloud_does(trainer, tmp_path, capfd):
    job_dir = tmp_path / "out" / "not-yet-there"
    code = main(
        [
            "local",
            "train",
            "--module-name",
            "trainer.task",
            "--package-path",
            str(trainer),
            "--job-dir",
            str(job_dir),
            "--",
            "--lr",
            "0.1",
            "--job-name=x",
        ]
    )
    assert code == 0
    seen = _read(job_dir, "single-0.json")
    assert seen["tf_config"] == {
        "job": {"job_name": "trainer.task", "args": ["--lr", "0.1", "--job-name=x"]},
        "task": {},
        "cluster": {},
        "environment": "cloud",
    }
    assert seen["argv"] == ["--lr", "0.1", "--job-name=x", "--job-dir", str(job_dir)]
    assert seen["cwd"] == str(trainer.parent)  # the parent of --package-path
    assert "hello from single 0" in capfd.readouterr().out


def test_exit_status_and_default_working_directory(trainer, tmp_path, monkeypatch):
    monkeypatch.chdir(trainer.parent)
    monkeypatch.setenv("EXIT_WITH", "3")
    job_dir = tmp_path / "out"
    assert main(["local", "train", "--module-name", "trainer.task", "--job-dir", str(job_dir)]) == 3
    assert _read(job_dir, "single-0.json")["cwd"] == str(trainer.parent)


@pytest.mark.parametrize(
    ("flags", "primary"),
    [([], "chief"), (["--runtime-version", "1.15"], "master"), (["--use-chief-in-tf-config", "false"], "master")],
)
def test_distributed_gives_each_task_its_tf_config(trainer, tmp_path, capfd, flags, primary):
    job_dir = tmp_path / "dist"
    code = main(
        [
            "local",
            "train",
            "--module-name",
            "trainer.task",
            "--package-path",
            str(trainer),
            "--job-dir",
            str(job_dir),
            "--distributed",
            "--worker-count",
            "2",
            "--parameter-server-count",
            "1",
            "--start-port",
            "30100",
            *flags,
            "--",
            "--steps",
            "5",
        ]
    )
    assert code == 0
    cluster = {
        primary: ["localhost:30100"],
        "worker": ["localhost:30101", "localhost:30102"],
        "ps": ["localhost:30103"],
    }
    expected_tasks = [(primary, 0), ("worker", 0), ("worker", 1), ("ps", 0)]
    for task_type, index in expected_tasks:
        seen = _read(job_dir, f"{task_type}-{index}.json")
        assert seen["tf_config"] == {
            "cluster": cluster,
            "task": {"type": task_type, "index": index},
            "job": {"job_name": "trainer.task", "args": ["--steps", "5"]},
            "environment": "cloud",
        }
        assert seen["argv"] == ["--steps", "5", "--job-dir", str(job_dir)]
    out, err = capfd.readouterr()
    assert f"[master-replica-0] hello from {primary} 0" in out
    assert "[ps-replica-0] hello from ps 0" in out
    # The parameter server never exits by itself: it is stopped once the master has ended.
    assert re.search(
        r"^master-replica-0 exited with status 0; stopped (worker-replica-\d, )*ps-replica-0\.$", err, re.M
    ), err


def test_distributed_primary_failure_is_the_exit_status_and_the_ps_is_stopped(trainer, tmp_path, monkeypatch):
    monkeypatch.setenv("EXIT_WITH", "4")
    job_dir = tmp_path / "dist"
    code = main(
        [
            "local",
            "train",
            "--module-name",
            "trainer.task",
            "--package-path",
            str(trainer),
            "--job-dir",
            str(job_dir),
            "--distributed",
            "--worker-count",
            "1",
            "--parameter-server-count",
            "1",
            "--start-port",
            "30200",
        ]
    )
    assert code == 4
    ps = _read(job_dir, "ps-0.json")
    assert ps["tf_config"]["task"] == {"type": "ps", "index": 0}
    # Nothing of ours is left running: no process has the ps task's TF_CONFIG any more.
    marker = '"type": "ps"'
    for pid in filter(str.isdigit, os.listdir("/proc")):
        try:
            environ = open(f"/proc/{pid}/environ", "rb").read().decode(errors="replace")
        except OSError:
            continue
        assert not (marker in environ and str(job_dir) in open(f"/proc/{pid}/cmdline").read().replace("\0", " "))


def test_counts_without_distributed_and_a_missing_package_are_usage_errors(trainer, tmp_path, capsys):
    assert main(["local", "train", "--module-name", "trainer.task", "--worker-count", "2"]) == 2
    assert "--worker-count: only used with --distributed" in capsys.readouterr().err
    assert main(["local", "train", "--module-name", "m", "--package-path", str(tmp_path / "nope")]) == 2
    assert "no such directory" in capsys.readouterr().err
