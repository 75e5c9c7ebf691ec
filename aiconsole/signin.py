"""Sign-in throttling: django-axes counts failed password sign-ins per user and per address
(settings ``AXES_*``); this module audits them and words the lockout.

Audit method names (Admin Activity, server-wide: shown to platform admins):
``aiconsole.LoginService.Login`` for a wrong username or password, and
``aiconsole.LoginService.LockOut`` when the failures reach the limit. Attempts refused unchecked
during a lockout are not recorded: axes does not count them either, and otherwise anyone could
fill the audit log by retrying. Only password sign-ins go through here; bearer tokens and
sessions never call ``authenticate``, so a lockout leaves them alone.
"""

from __future__ import annotations

from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import AnonymousUser
from django.contrib.auth.signals import user_login_failed
from django.dispatch import receiver
from django.shortcuts import render

from aiconsole import audit

LOGIN = "aiconsole.LoginService.Login"
LOCK_OUT = "aiconsole.LoginService.LockOut"
CODE_UNAUTHENTICATED = 16
CODE_RESOURCE_EXHAUSTED = 8


def cooloff_minutes() -> int:
    return int(settings.AXES_COOLOFF_TIME.total_seconds() // 60)


def lockout_message() -> str:
    return (f"Too many failed sign-ins for this user or from this address. Try again in "
            f"{cooloff_minutes()} minutes, or ask a platform admin to unlock it.")


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
    entry = {"actor": getattr(request, "user", None) or AnonymousUser(), "project": None,
             "resource_name": f"users/{username}", "permission": "", "granted": False,
             "request": {"username": username}}
    audit.record(method=LOGIN, status_code=CODE_UNAUTHENTICATED,
                 status_message="Wrong username or password.", **entry)
    if locked_out:
        audit.record(method=LOCK_OUT, status_code=CODE_RESOURCE_EXHAUSTED,
                     status_message=f"Locked out for {cooloff_minutes()} minutes after "
                                    f"{settings.AXES_FAILURE_LIMIT} failed sign-ins.", **entry)


def lockout_response(request, original_response=None, credentials=None):
    """``AXES_LOCKOUT_CALLABLE``: the sign-in page again, saying why, as 429 Too Many Requests."""
    username = (credentials or {}).get("username") or request.POST.get("username", "")
    context = {"form": AuthenticationForm(request, initial={"username": username}),
               "locked_out": lockout_message(), "next": request.POST.get("next", "")}
    return render(request, "registration/login.html", context, status=429)
