"""Running one job: PREPARING (packages, environment), RUNNING (replicas), and its outcome.

The runner owns nothing the database does not also know: the job's state, its replicas' rows,
pids and exit codes are written as they change, so a restarted console can reconcile.
"""

from __future__ import annotations

import logging
import threading
import time

from django.db import close_old_connections, connection
from django.utils import timezone

from aiconsole.errors import log_internal_error
from jobs import catalogue, kinds
from jobs.containers.staged import StagingRefused
from jobs.executor import gcs, strategies, trials
from jobs.executor.launch import ReplicaSet
from jobs.executor.preparing import (
    Cancelled,
    PrepareError,
    needs_gpu,
    passthrough_env,
    take_back_inputs,
    trainer_account,
    work_dir_for,
)
from jobs.executor.replicas import ReplicaProcess, exit_description
from jobs.executor.sink import LogSink
from jobs.metrics import points as metrics
from jobs.metrics import system
from jobs.models import Job, JobState, Replica, ReplicaState
from jobs.services import announce_state
from jobs.webaccess import holds
from jobs.webaccess.host import EMBEDDED

logger = logging.getLogger(__name__)

POLL_SECONDS = 0.05


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


class RunnerBase:
    """What every job runner shares: cancel and shutdown requests, and how a job's run ends.

    Subclasses implement ``_run(job)``; ``_main`` claims the job, opens its log and records a
    crash. ``fenced`` is set (scaled mode) when the job was handed to another worker: the runner
    then stops its processes and writes nothing more about the job.
    """

    fenced = False
    launch: strategies.Launch | None = None  # how its replicas run, decided when it starts
    replica_count = 0  # the replica processes it holds on this machine, what admission counts
    label = "Runner"  # for the executor's own log
    thread_prefix = "job"

    def __init__(self, job_pk: int, runner_id: str, on_done=None):
        self.job_pk = job_pk
        self.runner_id = runner_id
        self.on_done = on_done
        self.cancel_requested = threading.Event()
        self.abandoning = False
        self.sampler = system.Sampler(f"{self.thread_prefix}-{job_pk}-usage")  # its replicas' use of the machine
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
            self.announce(job)
            self.sink = LogSink(job.pk)
            try:
                self._run(job)
            finally:
                try:
                    self._release()
                finally:
                    self.sampler.close()
                    self.sink.close()
                    if not self.fenced:
                        take_back_inputs(job)
        except Exception:
            job = None if self.fenced else record_crash(self.job_pk, f"{self.label} for job {self.job_pk} crashed")
            try:
                if job is not None:
                    self.announce(job)
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

    def _prepared(self, job: Job, prepare, *refusals: type[Exception]):
        """``prepare()``, then the job RUNNING and announced; None when it failed preparing (one of
        ``refusals``: its message is the job's error), was cancelled meanwhile, or could not run."""
        try:
            prepared = prepare()
        except refusals as error:
            self._fail(job, str(error))
            return None
        except Cancelled:
            self._finish_cancel(job)
            return None
        if self.cancel_requested.is_set() or not job.mark_running():
            self._finish_cancel(job)
            return None
        self.announce(job)
        return prepared

    def _succeed(self, job: Job, output: dict) -> None:
        if self.fenced:
            return
        self.sink.service("Job completed successfully.")
        self.sink.flush()
        if job.mark_succeeded(output):
            kinds.job_succeeded(job)
            self.announce(job)
        else:
            self._finish_cancel(job, output)

    def _fail(self, job: Job, message: str, output: dict | None = None) -> None:
        if self.fenced:
            return
        self.sink.service(message, severity="ERROR")
        self.sink.flush()
        if job.mark_failed(message, output):
            self.announce(job)
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
            self.announce(job)

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
            self._fail(job, self.launch.failure(message, failed) if self.launch else message, output)
            return
        self._succeed(job, output)

    def announce(self, job: Job) -> None:
        announce_state(job)


