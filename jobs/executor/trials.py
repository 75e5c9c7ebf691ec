"""Running a hyperparameter tuning job: its trials, each a full set of the job's replicas.

``TuningLoop`` keeps up to the job's parallel trials running, asks ``jobs.tuning.search`` for the next
hyperparameters from the ``Trial`` rows, reads each trial's hypertune metric file while it runs,
stops trials that fall behind (early stopping), and decides the job's outcome. ``TrialRun`` owns
one trial's replica processes.

What a trial's replicas get, beyond what a plain job's replicas get:

- ``--<parameterName>=<value>`` for every parameter, in params order, after the user's args and
  before ``--job-dir DIR``, which stays last (trainers that read the job dir positionally from
  the end keep working; argparse does not care about the order).
- ``CLOUD_ML_TRIAL_ID``, ``task.trial`` in TF_CONFIG and CLUSTER_SPEC, ``CLOUD_ML_HP_METRIC_TAG``.
- Their own working directory and TMPDIR per trial and replica, and their own
  ``CLOUD_ML_HP_METRIC_FILE`` (the master's file is the trial's result).
- ``--job-dir <jobDir>/<trialId>``, as the original: each trial writes its own model (the job
  resource keeps its ``jobDir``).
- Metrics from cloudml-hypertune's file and from TensorFlow summaries with the metric's tag in
  event files under the trial's job dir (Keras' TensorBoard callback, an Estimator's
  evaluation); the hypertune file wins where both report.
"""

from __future__ import annotations

import shutil
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from aiconsole import storage, trainer_user
from jobs import catalogue
from jobs.executor import containers
from jobs.executor.launch import ReplicaSet, all_at_once
from jobs.executor.replicas import ReplicaProcess, exit_description
from jobs.executor.strategies import Launch
from jobs.metrics import points as metrics
from jobs.metrics import tfevents
from jobs.models import Job, JobState, Replica, ReplicaState, Trial, new_etag
from jobs.tuning import search as tuning
from jobs.wire import trial_resource

# How often the loop looks at its trials' processes and reports: a trial that ended is seen within
# this, and its slot filled (a study of 1 s trials lost 5 % of its time to a 0.1 s look).
POLL_SECONDS = 0.02
SUMMARY_POLL_SECONDS = 1.0


