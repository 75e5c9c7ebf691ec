"""How the job pages write numbers and durations: readable, with the exact value kept for a title.

``{{ value|significant }}`` (4 significant digits: ``0.00990744869641468`` → ``0.009907``),
``{{ seconds|duration }}`` (``4.2 s``, ``3 min 05 s``, ``1 h 02 min``, ``2 d 03 h``) and
``{{ units|ml_units }}`` (small values keep their digits: ``0.0042``, never ``0.0``).
"""

from __future__ import annotations

import math

from django import template

register = template.Library()


def _number(value) -> float | None:
    if isinstance(value, bool) or value is None or value == "":
        return None
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


@register.filter
def significant(value, digits: int = 4):
    """A number to ``digits`` significant digits; anything else (a category) unchanged."""
    number = _number(value)
    if number is None:
        return value
    if number == int(number) and abs(number) < 1e15:
        return str(int(number))
    if abs(number) >= 10**digits:
        return f"{number:.0f}"
    return f"{number:.{int(digits)}g}"


@register.filter
def duration(seconds) -> str:
    """Seconds as a short human duration; ``—`` when there is none (not started)."""
    number = _number(seconds)
    if number is None:
        return "—"
    if number < 10:
        return f"{number:.1f} s"
    whole = int(number)
    days, rest = divmod(whole, 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days} d {hours:02d} h"
    if hours:
        return f"{hours} h {minutes:02d} min"
    if minutes:
        return f"{minutes} min {secs:02d} s"
    return f"{secs} s"


@register.filter
def ml_units(value) -> str:
    """ML units with the digits that matter: 2 decimals from 1 up, 2 significant digits below."""
    number = _number(value)
    if number is None:
        return "—"
    if number == 0 or abs(number) >= 1:
        return f"{number:.2f}"
    decimals = min(10, max(2, 1 - math.floor(math.log10(abs(number)))))
    return f"{number:.{decimals}f}"


@register.filter
def words(value) -> str:
    """An identifier as words for a label: ``missing_features`` → ``Missing features``."""
    text = str(value or "").replace("_", " ").strip()
    return text[:1].upper() + text[1:]


@register.filter
def scale_tier(training_input) -> str:
    """A job's scale tier as every page writes it: the one it names, BASIC when it names none (the
    v1 default), and — for a job with no training input (batch prediction)."""
    if not training_input:
        return "—"
    return training_input.get("scaleTier") or "BASIC"