class JobRunner(RunnerBase):
    """Runs one job in a thread of the executor."""

    def __init__(self, job_pk: int, runner_id: str, on_done=None):
        super().__init__(job_pk, runner_id, on_done)
        self.processes: list[ReplicaProcess] = []
        self.replica_set: ReplicaSet | None = None
        self.replica_count = 0
        self.seed_history: list = []
        self.gcs_view: gcs.View | None = None

    # --- the job's life ------------------------------------------------------------------

    def _release(self) -> None:
        # After a crash mid-run, the replicas already started must not outlive the job.
        if any(p.popen is not None and p.poll() is None for p in self.processes):
            self._stop_all()
        if self.replica_set is not None:
            self.replica_set.release()  # containers and their pod, once the job's end is recorded
        if self.gcs_view is not None:
            self.gcs_view.stop()

    def _run(self, job: Job) -> None:
        self.launch = launch = strategies.strategy_for(job)  # decided once, handed on from here
        self.sink.service(f"Job {job.job_id} is preparing: {launch.preparing()}.")
        for note in launch.profile.notes if launch.profile is not None else []:
            self.sink.service(note)  # what a Vertex AI request asked that runs differently here, said once
        prepared = self._prepared(job, lambda: self._prepare(job, launch), PrepareError)
        if prepared is None:
            return
        environment, job_dir = prepared
        self.gcs_view = gcs.start(job, trainer_account(job.project), self.sink.service)
        launch.gcs = self.gcs_view.path if self.gcs_view is not None else None
        if job.is_hyperparameter_job:
            self._run_trials(job, launch, environment, job_dir)
            return
        outcome = self._run_replicas(job, launch, environment, job_dir)
        self._conclude(job, outcome)

    def _run_trials(self, job: Job, launch: strategies.Launch, environment, job_dir: str | None) -> None:
        """A hyperparameter tuning job: trials instead of one set of replicas (jobs.executor.trials)."""
        loop = trials.TuningLoop(
            self, job, launch, environment, job_dir, work_dir_for(job), passthrough_env(), self.seed_history
        )
        outcome = loop.run()
        output = loop.training_output()
        if outcome.get("failed_message"):
            self._fail(job, outcome["failed_message"], output)
            return
        self._conclude(job, outcome, output)

    def _prepare(self, job: Job, launch: strategies.Launch):
        if job.is_hyperparameter_job:
            try:
                self.seed_history = trials.seed_history(job, launch.training_input["hyperparameters"])
            except ValueError as error:
                raise PrepareError(str(error)) from None
        return launch.prepare(
            packages=work_dir_for(job) / "packages",
            log=self.sink.service,
            check_cancel=self._check_cancel,
            gpu=needs_gpu(launch.training_input),
        )

    def _run_replicas(self, job: Job, launch: strategies.Launch, environment, job_dir: str | None) -> dict:
        work = work_dir_for(job) / "replicas"
        self.replica_set = ReplicaSet(
            job=job,
            launch=launch,
            environment=environment,
            job_dir=job_dir,
            work=work,
            passthrough=passthrough_env(),
            sink=self.sink,
            sampler=self.sampler,
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
        self._stop_all(keep=failure)
        if failure is not None:
            self._hold_for_shell(job, failure)
            return {"failed": failure}
        return {"succeeded": True}

    def _hold_for_shell(self, job: Job, failed: ReplicaProcess) -> None:
        """A job with web access that asked (``aiconsole-hold-failed-replica``) keeps its failed
        replica's shell open that many minutes, the rest of it stopped, or until it is cancelled."""
        row = Replica.objects.filter(pk=failed.replica_id)
        held = holds.begin(
            failed,
            labels=job.labels,
            training_input=job.training_input,
            address=EMBEDDED,
            row=row,
            say=self.sink.service,
        )
        if not held:
            return
        self.cancel_requested.wait(held)
        holds.end(failed, address=EMBEDDED, row=row)
        self.sink.service(f"The hold on {failed.label} ended.")

    def _record_exit(self, process: ReplicaProcess, code: int) -> None:
        state = ReplicaState.SUCCEEDED if code == 0 else ReplicaState.FAILED
        Replica.objects.filter(pk=process.replica_id).update(state=state, exit_code=code, end_time=timezone.now())
        self.sink.service(
            f"{process.label} exited with status {exit_description(code)}.",
            severity="INFO" if code == 0 else "ERROR",
        )

    def _stop_all(self, keep: ReplicaProcess | None = None) -> None:
        """Stop every replica; none is held for its shell but ``keep``, whose hold is decided next."""
        if self.replica_set is not None:
            self.replica_set.stop(said=True)
        holds.let_go((p.replica_id for p in self.processes if p is not keep), address=EMBEDDED)
