"""Running one job: PREPARING (packages, environment), RUNNING (replicas), and its outcome.

The runner owns nothing the database does not also know: the job's state, its replicas' rows,
pids and exit codes are written as they change, so a restarted console can reconcile.
"""

from __future__ import annotations

import logging
import shutil
import threading
import time
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from aiconsole import archives, storage, trainer_user
from aiconsole.errors import log_internal_error
from aiconsole.walks import WalkLimitError
from jobs import catalogue, runtimes
from jobs.builtin import algorithm as builtin
from jobs.containers import images as container_images
from jobs.containers import replica as containers
from jobs.containers.staged import StagingRefused
from jobs.executor import environments, trials
from jobs.executor.launch import ReplicaSet, replica_failure
from jobs.executor.logs import LogSink
from jobs.executor.replicas import ReplicaProcess, exit_description
from jobs.metrics import points as metrics
from jobs.models import ACTIVE_STATES, Job, JobState, Replica, ReplicaState
from jobs.services import announce_state
from jobs.vertex import launch as vertex

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05


class PrepareError(Exception):
    """The job cannot start; the message becomes its errorMessage."""


def internal_error_message(error_id: str, where: str = "the executor") -> str:
    """A job's errorMessage after a crash: the id to find it by, never console code."""
    return f"Internal error in {where} (id {error_id}); the console's log has the details."


def record_crash(job_pk: int, what: str) -> Job | None:
    """Log the exception being handled under an id and end the job FAILED from whatever state
    it is in (CANCELLING included); the job when it changed, None otherwise."""
    error_id = log_internal_error(logger, what)
    try:
        job = Job.objects.get(pk=job_pk)
        return job if job.mark_crashed(internal_error_message(error_id)) else None
    except Exception:
        logger.exception("Could not record the failure of job %s", job_pk)
        return None


class Cancelled(Exception):
    pass


def work_dir_for(job: Job) -> Path:
    return settings.WORK_DIR / job.project.project_id / job.job_id


def passthrough_env() -> dict[str, str]:
    import os

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


