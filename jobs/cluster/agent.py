"""What runs inside ``aiconsole worker``: registration, heartbeat, and the replicas of this host.

The agent registers a ``Worker`` row with what it offers, then every heartbeat renews that row
and the leases of the replicas (and whole jobs) it runs. In the same round trip it learns which
of them it must stop (a cancel, the master finished, the time limit) and which it no longer owns
(its fencing token is stale because the coordinator presumed it lost and started the replica
elsewhere): those it kills without writing anything more. A replica process dies with the agent
(``PR_SET_PDEATHSIG``; a container's reaper stops its container), so a killed worker leaves no
trainer behind to race its replacement; and a worker that is alive but cannot renew its leases
(frozen, cut off from the database) has its replicas stop themselves: each reaper watches a file
the heartbeat touches after every renewal, and stops its trainer when the file is older than two
thirds of the lease (``reaper.py --lease``), before the coordinator starts it elsewhere.

Replicas are started with the same pieces as embedded mode: the job's launch strategy
(``jobs.executor.strategies``) prepares a replica (the package fetch and checks, the cached runtime
environment and job layer, or the container's image) and makes its process.
"""

from __future__ import annotations

import ctypes
import logging
import queue
import shutil
import signal
import socket
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection
from django.db.models import Q
from django.utils import timezone

from aiconsole.errors import log_internal_error
from jobs import catalogue, kinds
from jobs.cluster import capacity
from jobs.containers import engine as engines
from jobs.executor import containers, strategies
from jobs.executor.preparing import (
    PrepareError,
    fetch_packages,
    give_to_trainers,
    gpu_build,
    passthrough_env,
    prepare_arguments,
    trainer_account,
    work_dir_for,
)
from jobs.executor.replicas import ReplicaProcess, exit_description, set_worker_lease
from jobs.executor.runner import RunnerBase, internal_error_message
from jobs.executor.sink import LogSink
from jobs.metrics import points as metrics
from jobs.metrics import system
from jobs.models import Job, JobState, Replica, ReplicaState, Worker, new_etag
from jobs.services import announce_state
from jobs.vertex import launch as vertex
from jobs.webaccess import holds
from jobs.webaccess import host as webaccess

logger = logging.getLogger(__name__)

_PR_SET_PDEATHSIG = 1
SWEEP_HEARTBEATS = 10  # how often (in heartbeats) a worker removes what workers killed on its host left
_libc = ctypes.CDLL(None, use_errno=True)
_prctl = _libc.prctl


def _die_with_agent() -> None:
    """In the child before exec: SIGKILL when the spawning thread (the agent's spawner) dies."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


def _stop_with_agent() -> None:
    """A container's reaper: SIGTERM when the spawner dies, so that it stops the container first."""
    _prctl(_PR_SET_PDEATHSIG, signal.SIGTERM, 0, 0, 0)


def lease_deadline() -> float:
    """Seconds without a renewal after which a replica stops itself: two thirds of the lease, and
    at least a second and a half short of it, so that it is gone (a poll, a second's grace) before
    the lease runs out and the coordinator, a backoff later, starts it elsewhere; never less than
    a heartbeat and a half."""
    lease = settings.WORKER_LEASE_SECONDS
    return max(min(lease * 2 / 3, lease - 1.5), settings.WORKER_HEARTBEAT_SECONDS * 1.5)


@dataclass
class LocalReplica:
    pk: int
    attempt: int
    label: str
    task_type: str
    task_index: int
    job_pk: int
    sink: LogSink | None = None
    process: ReplicaProcess | None = None
    metrics: metrics.Collector | None = None  # the master's: the job's metric points (jobs.metrics.points)
    launch: strategies.Launch | None = None  # how it runs, decided when it is prepared
    trial_id: str = ""
    stopping: bool = False
    holding: bool = False  # failed, and held for its shell (web access) until its hold ends
    done: threading.Event = field(default_factory=threading.Event)

    def fence(self, cursor) -> bool:
        """Inside a log batch's transaction: is this still the replica's current start?"""
        cursor.execute("SELECT attempt FROM jobs_replica WHERE id = %s FOR SHARE", [self.pk])
        row = cursor.fetchone()
        return row is not None and row[0] == self.attempt


