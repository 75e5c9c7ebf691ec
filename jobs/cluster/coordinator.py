"""The scaled-mode coordinator: one elected process admits, places, watches and restarts.

Every ``aiconsole web`` and ``aiconsole worker`` process runs a candidate; the one holding the
coordinator lease (a ``CoordinatorLease`` row with a deadline, renewed every second on a database
connection whose every statement is bounded) leads. If its process dies, its database session ends
and another candidate leads within a second or two; if it is frozen or cut off from the database,
it stops acting when its own clock says the lease has run out, and another leads once the row's
deadline has passed (``COORDINATOR_LEASE_SECONDS``). The new leader adopts the running jobs: the
job's state, its replicas' placement and their leases all live in the database.

The leader, every tick:

- expires ``scheduling.maxWaitTime`` and relays cancels (embedded mode's controller does both);
- finds replicas whose lease ran out (their worker was killed, frozen or cut off; by then the
  replica has stopped itself, ``agent.lease_deadline``) and starts the job's whole gang again, as
  TFJob does: the other replicas are stopped, then all are placed anew, with a new fencing token
  and a TF_CONFIG that names where each peer now runs; up to ``MAX_REPLICA_RESTARTS`` times per
  replica, then the job is retried from the start, up to ``MAX_JOB_RESTARTS`` times, then it
  fails;
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
from typing import Any

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
from jobs.quotas import admission as quotas
from jobs.services import announce_state

logger = logging.getLogger(__name__)

TICK_SECONDS = 0.25
RENEW_SECONDS = 1.0  # how often the leader renews its lease


def restart_backoff(restarts: int) -> float:
    """Seconds before a lost replica's restart number ``restarts`` (1, 2, 4, 8, 8…)."""
    return float(min(2 ** max(restarts - 1, 0), 8))


class LeaseLost(Exception):
    """The coordinator lease ran out (by this process's own clock) or another process holds it."""


