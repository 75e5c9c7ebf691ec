"""Training jobs, their replicas and their log lines.

The database is the source of truth for state. Transitions are compare-and-set updates
(``UPDATE … WHERE state IN (allowed)``) so the executor and a user's cancel can race safely:
whoever loses sees the row's new state and acts on it.
"""

from __future__ import annotations

import base64
import secrets

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.db.models.fields.json import KeyTransform
from django.utils import timezone

from aiconsole import iam
from aiconsole.models import Project


def new_etag() -> str:
    return base64.b64encode(secrets.token_bytes(8)).decode()


class JobState(models.TextChoices):
    STATE_UNSPECIFIED = "STATE_UNSPECIFIED"
    QUEUED = "QUEUED"
    PREPARING = "PREPARING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    CANCELLING = "CANCELLING"
    CANCELLED = "CANCELLED"


TERMINAL_STATES = frozenset({JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED})
ACTIVE_STATES = frozenset({JobState.QUEUED, JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING})
CANCELLED_BY_USER = "Job is cancelled by the user."
DEFAULT_MAX_RUNNING_TIME = "604800s"  # 7 days, as the original


def parse_duration(value: str) -> float:
    """Seconds of a Google duration string such as "7200s" or "1.5s"."""
    return float(str(value).removesuffix("s"))


class JobQuerySet(models.QuerySet):
    def active(self):
        return self.filter(state__in=ACTIVE_STATES)

    def queued_in_order(self):
        """The waiting line: higher scheduling.priority first, then first come."""
        return self.filter(state=JobState.QUEUED).order_by("-priority", "create_time", "pk")

    def visible_to(self, user, permission: str = "ml.jobs.list"):
        return iam.scope(self, user, permission)

    def without_output(self):
        """Jobs read without their trainingOutput, which is read when first used. A study's holds every
        trial with its reports (1.9 MB of JSON at 2,000 trials: decoding it was over half of each
        request of its page's trial table), and the job page shows only its ML units from it
        (``Job.consumed_ml_units``), read here on their own."""
        return self.defer("training_output").annotate(
            output_ml_units=KeyTransform("consumedMLUnits", "training_output")
        )