class Agent:
    def __init__(self, worker: Worker):
        self.worker = worker
        folder = Path(settings.DATA_DIR) / "leases"
        folder.mkdir(mode=0o700, exist_ok=True)
        self.lease_file = folder / worker.name  # touched after each renewal (reaper.py --lease)
        self.renewed()
        self.replicas: dict[int, LocalReplica] = {}
        self.sampler = system.Sampler("agent-usage")  # every replica's use of this worker, one thread for all
        self.jobs: dict[int, RunnerBase] = {}  # whole jobs: pk → runner
        self._lock = threading.Lock()
        self._stopping = threading.Event()
        self._spawns: queue.Queue = queue.Queue()
        self._threads = [
            threading.Thread(target=target, name=name, daemon=True)
            for target, name in (
                (self._heartbeat_loop, "agent-heartbeat"),
                (self._spawner_loop, "agent-spawner"),
                (self._supervise_loop, "agent-supervisor"),
            )
        ]

    @property
    def runner_id(self) -> str:
        return f"worker:{self.worker.name}"

    def start(self) -> None:
        for thread in self._threads:
            thread.start()

    def renewed(self) -> None:
        """The database holds this worker's leases for another lease: its trainers may go on."""
        self.lease_file.touch()

    def stop(self) -> None:
        """Leave cleanly: stop this host's replicas and hand its work back at once."""
        self._stopping.set()
        self.sampler.close()
        # First, so that the coordinator tells the replicas' loss as a stop, not a silence.
        Worker.objects.filter(pk=self.worker.pk).update(stopped=True)
        with self._lock:
            replicas, runners = list(self.replicas.values()), list(self.jobs.values())
        for runner in runners:
            runner.abandon()
        for local in replicas:
            if local.process is not None:
                local.stopping = True
                local.process.stop(settings.STOP_GRACE_SECONDS)
                if isinstance(local.process, containers.ContainerReplicaProcess):
                    local.process.remove()  # and what it was given (mount points, env file)
        for runner in runners:
            runner.thread.join(30)
        now = timezone.now()
        for local in replicas:
            if local.sink is not None:
                local.sink.service(
                    f"{local.label} stopped: its worker {self.worker.name} is shutting down; "
                    "it starts again elsewhere.",
                    severity="WARNING",
                )
                local.sink.close()
            # Expire the lease now, so the coordinator restarts it without waiting for the lease.
            Replica.objects.filter(pk=local.pk, attempt=local.attempt).update(lease_expires=now)
        self.lease_file.unlink(missing_ok=True)

    # --- starting replicas (Celery tasks call these) ------------------------------------------

    def start_replica(self, replica_pk: int, attempt: int) -> None:
        close_old_connections()
        now = timezone.now()
        claimed = Replica.objects.filter(
            pk=replica_pk, attempt=attempt, worker=self.worker, state=ReplicaState.PENDING
        ).update(
            state=ReplicaState.RUNNING,
            start_time=now,
            end_time=None,
            exit_code=None,
            pid=None,
            lease_expires=now + timedelta(seconds=settings.WORKER_LEASE_SECONDS),
        )
        if not claimed:
            return  # delivered twice, or superseded: somebody else owns this start
        self.renewed()
        replica = Replica.objects.select_related("job__project").get(pk=replica_pk)
        local = LocalReplica(replica.pk, attempt, replica.label, replica.task_type, replica.task_index, replica.job_id)
        local.sink = LogSink(replica.job_id, fence=local.fence, late=lambda: self._late_note(local))
        local.trial_id = replica.trial_id
        with self._lock:
            self.replicas[replica.pk] = local
        job = replica.job
        if replica.stop_requested or job.state not in (JobState.PREPARING, JobState.RUNNING):
            self._finish(local, ReplicaState.STOPPED, None)
            return
        try:
            process = self._prepare(local, replica, job)
        except PrepareError as error:
            if local.stopping:
                self._finish(local, ReplicaState.STOPPED, None)
            else:
                self._finish(local, ReplicaState.FAILED, None, str(error))
            return
        except Exception:
            error_id = log_internal_error(logger, f"Starting {replica} failed")
            self._finish(local, ReplicaState.FAILED, None, internal_error_message(error_id, "the worker"))
            return
        if local.stopping:
            self._finish(local, ReplicaState.STOPPED, None)
            return
        started = threading.Event()
        self._spawns.put((process, started))
        started.wait()
        local.process = process
        if process.popen is None:
            self._finish(
                local,
                ReplicaState.FAILED,
                None,
                f"The replica {replica.task_type} {replica.task_index} could not be started.",
            )
            return
        # shells into it, on this worker's address, for a job with web access
        shell_port = webaccess.offer_replica(
            process, training_input=job.training_input or {}, labels=job.labels, address=self.worker.address
        )
        Replica.objects.filter(pk=replica.pk, attempt=attempt).update(pid=process.pid, shell_port=shell_port)
        if local.stopping:  # a stop came while it was being forked: the heartbeat left it to us
            local.stopping = False
            self._stop(local, fenced=False)
            return
        local.sink.service(
            f"Started {replica.label} on worker {self.worker.name} (pid {process.pid}"
            + (f", GPUs {replica.devices}" if replica.devices else "")
            + ")."
        )
        self._sample(local, replica, process)
        if job.mark_running():
            announce_state(job)

    def _sample(self, local: LocalReplica, replica: Replica, process: ReplicaProcess) -> None:
        """Have this worker's sampler watch the replica's use of it (its own network namespace
        when it is a container: scaled mode gives each its own) until it ends; a trial's under its trial."""
        _cpus, memory = system.machine_limits(replica.machine_type)
        sink = local.sink
        self.sampler.add(
            local.job_pk,
            local.label,
            process.usage_probe(memory, own_network=True),
            trial_id=local.trial_id,
            machine_type=replica.machine_type,
            gpus=process.gpu_devices(replica.accelerator_count),
            say=(lambda message: sink.service(message, trial_id=local.trial_id)) if sink is not None else None,
        )

    def _late_note(self, local: LocalReplica) -> str:
        return (
            f"The lines of {local.label} that follow were printed by its start {local.attempt} on worker "
            f"{self.worker.name} before it stopped itself there (its worker could not renew its lease in time: "
            "it was frozen or cut off from the database); they reach the log only now that the worker is back, "
            "after what its next start printed, and carry the time they arrived."
        )

    def _prepare(self, local: LocalReplica, replica: Replica, job: Job) -> ReplicaProcess:
        """A replica of a gang, made by its job's launch strategy: its image here (an uploaded one is
        loaded from its stored archive first) or its environment built on this worker; a container
        in its own network namespace, its port published on this worker's address."""
        launch = local.launch = strategies.strategy_for(job)
        spec = replica.launch
        replica_dir = work_dir_for(job) / "replicas" / replica.label
        shutil.rmtree(replica_dir, ignore_errors=True)
        (replica_dir / "tmp").mkdir(parents=True)
        sink = local.sink
        assert sink is not None  # start_replica opened it before preparing

        def check() -> None:
            if local.stopping:
                raise PrepareError("stopped")

        def log(message: str, **options) -> None:
            sink.service(f"{replica.label}: {message}", **options)

        if launch.needs_engine:  # its image here: loaded from the project's upload, or built (pre-built images)
            assert isinstance(launch, strategies.ContainerLaunch)
            launch.bring_image(containers.image_for(launch.training_input, replica.task_type), log, check)
        environment = None
        if launch.builds_environment:
            files = fetch_packages(launch.training_input, replica_dir / "packages", check, project=job.project)
        prepare_arguments(spec, project=job.project)
        if spec.get("jobDir"):
            give_to_trainers(spec["jobDir"], job.project)
        if launch.builds_environment:
            environment = launch.environment(files, log, check, gpu=gpu_build(bool(replica.devices)))
        if replica.task_type == "master" and not replica.trial_id:  # a tuning job collects per trial
            local.metrics = metrics.Collector(
                job.pk, job_dir=spec.get("jobDir"), metric_file=metrics.metric_file(replica_dir), say=sink.service
            )
        pod, devices = None, None
        extra = {**metrics.trainer_env(replica_dir), **_vertex_env(launch, replica, spec)}
        if launch.needs_engine:
            pod = containers.pod_for(job)
            assert pod is not None  # this worker registered with an engine, or it was not given the job
            pod.shared = False
            devices = [
                f"nvidia.com/gpu={d}" if pod.engine.is_podman else d for d in (replica.devices or "").split(",") if d
            ]
        else:
            extra["CUDA_VISIBLE_DEVICES"] = replica.devices  # none: the replica sees no GPU at all
        context = strategies.ReplicaContext(
            job=job,
            replica=replica,
            plan=catalogue.ReplicaPlan(
                replica.task_type,
                replica.task_index,
                replica.machine_type,
                replica.accelerator_type or None,
                replica.accelerator_count,
            ),
            replica_dir=replica_dir,
            tf_config=spec["tfConfig"],
            cluster_spec=spec["clusterSpec"],
            extra_env=extra,
            account=trainer_account(job.project),
            job_dir=spec.get("jobDir"),
            trial_args=[],
            passthrough=passthrough_env(),
            sink=sink,
            pod=pod,
            devices=devices,
            publish=replica.port if launch.needs_engine else None,
            preexec=_stop_with_agent if launch.needs_engine else _die_with_agent,
            attempt=local.attempt,
        )
        return launch.process(context, environment)

    def _spawner_loop(self) -> None:
        """Every trainer is forked from this one long-lived thread: PR_SET_PDEATHSIG fires when
        the thread that forked the child ends, and this one ends only with the process."""
        while True:
            process, started = self._spawns.get()
            try:
                process.start()
            except OSError:
                logger.exception("Could not start %s", process.label)
            finally:
                started.set()

    # --- watching them ---------------------------------------------------------------------------

    def _supervise_loop(self) -> None:
        while not self._stopping.is_set():
            with self._lock:
                running = [
                    (r, r.process)
                    for r in self.replicas.values()
                    if r.process is not None and not r.done.is_set() and not r.holding
                ]
            for local, process in running:
                code = process.poll()
                if local.metrics is not None and not local.stopping:
                    local.metrics.poll(final=code is not None)  # at most once a second while it runs
                if code is None or local.stopping:
                    continue
                try:
                    process.wait_output()
                    state = ReplicaState.SUCCEEDED if code == 0 else ReplicaState.FAILED
                    message = ""
                    if code != 0:
                        said = (
                            f"The replica {local.task_type} {local.task_index} exited with a non-zero "
                            f"status of {exit_description(code)}."
                        )
                        message = local.launch.failure(said, process) if local.launch else said
                        if self._hold_for_shell(local, process, code, message):
                            continue
                    self._finish(local, state, code, message)
                except Exception:
                    logger.exception("Recording the exit of %s failed", local.label)
            self._stopping.wait(0.05)

    def _hold_for_shell(self, local: LocalReplica, process: ReplicaProcess, code: int, message: str) -> bool:
        """A failed replica of a job with web access that asked (``aiconsole-hold-failed-replica``)
        stays RUNNING, its shell open, that many minutes or until the job is stopped; then it
        fails as it would have. Whether it is held."""
        labels, training_input = Job.objects.filter(pk=local.job_pk).values_list(
            "labels", "training_input"
        ).first() or ({}, {})
        row = Replica.objects.filter(pk=local.pk, attempt=local.attempt)
        say = local.sink.service if local.sink is not None else lambda *said, **how: None
        address = self.worker.address
        held = holds.begin(
            process, labels=labels, training_input=training_input, address=address, row=row, say=say,
            where="on this worker, ",
        )  # fmt: skip
        if not held:
            return False
        local.holding = True

        def release() -> None:
            local.done.wait(held)  # a stop (the job cancelled) finishes it sooner
            holds.end(process, address=address, row=row)
            self._finish(local, ReplicaState.FAILED, code, message)

        _in_thread(release)
        return True

    def _finish(self, local: LocalReplica, state: str, code: int | None, message: str = "") -> None:
        """Store what remains of its log, then its end, if this is still its current start."""
        if local.done.is_set():
            return
        local.done.set()
        self.sampler.remove(local.job_pk, local.label, trial_id=local.trial_id)
        holds.let_go([local.pk], address=self.worker.address)  # not held, or no longer: its shells end with it
        sink = local.sink
        if sink is not None:
            if state == ReplicaState.SUCCEEDED or state == ReplicaState.FAILED:
                sink.service(
                    f"{local.label} exited with status {exit_description(code) if code is not None else 'none'}.",
                    severity="INFO" if state == ReplicaState.SUCCEEDED else "ERROR",
                )
            if message and code is None and state == ReplicaState.FAILED:
                sink.service(message, severity="ERROR")
            sink.close()
        if not (sink is not None and sink.fenced):
            Replica.objects.filter(pk=local.pk, attempt=local.attempt).update(
                state=state, exit_code=code, end_time=timezone.now(), error_message=message, lease_expires=None
            )
        with self._lock:
            self.replicas.pop(local.pk, None)
        if isinstance(local.process, containers.ContainerReplicaProcess):
            local.process.remove()  # once its end is recorded

    def _stop(self, local: LocalReplica, *, fenced: bool) -> None:
        local.stopping = True
        if local.process is None:
            return  # still preparing: it stops at its next check
        local.process.stop(0 if fenced else settings.STOP_GRACE_SECONDS)
        local.process.wait_output()
        if fenced:
            local.done.set()
            self.sampler.remove(local.job_pk, local.label, trial_id=local.trial_id)
            holds.let_go([local.pk], address=self.worker.address)
            if local.sink is not None:
                local.sink.fenced = True
                local.sink.close()
            with self._lock:
                self.replicas.pop(local.pk, None)
            if isinstance(local.process, containers.ContainerReplicaProcess):
                local.process.remove()
            return
        self._finish(local, ReplicaState.STOPPED, local.process.poll())

    # --- heartbeat -------------------------------------------------------------------------

    def _heartbeat_loop(self) -> None:
        every = SWEEP_HEARTBEATS * settings.WORKER_HEARTBEAT_SECONDS
        next_sweep = time.monotonic() + every
        while not self._stopping.is_set():
            try:
                close_old_connections()
                self.heartbeat()
                if self.worker.containers and time.monotonic() >= next_sweep:
                    next_sweep = time.monotonic() + every
                    _in_thread(self._sweep_lost_workers)
            except Exception:
                logger.exception("Heartbeat failed")
            self._stopping.wait(settings.WORKER_HEARTBEAT_SECONDS)
        connection.close()

    def _sweep_lost_workers(self) -> None:
        live = {f"worker:{name}" for name in capacity.live_workers().values_list("name", flat=True)}
        containers.sweep_lost_workers(live)

    def heartbeat(self) -> None:
        now = timezone.now()
        lease = now + timedelta(seconds=settings.WORKER_LEASE_SECONDS)
        Worker.objects.filter(pk=self.worker.pk).update(heartbeat=now, stopped=False)
        with self._lock:
            locals_ = list(self.replicas.values())
            runners = dict(self.jobs)
        if locals_:
            mine = Q()
            for local in locals_:
                mine |= Q(pk=local.pk, attempt=local.attempt)
            Replica.objects.filter(mine, worker=self.worker, state=ReplicaState.RUNNING).update(lease_expires=lease)
        if runners:
            Job.objects.filter(pk__in=runners, worker=self.worker, runner=self.runner_id).update(lease_expires=lease)
        self.renewed()  # every lease renewed above: the trainers here may run another lease
        if locals_:
            rows = {
                row["pk"]: row
                for row in Replica.objects.filter(pk__in=[r.pk for r in locals_]).values(
                    "pk", "attempt", "state", "stop_requested", "worker_id", "job__state"
                )
            }
            for local in locals_:
                row = rows.get(local.pk)
                if local.done.is_set() or local.stopping:
                    continue
                if row is None or row["attempt"] != local.attempt or row["worker_id"] != self.worker.pk:
                    logger.warning("%s was started again elsewhere; stopping this copy", local.label)
                    _in_thread(self._stop, local, fenced=True)
                elif row["stop_requested"] or row["job__state"] in (
                    JobState.CANCELLING,
                    JobState.CANCELLED,
                    JobState.FAILED,
                    JobState.SUCCEEDED,
                ):
                    _in_thread(self._stop, local, fenced=False)
        if runners:
            job_rows = {
                job_row["pk"]: job_row
                for job_row in Job.objects.filter(pk__in=runners).values("pk", "state", "worker_id", "runner")
            }
            for pk, runner in runners.items():
                job_row = job_rows.get(pk)
                if (
                    job_row is None
                    or job_row["worker_id"] != self.worker.pk
                    or (job_row["runner"] and job_row["runner"] != self.runner_id)
                ):
                    logger.warning("Job %s was handed to another worker; stopping it here", pk)
                    runner.fenced = True
                    runner.cancel()
                elif job_row["state"] == JobState.CANCELLING:
                    runner.cancel()

    # --- whole jobs (tuning, batch prediction) ----------------------------------------------

    def run_job(self, job_pk: int) -> None:
        close_old_connections()
        job = Job.objects.filter(pk=job_pk, state=JobState.QUEUED, worker=self.worker).first()
        if job is None:
            return  # handed elsewhere already, or cancelled
        Job.objects.filter(pk=job_pk).update(
            lease_expires=timezone.now() + timedelta(seconds=settings.WORKER_LEASE_SECONDS), etag=new_etag()
        )
        runner = kinds.of_job(job).runner()(job_pk, self.runner_id, on_done=self._job_done)
        with self._lock:
            self.jobs[job_pk] = runner
        runner.start()

    def _job_done(self, runner) -> None:
        with self._lock:
            self.jobs.pop(runner.job_pk, None)
        Job.objects.filter(pk=runner.job_pk, worker=self.worker).exclude(
            state__in=[JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING]
        ).update(worker=None, lease_expires=None)


