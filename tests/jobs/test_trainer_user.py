"""A root console runs each project's trainers as an account of that project's own, which reaches
none of the console's secrets and nothing of another project's.

CI runs as root, so these tests run there: the trainer is the attacker, trying what a user's code
could try against the console it runs beside and against another project's trainers.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import re
import stat
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
from django.conf import settings

from aiconsole import storage, trainer_user
from aiconsole.errors import InvalidArgument
from aiconsole.models import TrainerAccount
from bench.support.packages import TASK_HEADER, build_package
from bench.support.waiting import wait_for
from jobs import services
from jobs.models import TERMINAL_STATES, Job, JobState
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


def _account_of(project) -> pwd.struct_passwd:
    return pwd.getpwuid(TrainerAccount.objects.get(project=project).uid)


def test_a_trainer_runs_as_its_projects_account_and_reaches_none_of_the_console_secrets(
    run_job, package_factory, project
):
    secret_key = settings.DATA_DIR / "secret_key"
    secret_key.write_text("a-key-only-the-console-may-read")
    secret_key.chmod(0o600)
    other = storage.save_upload(io.BytesIO(b"another project's trainer"), "trainer.tar.gz", project="project-b")
    job_dir = settings.STORAGE_DIR / "job-dirs" / "project-a" / "attacker"

    job = run_job(
        "attacker",
        package_factory(ATTACKER),
        jobDir=str(job_dir),
        args=[
            "--console-pid",
            str(os.getpid()),
            "--database",
            str(settings.DATABASES["default"]["NAME"]),
            "--secret-key",
            str(secret_key),
            "--other",
            str(other),
            "--data-dir",
            str(settings.DATA_DIR),
        ],
    )

    assert job.state == JobState.SUCCEEDED, job.error_message
    report = json.loads((job_dir / "report.json").read_text())
    account = _account_of(project)
    assert account.pw_uid in settings.TRAINER_UIDS and account.pw_name == f"aic-{account.pw_uid}"
    assert f"projects/project-a {settings.DATA_DIR}" in account.pw_gecos
    assert (report["user"], report["uid"], report["gid"]) == (account.pw_name, account.pw_uid, account.pw_gid)
    assert report["groups"] in ([], [account.pw_gid])
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


def test_a_trainer_reads_the_stored_inputs_its_job_names_for_the_jobs_life_only(run_job, package_factory):
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
    job = run_job(
        "inputs", package, args=[f"--train-file={named}", "--images", str(folder), "--unnamed", f"hidden:{unnamed}"]
    )  # not a path: not lent

    assert job.state == JobState.SUCCEEDED, job.error_message
    text = log_text(job)
    assert "named: x,y" in text and "folder: a cat" in text
    assert "unnamed: refused: PermissionError" in text
    assert unnamed.stat().st_mode & 0o077 == 0  # never named, never lent
    # Taken back once the job ended: no group may read them any more.
    for path in (named, folder / "cats" / "1.txt"):
        assert path.stat().st_mode & 0o070 == 0, oct(path.stat().st_mode)
    assert stat.S_IMODE((folder / "cats").stat().st_mode) & 0o077 == 0o010  # traversal only


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


# --- one project against another -------------------------------------------------------------------

VICTIM = """
    with open(os.path.join(sys.argv[sys.argv.index("--job-dir") + 1], "private.txt"), "w") as handle:
        handle.write("project a's results")
    print("READY", flush=True)
    time.sleep(150)
"""

INTRUDER = """
    import ctypes
    target = int(sys.argv[sys.argv.index("--pid") + 1])
    report = {"uid": os.getuid()}
    def attempt(name, action):
        try:
            action()
            report[name] = "done"
        except OSError as error:
            report[name] = "refused: %s" % type(error).__name__
    def ptrace():
        libc = ctypes.CDLL(None, use_errno=True)
        if libc.ptrace(16, target, 0, 0) != 0:  # PTRACE_ATTACH
            number = ctypes.get_errno()
            raise OSError(number, os.strerror(number))
        libc.ptrace(17, target, 0, 0)  # PTRACE_DETACH
    attempt("environ", lambda: open("/proc/%d/environ" % target, "rb").read())
    attempt("signal", lambda: os.kill(target, 0))
    attempt("ptrace", ptrace)
    for name in ("--job-file", "--lent"):
        attempt(name.strip("-"), lambda: open(sys.argv[sys.argv.index(name) + 1]).read())
    print("REPORT " + json.dumps(report))
