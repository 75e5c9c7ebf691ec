"""A root console runs trainers as an unprivileged user that can reach none of its secrets.

CI runs as root, so these tests run there: the trainer is the attacker, trying what a user's code
could try against the console it runs beside.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import subprocess
import sys
from pathlib import Path

import pytest
from django.conf import settings

from aiconsole import storage, trainer_user
from jobs.models import JobState
from tests.helpers.jobs import log_text

pytestmark = [
    pytest.mark.executor,
    pytest.mark.skipif(os.geteuid() != 0, reason="only a console running as root can switch users"),
]

ATTACKER = """
    import pwd
    report = {"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
              "user": pwd.getpwuid(os.getuid()).pw_name, "home": os.environ.get("HOME")}
    console_pid = int(sys.argv[sys.argv.index("--console-pid") + 1])
    targets = {
        "environ": "/proc/%d/environ" % console_pid,
        "database": sys.argv[sys.argv.index("--database") + 1],
        "secret_key": sys.argv[sys.argv.index("--secret-key") + 1],
        "other_upload": sys.argv[sys.argv.index("--other") + 1],
    }
    for name, path in targets.items():
        try:
            with open(path, "rb") as handle:
                report[name] = handle.read().decode("latin-1")
        except OSError as error:
            report[name] = "refused: %s" % type(error).__name__
    try:
        os.listdir(sys.argv[sys.argv.index("--data-dir") + 1])
        report["list_data_dir"] = "listed"
    except OSError as error:
        report["list_data_dir"] = "refused: %s" % type(error).__name__
    report["poisoned"] = []  # the shared runtime environment and interpreter, for later jobs
    shared = [p for p in sys.path if os.path.isdir(p) and os.path.abspath(p) != os.getcwd()]
    for folder in shared + [os.path.dirname(os.path.realpath(sys.executable)), os.path.dirname(os.__file__)]:
        try:
            open(os.path.join(folder, "poison.py"), "w").close()
            report["poisoned"].append(folder)
        except OSError:
            pass
    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    with open(os.path.join(job_dir, "report.json"), "w") as handle:
        json.dump(report, handle)
    with open(os.path.join(os.environ["HOME"], "scratch.txt"), "w") as handle:
        handle.write("a trainer writes in its own working dir")