class TrialRun:
    """One trial's replicas: started together, watched, stopped together."""

    def __init__(self, trial: Trial, loop: TuningLoop):
        self.trial = trial
        self.loop = loop
        self.processes: list[ReplicaProcess] = []
        self.replica_set: ReplicaSet | None = None
        self.finished: set[str] = set()
        self.reports: list[dict] = list(trial.all_metrics or [])
        self.metric_file: Path | None = None
        self._hypertune_reader: metrics.HypertuneReader | None = None
        self._hypertune: list[dict] = []
        self._summaries: list[dict] = []
        self._scalars: list = []
        self._events_polled = 0.0
        self.events: tfevents.EventScanner | None = None

    @property
    def trial_id(self) -> str:
        return self.trial.trial_id

    def start(self) -> None:
        loop = self.loop
        self.started = time.monotonic()
        hp_args = [f"--{name}={value}" for name, value in self.trial.hyperparameters.items()]
        job_dir = trial_job_dir(loop.job_dir, self.trial_id, project=loop.job.project)
        if job_dir:
            self.events = metrics.event_scanner(job_dir, tags={loop.tag}, since=metrics.job_started_after(loop.job.pk))
        self.replica_set = ReplicaSet(
            job=loop.job,
            launch=loop.launch,
            environment=loop.environment,
            job_dir=job_dir,
            work=loop.work / "trials" / self.trial_id,
            passthrough=loop.passthrough,
            sink=loop.sink,
            trial_id=self.trial_id,
            extra_args=hp_args,
            pod=loop.trial_pod(),
            sampler=loop.runner.sampler,  # its replicas' use of the machine, under the trial
        )

        def trial_env(replica_dir: Path, task_type: str) -> dict[str, str]:
            metric_file = metrics.metric_file(replica_dir)
            if task_type == "master":
                self.metric_file = metric_file
            return {
                "CLOUD_ML_TRIAL_ID": self.trial_id,
                "CLOUD_ML_HP_METRIC_FILE": str(metric_file),
                "CLOUD_ML_HP_METRIC_TAG": loop.tag,
            }

        shutil.rmtree(self.replica_set.work, ignore_errors=True)
        self.processes = self.replica_set.build(trial_env)
        self.collector = metrics.Collector(
            loop.job.pk,
            trial_id=self.trial_id,
            job_dir=job_dir,
            metric_file=self.metric_file,
            say=lambda message: loop.sink.service(message, trial_id=self.trial_id),
        )
        loop.sink.service(f"Trial {self.trial_id} starts with {' '.join(hp_args)}.", trial_id=self.trial_id)
        self.replica_set.start()

    def read_metrics(self, *, final: bool = False) -> bool:
        """Pick up new reports (hypertune file, TF summaries); True when there were any."""
        self.collector.poll(final=final)  # every tag, for the job's metrics (jobs.metrics.points)
        if not (self._read_hypertune() | self._read_summaries(final=final)):
            return False
        reports = self._hypertune or self._summaries  # the hypertune file wins where both report
        if reports == self.reports:
            return False
        self.reports = list(reports)
        self.trial.record_metrics(self.reports, tuning.final_report(self.loop.spec, self.reports))
        return True

    def _read_hypertune(self) -> bool:
        """New reports of the metric's tag, read in bounded steps (``metrics.HypertuneReader``: a
        trainer may write GBs there); the last ``AICONSOLE_METRIC_POINTS_MAX`` are kept, the
        final metric among them."""
        if self.metric_file is None:
            return False
        if self._hypertune_reader is None:
            self._hypertune_reader = metrics.HypertuneReader(self.metric_file)
        new = [
            {"trainingStep": str(r.step), "objectiveValue": r.value, "timestamp": r.wall_time}
            for r in self._hypertune_reader.read()
            if r.tag == self.loop.tag[:255]
        ]
        self._hypertune = (self._hypertune + new)[-settings.METRIC_POINTS_MAX :]
        return bool(new)

    def _read_summaries(self, *, final: bool = False) -> bool:
        # A walk of the trial's job dir: once a second while it runs (it may hold many files).
        if self.events is None or (not final and time.monotonic() - self._events_polled < SUMMARY_POLL_SECONDS):
            return False
        self._events_polled = time.monotonic()
        new = self.events.poll()
        if not new:
            return False
        self._scalars += new
        self._summaries = summary_reports(self._scalars, self.loop.tag)
        return True

    def poll(self) -> dict | None:
        """None while it runs; else ``{"succeeded": True}`` or ``{"failed": message}``."""
        failure = None
        for process in self.processes:
            code = process.poll()
            if code is None or process.label in self.finished:
                continue
            self.finished.add(process.label)
            process.wait_output()
            state = ReplicaState.SUCCEEDED if code == 0 else ReplicaState.FAILED
            Replica.objects.filter(pk=process.replica_id).update(state=state, exit_code=code, end_time=timezone.now())
            self.loop.sink.service(
                f"{process.label} exited with status {exit_description(code)}.",
                severity="INFO" if code == 0 else "ERROR",
                trial_id=self.trial_id,
            )
            if code != 0 and failure is None:
                failure = process
        if failure is not None:
            message = (
                f"The replica {failure.task_type} {failure.label.rsplit('-', 1)[1]} exited with a "
                f"non-zero status of {exit_description(failure.poll())}."
            )
            return {"failed": self.loop.launch.failure(message, failure)}
        if any(p.task_type == "master" and p.label in self.finished for p in self.processes):
            return {"succeeded": True}
        return None

    def stop(self) -> None:
        if self.replica_set is not None:
            self.replica_set.stop()
            self.loop.release_later(self.replica_set)

    def consumed_ml_units(self) -> float:
        plans = {
            catalogue.replica_label(p.task_type, p.index): p for p in catalogue.replica_plan(self.loop.training_input)
        }
        replicas = Replica.objects.filter(job=self.loop.job, trial_id=self.trial_id)
        return catalogue.consumed_ml_units((plans[r.label], r.duration_seconds) for r in replicas if r.label in plans)