"""


def _trainer_pid(job) -> int:
    """The trainer itself: the child of the replica's reaper."""
    reaper = job.replicas.get().pid
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == reaper:
            return int(entry.name)
    raise AssertionError("the trainer process was not found")


def test_a_projects_trainers_cannot_read_signal_or_debug_another_projects(
    executor, job_body, package_factory, project, other_project, admin, outsider
):
    lent = storage.save_upload(io.BytesIO(b"project a's data"), "data.csv", project="project-a")
    victim_dir = settings.STORAGE_DIR / "job-dirs" / "project-a" / "victim"
    victim = services.submit_job(
        project,
        job_body("victim", package_factory(VICTIM), jobDir=str(victim_dir), args=[f"--data={lent}"]),
        actor=admin,
    )
    try:
        wait_for(lambda: "READY" in log_text(victim), 180, message="project A's trainer to start")
        target = _trainer_pid(victim)
        intruder_package = build_package(
            settings.STORAGE_DIR / "test-packages" / "project-b" / "intruder",
            {"trainer/task.py": TASK_HEADER + textwrap.dedent(INTRUDER)},
        )
        intruder = services.submit_job(
            other_project,
            job_body(
                "intruder",
                intruder_package,
                args=["--pid", str(target), "--job-file", str(victim_dir / "private.txt"), "--lent", str(lent)],
            ),
            actor=outsider,
        )
        wait_for(
            lambda: Job.objects.get(pk=intruder.pk).state in TERMINAL_STATES,
            180,
            message="project B's trainer to finish",
        )
        found = re.search(r"REPORT (.*)", log_text(intruder))
        assert found, log_text(intruder)
        report = json.loads(found.group(1))
    finally:
        services.cancel_job(Job.objects.get(pk=victim.pk), actor=admin)

    a, b = _account_of(project), _account_of(other_project)
    assert a.pw_uid != b.pw_uid and report["uid"] == b.pw_uid
    assert Path(f"/proc/{target}").stat().st_uid == a.pw_uid or not Path(f"/proc/{target}").exists()
    assert report == {
        "uid": b.pw_uid,
        "environ": "refused: PermissionError",
        "signal": "refused: PermissionError",
        "ptrace": "refused: PermissionError",
        "job-file": "refused: PermissionError",
        "lent": "refused: PermissionError",
    }


# --- the root race (issue: a trainer swaps a folder for a link while root lends a path) ---------------

SWAPPER = """
    import ctypes
    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    data_dir = sys.argv[sys.argv.index("--data-dir") + 1]
    real, link = os.path.join(job_dir, "d"), os.path.join(job_dir, "link")
    os.makedirs(real, exist_ok=True)
    for name in ("secret_key", "aiconsole.sqlite3"):
        with open(os.path.join(real, name), "w") as handle:
            handle.write("harmless")
    os.makedirs(os.path.join(real, "out"), exist_ok=True)
    if not os.path.lexists(link):
        os.symlink(data_dir, link)
    libc = ctypes.CDLL(None, use_errno=True)
    print("SWAPPING", flush=True)
    deadline, swaps = time.time() + float(sys.argv[sys.argv.index("--seconds") + 1]), 0
    while time.time() < deadline:
        libc.renameat2(-100, real.encode(), -100, link.encode(), 2)  # RENAME_EXCHANGE, atomically
        swaps += 1
        if swaps % 200 == 0:
            for name in ("secret_key", "aiconsole.sqlite3"):
                try:
                    with open(os.path.join(data_dir, name), "rb") as handle:
                        print("STOLE", name, handle.read(16), flush=True)
                except OSError:
                    pass
    print("SWAPS", swaps, flush=True)
"""

NAMER = """
    print("named", len(sys.argv))
"""


