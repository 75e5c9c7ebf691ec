"""Scaled mode's Celery app: the broker from the settings, the tasks from the apps that define them.

The apps declare their tasks with ``shared_task`` (``jobs/cluster/tasks.py``) and never import this
module; the processes that send or run tasks (``aiconsole web``, ``aiconsole worker``, the
coordinator) load it first, which makes it the app those tasks use.
"""

from __future__ import annotations

from celery import Celery

app = Celery("aiconsole")
# The broker URL and anything else named CELERY_* come from the settings (console/settings.py),
# read when Celery first needs them, not when this module is imported.
app.config_from_object("django.conf:settings", namespace="CELERY")
app.conf.update(
    broker_connection_retry_on_startup=True,
    task_ignore_result=True,
    task_acks_late=False,  # acknowledged on receipt: a lost worker's work is found by its lease
    worker_prefetch_multiplier=1,
    task_default_queue="aiconsole.default",
    # JSON only, never pickle: a message on Redis is data, never code (workers run as root).
    accept_content=["json"],
    task_serializer="json",
    worker_hijack_root_logger=False,
    worker_send_task_events=False,
)
app.set_default()
app.autodiscover_tasks(["jobs.cluster"])