class TuningLoop:
    """Runs all of a tuning job's trials inside the job's runner thread."""

    def __init__(
        self,
        runner,
        job: Job,
        launch: Launch,
        environment,
        job_dir: str | None,
        work: Path,
        passthrough: dict[str, str],
        seed_history: list[tuning.TrialRecord],
    ):
        self.runner = runner
        self.sink = runner.sink
        self.job = job
        self.launch = launch
        self.training_input = training_input = launch.training_input
        profile = launch.profile
        # A Vertex AI study adds conditional parameters and its measurement selection to the spec,
        # and its trialJobSpec's scheduling.timeout limits each trial.
        self.spec = (
            training_input["hyperparameters"]
            if profile is None
            else profile.tuning_spec(training_input["hyperparameters"])
        )
        self.trial_timeout = profile.trial_timeout if profile is not None else None
        self.environment = environment
        self.job_dir = job_dir
        self.work = work
        self.passthrough = passthrough
        self.tag = tuning.metric_tag(self.spec)
        self.seed_history = seed_history
        self.per_trial = len(catalogue.replica_plan(training_input))
        self.parallel = tuning.parallel_trials(self.spec, self.per_trial, settings.MAX_REPLICAS)
        self.running: dict[str, TrialRun] = {}
        self.exhausted = False
        # A finished trial's containers and pod are removed off the loop's thread (about half a
        # second of engine calls each): the next trial does not wait for them; the job's end does.
        self._releases = ThreadPoolExecutor(max_workers=4, thread_name_prefix="trial-release")
        self._trial_pod: containers.Pod | None = None

    def release_later(self, replica_set: ReplicaSet) -> None:
        self._releases.submit(replica_set.release)

    def trial_pod(self) -> containers.Pod | None:
        """The pod a container study's one-replica trials share, made once for the job: a pod's
        network costs about 0.3 s of CPU to make and remove, which every trial would pay. Its
        trials are one project's and one job's, on its project's network either way. Trials of
        several replicas each get a pod of their own (their TF_CONFIG ports are their own)."""
        if not self.launch.needs_engine or self.per_trial != 1:
            return None
        if self._trial_pod is None:
            self._trial_pod = containers.pod_for(self.job)
            if self._trial_pod is not None:
                self._trial_pod.take_spare()
        return self._trial_pod

    def run(self) -> dict:
        """Trials until the budget (or the grid) is spent; the job's outcome."""
        try:
            return self._run()
        finally:
            self._releases.shutdown(wait=True)
            if self._trial_pod is not None:
                self._trial_pod.remove()

    def _run(self) -> dict:
        self._forget_interrupted()
        self.runner.replica_count = self.per_trial * self.parallel
        deadline = time.monotonic() + self.job.max_running_seconds
        failure, finished = None, None
        while True:
            if self.runner.cancel_requested.is_set():
                self._stop_all(JobState.CANCELLED, "The job was cancelled.")
                return {"cancelled": True}
            if time.monotonic() > deadline:
                self._stop_all(JobState.CANCELLED, "The job exceeded its maximum running time.")
                return {"timed_out": True}
            changed = self._watch_running()
            if changed or finished is None:  # the trials' states change only when one ends
                finished = self._finished_states()
            failure = tuning.too_many_failures(self.spec, finished)
            if failure:
                self._stop_all(JobState.CANCELLED, "The job failed: " + failure)
                break
            changed |= self._start_trials()
            if changed:
                self.publish()
            if not self.running and (self.exhausted or self._trial_count() >= tuning.max_trials(self.spec)):
                break
            time.sleep(POLL_SECONDS)
        self.publish()
        if failure:
            return {"failed_message": f"Too many trials failed. {failure} {self._last_failure()}".strip()}
        trials = list(self.job.trials.all())
        if not trials:
            return {
                "failed_message": "No trials were left to run: the resumed job already tried every point of the grid."
            }
        if not any(t.state == JobState.SUCCEEDED for t in trials):
            return {"failed_message": f"All {len(trials)} trials failed. {self._last_failure()}".strip()}
        return {"succeeded": True}

    # --- trials --------------------------------------------------------------------------

    def _forget_interrupted(self) -> None:
        """Trials a stopped console left unfinished run again under the same ids."""
        stale = self.job.trials.exclude(state__in=[JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED])
        for trial in stale:
            Replica.objects.filter(job=self.job, trial_id=trial.trial_id).delete()
            trial.delete()

    def _trial_count(self) -> int:
        return self.job.trials.count()

    def _finished_states(self) -> list[str]:
        return [t.state for t in self.job.trials.filter(state__in=[JobState.SUCCEEDED, JobState.FAILED])]

    def _last_failure(self) -> str:
        trial = self.job.trials.filter(state=JobState.FAILED).order_by("-number").first()
        return f"Trial {trial.trial_id}: {trial.error_message}" if trial else ""

    def history(self) -> list[tuning.TrialRecord]:
        own = [record_of(trial, self.running.get(trial.trial_id)) for trial in self.job.trials.all()]
        return self.seed_history + own

    def _start_trials(self) -> bool:
        free = min(self.parallel - len(self.running), tuning.max_trials(self.spec) - self._trial_count())
        if free <= 0 or self.exhausted:
            return False
        history = self.history()
        suggestions = tuning.suggest(self.spec, history, free, seed=self.job.pk * 10_000 + len(history))
        if len(suggestions) < free and tuning.sampler_name(self.spec) == "grid":
            self.exhausted = True
            if not suggestions:
                self.sink.service("Every point of the grid has been tried.")
        for hyperparameters in suggestions:
            number = self._trial_count() + 1
            trial = Trial.objects.create(
                job=self.job,
                trial_id=str(number),
                number=number,
                hyperparameters=hyperparameters,
                state=JobState.RUNNING,
                start_time=timezone.now(),
            )
            run = TrialRun(trial, self)
            self.running[trial.trial_id] = run
            run.start()
        return bool(suggestions)

    def _watch_running(self) -> bool:
        changed = False
        for trial_id, run in list(self.running.items()):
            new_reports = run.read_metrics()
            outcome = run.poll()
            if outcome is None and self.trial_timeout and time.monotonic() - run.started > self.trial_timeout:
                outcome = {"failed": f"The trial exceeded its timeout of {self.trial_timeout:g}s (scheduling.timeout)."}
                self.sink.service(
                    f"Trial {trial_id}: {outcome['failed']} Stopping it.", severity="ERROR", trial_id=trial_id
                )
            if outcome is not None:
                run.stop()  # the master decided: parameter servers and the rest stop with it
                run.read_metrics(final=True)
                self._finish(run, outcome)
                changed = True
            elif new_reports and self._falls_behind(run):
                self.sink.service(f"Trial {trial_id} falls behind the others; stopping it early.", trial_id=trial_id)
                run.stop()
                run.read_metrics(final=True)
                self._finish(run, {"succeeded": True}, stopped_early=True)
                changed = True
            changed |= new_reports
        return changed

    def _falls_behind(self, run: TrialRun) -> bool:
        if not tuning.early_stopping(self.spec):
            return False
        finished = [r for r in self.history() if r.state != "RUNNING"]
        return tuning.should_stop_early(self.spec, finished, record_of(run.trial, run))

    def _finish(
        self, run: TrialRun, outcome: dict, *, stopped_early: bool = False, state: str | None = None, message: str = ""
    ) -> None:
        self.running.pop(run.trial_id, None)
        if state is None:
            state = JobState.FAILED if "failed" in outcome else JobState.SUCCEEDED
            message = outcome.get("failed", "")
        if state == JobState.SUCCEEDED and not run.reports:
            self.sink.service(
                f"Trial {run.trial_id} succeeded without reporting the metric {self.tag!r}; "
                "it does not count as a result.",
                severity="WARNING",
                trial_id=run.trial_id,
            )
        elif state == JobState.FAILED:
            self.sink.service(f"Trial {run.trial_id} failed. {message}", severity="ERROR", trial_id=run.trial_id)
        run.trial.finish(
            state, error_message=message, stopped_early=stopped_early, consumed_ml_units=run.consumed_ml_units()
        )

    def _stop_all(self, state: str, message: str) -> None:
        runs = list(self.running.values())
        all_at_once(run.stop for run in runs)
        for run in runs:
            run.read_metrics(final=True)
            self._finish(run, {}, state=state, message=message)
        self.publish()

    # --- the job's trainingOutput --------------------------------------------------------

    def training_output(self) -> dict:
        return training_output(self.job, self.spec)

    def publish(self) -> None:
        Job.objects.filter(pk=self.job.pk).update(training_output=self.training_output(), etag=new_etag())
        self.runner.announce(self.job)


