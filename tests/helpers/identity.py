"""Users, roles, bearer headers and audit entries for tests of identity and IAM."""

from __future__ import annotations

from django.contrib.auth import get_user_model

from aiconsole import iam
from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token


def bearer(user) -> dict:
    _, raw = create_token(user)
    return {"HTTP_AUTHORIZATION": f"Bearer {raw}"}


def make_user(username: str, role: str | None = None, resource=None, **extra):
    user = get_user_model().objects.create_user(
        username=username, email=f"{username}@example.com", password="pw", **extra
    )
    if role:
        iam.grant(user, role, resource)
    return user


def entries(method: str, **filters) -> list[AuditEntry]:
    return list(AuditEntry.objects.filter(method_name=method, **filters).order_by("id"))


def tamper(statement: str, params=()) -> None:
    """Run raw SQL against the audit table as an attacker would, past PostgreSQL's trigger too."""
    from django.db import connection

    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("ALTER TABLE aiconsole_auditentry DISABLE TRIGGER aiconsole_audit_append_only")
        try:
            cursor.execute(statement, params)
        finally:
            if connection.vendor == "postgresql":
                cursor.execute("ALTER TABLE aiconsole_auditentry ENABLE TRIGGER aiconsole_audit_append_only")
