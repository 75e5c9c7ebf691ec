"""Telling the executor that a job needs attention (a new job, a cancel request)."""

from django.conf import settings
from django.db import transaction


def job_changed(job_pk: int) -> None:
    """After commit, wake whatever runs jobs: the in-process controller in embedded mode."""
    transaction.on_commit(lambda: _notify(job_pk))


def _notify(job_pk: int) -> None:
    if settings.EXECUTOR == "inprocess":
        from jobs.executor.controller import wake

        wake()
    else:
        from jobs.cluster.coordinator import wake as wake_coordinator

        wake_coordinator()
