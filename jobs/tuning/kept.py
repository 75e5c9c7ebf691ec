"""A finished study's charts, kept once built: a terminal job's trials no longer change, and a
2,000-trial study's charts took ~0.6 s to build on every visit (and again for each chart's data
table opened). Kept in this process's memory by the job, its end and the view asked for (the
contour's pair, every line or a sample), least recently used out first, up to
``STUDY_CHARTS_CACHE_MB`` of their HTML; a running study's are built each time.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings

from jobs.metrics.charts import Chart, DrawnChart


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0


_lock = threading.Lock()
_kept: OrderedDict[tuple, tuple[list[DrawnChart], int]] = OrderedDict()
_held = 0  # characters held by _kept
stats = Stats()


def study_charts(job, view: tuple, build: Callable[[], list[Chart]]) -> list[DrawnChart]:
    """The study's charts for ``view`` (what the query string chose), drawn: kept ones for a
    terminal job, else ``build()``'s."""
    if not job.is_terminal:
        return [chart.drawn() for chart in build()]
    # The row's creation too: a deleted job's number (and id) may be given to a new one.
    key = (job.pk, job.job_id, str(job.create_time), str(job.end_time), *view)
    with _lock:
        entry = _kept.get(key)
        if entry is not None:
            stats.hits += 1
            _kept.move_to_end(key)
            return entry[0]
        stats.misses += 1
    drawn = [chart.drawn() for chart in build()]  # outside the lock: other studies' pages need not wait
    _keep(key, drawn)
    return drawn


def _keep(key: tuple, drawn: list[DrawnChart]) -> None:
    global _held
    size = sum(chart.size for chart in drawn)
    limit = settings.STUDY_CHARTS_CACHE_MB * 1024 * 1024
    if size > limit:
        return  # larger than the whole allowance: built again each time rather than evicting all
    with _lock:
        if key in _kept:
            return
        _kept[key] = (drawn, size)
        _held += size
        while _held > limit:
            _, (_, freed) = _kept.popitem(last=False)
            _held -= freed


def held() -> int:
    """Characters of chart HTML kept now."""
    return _held


def reset() -> None:
    """Forget every kept chart and the counters (tests)."""
    global _held
    with _lock:
        _kept.clear()
        _held = 0
        stats.hits = stats.misses = 0