class LeaderLease:
    """The coordinator lease (``CoordinatorLease``), held through a connection of its own.

    Every connect and statement on it is bounded (a connect timeout, a statement timeout, TCP
    keepalives), so a partition ends in seconds, never at the database's idle timeout. ``valid``
    is judged by this process's monotonic clock: the lease is surely ours until the moment a renewal
    was asked, plus the lease, less a second's margin; a frozen holder that wakes up past it acts
    no more before it has the lease again."""

    def __init__(self, holder: str):
        self.holder = holder
        self.epoch: int | None = None
        self._connection: Any = None
        self._valid_until = 0.0
        self._renewed_at = 0.0
        self._lock = threading.Lock()  # the coordinator's loop and its lease keeper share the connection

    @property
    def seconds(self) -> float:
        return settings.COORDINATOR_LEASE_SECONDS

    def _execute(self, query: str, params: tuple):
        with self._lock:
            return self._execute_locked(query, params)

    def _execute_locked(self, query: str, params: tuple):
        import psycopg

        if self._connection is None or self._connection.closed:
            params_ = {
                **connections["default"].get_connection_params(),
                "autocommit": True,
                "connect_timeout": 3,
                "options": "-c statement_timeout=3000",
                "keepalives": 1,
                "keepalives_idle": 2,
                "keepalives_interval": 1,
                "keepalives_count": 3,
            }
            self._connection = psycopg.connect(**params_)
        cursor = self._connection.execute(query, params)
        return cursor.fetchone() if cursor.description else None

    def try_acquire(self) -> bool:
        asked = time.monotonic()
        try:
            self._execute(
                "INSERT INTO jobs_coordinatorlease (id, holder, epoch) VALUES (1, '', 0) ON CONFLICT (id) DO NOTHING",
                (),
            )
            row = self._execute(
                "UPDATE jobs_coordinatorlease SET holder = %s, epoch = epoch + 1, backend_pid = pg_backend_pid(), "
                "expires = now() + make_interval(secs => %s) "
                "WHERE id = 1 AND (expires IS NULL OR expires < now() OR holder = %s "
                "OR NOT EXISTS (SELECT 1 FROM pg_stat_activity WHERE pid = backend_pid)) RETURNING epoch",
                (self.holder, self.seconds, self.holder),
            )
        except Exception:
            logger.warning("Could not reach the database to elect a coordinator", exc_info=True)
            self.close()
            return False
        if row is None:
            return False
        self.epoch = row[0]
        self._renewed(asked)
        return True

    def renew(self) -> bool:
        """Renewed (at most once a second); False when the lease is lost or has run out."""
        if time.monotonic() - self._renewed_at < RENEW_SECONDS:
            return self.valid()
        asked = time.monotonic()
        try:
            row = self._execute(
                "UPDATE jobs_coordinatorlease SET expires = now() + make_interval(secs => %s) "
                "WHERE id = 1 AND holder = %s AND epoch = %s RETURNING epoch",
                (self.seconds, self.holder, self.epoch),
            )
        except Exception:
            logger.warning("Could not renew the coordinator lease", exc_info=True)
            self.close()
            return self.valid()  # it may still be renewed before it runs out
        if row is None:
            self._valid_until = 0.0
            return False
        self._renewed(asked)
        return True

    def _renewed(self, asked: float) -> None:
        self._renewed_at = asked
        self._valid_until = asked + self.seconds - 1.0

    def valid(self) -> bool:
        return time.monotonic() < self._valid_until

    def release(self) -> None:
        """Give the lease up at once (a clean stop): another candidate leads within a second."""
        if self.epoch is not None and self.valid():
            try:
                self._execute(
                    "UPDATE jobs_coordinatorlease SET expires = NULL, holder = '' "
                    "WHERE id = 1 AND holder = %s AND epoch = %s RETURNING epoch",
                    (self.holder, self.epoch),
                )
            except Exception:
                logger.warning("Could not give the coordinator lease up", exc_info=True)
        self._valid_until = 0.0
        self.close()

    def close(self) -> None:
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
        self.lease = LeaderLease(self.runner_id)
        self.leading = threading.Event()
        self.rng = random.Random()
        self.runners = Runners()
        self.retention = AuditRetention()
        self.loop = Loop("coordinator", self._step, first_wait=0)
        self._wake_thread = threading.Thread(target=self._listen_for_wakes, name="coordinator-wake", daemon=True)
        self._lease_thread = threading.Thread(target=self._keep_lease, name="coordinator-lease", daemon=True)

    def start(self) -> None:
        self.loop.start()
        self._wake_thread.start()
        self._lease_thread.start()

    def _keep_lease(self) -> None:
        """Renew the lease every second while leading, whatever a tick is busy with."""
        while not self.loop.stopping.is_set():
            if self.leading.is_set():
                self.lease.renew()
            self.loop.stopping.wait(0.25)

    def stop(self, timeout: float = 10.0) -> None:
        self.loop.stop(timeout)
        self._step_down()
        self.lease.release()

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
        """Lead if the lease is free, tick while leading; the seconds until the next try."""
        if not self.leading.is_set():
            if not self.lease.try_acquire():
                return 1.0
            logger.info("%s (%s) is now the coordinator (epoch %s)", self.runner_id, self.role, self.lease.epoch)
            self.leading.set()
        try:
            self.tick()  # the lease keeper renews it; each step checks it first
        except LeaseLost:
            logger.warning("%s lost the coordinator lease; it stands down", self.runner_id)
            self._step_down()
            return 0
        return TICK_SECONDS

    def still_leading(self) -> bool:
        """Whether this process may act as the coordinator now (its runners ask before they act)."""
        return self.leading.is_set() and self.lease.valid()

    def _step_down(self) -> None:
        """Stop watching jobs without touching them: the next coordinator adopts them."""
        self.leading.clear()
        self.retention.stop()  # the next coordinator's own clean-up goes on from there
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
        # again (running jobs keep their place ahead of new ones), then the queue. Before each
        # step, the lease: a coordinator that was frozen mid-tick acts no more once it ran out.
        for step in (
            self._relay_cancels,
            self._restart_replicas,
            self._admit,
            self._reconcile_replicas,
            self._reconcile_whole_jobs,
            expire_waiting,
            self._adopt,
            self.retention.run_if_due,
        ):
            if not self.lease.valid():
                raise LeaseLost
            step()

    def _relay_cancels(self) -> None:
        """Cancels reach the runner watching the job; a worker running a job whole sees it itself."""
        for pk in Job.objects.filter(state=JobState.CANCELLING, worker=None).values_list("pk", flat=True):
            runner = self.runners.get(pk)
            if runner is not None:
                runner.cancel()

    def _adopt(self) -> None:
        """Jobs an earlier coordinator was watching: watch them from here."""
        # Its own too: jobs it watched before it stood down and led again.
        started = Job.objects.filter(state__in=[JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING], worker=None)
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
        """Place what fits, in the fair queue's order (``jobs.quotas``), each job within its project's
        quotas; the rightful next job that no worker has room for yet stops the line."""
        queued = list(Job.objects.queued_in_order().filter(worker=None).select_related("project"))
        if not queued:
            return
        usage = quotas.running_usage()
        limits = quotas.quotas_of({job.project_id for job in queued})
        offers = capacity.offers()
        # What the workers have in all, for the fair shares: their replica slots, CPUs and accelerators.
        totals: dict[str, int] = {quotas.REPLICAS: 0, quotas.CPUS: 0}
        for offer in offers.values():
            totals[quotas.REPLICAS] += offer.slots or 0
            totals[quotas.CPUS] += int(offer.cpus or 0)
            for kind, count in offer.accelerators.items():
                totals[kind] = totals.get(kind, 0) + int(count)
        order = quotas.fair_order(queued, usage, {k: v for k, v in totals.items() if v})
        job = next(order, None)
        while job is not None:
            outcome = self._admit_one(job, offers, usage, limits)
            if outcome is None:
                return  # the rightful next waits for room: nobody jumps it
            if outcome == quotas.ADMITTED:
                offers = capacity.offers()  # read again: this job now holds its share
            try:
                job = order.send(outcome)
            except StopIteration:
                job = None

    def _admit_one(self, job: Job, offers: dict, usage, limits) -> str | None:
        """Place one job: ADMITTED when placed; WAITS when its quota holds it (its project's later
        jobs wait behind it); PASSED when nothing could ever run it (it holds up nobody); None when
        the line stops at it."""
        need = quotas.demand(job)
        blocked = quotas.blocking_quota(job, need, usage, limits.get(job.project_id, []))
        if blocked:
            self._explain(job, blocked)
            return quotas.WAITS
        region = (job.training_input or {}).get("region") or (job.prediction_input or {}).get("region") or ""
        whole = capacity.runs_whole(job)
        plans = capacity.whole_job_plans(job) if whole else catalogue.replica_plan(job.training_input or {})
        eligible = self._eligible(job, offers, region)
        if eligible is None:
            return quotas.PASSED
        if whole:
            assignments = self._place_whole(plans, eligible, region)
        else:
            assignments = placement.place(plans, eligible.values(), region, self.rng)
        if assignments is None:
            never = placement.never_fits(plans, list(eligible.values()), region)
            if never:
                self._explain(job, never)
                return quotas.PASSED  # it does not hold up the jobs behind it
            self._explain(job, placement.waiting_reason(plans, eligible.values(), region))
            return None
        workers = {w.name: w for w in Worker.objects.filter(name__in={a.worker for a in assignments})}
        if whole:
            self._hand_over_whole(job, workers[assignments[0].worker])
        else:
            self._launch_gang(job, assignments, workers)
        usage.add(job, need)
        return quotas.ADMITTED

    def _eligible(self, job: Job, offers: dict, region: str) -> dict | None:
        """The workers that may run ``job``: only those with a container engine for a container
        job (None, with the job told why, when no worker in its region has one)."""
        if not strategies.strategy_for(job).needs_engine:
            return offers
        eligible = {name: offer for name, offer in offers.items() if offer.containers}
        if not any(offer.region == region for offer in eligible.values()):
            self._explain(
                job,
                f"No worker in {region} runs custom containers: start one on a host with podman or "
                "docker (it says so when it registers).",
            )
            return None
        return eligible

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
        """Its lease ran out: by then its trainer stopped itself (``agent.lease_deadline``). It and
        the rest of its gang start again together, or, lost too often, it fails the job's run."""
        job = replica.job
        worker = replica.worker.name if replica.worker else "its worker"
        current = Replica.objects.filter(pk=replica.pk, attempt=replica.attempt, state__in=LIVE_REPLICA_STATES)
        now = timezone.now()
        sink = LogSink(job.pk)
        try:
            if replica.stop_requested or job.state not in (JobState.PREPARING, JobState.RUNNING):
                if current.update(state=ReplicaState.STOPPED, end_time=now, attempt=F("attempt") + 1):
                    sink.service(
                        f"{replica.label} did not confirm its stop before its lease on {worker} ran out; "
                        "its trainer stopped itself by then.",
                        severity="WARNING",
                    )
                return
            why = (
                "which was stopped"
                if replica.worker and replica.worker.stopped
                else f"no heartbeat for {settings.WORKER_LEASE_SECONDS:g}s"
            )
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
                    # The rest of the gang stops, to start again with it: a TF_CONFIG names every
                    # peer, and a peer that moved is not where the others were told it is.
                    others = current_replicas(job).filter(state__in=LIVE_REPLICA_STATES).exclude(pk=replica.pk)
                    count = others.update(stop_requested=True)
                    together = (
                        f"the job's {count + 1} replicas stop and start again together, each told where the others run"
                        if count
                        else "it starts again elsewhere"
                    )
                    sink.service(
                        f"{replica.label} was lost with {worker} ({why}); {together} (restart {restarts} of "
                        f"{settings.MAX_REPLICA_RESTARTS}).",
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
                    f"{replica.label} was lost with {worker} ({why}) again, {replica.restarts + 1} times in all.",
                    severity="ERROR",
                )
        finally:
            sink.close()

    def _restart_replicas(self) -> None:
        """Gangs with a lost replica whose backoff is over: placed again, all together."""
        waiting = Replica.objects.filter(
            state=ReplicaState.PENDING,
            worker=None,
            attempt__gt=0,
            trial_id="",
            job__worker=None,
            job__state__in=[JobState.PREPARING, JobState.RUNNING],
            not_before__lte=timezone.now(),
        ).select_related("job__project")
        jobs = {replica.job_id: replica.job for replica in waiting}
        for job in jobs.values():
            self._place_gang_again(job)

    def _place_gang_again(self, job: Job) -> None:
        """Once the rest of the gang has stopped (or its lease ran out), every replica is placed
        anew, its TF_CONFIG made from where each peer now runs, and handed to its worker."""
        gang = list(current_replicas(job))
        if any(r.state in LIVE_REPLICA_STATES and not _waiting_to_start(r) for r in gang):
            return  # the others are still stopping
        plans = [_plan_of(r) for r in gang]
        region = job.training_input.get("region", "")
        offers = self._eligible(job, capacity.offers(), region)
        if offers is None:
            return
        assignments = placement.place(plans, offers.values(), region, self.rng)
        if assignments is None:
            reason = placement.waiting_reason(plans, offers.values(), region)
            self._explain(job, f"Its replicas wait to start again: {reason}")
            return
        workers = {w.name: w for w in Worker.objects.filter(name__in={a.worker for a in assignments})}
        where = {(a.plan.task_type, a.plan.index): a for a in assignments}
        moved = []
        for replica in gang:
            assignment = where[(replica.task_type, replica.task_index)]
            replica.worker = workers[assignment.worker]
            replica.host, replica.port = replica.worker.address, assignment.port
            moved.append((replica, assignment))
        configs = _configs(job, gang)
        claim_by = timezone.now() + timedelta(seconds=settings.WORKER_CLAIM_SECONDS)
        starts = []
        with transaction.atomic():
            for replica, assignment in moved:
                tf_config, cluster_spec = configs[replica.label]
                attempt = replica.attempt if replica.state == ReplicaState.PENDING else replica.attempt + 1
                updated = Replica.objects.filter(pk=replica.pk, attempt=replica.attempt, state=replica.state).update(
                    state=ReplicaState.PENDING,
                    attempt=attempt,
                    worker=replica.worker,
                    host=replica.host,
                    port=replica.port,
                    devices=",".join(map(str, assignment.devices)),
                    launch={**replica.launch, "tfConfig": tf_config, "clusterSpec": cluster_spec},
                    stop_requested=False,
                    pid=None,
                    exit_code=None,
                    end_time=None,
                    lease_expires=claim_by,
                )
                if not updated:  # it changed meanwhile (a cancel): the next tick looks again
                    transaction.set_rollback(True)
                    return
                starts.append((replica.worker.queue, replica.pk, attempt))
            Job.objects.filter(pk=job.pk).update(wait_reason="")
        for queue, pk, attempt in starts:
            tasks.send_start_replica(queue, pk, attempt)
        if len(gang) > 1:
            sink = LogSink(job.pk)
            sink.service(
                f"The job's {len(gang)} replicas start again together on {_worker_names(gang)}: "
                + ", ".join(f"{r.label} at {r.host}:{r.port}" for r in gang)
                + "."
            )
            sink.close()

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


