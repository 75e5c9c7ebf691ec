"""The one audit writer: Admin Activity for changes, Data Access for reads.

Services call ``record`` inside the transaction that makes the change, so an entry exists exactly
when the change does. Entries are hash-chained; ``verify_chain`` finds any edit or deletion.
"""

from __future__ import annotations

import hashlib

from django.db import transaction
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
        # Serialise writers so the chain has no forks (a row lock on PostgreSQL; SQLite's
        # IMMEDIATE transactions already serialise writers).
        Project.objects.select_for_update().filter(pk=project.pk).first()
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