def _vertex_env(launch: strategies.Launch, replica: Replica, spec: dict) -> dict[str, str]:
    """A Vertex AI job's replica: its variables (from the CLUSTER_SPEC it was placed with), and its
    ``AIP_*`` folders made (jobs.vertex.launch); nothing for a v1 job."""
    if launch.profile is None:
        return {}
    vertex.prepare_output_dirs(spec.get("jobDir"), launch.job.project)
    return launch.replica_environment(
        task_type=replica.task_type, job_dir=spec.get("jobDir"), cluster_spec=spec["clusterSpec"], trial_id=""
    )


def _in_thread(target, *args, **kwargs) -> None:
    """Run ``target`` in a short-lived thread that gives back its database connection."""

    def run() -> None:
        try:
            target(*args, **kwargs)
        except Exception:
            logger.exception("%s failed", getattr(target, "__name__", target))
        finally:
            connection.close()

    threading.Thread(target=run, daemon=True).start()


_agent: Agent | None = None


def register(
    *,
    region: str,
    machine_types: list[str],
    accelerators: dict[str, int],
    cpus: float,
    memory_gb: float,
    address: str | None,
    ports: tuple[int, int],
    slots: int = 0,
) -> Agent:
    """Register this process as a worker and start its heartbeat (``slots``: see ``Worker.slots``)."""
    import os
    import uuid

    global _agent
    hostname = socket.gethostname()
    worker = Worker.objects.create(
        name=f"{hostname}-{os.getpid()}-{uuid.uuid4().hex[:4]}",
        hostname=hostname,
        address=address or _reachable_address(),
        region=region,
        machine_types=machine_types,
        accelerators=accelerators,
        cpus=cpus,
        memory_gb=memory_gb,
        port_first=ports[0],
        port_last=ports[1],
        slots=slots,
        pid=os.getpid(),
        containers=engines.available() is not None,
    )
    containers.set_owner(f"worker:{worker.name}")
    _agent = Agent(worker)
    set_worker_lease(_agent.lease_file, lease_deadline())
    containers.sweep(live_owners={f"worker:{name}" for name in capacity.live_workers().values_list("name", flat=True)})
    _agent.start()
    return _agent


def current() -> Agent:
    if _agent is None:
        raise RuntimeError("This process is not a worker (aiconsole worker registers one).")
    return _agent


def _reachable_address() -> str:
    """The address other hosts reach this one at: the source address of a route outwards."""
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
            probe.connect(("10.255.255.255", 1))  # no packet is sent
            return probe.getsockname()[0]
    except OSError:
        return socket.gethostbyname(socket.gethostname())