def lend_inputs(training_input: dict, *, project) -> None:
    """The project's account may read the local inputs the job's arguments name in its area."""
    try:
        trainer_user.lend_inputs(training_input.get("args", []), project=project)
    except (OSError, trainer_user.TrainerUserError, WalkLimitError) as error:
        raise PrepareError(
            f"The job's inputs cannot be given to the project's trainers: {getattr(error, 'strerror', None) or error}"
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


def prepare_container(job: Job, training_input: dict, log) -> str | None:
    """A container job's preparation: its images are still here and its project's, its job dir is
    ready and its inputs lent; the job dir."""
    for image in sorted(
        {containers.image_for(training_input, plan.task_type) for plan in catalogue.replica_plan(training_input)}
    ):
        try:
            resolved = container_images.runnable(image, job.project)
        except container_images.ImageUnavailable as error:
            raise PrepareError(str(error)) from None
        log(f"Image {image} is here (sha256:{resolved.image_id[:12]}, {resolved.size / 1e6:.1f} MB).")
    job_dir = prepare_job_dir(training_input, project=job.project)
    lend_inputs(training_input, project=job.project)
    return job_dir


class RunnerBase:
    """What every job runner shares: cancel and shutdown requests, and how a job's run ends.

    Subclasses implement ``_run(job)``; ``_main`` claims the job, opens its log and records a
    crash. ``fenced`` is set (scaled mode) when the job was handed to another worker: the runner
    then stops its processes and writes nothing more about the job.
    """

    fenced = False
    replica_count = 0  # the replica processes it holds on this machine, what admission counts
    label = "Runner"  # for the executor's own log
    thread_prefix = "job"

    def __init__(self, job_pk: int, runner_id: str, on_done=None):
        self.job_pk = job_pk
        self.runner_id = runner_id
        self.on_done = on_done
        self.cancel_requested = threading.Event()
        self.abandoning = False
        self.thread = threading.Thread(target=self._main, name=f"{self.thread_prefix}-{job_pk}", daemon=True)

    def start(self) -> None:
        self.thread.start()

    def cancel(self) -> None:
        self.cancel_requested.set()

    def abandon(self) -> None:
        """The console is shutting down: stop the processes and put the job back in line."""
        self.abandoning = True
        self.cancel_requested.set()

    def _check_cancel(self) -> None:
        if self.cancel_requested.is_set():
            raise Cancelled()

    def _main(self) -> None:
        close_old_connections()
        try:
            job = Job.objects.select_related("project").get(pk=self.job_pk)
            if not job.mark_preparing(self.runner_id):
                return
            self._announce(job)
            self.sink = LogSink(job.pk)
            try:
                self._run(job)
            finally:
                try:
                    self._release()
                finally:
                    self.sink.close()
                    if not self.fenced:
                        take_back_inputs(job)
        except Exception:
            job = None if self.fenced else record_crash(self.job_pk, f"{self.label} for job {self.job_pk} crashed")
            try:
                if job is not None:
                    self._announce(job)
            except Exception:
                logger.exception("Could not announce the failure of job %s", self.job_pk)
        finally:
            connection.close()
            if self.on_done:
                self.on_done(self)

    def _run(self, job: Job) -> None:
        raise NotImplementedError

    def _release(self) -> None:
        """Whatever ``_run`` may have left running, once it returns or raises."""

    def _succeed(self, job: Job, output: dict) -> None:
        if self.fenced:
            return
        self.sink.service("Job completed successfully.")
        self.sink.flush()
        if job.mark_succeeded(output):
            self._announce(job)
        else:
            self._finish_cancel(job, output)

    def _fail(self, job: Job, message: str, output: dict | None = None) -> None:
        if self.fenced:
            return
        self.sink.service(message, severity="ERROR")
        self.sink.flush()
        if job.mark_failed(message, output):
            self._announce(job)
        elif job.state == JobState.CANCELLING:
            self._finish_cancel(job, output)

    def _finish_cancel(self, job: Job, output: dict | None = None) -> None:
        if self.fenced:
            return
        job.refresh_from_db()
        if self.abandoning and job.state in {JobState.PREPARING, JobState.RUNNING}:
            self.sink.service("The console is shutting down; the job starts again when it is back.", severity="WARNING")
            self.sink.flush()
            job.requeue()
            return
        if job.state == JobState.PREPARING:
            job.request_cancel()
        self.sink.service(f"Job was cancelled: {job.error_message}" if job.error_message else "Job was cancelled.")
        self.sink.flush()
        if job.mark_cancelled(output):
            self._announce(job)

    def _training_output(self, job: Job) -> dict:
        plans = {catalogue.replica_label(p.task_type, p.index): p for p in catalogue.replica_plan(job.training_input)}
        runs = [(plans[r.label], r.duration_seconds) for r in job.replicas.all() if r.label in plans]
        return {"consumedMLUnits": catalogue.consumed_ml_units(runs)}

    def _conclude(self, job: Job, outcome: dict, output: dict | None = None) -> None:
        output = output if output is not None else self._training_output(job)
        if outcome.get("cancelled"):
            self._finish_cancel(job, output)
            return
        if outcome.get("timed_out"):
            limit = job.scheduling.get("maxRunningTime", "604800s")
            job.mark_cancelling(
                f"The job exceeded its maximum running time of {limit} "
                "(trainingInput.scheduling.maxRunningTime) and was cancelled."
            )
            self._finish_cancel(job, output)
            return
        if outcome.get("failed_message"):
            self._fail(job, outcome["failed_message"], output)
            return
        failed = outcome.get("failed")
        if failed is not None:
            code = failed.poll()
            message = (
                f"The replica {failed.task_type} {failed.label.rsplit('-', 1)[1]} exited with a "
                f"non-zero status of {exit_description(code)}."
            )
            self._fail(job, replica_failure(job.training_input or {}, message, failed), output)
            return
        self._succeed(job, output)

    def _announce(self, job: Job) -> None:
        announce_state(job)


class JobRunner(RunnerBase):
    """Runs one job in a thread of the executor."""

    def __init__(self, job_pk: int, runner_id: str, on_done=None):
        super().__init__(job_pk, runner_id, on_done)
        self.processes: list[ReplicaProcess] = []
        self.replica_set: ReplicaSet | None = None
        self.replica_count = 0
        self.seed_history: list = []

    # --- the job's life ------------------------------------------------------------------

    def _release(self) -> None:
        # After a crash mid-run, the replicas already started must not outlive the job.
        if any(p.popen is not None and p.poll() is None for p in self.processes):
            self._stop_all()
        if self.replica_set is not None:
            self.replica_set.release()  # containers and their pod, once the job's end is recorded

    def _run(self, job: Job) -> None:
        from jobs.builtin import (
            algorithm as builtin,  # a built-in algorithm runs as our shipped package and module
        )

        training_input = builtin.runnable_input(job.training_input)
        if containers.runs_container(training_input):
            self.sink.service(f"Job {job.job_id} is preparing: checking its container images.")
        else:
            self.sink.service(f"Job {job.job_id} is preparing: fetching trainer packages.")
        profile = vertex.profile_for(job)
        for note in profile.notes if profile is not None else []:
            self.sink.service(note)  # what a Vertex AI request asked that runs differently here, said once
        try:
            environment, job_dir = self._prepare(job, training_input)
        except PrepareError as error:
            self._fail(job, str(error))
            return
        except Cancelled:
            self._finish_cancel(job)
            return
        if self.cancel_requested.is_set() or not job.mark_running():
            self._finish_cancel(job)
            return
        self._announce(job)
        if job.is_hyperparameter_job:
            self._run_trials(job, training_input, environment, job_dir)
            return
        outcome = self._run_replicas(job, training_input, environment, job_dir)
        self._conclude(job, outcome)

    def _run_trials(self, job: Job, training_input: dict, environment, job_dir: str | None) -> None:
        """A hyperparameter tuning job: trials instead of one set of replicas (jobs.executor.trials)."""
        loop = trials.TuningLoop(
            self, job, training_input, environment, job_dir, work_dir_for(job), passthrough_env(), self.seed_history
        )
        outcome = loop.run()
        output = loop.training_output()
        if outcome.get("failed_message"):
            self._fail(job, outcome["failed_message"], output)
            return
        self._conclude(job, outcome, output)

    def _prepare(self, job: Job, training_input: dict):
        if containers.runs_container(training_input):
            return None, prepare_container(job, training_input, self.sink.service)
        files = fetch_packages(training_input, work_dir_for(job) / "packages", self._check_cancel, project=job.project)
        job_dir = prepare_job_dir(training_input, project=job.project)
        lend_inputs(training_input, project=job.project)
        if job.is_hyperparameter_job:
            try:
                self.seed_history = trials.seed_history(job, training_input["hyperparameters"])
            except ValueError as error:
                raise PrepareError(str(error)) from None
        environment = build_environment(
            training_input,
            files,
            self.sink.service,
            self._check_cancel,
            gpu=needs_gpu(training_input),
            account=trainer_account(job.project),
        )
        return environment, job_dir

    def _run_replicas(self, job: Job, training_input: dict, environment, job_dir: str | None) -> dict:
        work = work_dir_for(job) / "replicas"
        self.replica_set = ReplicaSet(
            job=job,
            training_input=training_input,
            environment=environment,
            job_dir=job_dir,
            work=work,
            passthrough=passthrough_env(),
            sink=self.sink,
        )
        self.metrics = metrics.Collector(
            job.pk,
            job_dir=job_dir,
            metric_file=metrics.metric_file(work / catalogue.replica_label("master", 0)),
            say=self.sink.service,
        )
        try:
            self.processes = self.replica_set.build(lambda replica_dir, task_type: metrics.trainer_env(replica_dir))
        except StagingRefused as error:
            return {"failed_message": str(error)}
        self.replica_count = len(self.processes)
        self.replica_set.start()
        try:
            return self._watch(job)
        finally:
            self.metrics.poll(final=True)  # what the replicas reported last

    def _watch(self, job: Job) -> dict:
        """Wait for the master, a failing replica, or a cancel; then stop the rest."""
        master = next(p for p in self.processes if p.task_type == "master")
        finished: set[str] = set()
        failure = None
        deadline = time.monotonic() + job.max_running_seconds
        while True:
            if self.cancel_requested.is_set():
                self._stop_all()
                return {"cancelled": True}
            if time.monotonic() > deadline:
                self._stop_all()
                return {"timed_out": True}
            for process in self.processes:
                code = process.poll()
                if code is None or process.label in finished:
                    continue
                finished.add(process.label)
                process.wait_output()
                self._record_exit(process, code)
                if code != 0 and failure is None:
                    failure = process
            if failure is not None or master.label in finished:
                break
            self.metrics.poll()
            time.sleep(POLL_SECONDS)
        self._stop_all()
        if failure is not None:
            return {"failed": failure}
        return {"succeeded": True}

    def _record_exit(self, process: ReplicaProcess, code: int) -> None:
        state = ReplicaState.SUCCEEDED if code == 0 else ReplicaState.FAILED
        Replica.objects.filter(pk=process.replica_id).update(state=state, exit_code=code, end_time=timezone.now())
        self.sink.service(
            f"{process.label} exited with status {exit_description(code)}.",
            severity="INFO" if code == 0 else "ERROR",
        )

    def _stop_all(self) -> None:
        running = [p for p in self.processes if p.poll() is None]
        threads = [threading.Thread(target=p.stop, args=(settings.STOP_GRACE_SECONDS,)) for p in running]
        for process in running:
            self.sink.service(f"Stopping {process.label}.")
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        for process in running:
            process.wait_output()
            Replica.objects.filter(pk=process.replica_id).update(
                state=ReplicaState.STOPPED, exit_code=process.poll(), end_time=timezone.now()
            )
        for process in self.processes:
            process.stop(0)  # reap anything a finished replica left behind in its group