class Job(models.Model):
    """A v1 Job resource and the bookkeeping needed to run it."""

    iam_resource_type = "job"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="jobs")
    job_id = models.CharField(max_length=128)
    training_input = models.JSONField(null=True, blank=True)
    prediction_input = models.JSONField(null=True, blank=True)
    training_output = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.QUEUED)
    error_message = models.TextField(blank=True)
    labels = models.JSONField(default=dict, blank=True)
    etag = models.CharField(max_length=16, default=new_etag)
    priority = models.IntegerField(default=0)
    create_time = models.DateTimeField(default=timezone.now, db_index=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Which executor instance runs it now; used to find orphans after a restart.
    runner = models.CharField(max_length=120, blank=True)
    # How often the job was started again after the console went away mid-run.
    restarts = models.IntegerField(default=0)
    # Scaled mode: why a QUEUED job still waits (no worker fits it yet, or none ever could).
    wait_reason = models.TextField(blank=True)
    # Scaled mode, a job run whole by one worker (tuning, batch prediction): that worker, and
    # the lease its heartbeat renews.
    worker = models.ForeignKey("Worker", null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs")
    lease_expires = models.DateTimeField(null=True, blank=True)
    # The console's free-text note on the job (not a v1 field): what this run tried, what came of it.
    note = models.CharField(max_length=500, blank=True, default="")
    # The console's record (not a v1 field) of the job this one was cloned or resumed from, by id: a
    # job page links back to it, and it stays readable after that job is deleted.
    cloned_from = models.CharField(max_length=128, blank=True, default="")

    objects = JobQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "job_id"], name="unique_job_id_per_project")]
        indexes = [models.Index(fields=["project", "-create_time"]), models.Index(fields=["state"])]
        ordering = ["-create_time", "-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/jobs/{self.job_id}"

    @property
    def is_terminal(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def scheduling(self) -> dict:
        return (self.training_input or {}).get("scheduling") or {}

    @property
    def max_running_seconds(self) -> float:
        return parse_duration(self.scheduling.get("maxRunningTime", DEFAULT_MAX_RUNNING_TIME))

    @property
    def max_wait_seconds(self) -> float | None:
        wait = self.scheduling.get("maxWaitTime")
        return parse_duration(wait) if wait else None

    @property
    def consumed_ml_units(self) -> float | None:
        """trainingOutput.consumedMLUnits, without reading the rest of it on a row read ``without_output()``."""
        if "training_output" in self.get_deferred_fields() and hasattr(self, "output_ml_units"):
            return self.output_ml_units
        return (self.training_output or {}).get("consumedMLUnits")

    @property
    def is_hyperparameter_job(self) -> bool:
        return bool((self.training_input or {}).get("hyperparameters"))

    # Durations the list and the page show; a span that has not ended runs to now.
    def _span(self, start, end) -> float | None:
        if start is None:
            return None
        end = end or (None if self.is_terminal else timezone.now())
        return None if end is None else max(0.0, (end - start).total_seconds())

    @property
    def queued_seconds(self) -> float | None:
        """From submit to RUNNING (waiting in line and preparing the environment)."""
        return self._span(self.create_time, self.start_time or self.end_time)

    @property
    def running_seconds(self) -> float | None:
        return self._span(self.start_time, self.end_time)

    @property
    def total_seconds(self) -> float | None:
        return self._span(self.create_time, self.end_time)

    def job_position(self) -> int:
        """Place in the waiting line (1 is next); 0 once scheduled."""
        if self.state != JobState.QUEUED:
            return 0
        ahead = Job.objects.filter(state=JobState.QUEUED).filter(
            Q(priority__gt=self.priority)
            | Q(priority=self.priority, create_time__lt=self.create_time)
            | Q(priority=self.priority, create_time=self.create_time, pk__lt=self.pk)
        )
        return ahead.count() + 1

    # --- transitions ---------------------------------------------------------------------

    def _transition(self, allowed: set[str], **changes) -> bool:
        """Apply ``changes`` if the row is still in one of ``allowed``; refresh either way."""
        changes.setdefault("etag", new_etag())
        updated = Job.objects.filter(pk=self.pk, state__in=allowed).update(**changes)
        self.refresh_from_db()
        return bool(updated)

    def mark_preparing(self, runner: str) -> bool:
        return self._transition({JobState.QUEUED}, state=JobState.PREPARING, runner=runner)

    def mark_running(self) -> bool:
        return self._transition({JobState.PREPARING}, state=JobState.RUNNING, start_time=timezone.now())

    def mark_succeeded(self, training_output: dict) -> bool:
        return self._transition(
            {JobState.RUNNING},
            state=JobState.SUCCEEDED,
            end_time=timezone.now(),
            training_output=training_output,
            runner="",
        )

    def mark_failed(self, message: str, training_output: dict | None = None) -> bool:
        changes = {"state": JobState.FAILED, "error_message": message, "end_time": timezone.now(), "runner": ""}
        if training_output is not None:
            changes["training_output"] = training_output
        return self._transition({JobState.QUEUED, JobState.PREPARING, JobState.RUNNING}, **changes)

    def mark_failed_in_queue(self, message: str) -> bool:
        """FAILED while still QUEUED: it could not be prepared ahead of its turn (jobs.executor.prebuild)."""
        return self._transition(
            {JobState.QUEUED}, state=JobState.FAILED, error_message=message, end_time=timezone.now(), runner=""
        )

    def mark_crashed(self, message: str) -> bool:
        """The executor running the job crashed: FAILED from any state that has not ended,
        CANCELLING included, so no job waits for a runner that is gone."""
        return self._transition(
            set(ACTIVE_STATES), state=JobState.FAILED, error_message=message, end_time=timezone.now(), runner=""
        )

    def request_cancel(self) -> bool:
        """QUEUED jobs are cancelled at once; started ones go through CANCELLING."""
        if self._transition(
            {JobState.QUEUED},
            state=JobState.CANCELLED,
            error_message=CANCELLED_BY_USER,
            end_time=timezone.now(),
        ):
            return True
        return self._transition(
            {JobState.PREPARING, JobState.RUNNING},
            state=JobState.CANCELLING,
            error_message=CANCELLED_BY_USER,
        )

    def mark_cancelling(self, message: str) -> bool:
        """The platform cancels a job (a scheduling limit ran out), giving its reason."""
        if self._transition(
            {JobState.QUEUED}, state=JobState.CANCELLED, error_message=message, end_time=timezone.now()
        ):
            return True
        return self._transition(
            {JobState.PREPARING, JobState.RUNNING}, state=JobState.CANCELLING, error_message=message
        )

    def mark_cancelled(self, training_output: dict | None = None) -> bool:
        changes = {"state": JobState.CANCELLED, "end_time": timezone.now(), "runner": ""}
        if training_output is not None:
            changes["training_output"] = training_output
        return self._transition({JobState.CANCELLING}, **changes)

    def requeue(self) -> bool:
        """Back to the waiting line after the executor that ran it went away."""
        return self._transition(
            {JobState.PREPARING, JobState.RUNNING},
            state=JobState.QUEUED,
            runner="",
            worker=None,
            lease_expires=None,
            restarts=models.F("restarts") + 1,
        )

    def touch_labels(self, labels: dict) -> None:
        self.labels = labels
        self.etag = new_etag()
        self.save(update_fields=["labels", "etag"])


class ReplicaState(models.TextChoices):
    PENDING = "PENDING"
    RUNNING = "RUNNING"
    SUCCEEDED = "SUCCEEDED"
    FAILED = "FAILED"
    STOPPED = "STOPPED"
    LOST = "LOST"  # scaled mode: its workers went away more often than it may restart


LIVE_REPLICA_STATES = frozenset({ReplicaState.PENDING, ReplicaState.RUNNING})


class Worker(models.Model):
    """A scaled-mode worker process (``aiconsole worker``) and what it offers.

    ``heartbeat`` is renewed every few seconds; a worker whose heartbeat is older than the lease
    is gone, and its replicas start again elsewhere.
    """

    name = models.CharField(max_length=120, unique=True)
    hostname = models.CharField(max_length=255)
    address = models.CharField(max_length=255)  # what other hosts use to reach its replicas
    region = models.CharField(max_length=40)
    machine_types = models.JSONField(default=list, blank=True)  # empty: every machine type
    accelerators = models.JSONField(default=dict, blank=True)  # {"NVIDIA_TESLA_T4": 2}
    cpus = models.FloatField()
    memory_gb = models.FloatField()
    # 0: strict accounting (``--capacity``): a replica costs its machine type's CPUs and memory.
    # N (no ``--capacity``): machine types are labels, as in embedded mode: a replica takes one of
    # N slots, and a job with more replicas than that runs here alone.
    slots = models.IntegerField(default=0)
    port_first = models.IntegerField(default=20000)
    port_last = models.IntegerField(default=29999)
    pid = models.IntegerField(null=True, blank=True)
    started = models.DateTimeField(default=timezone.now)
    heartbeat = models.DateTimeField(default=timezone.now, db_index=True)
    stopped = models.BooleanField(default=False)  # left cleanly (aiconsole worker was stopped)
    containers = models.BooleanField(default=False)  # has a container engine: runs custom containers

    class Meta:
        ordering = ["region", "name"]

    def __str__(self) -> str:
        return self.name

    @property
    def queue(self) -> str:
        """The Celery queue only this worker consumes."""
        return f"aiconsole.worker.{self.name}"


class CoordinatorLease(models.Model):
    """Scaled mode: which process coordinates (``jobs.cluster.coordinator``), and until when.

    One row. A candidate takes it when ``expires`` has passed (its holder was frozen or cut off
    from the database and stopped renewing) or the holder's database session is gone (its process
    died); ``epoch`` counts the holders, so a holder that lost it never renews another's.
    """

    holder = models.CharField(max_length=200, blank=True)
    backend_pid = models.IntegerField(null=True, blank=True)  # the holder's database session
    epoch = models.IntegerField(default=0)
    expires = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.holder or 'nobody'} (epoch {self.epoch})"


class Replica(models.Model):
    """One process of a job: the master, a worker, a parameter server or an evaluator."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="replicas")
    trial_id = models.CharField(max_length=10, blank=True)
    task_type = models.CharField(max_length=10)  # master | worker | ps | evaluator
    task_index = models.IntegerField()
    label = models.CharField(max_length=40)  # master-replica-0, worker-replica-1, …
    machine_type = models.CharField(max_length=40)
    accelerator_type = models.CharField(max_length=40, blank=True)
    accelerator_count = models.IntegerField(default=0)
    state = models.CharField(max_length=10, choices=ReplicaState.choices, default=ReplicaState.PENDING)
    host = models.CharField(max_length=255, blank=True)
    port = models.IntegerField(null=True, blank=True)
    pid = models.IntegerField(null=True, blank=True)
    exit_code = models.IntegerField(null=True, blank=True)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    # Scaled mode. ``attempt`` is the fencing token: each start of the replica gets a new one,
    # and a worker holding an older one may no longer write its state or its logs.
    worker = models.ForeignKey(Worker, null=True, blank=True, on_delete=models.SET_NULL, related_name="replicas")
    attempt = models.IntegerField(default=0)
    restarts = models.IntegerField(default=0)  # times it started again after its worker vanished
    lease_expires = models.DateTimeField(null=True, blank=True)
    not_before = models.DateTimeField(null=True, blank=True)  # restart backoff
    devices = models.CharField(max_length=100, blank=True)  # CUDA_VISIBLE_DEVICES on its worker
    launch = models.JSONField(default=dict, blank=True)  # module, args, TF_CONFIG…: what to start
    stop_requested = models.BooleanField(default=False)
    generation = models.IntegerField(default=0)  # the job's restarts when this row was made
    error_message = models.TextField(blank=True)  # why it failed, in the original's words
    # Web access (``enableWebAccess``, jobs.webaccess): the port on ``host`` where the process that
    # runs it opens shells into it, and, for a failed replica held for its shell, until when.
    shell_port = models.IntegerField(null=True, blank=True)
    shell_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["pk"]
        indexes = [models.Index(fields=["job", "trial_id"]), models.Index(fields=["state", "lease_expires"])]

    def __str__(self) -> str:
        return f"{self.job.job_id} {self.label}"

    @property
    def duration_seconds(self) -> float:
        if not self.start_time:
            return 0.0
        end = self.end_time or timezone.now()
        return max(0.0, (end - self.start_time).total_seconds())


class Severity(models.TextChoices):
    DEBUG = "DEBUG"
    INFO = "INFO"
    WARNING = "WARNING"
    ERROR = "ERROR"
    CRITICAL = "CRITICAL"


class LogLineQuerySet(models.QuerySet):
    def after(self, last_id: int | None):
        """Keyset paging: lines after the given id, never OFFSET."""
        return self.filter(pk__gt=last_id) if last_id else self


class LogLine(models.Model):
    """One line one replica printed (or one the platform wrote as ``service``)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="log_lines")
    task_name = models.CharField(max_length=40)  # master-replica-0 … or service
    trial_id = models.CharField(max_length=10, blank=True)
    # Per task (and trial) sequence number, so a reader can resume without gaps or repeats.
    seq = models.BigIntegerField()
    stream = models.CharField(max_length=7)  # stdout | stderr | service
    severity = models.CharField(max_length=8, choices=Severity.choices)
    message = models.TextField()
    time = models.DateTimeField()

    objects = LogLineQuerySet.as_manager()

    class Meta:
        ordering = ["pk"]
        indexes = [
            models.Index(fields=["job", "id"]),
            models.Index(fields=["job", "task_name", "id"]),
            # "Jump to the first error" on a ten-million-line log must not scan it.
            models.Index(fields=["job", "severity", "id"]),
        ]

    def __str__(self) -> str:
        return f"{self.task_name}: {self.message[:60]}"


