"""Shared fixtures: personas, projects, trainer packages built on the fly, the executor."""

from __future__ import annotations

import io
import os
import tarfile
import textwrap
import time
import zipfile
from collections.abc import Callable
from pathlib import Path

import pytest
from django.conf import settings

pytest_plugins = ["tests.gcs_emulator"]


def wait_for(predicate: Callable[[], object], timeout: float = 60.0, interval: float = 0.05,
             message: str = "condition") -> object:
    """Poll until the predicate returns something truthy; fail with a message on timeout."""
    deadline = time.monotonic() + timeout
    while True:
        result = predicate()
        if result:
            return result
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {message}")
        time.sleep(interval)


@pytest.fixture(scope="session", autouse=True)
def _trainers_reach_temporary_folders(tmp_path_factory):
    """As root, trainers run as an unprivileged user (aiconsole.trainer_user), and a console
    refuses a data dir that user cannot reach; pytest makes its temporary folders 0700. Let others
    traverse them (not list them), so consoles started on a tmp_path data dir run their trainers."""
    if os.geteuid() != 0:
        return
    base = tmp_path_factory.getbasetemp()
    for folder in (base.parent, base):
        folder.chmod(folder.stat().st_mode | 0o011)
    mktemp = tmp_path_factory.mktemp

    def traversable_mktemp(basename: str, numbered: bool = True) -> Path:
        path = mktemp(basename, numbered)
        path.chmod(0o711)
        return path

    tmp_path_factory.mktemp = traversable_mktemp


@pytest.fixture(autouse=True)
def _fast_password_hashing(settings):
    """The default hasher costs ~0.3 s per user: far too slow for persona-heavy tests."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


# --- personas -----------------------------------------------------------------------------------


@pytest.fixture
def project(db):
    from aiconsole.models import Project

    return Project.objects.create(project_id="project-a", display_name="Project A")


@pytest.fixture
def other_project(db):
    from aiconsole.models import Project

    return Project.objects.create(project_id="project-b", display_name="Project B")


def _member(username, role, project):
    from django.contrib.auth import get_user_model

    from aiconsole import iam

    user = get_user_model().objects.create_user(username=username, email=f"{username}@example.com",
                                                password="pw-" + username)
    if role:
        iam.grant(user, role, project)
    return user


@pytest.fixture
def admin(project):
    return _member("alice_admin", "roles/ml.admin", project)


@pytest.fixture
def developer(project):
    return _member("dave_dev", "roles/ml.developer", project)


@pytest.fixture
def viewer(project):
    return _member("vera_viewer", "roles/ml.viewer", project)


@pytest.fixture
def outsider(other_project):
    return _member("olga_outsider", "roles/ml.admin", other_project)


# --- queued jobs (no executor) ----------------------------------------------------------------

PACKAGE = "gs://trainer-bucket/trainer-0.1.tar.gz"


def body(job_id: str, **training_input) -> dict:
    """A valid BASIC job body; nothing fetches its package unless an executor runs."""
    return {"jobId": job_id, "trainingInput": {
        "scaleTier": "BASIC", "packageUris": [PACKAGE], "pythonModule": "trainer.task",
        "region": "us-central1", "runtimeVersion": "2.11", "pythonVersion": "3.7", **training_input}}


def submit(project, job_id: str, actor):
    from jobs import services

    return services.submit_job(project, body(job_id), actor=actor)


# --- trainer packages ---------------------------------------------------------------------------

TASK_HEADER = "import json, os, sys, time\n"


def _tar_add(tar: tarfile.TarFile, name: str, data: bytes) -> None:
    info = tarfile.TarInfo(name)
    info.size = len(data)
    info.mode = 0o644
    tar.addfile(info, io.BytesIO(data))


def build_package(directory: Path, modules: dict[str, str], *, name: str = "trainer", version: str = "0.1",
                  requires: list[str] | None = None, kind: str = "sdist") -> Path:
    """Write a real sdist or wheel of a tiny trainer package; ``modules`` maps paths to source."""
    directory.mkdir(parents=True, exist_ok=True)
    requires = requires or []
    files = {path: textwrap.dedent(source) for path, source in modules.items()}
    for path in list(files):
        package_init = str(Path(path).parent / "__init__.py")
        if "/" in path and package_init not in files:
            files[package_init] = ""
    if kind == "wheel":
        target = directory / f"{name}-{version}-py3-none-any.whl"
        dist_info = f"{name}-{version}.dist-info"
        metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
            f"Requires-Dist: {r}\n" for r in requires)
        with zipfile.ZipFile(target, "w") as wheel:
            for path, source in files.items():
                wheel.writestr(path, source)
            wheel.writestr(f"{dist_info}/METADATA", metadata)
            wheel.writestr(f"{dist_info}/WHEEL", "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
            wheel.writestr(f"{dist_info}/RECORD", "")
        return target
    target = directory / f"{name}-{version}.tar.gz"
    top = f"{name}-{version}"
    packages = sorted({str(Path(p).parent).replace("/", ".") for p in files if "/" in p})
    setup_py = (f"from setuptools import setup\nsetup(name={name!r}, version={version!r}, "
                f"packages={packages!r}, install_requires={requires!r})\n")
    pkg_info = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n" + "".join(
        f"Requires-Dist: {r}\n" for r in requires)
    with tarfile.open(target, "w:gz") as tar:
        _tar_add(tar, f"{top}/PKG-INFO", pkg_info.encode())
        _tar_add(tar, f"{top}/setup.py", setup_py.encode())
        for path, source in files.items():
            _tar_add(tar, f"{top}/{path}", source.encode())
    return target


@pytest.fixture
def package_factory(tmp_path):
    """Build trainer packages inside the server's storage root, where packageUris may point."""
    counter = iter(range(1_000_000))

    def make(task_source: str, **kwargs) -> Path:
        folder = settings.STORAGE_DIR / "test-packages" / "project-a" / f"{tmp_path.name}-{next(counter)}"
        modules = kwargs.pop("modules", None) or {"trainer/task.py": TASK_HEADER + textwrap.dedent(task_source)}
        return build_package(folder, modules, **kwargs)

    return make


# --- the executor -------------------------------------------------------------------------------


@pytest.fixture
def executor(transactional_db):
    """The embedded executor, running in this process as ``aiconsole up`` runs it."""
    from jobs.executor import controller

    instance = controller.start()
    yield instance
    controller.stop()


@pytest.fixture
def job_body():
    def make(job_id: str, package: Path, **training_input) -> dict:
        body = {
            "jobId": job_id,
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": [str(package)],
                "pythonModule": "trainer.task",
                "region": "us-central1",
                "runtimeVersion": "2.11",
                "pythonVersion": "3.7",
                **training_input,
            },
        }
        return body

    return make


@pytest.fixture
def run_job(executor, job_body, admin, project):
    """Submit a job as the admin and wait until it reaches a terminal state."""
    from jobs import services
    from jobs.models import TERMINAL_STATES, Job

    def run(job_id: str, package: Path, timeout: float = 180, **training_input) -> Job:
        job = services.submit_job(project, job_body(job_id, package, **training_input), actor=admin)
        wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, timeout,
                 message=f"job {job_id} to finish")
        job.refresh_from_db()
        return job

    return run


def log_text(job) -> str:
    return "\n".join(job.log_lines.order_by("pk").values_list("message", flat=True))