def _waiting_to_start(replica: Replica) -> bool:
    return replica.state == ReplicaState.PENDING and replica.worker_id is None


def _plan_of(replica: Replica) -> catalogue.ReplicaPlan:
    return catalogue.ReplicaPlan(
        replica.task_type,
        replica.task_index,
        replica.machine_type,
        replica.accelerator_type or None,
        replica.accelerator_count,
    )


def _configs(job: Job, replicas: list[Replica]) -> dict[str, tuple[dict, dict]]:
    """Each replica's TF_CONFIG and CLUSTER_SPEC, from where every replica of the gang runs."""
    return cluster_configs(
        [Placement(_plan_of(r), r.host, r.port) for r in replicas],
        job_id=job.job_id,
        training_input=job.training_input,
        use_chief=strategies.strategy_for(job).uses_chief(),
    )


def launch(job: Job, replicas: list[Replica], job_dir: str | None) -> None:
    """TF_CONFIG from the replicas' placements, then each replica to its worker's queue (attempt 1)."""
    training_input = job.training_input
    configs = _configs(job, replicas)
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

    def _may_act(self) -> bool:
        """Still this job's coordinator: not detached, and the lease is this process's."""
        if self.detached.is_set():
            return False
        return self.coordinator is None or self.coordinator.still_leading()

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
            if not self._may_act():
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
        """Until the master finishes, a replica fails or is lost for good, a cancel, or the time limit;
        then until every replica has stopped. Detached when this process no longer coordinates: the
        next coordinator adopts the job and decides it."""
        outcome = self._outcome(job)
        if outcome.get("detached") or self._stop_replicas(job):
            return outcome
        return {"detached": True}  # the lease went while its replicas were stopping

    def _outcome(self, job: Job) -> dict:
        while True:
            if not self._may_act():
                return {"detached": True}
            job.refresh_from_db(fields=["state", "start_time", "restarts"])
            if job.state == JobState.CANCELLING:
                self.cancel_requested.set()
            if self.cancel_requested.is_set():
                return {"cancelled": True}
            if job.start_time and (timezone.now() - job.start_time).total_seconds() > job.max_running_seconds:
                return {"timed_out": True}
            replicas = list(current_replicas(job))
            if job.state == JobState.PREPARING and any(r.state == ReplicaState.RUNNING and r.pid for r in replicas):
                if job.mark_running():
                    self.announce(job)
            by_state = {r.state: r for r in replicas}
            master = next((r for r in replicas if r.task_type == "master"), None)
            if ReplicaState.FAILED in by_state:
                return {"failed": by_state[ReplicaState.FAILED]}
            if ReplicaState.LOST in by_state:
                return {"lost": by_state[ReplicaState.LOST]}
            if master is not None and master.state == ReplicaState.SUCCEEDED:
                if job.state == JobState.PREPARING:
                    job.mark_running()
                return {"succeeded": True}
            self.detached.wait(0.1)

    def _stop_replicas(self, job: Job) -> bool:
        """Ask the workers to stop what still runs, and wait until they did, or until their lease ran
        out (a replica stops itself before that: ``agent.lease_deadline``): only then is the job
        over, so that nothing of it runs once it shows CANCELLED, FAILED or SUCCEEDED. False when
        this process stopped coordinating meanwhile."""
        live = current_replicas(job).filter(state__in=LIVE_REPLICA_STATES)
        live.filter(state=ReplicaState.PENDING).filter(pid=None).update(
            state=ReplicaState.STOPPED, end_time=timezone.now(), attempt=F("attempt") + 1
        )
        live.update(stop_requested=True)
        names = ", ".join(live.values_list("label", flat=True))
        if names:
            self.sink.service(f"Stopping {names}.")
        while live.exists():
            if not self._may_act():
                return False
            self.detached.wait(0.1)
        return True

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