class Trial(models.Model):
    """One trial of a hyperparameter tuning job: the values it ran with and what it reported.

    These rows are the tuning study's source of truth: the executor rebuilds its Optuna study
    from them, so a restarted console continues where it stopped.
    """

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="trials")
    trial_id = models.CharField(max_length=10)  # "1", "2", … as the API writes it
    number = models.IntegerField()  # the same, for ordering
    hyperparameters = models.JSONField(default=dict)  # name → value as a string
    state = models.CharField(max_length=20, choices=JobState.choices, default=JobState.RUNNING)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    final_metric = models.JSONField(null=True, blank=True)  # {trainingStep, objectiveValue}
    all_metrics = models.JSONField(default=list, blank=True)
    # The highest and lowest objective reported (either is the best, by the study's goal): the trial
    # table shows and sorts by them without reading every report of thousands of trials.
    report_max = models.FloatField(null=True, blank=True)
    report_min = models.FloatField(null=True, blank=True)
    is_stopped_early = models.BooleanField(default=False)
    error_message = models.TextField(blank=True)
    consumed_ml_units = models.FloatField(default=0.0)

    class Meta:
        ordering = ["job", "number"]
        constraints = [models.UniqueConstraint(fields=["job", "trial_id"], name="unique_trial_id_per_job")]

    def __str__(self) -> str:
        return f"{self.job.job_id} trial {self.trial_id}"

    @property
    def is_finished(self) -> bool:
        return self.state in TERMINAL_STATES

    @property
    def objective_value(self) -> float | None:
        return (self.final_metric or {}).get("objectiveValue")

    @property
    def reported_no_metric(self) -> bool:
        """Succeeded without ever reporting the metric tag: shown, never counted as a result."""
        return self.state == JobState.SUCCEEDED and self.final_metric is None

    def finish(
        self, state: str, *, error_message: str = "", stopped_early: bool = False, consumed_ml_units: float = 0.0
    ) -> None:
        self.state = state
        self.error_message = error_message
        self.is_stopped_early = stopped_early
        self.consumed_ml_units = consumed_ml_units
        self.end_time = timezone.now()
        self.save(update_fields=["state", "error_message", "is_stopped_early", "consumed_ml_units", "end_time"])

    def record_metrics(self, reports: list[dict], final: dict | None = None) -> None:
        """Every report so far; the last one is the final metric, as the original, unless ``final``
        names another (a Vertex study's BEST_MEASUREMENT: ``jobs.tuning.search.final_report``)."""
        self.all_metrics = [{"trainingStep": r["trainingStep"], "objectiveValue": r["objectiveValue"]} for r in reports]
        if final is not None:
            self.final_metric = {"trainingStep": final["trainingStep"], "objectiveValue": final["objectiveValue"]}
        else:
            self.final_metric = self.all_metrics[-1] if self.all_metrics else None
        values = [m["objectiveValue"] for m in self.all_metrics]
        self.report_max, self.report_min = (max(values), min(values)) if values else (None, None)
        self.save(update_fields=["all_metrics", "final_metric", "report_max", "report_min"])


