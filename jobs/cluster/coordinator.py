"""The scaled-mode coordinator: one elected process admits, places, watches and restarts.

Every ``aiconsole web`` and ``aiconsole worker`` process runs a candidate; the one holding a
PostgreSQL session advisory lock leads. If its process dies, its database session ends, the lock
is free, and another candidate leads within a second or two and adopts the running jobs: the
job's state, its replicas' placement and their leases all live in the database.

The leader, every tick:

- expires ``scheduling.maxWaitTime`` and relays cancels (embedded mode's controller does both);
- finds replicas whose lease ran out (their worker was killed, its host is gone) and starts them
  again on another worker, after a backoff, with a new fencing token: up to
  ``MAX_REPLICA_RESTARTS`` times per replica, then the job is retried from the start, up to
  ``MAX_JOB_RESTARTS`` times, then it fails;
- admits queued jobs in order (priority, then age) when every replica fits at once (gang
  placement), or says why a job waits, or why no worker could ever run it;
- runs a ``ScaledJobRunner`` per admitted job: it checks the packages, hands each replica to its
  worker's Celery queue, watches the replicas' rows and decides the job's outcome with embedded
  mode's rules (the master decides; any failing replica fails the job).

Tuning and batch prediction jobs run whole on one worker, with embedded mode's runners.
"""

from __future__ import annotations

import logging
import os
import random
import socket
import threading
import time
import uuid
from datetime import timedelta

from django.conf import settings
from django.db import close_old_connections, connection, connections, transaction
from django.db.models import F
from django.utils import timezone

from jobs import catalogue, dispatch
from jobs.cluster import capacity, placement, tasks
from jobs.executor import strategies
from jobs.executor.housekeeping import AuditRetention, Loop, Runners, expire_waiting
from jobs.executor.preparing import PrepareError, prepare_job_dir, take_back_inputs
from jobs.executor.replicas import Placement, cluster_configs
from jobs.executor.runner import RunnerBase, record_crash
from jobs.executor.sink import LogSink
from jobs.models import LIVE_REPLICA_STATES, Job, JobState, Replica, ReplicaState, Worker, new_etag
from jobs.services import announce_state

logger = logging.getLogger(__name__)

LEADER_LOCK = (0x4149, 0x434F)  # pg_try_advisory_lock("AI", "CO")
TICK_SECONDS = 0.25


def restart_backoff(restarts: int) -> float:
    """Seconds before a lost replica's restart number ``restarts`` (1, 2, 4, 8, 8…)."""
    return float(min(2 ** max(restarts - 1, 0), 8))


class LeaderLock:
    """A session-level advisory lock on its own connection: held until released or the process dies."""

    def __init__(self):
        self._connection = None

    def try_acquire(self) -> bool:
        import psycopg

        try:
            if self._connection is None or self._connection.closed:
                params = connections["default"].get_connection_params()
                self._connection = psycopg.connect(**params, autocommit=True, connect_timeout=5)
            row = self._connection.execute("SELECT pg_try_advisory_lock(%s, %s)", LEADER_LOCK).fetchone()
            return bool(row[0])
        except Exception:
            logger.warning("Could not reach the database to elect a coordinator", exc_info=True)
            self.release()
            return False

    def still_held(self) -> bool:
        try:
            self._connection.execute("SELECT 1")
            return True
        except Exception:
            self.release()
            return False

    def release(self) -> None:
        if self._connection is not None:
            try:
                self._connection.close()
            except Exception:
                pass
            self._connection = None


