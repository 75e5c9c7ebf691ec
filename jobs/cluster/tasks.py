"""The two tasks the coordinator sends to a worker's own queue.

Each task only hands work to the worker's agent and returns: replicas and whole jobs run in the
agent, under leases kept in the database, never inside a long Celery task. A message delivered
twice (a broker's visibility timeout, a retry) finds its replica or job already claimed, or
claimed under a newer fencing token, and does nothing: a job runs exactly once.
"""

from __future__ import annotations

from celery import current_app, shared_task

# The app these tasks run in is the project's (console/celery.py), which the processes that send or
# run them load first: without it Celery would quietly send to its default broker instead.
APP_NAME = "aiconsole"


def _require_app() -> None:
    if current_app.main != APP_NAME:
        raise RuntimeError(
            "Scaled mode's Celery app (console.celery) is not loaded in this process; import it before sending tasks."
        )


@shared_task(name="aiconsole.start_replica")
def start_replica(replica_pk: int, attempt: int) -> None:
    # deferred: every process that sends tasks loads this module; the agent only the worker that runs them
    from jobs.cluster import agent

    agent.current().start_replica(replica_pk, attempt)


@shared_task(name="aiconsole.run_job")
def run_job(job_pk: int) -> None:
    # deferred: every process that sends tasks loads this module; the agent only the worker that runs them
    from jobs.cluster import agent

    agent.current().run_job(job_pk)


def send_start_replica(queue: str, replica_pk: int, attempt: int) -> None:
    _require_app()
    start_replica.apply_async((replica_pk, attempt), queue=queue)


def send_run_job(queue: str, job_pk: int) -> None:
    _require_app()
    run_job.apply_async((job_pk,), queue=queue)