class MetricSource(models.TextChoices):
    HYPERTUNE = "hypertune"
    TFEVENTS = "tfevents"
    SYSTEM = "system"  # the replica's CPU, memory, network and GPUs, sampled by the console (jobs.metrics.system)


class MetricPoint(models.Model):
    """One reported value of a job's (or a trial's) metric: a cloudml-hypertune report, a
    TensorFlow summary scalar, or a replica's use of the machine the console sampled (``run`` its
    name). Stored as the executor reads them, so the curves outlive the job dir; written in bulk and
    read by keyset on the id (``jobs.metrics.points``)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="metric_points")
    trial_id = models.CharField(max_length=10, blank=True)
    source = models.CharField(max_length=9, choices=MetricSource.choices)
    run = models.CharField(max_length=255, blank=True)  # the summary writer's sub-directory: train, validation
    tag = models.CharField(max_length=255)
    step = models.BigIntegerField()
    value = models.FloatField()
    wall_time = models.FloatField()  # seconds since the epoch, as the trainer wrote it

    class Meta:
        ordering = ["pk"]
        indexes = [
            models.Index(fields=["job", "id"]),
            models.Index(fields=["job", "tag", "id"]),
            models.Index(fields=["job", "trial_id", "id"]),
        ]

    def __str__(self) -> str:
        return f"{self.tag}@{self.step}={self.value}"


class ContainerImage(models.Model):
    """An image a project uploaded (an archive from ``docker save`` or ``podman save``), loaded into
    the container engine's store under ``name`` and owned by that project: another project's jobs
    may not run it. Images an administrator put in the engine's store by hand have no row and run
    for every project (jobs/containers/images.py)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="container_images")
    name = models.CharField(max_length=1024)  # gcr.io/my-project/trainer:v3, as jobs name it
    image_id = models.CharField(max_length=128, db_index=True)  # the engine's sha256 image id
    digest = models.CharField(max_length=128, blank=True)  # the manifest digest, when the engine gives one
    size_bytes = models.BigIntegerField(default=0)
    archive = models.CharField(max_length=1024, blank=True)  # the stored archive, to load on another worker
    loaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    create_time = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["name"]
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="one_image_per_name_per_project")]

    def __str__(self) -> str:
        return self.name