class Coordinator:
    """A candidate coordinator; it acts only while it holds the leader lock."""

    def __init__(self, role: str):
        self.runner_id = f"coordinator:{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"
        self.role = role
        self.lock = LeaderLock()
        self.leading = threading.Event()
        self.rng = random.Random()
        self.runners = Runners()
        self.retention = AuditRetention()
        self.loop = Loop("coordinator", self._step, first_wait=0)
        self._wake_thread = threading.Thread(target=self._listen_for_wakes, name="coordinator-wake", daemon=True)

    def start(self) -> None:
        self.loop.start()
        self._wake_thread.start()

    def stop(self, timeout: float = 10.0) -> None:
        self.loop.stop(timeout)
        self._step_down()
        self.lock.release()

    def _listen_for_wakes(self) -> None:
        """New jobs and cancels publish a wake-up on Redis, so admission does not wait for a tick."""
        import redis

        while not self.loop.stopping.is_set():
            try:
                client = redis.Redis.from_url(settings.REDIS_URL, socket_timeout=None)
                pubsub = client.pubsub(ignore_subscribe_messages=True)
                pubsub.subscribe(dispatch.WAKE_CHANNEL)
                while not self.loop.stopping.is_set():
                    if pubsub.get_message(timeout=1.0):
                        self.loop.wake()
            except Exception:
                logger.warning("Coordinator wake-ups from Redis are interrupted; retrying", exc_info=True)
                time.sleep(1.0)

    # --- leadership ------------------------------------------------------------------------

    def _step(self) -> float:
        """Lead if the lock is free, tick while leading; the seconds until the next try."""
        if not self.leading.is_set():
            if not self.lock.try_acquire():
                return 1.0
            logger.info("%s (%s) is now the coordinator", self.runner_id, self.role)
            self.leading.set()
        if not self.lock.still_held():
            logger.warning("%s lost the coordinator lock", self.runner_id)
            self._step_down()
            return 0
        self.tick()
        return TICK_SECONDS

    def _step_down(self) -> None:
        """Stop watching jobs without touching them: the next coordinator adopts them."""
        self.leading.clear()
        runners = self.runners.all()
        for runner in runners:
            if isinstance(runner, ScaledJobRunner):
                runner.detach()
        for runner in runners:
            runner.thread.join(5.0)

    def _finished(self, runner: RunnerBase) -> None:
        self.runners.remove(runner)
        self.loop.wake()

    # --- each tick -------------------------------------------------------------------------

    def tick(self) -> None:
        # What a wake-up is usually about comes first: cancels, replicas waiting to start
        # again (running jobs keep their place ahead of new ones), then the queue.
        self._relay_cancels()
        self._restart_replicas()
        self._admit()
        self._reconcile_replicas()
        self._reconcile_whole_jobs()
        expire_waiting()
        self._adopt()
        self.retention.run_if_due()

    def _relay_cancels(self) -> None:
        """Cancels reach the runner watching the job; a worker running a job whole sees it itself."""
        for pk in Job.objects.filter(state=JobState.CANCELLING, worker=None).values_list("pk", flat=True):
            runner = self.runners.get(pk)
            if runner is not None:
                runner.cancel()

    def _adopt(self) -> None:
        """Jobs an earlier coordinator was watching: watch them from here."""
        started = Job.objects.filter(
            state__in=[JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING], worker=None
        ).exclude(runner=self.runner_id)
        for job in started.only("pk", "runner"):
            if job.pk in self.runners:
                continue
            if Job.objects.filter(pk=job.pk, runner=job.runner).update(runner=self.runner_id):
                logger.info("Adopting job %s from %s", job.pk, job.runner or "nobody")
                self._start_runner(job.pk)

    def _start_runner(self, job_pk: int, admitted: bool = False) -> None:
        runner = ScaledJobRunner(job_pk, self.runner_id, on_done=self._finished, coordinator=self, admitted=admitted)
        self.runners.add(runner)
        runner.start()

    # --- admission -------------------------------------------------------------------------

    def _admit(self) -> None:
        offers = None
        for job in Job.objects.queued_in_order().filter(worker=None).select_related("project"):
            offers = offers if offers is not None else capacity.offers()
            region = (job.training_input or {}).get("region") or (job.prediction_input or {}).get("region") or ""
            whole = capacity.runs_whole(job)
            plans = capacity.whole_job_plans(job) if whole else catalogue.replica_plan(job.training_input)
            eligible = offers
            if strategies.strategy_for(job).needs_engine:  # only workers with a container engine
                eligible = {name: offer for name, offer in offers.items() if offer.containers}
                if not any(offer.region == region for offer in eligible.values()):
                    self._explain(
                        job,
                        f"No worker in {region} runs custom containers: start one on a host with podman or "
                        "docker (it says so when it registers).",
                    )
                    continue
            if whole:
                assignments = self._place_whole(plans, eligible, region)
            else:
                assignments = placement.place(plans, eligible.values(), region, self.rng)
            if assignments is None:
                never = placement.never_fits(plans, list(eligible.values()), region)
                if never:
                    self._explain(job, never)
                    continue  # it does not hold up the jobs behind it
                self._explain(job, placement.waiting_reason(plans, eligible.values(), region))
                break  # first come first served: later jobs do not jump the line
            workers = {w.name: w for w in Worker.objects.filter(name__in={a.worker for a in assignments})}
            if whole:
                self._hand_over_whole(job, workers[assignments[0].worker])
            else:
                self._launch_gang(job, assignments, workers)
            offers = None  # read again: this job now holds its share

    def _place_whole(self, plans, offers, region):
        """All of a job's replicas on one worker: the one with the least room left that fits."""
        fits = []
        for offer in offers.values():
            assignments = placement.place(plans, [offer], region, self.rng)
            if assignments is not None:
                fits.append((offer.free_cpus, offer.name, assignments))
        return min(fits)[2] if fits else None

    def _explain(self, job: Job, reason: str) -> None:
        if job.wait_reason == reason:
            return
        Job.objects.filter(pk=job.pk).update(wait_reason=reason)
        sink = LogSink(job.pk)
        sink.service(reason, severity="WARNING")
        sink.close()

    def _launch_gang(self, job: Job, assignments: list[placement.Assignment], workers: dict[str, Worker]) -> None:
        with transaction.atomic():
            if not job.mark_preparing(self.runner_id):
                return
            Job.objects.filter(pk=job.pk).update(wait_reason="")
            for assignment in assignments:
                plan, worker = assignment.plan, workers[assignment.worker]
                Replica.objects.create(
                    job=job,
                    task_type=plan.task_type,
                    task_index=plan.index,
                    label=catalogue.replica_label(plan.task_type, plan.index),
                    machine_type=plan.machine_type,
                    accelerator_type=plan.accelerator_type or "",
                    accelerator_count=plan.accelerator_count,
                    host=worker.address,
                    port=assignment.port,
                    worker=worker,
                    devices=",".join(map(str, assignment.devices)),
                    generation=job.restarts,
                )
        # Hand the replicas to their workers from here, on this thread's warm connection: a new
        # runner thread's first query opens a database connection, tens of milliseconds.
        replicas = list(current_replicas(job))
        try:
            launch(job, replicas, prepare_job_dir(job.training_input, project=job.project))
        except PrepareError:
            pass  # the runner fails the job with the reason
        self._start_runner(job.pk, admitted=True)

    def _hand_over_whole(self, job: Job, worker: Worker) -> None:
        claim_by = timezone.now() + timedelta(seconds=settings.WORKER_CLAIM_SECONDS)
        if Job.objects.filter(pk=job.pk, state=JobState.QUEUED, worker=None).update(
            worker=worker, lease_expires=claim_by, wait_reason=""
        ):
            transaction.on_commit(lambda: tasks.send_run_job(worker.queue, job.pk))

    # --- losing workers --------------------------------------------------------------------

    def _reconcile_replicas(self) -> None:
        """Replicas whose lease ran out: their worker stopped renewing it (killed, host gone)."""
        now = timezone.now()
        lost = Replica.objects.filter(
            state__in=LIVE_REPLICA_STATES, attempt__gt=0, lease_expires__lt=now, job__worker=None
        ).select_related("job", "worker")
        for replica in lost:
            self._replica_lost(replica)

    def _replica_lost(self, replica: Replica) -> None:
        job = replica.job
        worker = replica.worker.name if replica.worker else "its worker"
        current = Replica.objects.filter(pk=replica.pk, attempt=replica.attempt, state__in=LIVE_REPLICA_STATES)
        now = timezone.now()
        sink = LogSink(job.pk)
        try:
            if replica.stop_requested or job.state not in (JobState.PREPARING, JobState.RUNNING):
                current.update(state=ReplicaState.STOPPED, end_time=now, attempt=F("attempt") + 1)
                return
            if replica.restarts < settings.MAX_REPLICA_RESTARTS:
                restarts = replica.restarts + 1
                if current.update(
                    state=ReplicaState.PENDING,
                    attempt=F("attempt") + 1,
                    restarts=restarts,
                    worker=None,
                    pid=None,
                    lease_expires=None,
                    exit_code=None,
                    not_before=now + timedelta(seconds=restart_backoff(restarts)),
                ):
                    sink.service(
                        f"{replica.label} was lost with {worker} (no heartbeat for "
                        f"{settings.WORKER_LEASE_SECONDS:g}s); it starts again elsewhere (restart "
                        f"{restarts} of {settings.MAX_REPLICA_RESTARTS}).",
                        severity="WARNING",
                    )
                return
            if current.update(
                state=ReplicaState.LOST,
                end_time=now,
                attempt=F("attempt") + 1,
                error_message=f"The replica {replica.task_type} {replica.task_index} was lost "
                f"{replica.restarts + 1} times with its workers.",
            ):
                sink.service(
                    f"{replica.label} was lost with {worker} again, {replica.restarts + 1} times in all.",
                    severity="ERROR",
                )
        finally:
            sink.close()

    def _restart_replicas(self) -> None:
        """Lost replicas waiting for a worker: place each on any worker it fits, then hand it over."""
        now = timezone.now()
        waiting = (
            Replica.objects.filter(
                state=ReplicaState.PENDING,
                worker=None,
                attempt__gt=0,
                job__state__in=[JobState.PREPARING, JobState.RUNNING],
            )
            .filter(not_before__lte=now)
            .select_related("job")
        )
        offers = None
        for replica in waiting:
            offers = offers if offers is not None else capacity.offers()
            plan = catalogue.ReplicaPlan(
                replica.task_type,
                replica.task_index,
                replica.machine_type,
                replica.accelerator_type or None,
                replica.accelerator_count,
            )
            region = replica.job.training_input.get("region", "")
            assignments = placement.place([plan], offers.values(), region, self.rng)
            if assignments is None:
                continue  # it waits for room; the job keeps running
            worker = Worker.objects.get(name=assignments[0].worker)
            launch = dict(replica.launch)
            launch["tfConfig"], launch["clusterSpec"] = _moved_configs(replica, worker.address, assignments[0].port)
            if Replica.objects.filter(
                pk=replica.pk, attempt=replica.attempt, state=ReplicaState.PENDING, worker=None
            ).update(
                worker=worker,
                host=worker.address,
                port=assignments[0].port,
                devices=",".join(map(str, assignments[0].devices)),
                launch=launch,
                lease_expires=now + timedelta(seconds=settings.WORKER_CLAIM_SECONDS),
            ):
                tasks.send_start_replica(worker.queue, replica.pk, replica.attempt)
                offers = None

    def _reconcile_whole_jobs(self) -> None:
        """Jobs run whole by a worker whose lease ran out: retried, or given up."""
        now = timezone.now()
        unclaimed = Job.objects.filter(state=JobState.QUEUED, lease_expires__lt=now).exclude(worker=None)
        unclaimed.update(worker=None, lease_expires=None)
        lost = (
            Job.objects.filter(
                state__in=[JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING], lease_expires__lt=now
            )
            .exclude(worker=None)
            .select_related("worker")
        )
        for job in lost:
            worker = job.worker.name if job.worker else "its worker"
            Replica.objects.filter(job=job, state__in=LIVE_REPLICA_STATES).update(
                state=ReplicaState.STOPPED, end_time=now
            )
            sink = LogSink(job.pk)
            try:
                if job.state == JobState.CANCELLING:
                    sink.service("Job was cancelled.")
                    sink.flush()
                    Job.objects.filter(pk=job.pk).update(worker=None, lease_expires=None)
                    job.mark_cancelled()
                elif job.restarts < settings.MAX_JOB_RESTARTS:
                    sink.service(
                        f"The job was lost with {worker}; it starts again (retry {job.restarts + 1} of "
                        f"{settings.MAX_JOB_RESTARTS}).",
                        severity="WARNING",
                    )
                    sink.flush()
                    job.requeue()
                else:
                    message = f"The job was lost with its worker {job.restarts + 1} times; it is not retried again."
                    sink.service(message, severity="ERROR")
                    sink.flush()
                    job.mark_failed(message)
                    Job.objects.filter(pk=job.pk).update(worker=None, lease_expires=None)
            finally:
                sink.close()
            announce_state(job)