"""


def test_a_trainer_runs_unprivileged_and_reaches_none_of_the_console_secrets(run_job, package_factory):
    secret_key = settings.DATA_DIR / "secret_key"
    secret_key.write_text("a-key-only-the-console-may-read")
    secret_key.chmod(0o600)
    other = storage.save_upload(io.BytesIO(b"another project's trainer"), "trainer.tar.gz", project="project-b")
    job_dir = settings.STORAGE_DIR / "job-dirs" / "project-a" / "attacker"

    job = run_job("attacker", package_factory(ATTACKER), jobDir=str(job_dir), args=[
        "--console-pid", str(os.getpid()), "--database", str(settings.DATABASES["default"]["NAME"]),
        "--secret-key", str(secret_key), "--other", str(other), "--data-dir", str(settings.DATA_DIR),
    ])

    assert job.state == JobState.SUCCEEDED, job.error_message
    report = json.loads((job_dir / "report.json").read_text())
    account = pwd.getpwnam(settings.TRAINER_USER)
    assert (report["user"], report["uid"], report["gid"]) == (settings.TRAINER_USER, account.pw_uid, account.pw_gid)
    assert report["uid"] != 0 and report["groups"] in ([], [account.pw_gid])
    assert report["environ"] == "refused: PermissionError"  # AICONSOLE_SECRET_KEY is in there
    assert report["secret_key"] == "refused: PermissionError"
    assert report["database"].startswith("refused:")
    assert report["other_upload"] == "refused: PermissionError"
    assert report["list_data_dir"] == "refused: PermissionError"
    assert report["poisoned"] == []
    # Its own folders are its own: the job dir, and its working dir as its home.
    assert job_dir.stat().st_uid == account.pw_uid
    assert Path(report["home"], "scratch.txt").read_text() == "a trainer writes in its own working dir"
    assert "master-replica-0" in Path(report["home"]).name
    # The console still reads what the trainer wrote.
    assert "Started master-replica-0" in log_text(job)


def test_a_trainer_reads_the_stored_inputs_its_job_names_and_no_others(run_job, package_factory):
    named = storage.save_upload(io.BytesIO(b"x,y\n1,2\n"), "train.csv", project="project-a")
    folder = settings.STORAGE_DIR / "datasets" / "project-a" / "images"
    (folder / "cats").mkdir(parents=True)
    (folder / "cats" / "1.txt").write_text("a cat")
    unnamed = storage.save_upload(io.BytesIO(b"secret,rows\n"), "other.csv", project="project-a")
    assert (named.stat().st_mode & 0o077, unnamed.stat().st_mode & 0o077) == (0, 0)  # the console's, until named
    package = package_factory("""
        def read(path):
            try:
                with open(path) as handle:
                    return handle.read()
            except OSError as error:
                return "refused: %s" % type(error).__name__
        print("named:", read([a for a in sys.argv if a.startswith("--train-file=")][0].split("=", 1)[1]))
        print("folder:", read(os.path.join(sys.argv[sys.argv.index("--images") + 1], "cats", "1.txt")))
        print("unnamed:", read(sys.argv[sys.argv.index("--unnamed") + 1][len("hidden:"):]))
    """)
    job = run_job("inputs", package, args=[f"--train-file={named}", "--images", str(folder),
                                            "--unnamed", f"hidden:{unnamed}"])  # not a path: not lent

    assert job.state == JobState.SUCCEEDED, job.error_message
    text = log_text(job)
    assert "named: x,y" in text and "folder: a cat" in text
    assert "unnamed: refused: PermissionError" in text
    assert unnamed.stat().st_mode & 0o077 == 0  # never named, never lent


def test_a_trainer_cannot_signal_the_console(run_job, package_factory):
    package = package_factory("""
        import signal
        try:
            os.kill(int(sys.argv[sys.argv.index("--console-pid") + 1]), signal.SIGTERM)
            print("signalled")
        except PermissionError:
            print("refused")
    """)
    job = run_job("signal", package, args=["--console-pid", str(os.getpid())])

    assert job.state == JobState.SUCCEEDED, job.error_message
    assert "refused" in log_text(job) and "signalled" not in log_text(job)


def test_a_console_whose_data_dir_the_trainer_cannot_reach_refuses_to_start(tmp_path):
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    env = {**os.environ, "AICONSOLE_DATA_DIR": str(hidden / "data"), "AICONSOLE_ADMIN_PASSWORD": "pw-admin-1234"}
    result = subprocess.run([str(Path(sys.executable).with_name("aiconsole")), "up", "--port", "0"], env=env,
                            capture_output=True, text=True, timeout=120)

    assert result.returncode == 2
    assert f"cannot reach {hidden / 'data'}: {hidden} lets only its owner in" in result.stderr
    assert "AICONSOLE_TRAINER_USER=root" in result.stderr


def test_trainers_run_as_root_only_when_asked_and_never_as_an_account_with_id_0(settings, monkeypatch):
    trainer_user.current.cache_clear()
    try:
        settings.TRAINER_USER = "root"
        assert trainer_user.current() is None
        assert trainer_user.describe().startswith("Trainers run as root (AICONSOLE_TRAINER_USER=root)")

        settings.TRAINER_USER = "toor"
        trainer_user.current.cache_clear()
        monkeypatch.setattr(trainer_user.pwd, "getpwnam",
                            lambda name: pwd.struct_passwd((name, "x", 0, 0, "", "/root", "/bin/sh")))
        with pytest.raises(trainer_user.TrainerUserError, match="toor has user or group id 0"):
            trainer_user.current()
    finally:
        trainer_user.current.cache_clear()

