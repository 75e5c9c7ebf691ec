"""Publishing typed events to Channels groups, always after the transaction commits."""

from __future__ import annotations

import logging

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import transaction

logger = logging.getLogger(__name__)


def group_for_job(job_pk: int) -> str:
    return f"job-{job_pk}"


def group_for_project_jobs(project_pk: int) -> str:
    return f"project-{project_pk}-jobs"


def send_now(group: str, payload: dict) -> None:
    layer = get_channel_layer()
    if layer is None:
        return
    try:
        async_to_sync(layer.group_send)(group, payload)
    except Exception:  # a missing listener or a broken layer must never fail the caller
        logger.exception("Could not publish %s to %s", payload.get("type"), group)


def publish(group: str, payload: dict) -> None:
    """Send after commit, so listeners never see a change that was rolled back."""
    transaction.on_commit(lambda: send_now(group, payload))