def _snapshot(data_dir: Path, project_id: str) -> dict[str, tuple[int, int, int]]:
    """Owner, group and mode of everything in the data dir outside the project's own folders."""
    own = [data_dir / "storage" / folder / project_id for folder in ("job-dirs", "packages", "test-packages")]
    own.append(data_dir / "work" / project_id)
    found = {}
    for folder, folders, files in os.walk(data_dir):
        if any(Path(folder).is_relative_to(area) for area in own):
            folders[:] = []
            continue
        for name in [*folders, *files, ""]:
            path = Path(folder, name)
            try:
                info = path.lstat()
            except FileNotFoundError:
                continue
            found[str(path)] = (info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode))
    return found


def test_a_trainer_swapping_a_folder_for_a_link_while_root_lends_its_path_gains_nothing(
    executor, job_body, package_factory, project, admin, run_job
):
    """A trainer of project A swaps a folder of its job dir with a link to the data dir, over and over,
    while other jobs of A name paths through that folder (90+ times each), use a folder below it as
    their job dir, and the analysis page reads a file through it. For at least a minute, nothing
    outside A's folders may change owner or mode, the trainer may read no secret, and no read on
    A's behalf may return one."""
    from jobs.builtin import algorithm as builtin

    secret = "the-console's-real-secret-key"
    (settings.DATA_DIR / "secret_key").write_text(secret)
    (settings.DATA_DIR / "secret_key").chmod(0o600)
    swap_dir = settings.STORAGE_DIR / "job-dirs" / "project-a" / "swapper"
    warm = run_job("warm_up", package_factory(NAMER))  # accounts, environments and folders made first
    assert warm.state == JobState.SUCCEEDED, warm.error_message
    before = _snapshot(settings.DATA_DIR, "project-a")
    assert before[str(settings.DATA_DIR / "secret_key")][2] == 0o600

    swapper = services.submit_job(
        project,
        job_body(
            "swapper",
            package_factory(SWAPPER),
            jobDir=str(swap_dir),
            args=["--data-dir", str(settings.DATA_DIR), "--seconds", "150"],
        ),
        actor=admin,
    )
    namer = package_factory(NAMER)
    wait_for(lambda: "SWAPPING" in log_text(swapper), 180, message="the swapping trainer to start")
    started, rounds, refused, leaked = time.monotonic(), 0, 0, []
    try:
        while time.monotonic() - started < 65 and rounds < 2000:
            rounds += 1
            through = swap_dir / "d"
            args = [f"--key={through / 'secret_key'}", str(through), f"--db={through / 'aiconsole.sqlite3'}"] * 32
            # Every other job also gets a job dir through the swapped folder, to be made and handed over.
            job_dir = (
                through / "out" / str(rounds) if rounds % 2 else settings.STORAGE_DIR / "job-dirs" / "project-a" / "n"
            )
            try:
                job = run_job(f"namer_{rounds}", namer, jobDir=str(job_dir), args=args)
                assert job.state in (JobState.SUCCEEDED, JobState.FAILED), job.error_message
            except InvalidArgument:
                refused += 1  # the path changed under the submit's own check: refused, and that is fine
            for _ in range(20):
                try:
                    data, _ = builtin.read_csv_bytes(str(through / "secret_key"), project=project)
                except Exception:  # refused, or a changed path: never the secret
                    continue
                if secret.encode() in data:
                    leaked.append(data)
    finally:
        services.cancel_job(Job.objects.get(pk=swapper.pk), actor=admin)
        wait_for(lambda: Job.objects.get(pk=swapper.pk).state in TERMINAL_STATES, 60, message="the swapper to stop")

    after = _snapshot(settings.DATA_DIR, "project-a")
    changed = {
        path: (before[path], after[path]) for path in before.keys() & after.keys() if before[path] != after[path]
    }
    assert changed == {}
    assert "STOLE" not in log_text(Job.objects.get(pk=swapper.pk))
    assert leaked == []
    assert (settings.DATA_DIR / "secret_key").read_text() == secret
    assert rounds - refused >= 5 and time.monotonic() - started >= 60


# --- accounts ------------------------------------------------------------------------------------------


