"""A job's packages are built as its project's account: a package's build code (its PEP 517
backend, in-tree with ``backend-path``, or an sdist it pins from the index) is the user's code,
and gets nothing of the console's, whether the job is built while it waits in the queue or when
it starts. A package that builds normally still installs and runs.

CI runs as root, so these run there: the build backend is the attacker.
"""

from __future__ import annotations

import io
import json
import os
import pwd
import tarfile
import textwrap
from pathlib import Path

import pytest
from django.conf import settings

from aiconsole.models import TrainerAccount
from bench.support.waiting import wait_for
from jobs import services
from jobs.executor import builds
from jobs.models import TERMINAL_STATES, Job, JobState
from tests.helpers.jobs import log_text

pytestmark = [
    pytest.mark.executor,
    pytest.mark.skipif(os.geteuid() != 0, reason="only a console running as root can switch users"),
]

# An in-tree PEP 517 backend (Python 3.7, standard library only) that probes what it can reach
# from each hook, then writes a real wheel whose module carries what it found.
BACKEND = """
import base64, hashlib, json, os, sys, zipfile

NAME, VERSION, REQUIRES, TARGETS = {name!r}, "1.0", {requires!r}, {targets!r}


def _probe():
    found = {{"uid": os.getuid(), "gid": os.getgid(), "groups": os.getgroups(),
             "console_env": sorted(k for k in os.environ if k.startswith("AICONSOLE") or "DATABASE" in k)}}
    for label, path in TARGETS["read"].items():
        try:
            with open(path, "rb") as handle:
                found[label] = "read %d bytes" % len(handle.read())
        except OSError as error:
            found[label] = "refused: " + type(error).__name__
    for label, folder in TARGETS["write"].items():
        try:
            with open(os.path.join(folder, "planted-by-a-build"), "w") as handle:
                handle.write("a build wrote here")
            found[label] = "written"
        except OSError as error:
            found[label] = "refused: " + type(error).__name__
    try:
        os.listdir(TARGETS["list"])
        found["list_data_dir"] = "listed"
    except OSError as error:
        found["list_data_dir"] = "refused: " + type(error).__name__
    return found


def get_requires_for_build_wheel(config_settings=None):
    with open("requires-hook.json", "w") as handle:
        json.dump(_probe(), handle)
    return []


def _record(data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return digest, len(data)


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    hooks = {{"build_wheel": _probe()}}
    if os.path.exists("requires-hook.json"):
        with open("requires-hook.json") as handle:
            hooks["get_requires_for_build_wheel"] = json.load(handle)
    info = "%s-%s.dist-info" % (NAME, VERSION)
    files = {{NAME + "/" + source: open(os.path.join(NAME, source)).read() for source in os.listdir(NAME)}}
    files.update({{
        NAME + "/found.py": "FOUND = %r\\n" % json.dumps(hooks),
        info + "/METADATA": "Metadata-Version: 2.1\\nName: %s\\nVersion: %s\\n%s" % (
            NAME, VERSION, "".join("Requires-Dist: %s\\n" % r for r in REQUIRES)),
        info + "/WHEEL": "Wheel-Version: 1.0\\nGenerator: hostile\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n",
    }})
    filename = "%s-%s-py3-none-any.whl" % (NAME, VERSION)
    with zipfile.ZipFile(os.path.join(wheel_directory, filename), "w") as wheel:
        record = []
        for path, text in files.items():
            data = text.encode()
            wheel.writestr(path, data)
            digest, size = _record(data)
            record.append("%s,sha256=%s,%d" % (path, digest, size))
        record.append(info + "/RECORD,,")
        wheel.writestr(info + "/RECORD", "\\n".join(record) + "\\n")
    return filename
"""

PYPROJECT = '[build-system]\nrequires = []\nbuild-backend = "backend"\nbackend-path = ["."]\n'

TASK = """
import json
from trainer import found as mine
from hostiledep import found as theirs
print("BUILD-REPORT " + json.dumps({"trainer": json.loads(mine.FOUND), "hostiledep": json.loads(theirs.FOUND)}))
"""


def _sdist(folder: Path, name: str, *, requires: list[str], task: str = "") -> Path:
    targets = {
        "read": {
            "secret_key": str(settings.DATA_DIR / "secret_key"),
            "database": str(settings.DATABASES["default"]["NAME"]),
        },
        "write": {
            "data_dir": str(settings.DATA_DIR),
            "env_dir": str(settings.ENV_DIR),
            "work_dir": str(settings.WORK_DIR),
        },
        "list": str(settings.DATA_DIR),
    }
    backend = BACKEND.format(name=name, requires=requires, targets=targets)
    top = f"{name}-1.0"
    files = {
        f"{top}/PKG-INFO": f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n",
        f"{top}/pyproject.toml": PYPROJECT,
        f"{top}/backend.py": textwrap.dedent(backend),
        f"{top}/{name}/__init__.py": "",
        **({f"{top}/{name}/task.py": task} if task else {}),
    }
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / f"{top}.tar.gz"
    with tarfile.open(target, "w:gz") as tar:
        for path, text in files.items():
            data = text.encode()
            info = tarfile.TarInfo(path)
            info.size, info.mode = len(data), 0o644
            tar.addfile(info, io.BytesIO(data))
    return target


