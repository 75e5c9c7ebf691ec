"""Shared fixtures: personas, projects, trainer packages built on the fly, the executor."""

from __future__ import annotations

import os
import tempfile
import textwrap
from pathlib import Path

import pytest
from django.conf import settings
from hypothesis import Phase
from hypothesis import settings as hypothesis_settings

from bench.support.packages import TASK_HEADER, build_package
from bench.support.waiting import wait_for
from tests.helpers import jobs as jobs_helpers

pytest_plugins = ["tests.gcs_emulator", "tests.fixtures.serving"]

# The fast lane's depth for the API fuzz (tests/test_api_fuzz.py), the suite's only Hypothesis
# test: 10 random requests per operation instead of 25, and not the explicit phase, where
# schemathesis sends its boundary cases (some 4,600 requests) and the description's examples.
# `make fast` loads it with --hypothesis-profile=fast-lane; the full suite and CI send them all.
hypothesis_settings.register_profile(
    "fast-lane",
    max_examples=10,
    phases=[phase for phase in Phase if phase not in (Phase.explicit, Phase.explain)],
)


@pytest.fixture(scope="session", autouse=True)
def _trainers_reach_temporary_folders(tmp_path_factory):
    """As root, trainers run as an unprivileged user (aiconsole.trainer_user), and a console
    refuses a data dir that user cannot reach; pytest makes its temporary folders 0700. Let others
    traverse them (not list them), so consoles started on a tmp_path data dir run their trainers."""
    if os.geteuid() != 0:
        return
    base = tmp_path_factory.getbasetemp()
    # Up to the system's temporary folder: pytest-xdist puts each worker's one level deeper.
    top = Path(tempfile.gettempdir()).resolve()
    for folder in [base, *base.parents]:
        if folder == top or not folder.is_relative_to(top):
            break
        folder.chmod(folder.stat().st_mode | 0o011)
    mktemp = tmp_path_factory.mktemp

    def traversable_mktemp(basename: str, numbered: bool = True) -> Path:
        path = mktemp(basename, numbered)
        path.chmod(0o711)
        return path

    tmp_path_factory.mktemp = traversable_mktemp


@pytest.fixture(scope="session", autouse=True)
def _remove_trainer_accounts(tmp_path_factory):
    """As root, each project's trainers run as an account made for it on this host: the consoles of
    this run (on its data dir and on temporary ones) leave none behind, nor the job environments
    built for those accounts in the shared environment cache."""
    yield
    _remove_containers_leftovers()
    if os.geteuid() == 0:
        from aiconsole import trainer_user

        trainer_user.remove_accounts([settings.DATA_DIR, tmp_path_factory.getbasetemp()], [settings.ENV_DIR])


def _remove_containers_leftovers() -> None:
    """What this run's consoles gave containers: mount points in the data dir (before it is removed,
    which would walk into them) and the projects' networks no container uses, of this run's console
    and of the consoles it started whose data dirs are gone (each holds one of the engine's subnets)."""
    from jobs.containers import engine as engines
    from jobs.containers import staged
    from jobs.executor import containers as replica

    staged.release_all()
    engine = engines.available()
    if engine is not None:
        replica.remove_networks(engine, gone_consoles=True)


@pytest.fixture(scope="session")
def django_db_setup(django_db_setup):
    """After each test that commits (``transactional_db``, a live server), Django empties every
    table and then recreates its content types and permissions, as after ``migrate``: some 17 ms
    each time, and nothing of the console's reads those rows (IAM has roles of its own). The tables
    are still emptied; the rows are not made again."""
    from django.contrib.auth.management import create_permissions
    from django.contrib.contenttypes.management import create_contenttypes
    from django.db.models.signals import post_migrate

    post_migrate.disconnect(create_permissions, dispatch_uid="django.contrib.auth.management.create_permissions")
    post_migrate.disconnect(create_contenttypes)


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

    user = get_user_model().objects.create_user(
        username=username, email=f"{username}@example.com", password="pw-" + username
    )
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


# --- trainer packages ---------------------------------------------------------------------------


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
        return jobs_helpers.body(job_id, packageUris=[str(package)], **training_input)

    return make


@pytest.fixture
def run_job(executor, job_body, admin, project):
    """Submit a job as the admin and wait until it reaches a terminal state."""
    from jobs import services
    from jobs.models import TERMINAL_STATES, Job

    def run(job_id: str, package: Path, timeout: float = 180, **training_input) -> Job:
        job = services.submit_job(project, job_body(job_id, package, **training_input), actor=admin)
        wait_for(
            lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, timeout, message=f"job {job_id} to finish"
        )
        # And its runner done with what follows the end (what it lent taken back, its logs closed).
        wait_for(lambda: executor.runners.get(job.pk) is None, 30, message=f"job {job_id}'s runner to let go")
        job.refresh_from_db()
        return job

    return run