def current_replicas(job: Job):
    """The replicas of the job's current run (an earlier run's, before a retry, stay as history)."""
    return Replica.objects.filter(job=job, generation=job.restarts, trial_id="").select_related("worker")


def launch(job: Job, replicas: list[Replica], job_dir: str | None) -> None:
    """TF_CONFIG from the replicas' placements, then each replica to its worker's queue (attempt 1)."""
    training_input = job.training_input
    placements = {
        r.label: Placement(
            catalogue.ReplicaPlan(
                r.task_type, r.task_index, r.machine_type, r.accelerator_type or None, r.accelerator_count
            ),
            r.host,
            r.port,
        )
        for r in replicas
    }
    configs = cluster_configs(
        list(placements.values()),
        job_id=job.job_id,
        training_input=training_input,
        use_chief=strategies.strategy_for(job).uses_chief(),
    )
    claim_by = timezone.now() + timedelta(seconds=settings.WORKER_CLAIM_SECONDS)
    for replica in replicas:
        tf_config, cluster_spec = configs[replica.label]
        spec = {
            "tfConfig": tf_config,
            "clusterSpec": cluster_spec,
            "jobDir": job_dir,
            "args": list(training_input.get("args", [])),
        }
        if Replica.objects.filter(pk=replica.pk, attempt=0, state=ReplicaState.PENDING).update(
            attempt=1, launch=spec, lease_expires=claim_by
        ):
            tasks.send_start_replica(replica.worker.queue, replica.pk, 1)


