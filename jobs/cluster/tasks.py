"""The Celery app of scaled mode and the two tasks the coordinator sends to a worker's own queue.

Each task only hands work to the worker's agent and returns: replicas and whole jobs run in the
agent, under leases kept in the database, never inside a long Celery task. A message delivered
twice (a broker's visibility timeout, a retry) finds its replica or job already claimed, or
claimed under a newer fencing token, and does nothing: a job runs exactly once.
"""

from __future__ import annotations

from celery import Celery
from django.conf import settings

app = Celery("aiconsole")
app.conf.update(
    broker_url=settings.CELERY_BROKER_URL,
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    task_acks_late=False,  # acknowledged on receipt: a lost worker's work is found by its lease
    worker_prefetch_multiplier=1,
    task_default_queue="aiconsole.default",
    worker_hijack_root_logger=False,
    worker_send_task_events=False,
)


@app.task(name="aiconsole.start_replica")
def start_replica(replica_pk: int, attempt: int) -> None:
    # deferred: this module is the Celery app; the agent loads only in the worker that runs the task
    from jobs.cluster import agent

    agent.current().start_replica(replica_pk, attempt)


@app.task(name="aiconsole.run_job")
def run_job(job_pk: int) -> None:
    # deferred: this module is the Celery app; the agent loads only in the worker that runs the task
    from jobs.cluster import agent

    agent.current().run_job(job_pk)


def send_start_replica(queue: str, replica_pk: int, attempt: int) -> None:
    start_replica.apply_async((replica_pk, attempt), queue=queue)


def send_run_job(queue: str, job_pk: int) -> None:
    run_job.apply_async((job_pk,), queue=queue)
