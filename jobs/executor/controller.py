"""The embedded executor's controller: admits queued jobs, relays cancels, reconciles.

It reconciles what the database says should run with what runs in this process. On start it
finds jobs an earlier console process left PREPARING or RUNNING, stops their orphaned replicas
and puts them back in line (or fails them after too many restarts), so nothing stays RUNNING
forever. Admission keeps the number of replica processes on this machine within
``AICONSOLE_MAX_REPLICAS``; a job larger than that runs alone.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import uuid

from django.conf import settings
from django.db import transaction

from jobs import dispatch, kinds
from jobs.executor import containers
from jobs.executor.housekeeping import AuditRetention, Loop, Runners, expire_waiting
from jobs.executor.prebuild import Prebuilder
from jobs.executor.replicas import SPARES, stop_orphan
from jobs.executor.runner import RunnerBase
from jobs.executor.sink import LogSink
from jobs.models import Job, JobState, Replica, ReplicaState
from jobs.quotas import admission as quotas

logger = logging.getLogger(__name__)

PREPARED_AHEAD = 20  # queued jobs whose environments are built ahead, at most, from the front
TICK_SECONDS = 1.0  # at the latest; submits and cancels wake it at once

_controller: Controller | None = None
_lock = threading.Lock()


class Controller:
    """Embedded mode's scheduler: runs every admitted job in this process."""

    def __init__(self):
        self.runner_id = f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}"
        self.runners = Runners()
        self.loop = Loop("executor-controller", self._tick)
        self.retention = AuditRetention()
        self.serving = True
        self.prebuilder = Prebuilder()  # queued jobs' environments, built while they wait

    def start(self, *, serving: bool = True) -> None:
        """``serving``: also online prediction (in 'aiconsole up' the web process runs it)."""
        self.serving = serving
        self.reconcile_orphans()
        SPARES.prepare()  # the first replica's reaper, started ahead
        containers.SPARE_PODS.reopen()
        self.loop.start()
        if serving:
            kinds.start_services()

    def wake(self) -> None:
        self.loop.wake()

    def stop(self, timeout: float = 60.0) -> None:
        """Stop admitting, stop running replicas, and requeue their jobs for the next start."""
        self.loop.stop(timeout)
        self.retention.stop()
        self.prebuilder.stop()
        runners = self.runners.all()
        for runner in runners:
            runner.abandon()
        for runner in runners:
            runner.thread.join(timeout)
        containers.SPARE_PODS.close()  # the pods made ahead that no job took
        if self.serving:
            kinds.stop_services()

    # --- each tick -----------------------------------------------------------------------

    def _tick(self) -> float:
        self.retention.run_if_due()
        expire_waiting()
        self._relay_cancels()
        self._admit()
        return TICK_SECONDS

    def _relay_cancels(self) -> None:
        cancelling = Job.objects.filter(state=JobState.CANCELLING).values_list("pk", "runner")
        for pk, runner in cancelling:
            job_runner = self.runners.get(pk)
            if job_runner is not None:
                job_runner.cancel()
            elif runner != self.runner_id:
                # Nobody runs it (its console went away): finish the cancel here.
                Job.objects.get(pk=pk).mark_cancelled()

    def _admit(self) -> None:
        """Start what fits, in the fair queue's order (``jobs.quotas``): the project owed the most
        first, then priority, then first come; a job its project's quota holds back waits, and the
        rightful next job that finds no room stops the line (nobody jumps it). Then have the next
        jobs' environments built ahead, so one that cannot install fails now, not at its turn."""
        # Each project's first jobs are all a pass can reach: it admits a few and prepares 20 ahead.
        queued = quotas.waiting_line(per_project=PREPARED_AHEAD + 1)
        usage = quotas.running_usage()
        # A job started a moment ago reads QUEUED until its runner marks it PREPARING: it holds its
        # share already, and must not get a second runner (whose end would uncount the first).
        starting = [job for job in queued if self.runners.get(job.pk) is not None]
        for held in starting:
            usage.add(held, quotas.demand(held))
        queued = [job for job in queued if self.runners.get(job.pk) is None]
        if not queued:
            self.prebuilder.take([])
            return
        limits = quotas.quotas_of({job.project_id for job in queued})
        order = quotas.fair_order(queued, usage, quotas.console_capacity())
        waiting: list[int] = []
        full = False
        job: Job | None = next(order, None)
        while job is not None and len(waiting) < PREPARED_AHEAD:
            need = quotas.demand(job)
            replicas = need.amounts[quotas.REPLICAS]
            busy = self.runners.busy_replicas()
            outcome = quotas.ADMITTED  # once the line is full, followed as if each went in its turn
            if quotas.blocking_quota(job, need, usage, limits.get(job.project_id, [])):
                outcome = quotas.WAITS  # its project's quota holds it back; the others go on
            elif full or (busy and busy + replicas > settings.MAX_REPLICAS):
                full = True  # the rightful next waits for room: what follows is only prepared ahead
            else:
                runner = kinds.of_job(job).runner()(job.pk, self.runner_id, on_done=self._finished)
                runner.replica_count = replicas
                self.runners.add(runner)
                runner.start()
                usage.add(job, need)
            if (full or outcome == quotas.WAITS) and job.training_input:
                waiting.append(job.pk)
            try:
                job = order.send(outcome)
            except StopIteration:
                job = None
        self.prebuilder.take(waiting)

    def _finished(self, runner: RunnerBase) -> None:
        self.runners.remove(runner)
        self.wake()

    # --- reconciliation ------------------------------------------------------------------

    def reconcile_orphans(self) -> None:
        """Jobs an earlier console process was running: stop leftovers, requeue or fail."""
        containers.sweep()  # an earlier process's containers and pods, found by label
        for job in Job.objects.filter(state__in=[JobState.PREPARING, JobState.RUNNING, JobState.CANCELLING]):
            live = Replica.objects.filter(job=job, state=ReplicaState.RUNNING).exclude(pid=None)
            for replica in live:
                stop_orphan(replica.pid, replica.pk)
            live.update(state=ReplicaState.STOPPED)
            sink = LogSink(job.pk)
            try:
                self._reconcile_job(job, sink)
            finally:
                sink.close()

    def _reconcile_job(self, job: Job, sink: LogSink) -> None:
        if job.state == JobState.CANCELLING:
            sink.service("Job was cancelled.")
            sink.flush()  # stored before the job reads as ended, so readers see the whole log
            job.mark_cancelled()
        elif job.restarts >= settings.MAX_JOB_RESTARTS:
            message = (
                f"The job was interrupted {job.restarts + 1} times because the console stopped "
                "while it ran; it is not restarted again."
            )
            sink.service(message, severity="ERROR")
            sink.flush()
            job.mark_failed(message)
        else:
            sink.service("The console stopped while this job was running; the job starts again.", severity="WARNING")
            with transaction.atomic():
                job.requeue()


def start(*, serving: bool = True) -> Controller:
    """Start the process-wide controller (embedded mode)."""
    global _controller
    with _lock:
        if _controller is None:
            _controller = Controller()
            _controller.start(serving=serving)
            dispatch.attach(_controller.wake)
        return _controller


def stop() -> None:
    global _controller
    with _lock:
        controller, _controller = _controller, None
        dispatch.detach()
    if controller is not None:
        controller.stop()


def listen_for_wakeups(path: str) -> None:
    """In the worker process: a datagram at ``path`` wakes the controller."""
    if os.path.exists(path):
        os.unlink(path)  # left by a worker process that was killed
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    listener.bind(path)

    def listen() -> None:
        while True:
            listener.recv(64)
            dispatch.wake()

    threading.Thread(target=listen, name="executor-wakeups", daemon=True).start()
