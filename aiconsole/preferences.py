"""A user's own preferences (how a page opens for them), by name: read with a default, written whole.

Only ever for the user a request is signed in as: nothing here takes another user's id, so no page
or call can read or change someone else's. Each feature names its preference and checks its values
before saving (``jobs.web.listing`` the jobs list's columns); a preference is small, and its value
is bounded by the feature that writes it.
"""

from __future__ import annotations

from typing import Any

from aiconsole.models import UserPreference


def get(user, name: str, default: Any = None) -> Any:
    """``user``'s value of ``name``, or ``default`` when they have none (or are anonymous)."""
    if not getattr(user, "is_authenticated", False):
        return default
    found = UserPreference.objects.filter(user=user, name=name).values_list("value", flat=True).first()
    return default if found is None else found


def put(user, name: str, value: Any) -> None:
    """Keep ``value`` as ``user``'s ``name``, replacing what was there."""
    UserPreference.objects.update_or_create(user=user, name=name, defaults={"value": value})


def forget(user, name: str) -> None:
    """Drop ``user``'s ``name``: their pages open on the feature's default again."""
    UserPreference.objects.filter(user=user, name=name).delete()
