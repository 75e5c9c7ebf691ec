"""The one audit writer: Admin Activity for changes, Data Access for reads.

Services call ``record`` inside the transaction that makes the change, so an entry exists exactly
when the change does. Entries form one chain of keyed hashes (HMAC with the console's secret key):
``verify_chain`` finds an edited, inserted or removed entry anywhere but at the very end, and
someone with only database access cannot recompute the chain to hide an edit. Removing the newest
entries leaves a valid shorter chain; exporting entries (Cloud Logging) is what anchors the head.
"""

from __future__ import annotations

import hashlib

from django.db import connection, transaction
from django.utils import timezone

from aiconsole import iam
from aiconsole.middleware import current_request
from aiconsole.models import AuditEntry, Project

GENESIS_HASH = hashlib.sha256(b"aiconsole-audit-genesis").hexdigest()
SERVICE = "ml.googleapis.com"

# google.rpc.Code values used in audit statuses.
CODE_PERMISSION_DENIED = 7
CODE_NOT_FOUND = 5


def principal_of(actor) -> str:
    if actor is None:
        return "system"
    return actor.email or actor.get_username()


def record(
    *,
    actor,
    project: Project,
    method: str,
    resource_name: str,
    permission: str,
    granted: bool = True,
    data_access: bool = False,
    request: dict | None = None,
    response: dict | None = None,
    status_code: int = 0,
    status_message: str = "",
) -> AuditEntry | None:
    """Append one entry. Data Access entries are written only when the project enables them."""
    if data_access and not project.data_access_logs:
        return None
    context = current_request.get()
    with transaction.atomic():
        _lock_chain()
        last = AuditEntry.objects.order_by("-id").only("entry_hash").first()
        entry = AuditEntry(
            timestamp=timezone.now(),
            log_type=AuditEntry.LogType.DATA_ACCESS if data_access else AuditEntry.LogType.ADMIN_ACTIVITY,
            project_id=project.project_id,
            principal=principal_of(actor),
            method_name=method,
            resource_name=resource_name,
            permission=permission,
            granted=granted,
            status_code=status_code,
            status_message=status_message,
            caller_ip=context.caller_ip,
            user_agent=context.user_agent,
            request_id=context.request_id,
            request=request or {},
            response=response or {},
            prev_hash=last.entry_hash if last else GENESIS_HASH,
        )
        entry.entry_hash = entry.compute_hash()
        entry.save()
    return entry


CHAIN_LOCK_ID = 0x41554449  # "AUDI": one advisory lock for the whole chain


def _lock_chain() -> None:
    """Serialise writers so every entry links to the one before it, across all projects.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: IMMEDIATE transactions already let
    one writer in at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_ID])


def authorize(actor, permission: str, resource, *, method: str, data_access: bool = False) -> None:
    """Check a permission through IAM; a refusal is itself audited, then re-raised."""
    try:
        iam.require(actor, permission, resource)
    except iam.IamError as refusal:
        project = resource if isinstance(resource, Project) else resource.project
        not_found = isinstance(refusal, iam.NotFound)
        record(
            actor=actor,
            project=project,
            method=method,
            resource_name=resource.resource_name,
            permission=permission,
            granted=False,
            data_access=data_access,
            status_code=CODE_NOT_FOUND if not_found else CODE_PERMISSION_DENIED,
            status_message=str(refusal),
        )
        raise


def verify_chain() -> list[int]:
    """Ids of entries whose hash or link does not match: empty when the log is intact."""
    broken = []
    expected_prev = GENESIS_HASH
    for entry in AuditEntry.objects.order_by("id").iterator():
        if entry.prev_hash != expected_prev or entry.compute_hash() != entry.entry_hash:
            broken.append(entry.id)
        expected_prev = entry.entry_hash
    return broken
