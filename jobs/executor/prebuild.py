"""Queued jobs' Python environments, built while they wait for their turn.

A job that cannot install (a pin that does not exist, a module missing from its package) used to
learn so only once it reached the front of the queue, a minute or more after a failure that takes
a second. So the controller hands every job still QUEUED after admission to this builder, which
fetches its packages and builds (or finds in the cache) the environment it will run in (and
builds the pre-built images a container job names that this machine has not built yet), one job
at a time, in queue order, in a thread of its own. A job that cannot be prepared fails at once,
from QUEUED, with the message PREPARING would have given; one that can starts, when its replicas
fit, on an environment that is ready. Nothing is held: the runner still prepares the job itself,
and finds the cache warm.
"""

from __future__ import annotations

import logging
import shutil
import threading
from collections import deque

from django.db import close_old_connections, connection

from jobs.executor import strategies
from jobs.executor.preparing import Cancelled, PrepareError, fetch_packages, needs_gpu, work_dir_for
from jobs.executor.sink import LogSink
from jobs.models import Job, JobState
from jobs.services import announce_state

logger = logging.getLogger(__name__)


class Prebuilder:
    """One thread that prepares queued jobs' environments, in the order they are handed over."""

    def __init__(self):
        self._waiting: deque[int] = deque()
        self._seen: set[int] = set()
        self._lock = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def take(self, job_pks: list[int]) -> None:
        """Queued training jobs to prepare ahead (each once per console process)."""
        with self._lock:
            fresh = [pk for pk in job_pks if pk not in self._seen]
            if not fresh:
                return
            self._seen.update(fresh)
            self._waiting.extend(fresh)
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name="executor-prebuild", daemon=True)
                self._thread.start()
            self._lock.notify()

    def stop(self) -> None:
        with self._lock:
            self._stopping = True
            self._waiting.clear()
            self._lock.notify()

    def _loop(self) -> None:
        while True:
            with self._lock:
                while not self._waiting and not self._stopping:
                    self._lock.wait()
                if self._stopping:
                    return
                job_pk = self._waiting.popleft()
            try:
                close_old_connections()
                prepare_ahead(job_pk)
            except Exception:
                logger.exception("Preparing queued job %s ahead failed", job_pk)
            finally:
                connection.close()


def prepare_ahead(job_pk: int) -> None:
    """Fetch a queued job's packages and build its environment; fail it at once if that fails."""
    job = Job.objects.select_related("project").filter(pk=job_pk, state=JobState.QUEUED).first()
    if job is None or not job.training_input:
        return
    launch = strategies.strategy_for(job)
    to_build = launch.images_to_build()
    if not launch.builds_environment and not to_build:
        return  # a container's images are checked when it starts
    scratch = work_dir_for(job) / "queued"

    def still_queued() -> None:
        if not Job.objects.filter(pk=job_pk, state=JobState.QUEUED).exists():
            raise Cancelled()  # admitted (its runner prepares it) or cancelled meanwhile

    sink = LogSink(job.pk)
    try:
        sink.service("Preparing the job's environment while it waits in the queue.")
        if launch.builds_environment:
            files = fetch_packages(launch.training_input, scratch, still_queued, project=job.project)
            launch.environment(files, sink.service, still_queued, gpu=needs_gpu(launch.training_input))
        else:
            assert isinstance(launch, strategies.ContainerLaunch)  # only a container job has images to build
            for image in to_build:
                launch.bring_image(image, sink.service, still_queued)
        sink.service("The job's environment is ready; it starts when its replicas fit.")
    except Cancelled:
        pass
    except PrepareError as error:
        sink.service(str(error), severity="ERROR")
        sink.flush()  # stored before the job reads as ended, so readers see the whole log
        if job.mark_failed_in_queue(str(error)):
            announce_state(job)
    finally:
        sink.close()
        shutil.rmtree(scratch, ignore_errors=True)