def trial_job_dir(job_dir: str | None, trial_id: str, *, project=None) -> str | None:
    """``<jobDir>/<trialId>``: the original's job dir for a trial, created when it is local."""
    if not job_dir:
        return None
    return trainer_user.give_job_dir(
        storage.prepare_job_dir(f"{job_dir.rstrip('/')}/{trial_id}", project=project), project
    )


EVALUATION_RUNS = {"validation", "eval", "evaluation", "val", "test"}


def summary_reports(scalars, tag: str) -> list[dict]:
    """TF summary scalars of the metric's tag as reports (step = the event's step).

    Keras writes a tag in both ``train/`` and ``validation/`` (an Estimator in its folder and
    ``eval/``): where the tag is in an evaluation run, that run is the trial's metric.
    """
    matching = [s for s in scalars if s.tag == tag]
    evaluated = [s for s in matching if s.run.rsplit("/", 1)[-1] in EVALUATION_RUNS]
    return [
        {"trainingStep": str(s.step), "objectiveValue": s.value, "timestamp": s.wall_time}
        for s in (evaluated or matching)
    ]


def record_of(trial: Trial, run: TrialRun | None = None) -> tuning.TrialRecord:
    reports = run.reports if run is not None else (trial.all_metrics or [])
    state = "RUNNING" if trial.state in (JobState.RUNNING, JobState.QUEUED, JobState.PREPARING) else trial.state
    return tuning.TrialRecord(
        hyperparameters=dict(trial.hyperparameters),
        state=state,
        objective=trial.objective_value,
        intermediate=tuning.intermediate_values(reports),
        stopped_early=trial.is_stopped_early,
    )


