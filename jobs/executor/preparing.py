"""Preparing a job to run: its packages fetched and checked, its job dir and inputs given to its
project's account, its environment built (as that account, ``jobs.executor.builds``) or its
images checked. The embedded runner, the queue's prebuild and scaled mode's workers and coordinator
all prepare through these.
"""

from __future__ import annotations

import logging
import os
import shutil
from pathlib import Path

from django.conf import settings

from aiconsole import archives, storage, trainer_user
from aiconsole.walks import WalkLimitError
from jobs import catalogue, runtimes
from jobs.builtin import algorithm as builtin
from jobs.executor import environments
from jobs.models import ACTIVE_STATES, Job

logger = logging.getLogger(__name__)


class PrepareError(Exception):
    """The job cannot start; the message becomes its errorMessage."""


class Cancelled(Exception):
    pass


def work_dir_for(job: Job) -> Path:
    return settings.WORK_DIR / job.project.project_id / job.job_id


def passthrough_env() -> dict[str, str]:
    return {name: os.environ[name] for name in settings.TRAINER_ENV_PASSTHROUGH if name in os.environ}


def fetch_packages(training_input: dict, package_dir: Path, check_cancel=lambda: None, *, project) -> list[Path]:
    """Fetch the job's packageUris into ``package_dir`` and check them before anything installs them.

    Local ones must lie in ``project``'s storage area (or a shared root), also for jobs stored before
    that rule: checked again here, at run time."""
    shutil.rmtree(package_dir, ignore_errors=True)
    package_dir.mkdir(parents=True)

    files, infos = [], []
    # A built-in algorithm's package is the console's own wheel (builtin.runnable_input), in no project's area.
    own = {str(builtin.package_path())} if builtin.algos.for_training_input(training_input) else set()
    for uri in training_input.get("packageUris", []):
        check_cancel()
        try:
            path = storage.fetch(uri, package_dir, project=None if uri in own else project)
            infos.append(archives.inspect_package(path))
        except (storage.StorageError, archives.ArchiveError) as error:
            raise PrepareError(f"Failed to prepare the trainer package {uri}: {error}") from None
        files.append(path)
    try:
        archives.require_module(infos, training_input["pythonModule"])
    except archives.ArchiveError as error:
        raise PrepareError(str(error)) from None
    return files


def prepare_job_dir(training_input: dict, *, project) -> str | None:
    """The job's jobDir, created when local; it must lie in ``project``'s storage area."""
    if not training_input.get("jobDir"):
        return None
    try:
        return give_to_trainers(storage.prepare_job_dir(training_input["jobDir"], project=project), project)
    except storage.StorageError as error:
        raise PrepareError(f"The job directory cannot be used: {error}") from None


def trainer_account(project) -> trainer_user.TrainerUser | None:
    """The account the project's trainers run as (None: the console's own), as a PrepareError if unusable."""
    try:
        return trainer_user.for_project(project)
    except trainer_user.TrainerUserError as error:
        raise PrepareError(str(error)) from None


def give_to_trainers(job_dir: str, project) -> str:
    try:
        return trainer_user.give_job_dir(job_dir, project)
    except (OSError, trainer_user.TrainerUserError, WalkLimitError) as error:
        raise PrepareError(
            f"The job directory {job_dir} cannot be given to the project's trainers: "
            f"{getattr(error, 'strerror', None) or error}"
        ) from None


def prepare_arguments(training_input: dict, *, project) -> list[Path]:
    """What the job's arguments name in its project's area: its stored inputs lent to the
    project's account for reading, and the output folders not there yet (``--model-dir`` beside the
    job dir) made and given to it (``trainer_user.give_output_folders``); the folders made."""
    args = training_input.get("args", [])
    try:
        trainer_user.lend_inputs(args, project=project)
        return trainer_user.give_output_folders(args, project=project)
    except (OSError, trainer_user.TrainerUserError, WalkLimitError, storage.StorageError) as error:
        raise PrepareError(
            f"The folders the job's arguments name cannot be given to the project's trainers: "
            f"{getattr(error, 'strerror', None) or error}"
        ) from None


def take_back_inputs(job: Job) -> None:
    """What the job's arguments lent its project's account is taken back once it ended, except what
    another running job of the project names too."""
    if not trainer_user.switching():
        return
    others = (
        Job.objects.filter(project_id=job.project_id, state__in=ACTIVE_STATES)
        .exclude(pk=job.pk)
        .values_list("training_input", flat=True)
    )
    try:
        trainer_user.take_back_inputs(
            (job.training_input or {}).get("args", []),
            project=job.project,
            still_named=[(other or {}).get("args", []) for other in others],
        )
    except (OSError, trainer_user.TrainerUserError) as error:
        logger.warning("Could not take back the inputs job %s was lent: %s", job.pk, error)


def build_environment(
    training_input: dict,
    files: list[Path],
    log,
    check_cancel=lambda: None,
    *,
    gpu: bool = False,
    account: trainer_user.TrainerUser | None = None,
):
    """The runtime version's cached environment plus a layer with the job's packages.

    ``gpu``: the GPU-capable build of the runtime (for replicas with GPUs); the CPU build otherwise.
    ``account``: the project's, whose group alone may read the layer.
    """
    check_cancel()
    _, why, differs = runtimes.python_choice(training_input.get("runtimeVersion"), training_input.get("pythonVersion"))
    log(why, **({"severity": "WARNING"} if differs else {}))
    try:
        runtime = environments.runtime_environment(
            training_input.get("runtimeVersion"),
            log,
            python_version=training_input.get("pythonVersion"),
            variant="gpu" if gpu else "cpu",
        )
        check_cancel()
        environment = environments.job_environment(runtime, files, log, account)
    except environments.EnvironmentError_ as error:
        raise PrepareError(f"Failed to install the trainer packages. {error}") from None
    log(environments.describe(runtime, environment.frozen()))
    check_cancel()
    return environment


def needs_gpu(training_input: dict) -> bool:
    """Whether the job runs on the runtime's GPU-capable build: a replica asks for GPUs and this
    host has them (in embedded mode accelerators are otherwise labels, and the CPU build is far
    smaller). ``AICONSOLE_GPU_BUILD`` = always / never overrides the host check."""
    return gpu_build(
        any(
            plan.accelerator_count and "TPU" not in (plan.accelerator_type or "")
            for plan in catalogue.replica_plan(training_input)
        )
    )


def gpu_build(wants_gpus: bool) -> bool:
    if not wants_gpus or settings.GPU_BUILD == "never":
        return False
    return settings.GPU_BUILD == "always" or host_has_gpus()


def host_has_gpus() -> bool:
    return Path("/proc/driver/nvidia/gpus").is_dir() or Path("/dev/nvidia0").exists()
