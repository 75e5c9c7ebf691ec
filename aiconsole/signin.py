"""Sign-in throttling: django-axes counts failed password sign-ins (settings ``AXES_*``); this
module decides what they lock, audits them and words the lockout.

Two limits, never one per address alone: ``AXES_FAILURE_LIMIT`` wrong passwords for one user from
one address refuse that user from that address, and ``LOGIN_ACCOUNT_FAILURE_LIMIT`` for one user
from any addresses refuse that user everywhere, for the cool-off. Failures for other names never
refuse a user, so behind a proxy or a NAT, where everyone shares an address, nobody can lock
everybody out; someone who knows a name can still lock that one account (SECURITY.md).

Audit method names (Admin Activity, server-wide: shown to platform admins):
``aiconsole.LoginService.Login`` for a wrong username or password, and
``aiconsole.LoginService.LockOut`` when the failures reach the limit. Attempts refused unchecked
during a lockout are not recorded: axes does not count them either, and otherwise anyone could
fill the audit log by retrying. Only password sign-ins go through here; bearer tokens and
sessions never call ``authenticate``, so a lockout leaves them alone.
"""

from __future__ import annotations

from typing import Any

from axes.attempts import get_cool_off_threshold
from axes.handlers.database import AxesDatabaseHandler
from axes.helpers import get_client_username
from axes.models import AccessAttempt
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.signals import user_login_failed
from django.db.models import Sum
from django.dispatch import receiver
from django.shortcuts import render

from aiconsole import audit

LOGIN = "aiconsole.LoginService.Login"
LOCK_OUT = "aiconsole.LoginService.LockOut"
CODE_UNAUTHENTICATED = 16
CODE_RESOURCE_EXHAUSTED = 8


def cooloff_minutes() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)


def failures(username: str | None, address: str | None, since) -> tuple[int, int]:
    """Failed sign-ins for ``username`` since ``since``: (from ``address``, from any address)."""
    recent = AccessAttempt.objects.filter(username=username, attempt_time__gte=since)
    everywhere = recent.aggregate(n=Sum("failures_since_start"))["n"] or 0
    here = recent.filter(ip_address=address).aggregate(n=Sum("failures_since_start"))["n"] or 0
    return here, everywhere


def locked_scope(request, credentials=None) -> str | None:
    """ "account" when the user is locked out everywhere, "address" when only from the request's
    address, None when not locked."""
    here, everywhere = failures(
        get_client_username(request, credentials), request.axes_ip_address, get_cool_off_threshold(request)
    )
    if everywhere >= settings.LOGIN_ACCOUNT_FAILURE_LIMIT:
        return "account"
    return "address" if here >= settings.AXES_FAILURE_LIMIT else None


class SignInHandler(AxesDatabaseHandler):
    """``AXES_HANDLER``: axes' database handler with our two limits. Axes compares one count with
    ``AXES_FAILURE_LIMIT``; this one answers a count that reaches it exactly when either limit is
    reached (the failures from this address, raised to the limit once the account's are)."""

    def get_failures(self, request, credentials=None) -> int:
        here, everywhere = failures(
            get_client_username(request, credentials), request.axes_ip_address, get_cool_off_threshold(request)
        )
        if everywhere >= settings.LOGIN_ACCOUNT_FAILURE_LIMIT:
            return max(here, settings.AXES_FAILURE_LIMIT)
        return here


def lockout_message(scope: str | None = "account") -> str:
    where = " from this address" if scope == "address" else ""
    return (
        f"Too many failed sign-ins for this user{where}. Try again in "
        f"{cooloff_minutes()} minutes, or ask a platform admin to unlock it."
    )


def _lockout_reason(scope: str | None) -> str:
    if scope == "address":
        return (
            f"Locked out for {cooloff_minutes()} minutes after {settings.AXES_FAILURE_LIMIT} failed sign-ins "
            f"from this address."
        )
    return (
        f"Locked out for {cooloff_minutes()} minutes after {settings.LOGIN_ACCOUNT_FAILURE_LIMIT} failed "
        f"sign-ins from any address."
    )


@receiver(user_login_failed, dispatch_uid="aiconsole-audit-failed-sign-in")
def audit_failed_sign_in(sender, credentials: dict, request=None, **kwargs) -> None:
    """Runs after axes' own receiver ("axes" comes before "aiconsole" in INSTALLED_APPS), so the
    request already says whether this failure was counted and whether it locked the user out."""
    if request is None:
        return  # authenticate() called by code, not a sign-in
    locked_out = getattr(request, "axes_locked_out", False)
    if locked_out and getattr(request, "axes_failures_since_start", None) is None:
        return  # refused unchecked, already locked out
    username = str(credentials.get("username") or "")[:150]
    entry: dict[str, Any] = {
        "actor": getattr(request, "user", None) or AnonymousUser(),
        "project": None,
        "resource_name": f"users/{username}",
        "permission": "",
        "granted": False,
        "request": {"username": username},
    }
    audit.record(method=LOGIN, status_code=CODE_UNAUTHENTICATED, status_message="Wrong username or password.", **entry)
    if locked_out:
        audit.record(
            method=LOCK_OUT,
            status_code=CODE_RESOURCE_EXHAUSTED,
            status_message=_lockout_reason(locked_scope(request, credentials)),
            **entry,
        )


def lockout_response(request, original_response=None, credentials=None):
    """``AXES_LOCKOUT_CALLABLE``: the sign-in page again, saying why, as 429 Too Many Requests."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {
        "form": AuthenticationForm(request, initial={"username": username}),
        "locked_out": lockout_message(locked_scope(request, credentials or {"username": username})),
        "next": request.POST.get("next", ""),
    }
    return render(request, "registration/login.html", context, status=429)