def test_a_console_whose_data_dir_the_trainers_cannot_reach_refuses_to_start(tmp_path):
    hidden = tmp_path / "private"
    hidden.mkdir(mode=0o700)
    env = {**os.environ, "AICONSOLE_DATA_DIR": str(hidden / "data"), "AICONSOLE_ADMIN_PASSWORD": "pw-admin-1234"}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("aiconsole")), "up", "--port", "0"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode == 2
    assert f"cannot reach {hidden / 'data'}: {hidden} lets only its owner in" in result.stderr
    assert "AICONSOLE_TRAINER_USER=root" in result.stderr


def test_an_account_name_other_than_root_is_refused_with_the_reason(tmp_path):
    env = {**os.environ, "AICONSOLE_DATA_DIR": str(tmp_path), "AICONSOLE_TRAINER_USER": "shared-trainer"}
    result = subprocess.run(
        [str(Path(sys.executable).with_name("aiconsole")), "manage", "check"],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert result.returncode != 0
    assert "AICONSOLE_TRAINER_USER=shared-trainer: trainers run as an account of their own project" in result.stderr


def test_trainers_run_as_root_only_when_asked(settings):
    settings.TRAINER_USER = "root"
    assert trainer_user.for_project(object()) is None
    assert trainer_user.describe().startswith("Trainers run as root (AICONSOLE_TRAINER_USER=root)")


def test_consoles_on_one_host_never_share_an_account(db, project, settings, tmp_path, monkeypatch):
    first = trainer_user.for_project(project)
    TrainerAccount.objects.all().delete()
    settings.DATA_DIR = tmp_path / "another-console"  # another console, its own database
    monkeypatch.setattr(trainer_user, "_accounts", {})
    try:
        second = trainer_user.for_project(type(project).objects.get(pk=project.pk))
        assert second.uid != first.uid
        assert pwd.getpwuid(first.uid).pw_gecos != pwd.getpwuid(second.uid).pw_gecos
    finally:
        trainer_user.remove_accounts([settings.DATA_DIR])


def test_an_id_another_account_holds_is_refused_with_the_reason(db, project, monkeypatch):
    TrainerAccount.objects.create(project=project, uid=settings.TRAINER_UIDS.start)
    foreign = pwd.struct_passwd(
        (
            "someone",
            "x",
            settings.TRAINER_UIDS.start,
            settings.TRAINER_UIDS.start,
            "a person",
            "/home/someone",
            "/bin/sh",
        )
    )
    monkeypatch.setattr(trainer_user.pwd, "getpwuid", lambda uid: foreign)
    monkeypatch.setattr(trainer_user, "_accounts", {})

    with pytest.raises(
        trainer_user.TrainerUserError,
        match=r"belongs on this host to someone, an account this "
        r"console did not make",
    ):
        trainer_user.for_project(project)


def test_a_job_dir_that_is_the_projects_whole_area_is_handed_over(db, project):
    area = settings.STORAGE_DIR / "outputs" / project.project_id
    area.mkdir(parents=True)
    (area / "earlier.txt").write_text("left by the console")

    trainer_user.give_job_dir(str(area), project)

    account = TrainerAccount.objects.get(project=project).uid
    assert (area.stat().st_uid, (area / "earlier.txt").stat().st_uid) == (account, account)
    assert stat.S_IMODE(area.parent.stat().st_mode) & 0o001  # others traverse the folder every project shares


def test_a_trainer_writes_the_output_folder_its_arguments_name_beside_its_job_dir(run_job, package_factory, project):
    """As on Cloud Storage, where folders need no making: ``--model-dir`` beside the job dir is
    made for the project's account before the trainer starts."""
    area = settings.STORAGE_DIR / "outputs" / "project-a" / "beside"
    trainer = """
        model_dir = sys.argv[sys.argv.index("--model-dir") + 1]
        with open(os.path.join(model_dir, "model.txt"), "w") as handle:
            handle.write("weights")
    """
    job = run_job(
        "beside", package_factory(trainer), jobDir=str(area / "job"), args=["--model-dir", str(area / "model")]
    )

    assert job.state == JobState.SUCCEEDED, job.error_message
    assert (area / "model" / "model.txt").read_text() == "weights"
    assert (area / "model").stat().st_uid == _account_of(project).pw_uid
