"""Job ids the console suggests, as gcloud users write them: ``census_20260121_160502``."""

from __future__ import annotations

import re
from datetime import datetime

from django.utils import timezone


def job_id_prefix(python_module: str) -> str:
    """``trainer.task`` → ``trainer``: the module's package, made a valid start of a job id."""
    head = re.sub(r"\W", "_", (python_module or "").strip().split(".")[0], flags=re.ASCII)
    return head if head[:1].isalpha() else f"job{'_' + head if head else ''}"


def suggest_job_id(taken, python_module: str = "trainer.task", now: datetime | None = None) -> str:
    """``<module>_<YYYYMMDD_HHMMSS>`` (UTC), with ``_2``, ``_3``… if ``taken(candidate)`` says it is used."""
    base = f"{job_id_prefix(python_module)}_{(now or timezone.now()):%Y%m%d_%H%M%S}"
    candidate, n = base, 1
    while taken(candidate):
        n += 1
        candidate = f"{base}_{n}"
    return candidate


JOB_ID = re.compile(r"[A-Za-z][A-Za-z0-9_]{0,127}")


def is_job_id(text: str) -> bool:
    """Whether ``text`` is a well-formed job id (letters, digits, underscores; a letter first)."""
    return bool(JOB_ID.fullmatch(text or ""))


def vertex_job_id(display_name: str, vertex_id: str) -> str:
    """The console's job id for a Vertex job: its display name made a v1 id, then its number (what
    ``gcloud ai custom-jobs stream-logs`` follows, ``console.cli.vertex``)."""
    stem = re.sub(r"[^A-Za-z0-9_]+", "_", display_name).strip("_")[:80]
    if not stem or not stem[0].isalpha():
        stem = f"job_{stem}".rstrip("_")
    return f"{stem}_{vertex_id}"