def training_output(job: Job, spec: dict) -> dict:
    """TrainingOutput of a tuning job, from its Trial rows (live while it runs)."""
    trials = list(job.trials.all())
    return {
        "consumedMLUnits": catalogue.round_ml_units(sum(t.consumed_ml_units for t in trials)),
        "completedTrialCount": str(sum(1 for t in trials if t.state in (JobState.SUCCEEDED, JobState.FAILED))),
        "trials": [trial_resource(t) for t in trials],
        "isHyperparameterTuningJob": True,
        "hyperparameterMetricTag": tuning.metric_tag(spec),
    }


def seed_history(job: Job, spec: dict) -> list[tuning.TrialRecord]:
    """resumePreviousJobId: the earlier job's finished trials, which the study learns from.

    Raises ValueError with a message for the job's errorMessage when it cannot be resumed.
    """
    previous_id = spec.get("resumePreviousJobId")
    if not previous_id:
        return []
    previous = Job.objects.filter(project=job.project, job_id=previous_id).first()
    if previous is None:
        raise ValueError(f"resumePreviousJobId: the job {previous_id} does not exist in this project.")
    if not previous.is_hyperparameter_job:
        raise ValueError(f"resumePreviousJobId: the job {previous_id} is not a hyperparameter tuning job.")
    finished = previous.trials.filter(state__in=[JobState.SUCCEEDED, JobState.FAILED])
    return [record_of(trial) for trial in finished]
