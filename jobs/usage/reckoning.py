"""Usage from a job's records, as plain arithmetic: the spans its replicas ran, spread over the
UTC days they cover. Pure (no database), so the figures are tested on their own.

A replica's CPU-hours are its machine type's vCPUs times the hours it ran; its accelerator-hours the
accelerators it carries times those hours; its ML units the rate ``consumedMLUnits`` is made of
(``catalogue.ml_units_per_hour``). A finished job's recorded ``consumedMLUnits`` is the truth for
its total: its days' ML units are scaled to sum to it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field

from jobs import catalogue

DAY = dt.timedelta(days=1)


@dataclass(frozen=True)
class Span:
    """One replica (or one planned replica, where the job kept no replica rows) and when it ran."""

    plan: catalogue.ReplicaPlan
    start: dt.datetime
    end: dt.datetime


@dataclass
class Figures:
    ml_units: float = 0.0
    cpu_hours: float = 0.0
    accelerator_hours: dict[str, float] = field(default_factory=dict)
    jobs: set[str] = field(default_factory=set)

    def add(self, other: Figures) -> None:
        self.ml_units += other.ml_units
        self.cpu_hours += other.cpu_hours
        for kind, hours in other.accelerator_hours.items():
            self.accelerator_hours[kind] = self.accelerator_hours.get(kind, 0.0) + hours
        self.jobs |= other.jobs

    def as_dict(self) -> dict:
        return {
            "mlUnits": catalogue.round_ml_units(self.ml_units),
            "cpuHours": round(self.cpu_hours, 4),
            "acceleratorHours": round(sum(self.accelerator_hours.values()), 4),
            "acceleratorHoursByType": {k: round(v, 4) for k, v in sorted(self.accelerator_hours.items())},
            "jobs": len(self.jobs),
        }


def days_of(start: dt.datetime, end: dt.datetime) -> Iterator[tuple[dt.date, float]]:
    """(UTC day, hours of [start, end) on it), for each day the span touches."""
    start, end = start.astimezone(dt.UTC), end.astimezone(dt.UTC)
    while start < end:
        midnight = dt.datetime.combine(start.date(), dt.time(), tzinfo=dt.UTC) + DAY
        stop = min(end, midnight)
        yield start.date(), (stop - start).total_seconds() / 3600.0
        start = stop


def job_days(
    job_id: str,
    spans: Iterable[Span],
    *,
    recorded_ml_units: float | None,
    first: dt.date,
    last: dt.date,
) -> dict[dt.date, Figures]:
    """One job's figures per UTC day from ``first`` to ``last`` (inclusive)."""
    every: dict[dt.date, Figures] = {}
    for span in spans:
        machine = catalogue.MACHINE_TYPES.get(span.plan.machine_type)
        vcpus = (machine.vcpus or 0) if machine is not None else 0
        rate = catalogue.ml_units_per_hour(span.plan) if machine is not None else 0.0
        for day, hours in days_of(span.start, span.end):
            figures = every.setdefault(day, Figures(jobs={job_id}))
            figures.cpu_hours += vcpus * hours
            figures.ml_units += rate * hours
            if span.plan.accelerator_type and span.plan.accelerator_count:
                kind = span.plan.accelerator_type
                figures.accelerator_hours[kind] = (
                    figures.accelerator_hours.get(kind, 0.0) + span.plan.accelerator_count * hours
                )
    reckoned = sum(figures.ml_units for figures in every.values())
    if recorded_ml_units is not None and reckoned > 0:
        for figures in every.values():
            figures.ml_units *= recorded_ml_units / reckoned
    return {day: figures for day, figures in every.items() if first <= day <= last}