class JobMetric(models.Model):
    """A job's final value of one metric: its last point by step (the later report at the same step),
    named as the compare page names it (``tag`` or ``tag (run)``). Kept by ``jobs.metrics.points.insert``
    from the job's own points (a tuning job's trials have theirs in the trial table), so the jobs list
    shows, filters and sorts by final metrics in SQL instead of reading every point."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="final_metrics")
    name = models.CharField(max_length=520)
    step = models.BigIntegerField()
    value = models.FloatField()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["job", "name"], name="unique_final_metric_per_job")]
        indexes = [models.Index(fields=["name", "value"])]

    def __str__(self) -> str:
        return f"{self.name}@{self.step}={self.value}"


class VertexCollection(models.TextChoices):
    CUSTOM_JOBS = "customJobs"
    HYPERPARAMETER_TUNING_JOBS = "hyperparameterTuningJobs"
    TRAINING_PIPELINES = "trainingPipelines"  # a custom training pipeline: it runs one of the two above
    BATCH_PREDICTION_JOBS = "batchPredictionJobs"  # a batch prediction job (models_registry.vertex.batch)


class VertexJob(models.Model):
    """A job created through Vertex AI's API (``jobs.vertex``): the Vertex resource it answers as.

    The engine runs the job from its v1 ``trainingInput`` like any other job. This row keeps what
    Vertex names it by (``projects/P/locations/L/customJobs/<vertex_id>``), the request as it was
    read (to answer it back), and what the v1 body cannot say but the engine honours (``engine``:
    each worker pool's environment variables, conditional parameters, the measurement selection,
    notes for the job's log).
    """

    job = models.OneToOneField(Job, on_delete=models.CASCADE, related_name="vertex")
    collection = models.CharField(max_length=32, choices=VertexCollection.choices)
    vertex_id = models.CharField(max_length=20, unique=True)  # decimal digits, as Vertex numbers its jobs
    location = models.CharField(max_length=40)
    display_name = models.CharField(max_length=128)
    request = models.JSONField(default=dict)  # the resource as read: enum names, int64 as strings
    engine = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.job.project.project_id}/locations/{self.location}/{self.collection}/{self.vertex_id}"

    @property
    def runs_as(self) -> str:
        """The collection whose resource ``request`` is: a training pipeline's task is a CustomJob
        or a HyperparameterTuningJob (``engine["pipeline"]["runsAs"]``)."""
        if self.collection == VertexCollection.TRAINING_PIPELINES:
            return (self.engine or {}).get("pipeline", {}).get("runsAs", VertexCollection.CUSTOM_JOBS)
        return self.collection


class VertexOperation(models.Model):
    """A long-running operation the Vertex API answered (a job's deletion, a model's upload), kept
    so that ``…/operations/{id}`` reads it back as the SDK polls it.

    One that is not done yet names what it waits for (``waits_for``, e.g. ``version:12``, the
    version a model upload deploys); whoever finishes that work writes the operation's end."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="vertex_operations")
    operation_id = models.CharField(max_length=20, unique=True)
    location = models.CharField(max_length=40)
    body = models.JSONField(default=dict)  # the Operation: name, metadata, done, response or error
    create_time = models.DateTimeField(default=timezone.now)
    waits_for = models.CharField(max_length=64, blank=True, default="", db_index=True)

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.body.get("name", self.operation_id)


class NotificationEvent(models.TextChoices):
    JOB_SUCCEEDED = "JOB_SUCCEEDED"
    JOB_FAILED = "JOB_FAILED"
    JOB_CANCELLED = "JOB_CANCELLED"
    JOB_WAITING = "JOB_WAITING"  # still QUEUED after the rule's waitingMinutes
    STUDY_BEST_IMPROVED = "STUDY_BEST_IMPROVED"


class NotificationRule(models.Model):
    """A project's rule: on these events of its jobs, tell this webhook or these addresses
    (``jobs.notifications``). The secret signs each webhook body (HMAC-SHA256)."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="notification_rules")
    rule_id = models.CharField(max_length=20, unique=True)
    display_name = models.CharField(max_length=128, blank=True)
    events = models.JSONField(default=list)
    webhook_uri = models.CharField(max_length=2048, blank=True)
    webhook_format = models.CharField(max_length=8, default="json")  # json, or slack
    secret = models.CharField(max_length=64)
    emails = models.JSONField(default=list, blank=True)
    waiting_minutes = models.PositiveIntegerField(default=30)
    create_time = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/notificationRules/{self.rule_id}"


class DeliveryState(models.TextChoices):
    PENDING = "PENDING"  # due at next_attempt_time
    SENDING = "SENDING"
    DELIVERED = "DELIVERED"
    FAILED = "FAILED"  # every attempt failed


class NotificationDelivery(models.Model):
    """One event told (or to be told) by one rule; each attempt's outcome is kept on it. At most one
    per rule, job, event and ``key`` (a study's improving trial), whichever process noticed it."""

    rule = models.ForeignKey(NotificationRule, on_delete=models.CASCADE, related_name="deliveries")
    job = models.ForeignKey(Job, null=True, on_delete=models.SET_NULL, related_name="+")
    event = models.CharField(max_length=24, choices=NotificationEvent.choices)
    key = models.CharField(max_length=64, blank=True, default="")
    payload = models.JSONField(default=dict)
    state = models.CharField(max_length=10, choices=DeliveryState.choices, default=DeliveryState.PENDING)
    attempts = models.JSONField(default=list, blank=True)  # [{"time", "outcome"}]
    next_attempt_time = models.DateTimeField(default=timezone.now, db_index=True)
    create_time = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["-pk"]
        constraints = [models.UniqueConstraint(fields=["rule", "job", "event", "key"], name="one_delivery_per_event")]

    def __str__(self) -> str:
        return f"{self.rule} {self.event} {self.key}"


class ProjectQuota(models.Model):
    """A limit on what a project's running jobs hold at once (``jobs.quotas``): CPUS, REPLICAS or an
    accelerator type, in one region or (``region`` empty) in all."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="quotas")
    metric = models.CharField(max_length=40)
    region = models.CharField(max_length=40, blank=True, default="")
    limit = models.PositiveIntegerField()

    class Meta:
        ordering = ["metric", "region"]
        constraints = [models.UniqueConstraint(fields=["project", "metric", "region"], name="one_quota_per_metric")]

    def __str__(self) -> str:
        return f"{self.project} {self.metric} {self.region or '*'} ≤ {self.limit}"


class ProjectShare(models.Model):
    """A project's weight in the fair queue (1: an equal share; 2: owed twice as much)."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="share")
    weight = models.FloatField(default=1.0)

    def __str__(self) -> str:
        return f"{self.project} × {self.weight:g}"


class WebAccessSession(models.Model):
    """One shell a user opened into a replica (``enableWebAccess``): who, when, how much went each
    way, and where its recording is (an asciicast file in the data dir, ``jobs.webaccess.recording``)."""

    job = models.ForeignKey(Job, on_delete=models.CASCADE, related_name="shell_sessions")
    replica_label = models.CharField(max_length=40)
    trial_id = models.CharField(max_length=10, blank=True)
    user = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    principal = models.CharField(max_length=200)  # as the audit log names the user, kept when the user goes
    started = models.DateTimeField(default=timezone.now)
    ended = models.DateTimeField(null=True, blank=True)
    end_reason = models.CharField(max_length=300, blank=True)
    input_bytes = models.BigIntegerField(default=0)
    output_bytes = models.BigIntegerField(default=0)
    recording = models.CharField(max_length=200, blank=True)  # the file's name under the recordings folder

    class Meta:
        ordering = ["-started", "-pk"]

    def __str__(self) -> str:
        return f"{self.job} {self.replica_label} by {self.principal}"