@pytest.fixture
def hostile_package(tmp_path_factory, monkeypatch):
    """The trainer (an sdist with an in-tree backend) and the sdist it pins, served from a local
    package index folder (find-links), both probing the console from their build hooks."""
    index = tmp_path_factory.mktemp("index")
    index.chmod(0o755)  # a package index: anyone may read it
    _sdist(index, "hostiledep", requires=[]).chmod(0o644)
    monkeypatch.setenv("UV_FIND_LINKS", str(index))
    secret_key = settings.DATA_DIR / "secret_key"
    if not secret_key.exists():
        secret_key.write_text("a-key-only-the-console-may-read")
        secret_key.chmod(0o600)
    folder = settings.STORAGE_DIR / "test-packages" / "project-a" / f"hostile-{os.urandom(3).hex()}"
    return _sdist(folder, "trainer", requires=["hostiledep==1.0"], task=TASK)


def _planted() -> list[str]:
    found = []
    for base in (settings.DATA_DIR, settings.ENV_DIR):
        for root, _, names in os.walk(base):
            found += [os.path.join(root, n) for n in names if n == "planted-by-a-build"]
    return found


def _assert_nothing_reached(report: dict, account: pwd.struct_passwd) -> None:
    for package in ("trainer", "hostiledep"):
        for hook, found in report[package].items():
            where = f"{package}'s {hook}"
            assert (found["uid"], found["gid"]) == (account.pw_uid, account.pw_gid), where
            assert found["groups"] in ([], [account.pw_gid]), where
            assert found["console_env"] == [], where
            assert found["secret_key"] == "refused: PermissionError", where
            assert found["database"].startswith("refused:"), where
            assert found["list_data_dir"] == "refused: PermissionError", where
            for folder in ("data_dir", "env_dir", "work_dir"):
                assert found[folder].startswith("refused:"), (where, folder)


@pytest.fixture
def one_slot(settings):
    settings.MAX_REPLICAS = 1


def _report(job) -> dict:
    line = next(line for line in log_text(job).splitlines() if line.startswith("BUILD-REPORT "))
    return json.loads(line.removeprefix("BUILD-REPORT "))


def _account(project) -> pwd.struct_passwd:
    return pwd.getpwuid(TrainerAccount.objects.get(project=project).uid)


def test_a_packages_build_code_runs_as_its_projects_account_and_reaches_nothing_of_the_console(
    hostile_package, run_job, project
):
    job = run_job("hostile_build", hostile_package)

    assert job.state == JobState.SUCCEEDED, job.error_message + log_text(job)[-3000:]
    _assert_nothing_reached(_report(job), _account(project))
    assert _planted() == []
    # The sandbox is gone; the account's own uv cache stays for its next build.
    builds_folder = settings.WORK_DIR / "project-a" / builds.BUILDS_FOLDER
    # Only the account's cache is kept (and the lock its making is taken under): the build folder went.
    assert sorted(p.name for p in builds_folder.iterdir()) == [".cache.lock", builds.CACHE_FOLDER]


def test_a_queued_jobs_build_code_runs_as_its_projects_account_too(
    hostile_package, one_slot, executor, job_body, package_factory, project, admin
):
    blocker = services.submit_job(
        project, job_body("blocker", package_factory('print("HOLDING", flush=True)\ntime.sleep(120)')), actor=admin
    )
    try:
        wait_for(lambda: "HOLDING" in log_text(blocker), 120, message="the first job to hold the only slot")
        queued = services.submit_job(project, job_body("hostile_queued", hostile_package), actor=admin)
        wait_for(
            lambda: (
                "it starts when its replicas fit" in log_text(queued)
                or Job.objects.get(pk=queued.pk).state in TERMINAL_STATES
            ),
            180,
            message="the queued job's environment to be built while it waits",
        )
        assert Job.objects.get(pk=queued.pk).state == JobState.QUEUED, log_text(queued)[-3000:]
        assert _planted() == []
    finally:
        services.cancel_job(Job.objects.get(pk=blocker.pk), actor=admin)
    wait_for(lambda: Job.objects.get(pk=queued.pk).state in TERMINAL_STATES, 180, message="the queued job to run")
    queued.refresh_from_db()

    assert queued.state == JobState.SUCCEEDED, queued.error_message
    assert "Reusing the cached environment" in log_text(queued)  # built while it waited, not again
    _assert_nothing_reached(_report(queued), _account(project))
    assert _planted() == []


def test_the_console_never_starts_a_layer_whose_packages_hold_code_that_runs_at_start(run_job, package_factory):
    """A wheel's ``.pth`` file runs in every interpreter that starts on its environment: the
    trainer's, as the account, and never the console's (installing, compiling, listing)."""
    marker = settings.DATA_DIR / "a-pth-ran-as-root"
    probe = f"import os; os.getuid() == 0 and open({str(marker)!r}, 'w').write('root ran a .pth')\n"
    package = package_factory(
        'import site_probe; print("TRAINER-RAN", flush=True)',
        kind="wheel",
        modules={"trainer/task.py": 'print("TRAINER-RAN", flush=True)\n', "aaa_site_probe.pth": probe},
    )

    job = run_job("pth_probe", package)

    assert job.state == JobState.SUCCEEDED, job.error_message
    assert "TRAINER-RAN" in log_text(job)
    assert not marker.exists()