def _moved_configs(replica: Replica, host: str, port: int) -> tuple[dict, dict]:
    """TF_CONFIG and CLUSTER_SPEC of a replica that starts again at a new address."""
    tf_config, cluster_spec = dict(replica.launch.get("tfConfig") or {}), dict(replica.launch.get("clusterSpec") or {})
    old, new = f"{replica.host}:{replica.port}", f"{host}:{port}"
    for config in (tf_config, cluster_spec):
        config["cluster"] = {
            kind: [new if address == old else address for address in addresses]
            for kind, addresses in (config.get("cluster") or {}).items()
        }
    return tf_config, cluster_spec


class ScaledJobRunner(RunnerBase):
    """Watches one job whose replicas run on workers; decides its outcome as embedded mode does."""

    def __init__(
        self, job_pk: int, runner_id: str, on_done=None, coordinator: Coordinator | None = None, admitted: bool = False
    ):
        super().__init__(job_pk, runner_id, on_done)
        self.coordinator = coordinator
        self.admitted = admitted  # just admitted by this coordinator (not adopted from another)
        self.detached = threading.Event()

    def detach(self) -> None:
        """This process stops coordinating: leave the job and its replicas as they are."""
        self.detached.set()

    def _main(self) -> None:
        close_old_connections()
        try:
            job = Job.objects.select_related("project").get(pk=self.job_pk)
            self.sink = LogSink(job.pk)
            try:
                self._coordinate(job)
            finally:
                self.sink.close()
                if not self.detached.is_set():
                    take_back_inputs(job)  # what the workers lent for it, on the storage they share
        except Exception:
            if self.detached.is_set():
                logger.exception("Coordinating job %s failed", self.job_pk)
            else:
                self._stop_replicas(Job.objects.get(pk=self.job_pk))
                job = record_crash(self.job_pk, f"Coordinating job {self.job_pk} failed")
                if job is not None:
                    self.announce(job)
        finally:
            connection.close()
            if self.on_done:
                self.on_done(self)

    def _coordinate(self, job: Job) -> None:
        if job.state == JobState.CANCELLING:
            self.cancel_requested.set()
        replicas = list(current_replicas(job))
        if any(r.attempt == 0 for r in replicas) and not self.cancel_requested.is_set():
            try:
                job_dir = self._check(job)
            except PrepareError as error:
                self._release_pending(job)
                self._fail(job, str(error))
                return
            launch(job, replicas, job_dir)  # an adopted job whose replicas were never handed out
        if self.admitted:
            self.announce(job)
            self.sink.service(
                f"Job {job.job_id} is preparing: {len(replicas)} replicas are placed on {_worker_names(replicas)}."
            )
        outcome = self._watch_remote(job)
        if outcome.get("detached"):
            return
        job.refresh_from_db()
        output = self._training_output(job)
        if outcome.get("lost"):
            self._retry_or_fail(job, outcome["lost"], output)
        elif outcome.get("failed"):
            self._fail(job, outcome["failed"].error_message or "A replica failed.", output)
        else:
            self._conclude(job, outcome, output)

    def _check(self, job: Job) -> str | None:
        """The job dir, made once here. Packages are fetched and checked by each worker before it
        installs them: a bad one fails its replica, and so the job, with embedded mode's message."""
        return prepare_job_dir(job.training_input, project=job.project)

    def _watch_remote(self, job: Job) -> dict:
        """Until the master finishes, a replica fails or is lost for good, a cancel, or the time limit."""
        while True:
            if self.detached.is_set():
                return {"detached": True}
            job.refresh_from_db(fields=["state", "start_time", "restarts"])
            if job.state == JobState.CANCELLING:
                self.cancel_requested.set()
            if self.cancel_requested.is_set():
                self._stop_replicas(job)
                return {"cancelled": True}
            if job.start_time and (timezone.now() - job.start_time).total_seconds() > job.max_running_seconds:
                self._stop_replicas(job)
                return {"timed_out": True}
            replicas = list(current_replicas(job))
            if job.state == JobState.PREPARING and any(r.state == ReplicaState.RUNNING and r.pid for r in replicas):
                if job.mark_running():
                    self.announce(job)
            by_state = {r.state: r for r in replicas}
            master = next((r for r in replicas if r.task_type == "master"), None)
            if ReplicaState.FAILED in by_state:
                self._stop_replicas(job)
                return {"failed": by_state[ReplicaState.FAILED]}
            if ReplicaState.LOST in by_state:
                self._stop_replicas(job)
                return {"lost": by_state[ReplicaState.LOST]}
            if master is not None and master.state == ReplicaState.SUCCEEDED:
                self._stop_replicas(job)
                if job.state == JobState.PREPARING:
                    job.mark_running()
                return {"succeeded": True}
            self.detached.wait(0.1)

    def _stop_replicas(self, job: Job) -> None:
        """Ask the workers to stop what still runs, and wait until they did (or were lost)."""
        live = current_replicas(job).filter(state__in=LIVE_REPLICA_STATES)
        live.filter(state=ReplicaState.PENDING).filter(pid=None).update(
            state=ReplicaState.STOPPED, end_time=timezone.now(), attempt=F("attempt") + 1
        )
        live.update(stop_requested=True)
        names = ", ".join(live.values_list("label", flat=True))
        if names:
            self.sink.service(f"Stopping {names}.")
        deadline = time.monotonic() + settings.STOP_GRACE_SECONDS + settings.WORKER_LEASE_SECONDS + 5
        while live.exists() and time.monotonic() < deadline and not self.detached.is_set():
            self.detached.wait(0.1)
            if self.coordinator is not None and not self.coordinator.leading.is_set():
                return

    def _release_pending(self, job: Job) -> None:
        current_replicas(job).filter(state=ReplicaState.PENDING).update(
            state=ReplicaState.STOPPED, attempt=F("attempt") + 1
        )

    def _retry_or_fail(self, job: Job, lost: Replica, output: dict) -> None:
        if job.restarts < settings.MAX_JOB_RESTARTS:
            self.sink.service(
                f"{lost.error_message} The job starts again from the beginning (retry "
                f"{job.restarts + 1} of {settings.MAX_JOB_RESTARTS}).",
                severity="WARNING",
            )
            self.sink.flush()
            Job.objects.filter(pk=job.pk).update(training_output=output, etag=new_etag())
            if job.requeue():
                self.announce(job)
            return
        self._fail(job, f"{lost.error_message} The job was retried {job.restarts} times.", output)


def _worker_names(replicas: list[Replica]) -> str:
    names = sorted({r.worker.name for r in replicas if r.worker})
    return ", ".join(names) or "no worker"


_coordinator: Coordinator | None = None
_lock = threading.Lock()


def start(role: str) -> Coordinator:
    global _coordinator
    with _lock:
        if _coordinator is None:
            _coordinator = Coordinator(role)
            _coordinator.start()
        return _coordinator


def stop() -> None:
    global _coordinator
    with _lock:
        coordinator, _coordinator = _coordinator, None
    if coordinator is not None:
        coordinator.stop()
