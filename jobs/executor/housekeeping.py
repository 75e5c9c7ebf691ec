"""What both schedulers hold: embedded mode's controller and scaled mode's coordinator.

Each is made of these parts rather than one extending the other: a loop thread woken by
dispatch, the table of the job runners it watches, and the chores either does on its ticks
(``scheduling.maxWaitTime``, and once a day the audit log's retention and the projects' clean-up).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from django.db import close_old_connections, connection
from django.utils import timezone

from aiconsole import audit
from jobs.executor import cleanup
from jobs.executor.runner import RunnerBase
from jobs.models import Job, JobState
from jobs.services import announce_state

logger = logging.getLogger(__name__)

PURGE_INTERVAL_SECONDS = 24 * 3600


class Loop:
    """A daemon thread that runs ``step`` each time it is woken, and at the latest after the
    number of seconds the last step returned. ``step`` runs with fresh database connections;
    an exception is logged and the loop goes on."""

    def __init__(self, name: str, step: Callable[[], float], first_wait: float = 1.0):
        self.name = name
        self._step = step
        self._first_wait = first_wait
        self.stopping = threading.Event()
        self._wake = threading.Event()
        self.thread = threading.Thread(target=self._run, name=name, daemon=True)

    def start(self) -> None:
        self.thread.start()

    def wake(self) -> None:
        self._wake.set()

    def stop(self, timeout: float) -> None:
        self.stopping.set()
        self._wake.set()
        if self.thread.is_alive():
            self.thread.join(timeout)

    def _run(self) -> None:
        wait = self._first_wait
        while not self.stopping.is_set():
            self._wake.wait(wait)
            self._wake.clear()
            if self.stopping.is_set():
                break
            try:
                close_old_connections()
                wait = self._step()
            except Exception:
                logger.exception("%s: a tick failed", self.name)
        connection.close()


class Runners:
    """The runners of the jobs one process watches, by job; shared by the loop and the runners'
    own threads (a runner leaves the table when its job ends)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._by_job: dict[int, RunnerBase] = {}

    def add(self, runner: RunnerBase) -> None:
        with self._lock:
            self._by_job[runner.job_pk] = runner

    def remove(self, runner: RunnerBase) -> None:
        with self._lock:
            if self._by_job.get(runner.job_pk) is runner:
                del self._by_job[runner.job_pk]

    def get(self, job_pk: int) -> RunnerBase | None:
        with self._lock:
            return self._by_job.get(job_pk)

    def __contains__(self, job_pk: int) -> bool:
        with self._lock:
            return job_pk in self._by_job

    def all(self) -> list[RunnerBase]:
        with self._lock:
            return list(self._by_job.values())

    def busy_replicas(self) -> int:
        """Replica slots the watched jobs hold (a job holds at least one while it prepares)."""
        with self._lock:
            return sum(max(runner.replica_count, 1) for runner in self._by_job.values())


def expire_waiting() -> None:
    """``scheduling.maxWaitTime``: a job still QUEUED or PREPARING past it is cancelled."""
    now = timezone.now()
    waiting = Job.objects.filter(state__in=[JobState.QUEUED, JobState.PREPARING])
    for job in waiting.exclude(training_input__scheduling__maxWaitTime=None).select_related("project"):
        limit = job.max_wait_seconds
        if limit is not None and (now - job.create_time).total_seconds() > limit:
            message = (
                f"The job waited longer than its maximum wait time of "
                f"{job.scheduling['maxWaitTime']} (trainingInput.scheduling.maxWaitTime) "
                "and was cancelled."
            )
            if job.mark_cancelling(message):
                announce_state(job)


class AuditRetention:
    """The audit log's retention and the projects' clean-up (``cleanup``: their retention, unused
    environments), applied once a day (neither mode has a scheduler of its own). It runs on a
    thread of its own: a long clean-up (a year of logs, the first time a retention is set) never
    holds up the tick that started it, whose admissions, cancels and, in scaled mode,
    reconciliation go on meanwhile. ``stop`` ends it between two removals."""

    def __init__(self) -> None:
        self._last: float | None = None
        self._thread: threading.Thread | None = None
        self._stopping = threading.Event()

    def run_if_due(self) -> None:
        now = time.monotonic()
        if self._last is not None and now - self._last < PURGE_INTERVAL_SECONDS:
            return
        if self._thread is not None and self._thread.is_alive():
            return  # yesterday's is still going
        self._last = now
        self._stopping.clear()
        self._thread = threading.Thread(target=self._run, name="daily-clean-up", daemon=True)
        self._thread.start()

    def wait(self, timeout: float) -> bool:
        """Let the clean-up under way finish; whether none runs now."""
        if self._thread is not None:
            self._thread.join(timeout)
        return self._thread is None or not self._thread.is_alive()

    def stop(self, timeout: float = 5.0) -> None:
        """End the clean-up under way after the removal it is at (the rest waits for tomorrow)."""
        self._stopping.set()
        self.wait(timeout)

    def _run(self) -> None:
        try:
            self._clean_up()
        finally:
            connection.close()

    def _clean_up(self) -> None:
        try:
            cleanup.run(stopping=self._stopping)
        except Exception:
            logger.exception("The daily clean-up failed; it is tried again tomorrow")
        if self._stopping.is_set():
            return
        try:
            removed = audit.purge()
        except audit.ChainBroken:
            logger.error("Audit log retention skipped: the chain does not verify (aiconsole audit verify)")
            return
        if any(removed.values()):
            logger.info("Audit log retention removed %s", removed)
