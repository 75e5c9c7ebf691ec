"""Every job's metric curves: cloudml-hypertune reports and TensorFlow summary scalars.

The executor side is :class:`Collector`: one per plain job and one per tuning trial, polled from
the runner's watch loop. It reads the master replica's hypertune file (``CLOUD_ML_HP_METRIC_FILE``,
which :func:`trainer_env` gives every replica) and the event files under the job dir with the one
TF event reader (:class:`jobs.tfevents.EventScanner`), and stores what is new as
:class:`~jobs.models.MetricPoint` rows in bulk (:func:`insert`). The rows outlive the job dir.

The read side (:func:`points_for`, :func:`page`, :func:`wire`) serves
``GET /v1/projects/P/jobs/J/metrics``, the job page's charts and the CSV download.
"""

from __future__ import annotations

import csv
import io
import json
import logging
import math
import os
import time
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.db import connection, transaction

from aiconsole import csvsafe, paging, storage
from aiconsole.errors import FieldViolation, InvalidArgument
from jobs import tfevents
from jobs.models import MetricPoint, MetricSource

logger = logging.getLogger(__name__)

METRIC_FILE = Path("hypertune") / "output.metrics"  # under each replica's working directory
POLL_SECONDS = 1.0  # a walk of the job dir at most this often while the job runs
INSERT_BATCH = 5000
# Keys cloudml-hypertune writes beside the metric itself; every other key is a metric tag.
HYPERTUNE_KEYS = frozenset({"timestamp", "trial", "global_step", "checkpoint_path"})

DEFAULT_PAGE_SIZE = 1000
MAX_PAGE_SIZE = 10_000
PAGE_KIND = "metrics"
CSV_COLUMNS = ["tag", "step", "value", "time", "trialId", "source", "run"]


# --- the executor side ---------------------------------------------------------------------------


def metric_file(replica_dir: Path) -> Path:
    return Path(replica_dir) / METRIC_FILE


def trainer_env(replica_dir: Path) -> dict[str, str]:
    """What a plain job's replica gets so that cloudml-hypertune writes where we read (as trials do)."""
    return {"CLOUD_ML_HP_METRIC_FILE": str(metric_file(replica_dir))}


@dataclass(frozen=True)
class Report:
    tag: str
    step: int
    value: float
    wall_time: float


def parse_hypertune(text: str) -> list[Report]:
    """Every metric in a cloudml-hypertune file, whatever its tag, oldest first.

    The library rewrites the file on each report (keeping its last 100), so a half-written
    line is skipped here and read on the next poll; non-finite values are left out.
    """
    reports = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            wall_time = float(entry.get("timestamp") or 0.0)
            step = int(float(entry.get("global_step") or 0))
        except (ValueError, TypeError, AttributeError):
            continue
        for tag, raw in entry.items():
            if tag in HYPERTUNE_KEYS:
                continue
            try:
                value = float(raw)
            except (TypeError, ValueError):
                continue
            if math.isfinite(value):
                reports.append(Report(str(tag)[:255], step, value, wall_time))
    return reports


def event_scanner(job_dir: str, tags: set[str] | None = None) -> tfevents.EventScanner:
    """The reader of a job dir's event files, opening them from its storage root down."""
    if storage.is_gcs_uri(job_dir):
        return tfevents.EventScanner(job_dir, tags=tags)
    try:
        base = storage.base_of(Path(job_dir))
    except storage.StorageError:
        base = None
    return tfevents.EventScanner(Path(job_dir), tags=tags, base=base)


class Collector:
    """Reads one run's metrics (a plain job, or one trial) while it runs and stores new points.

    Created when the run starts: points an earlier attempt of the same run stored are dropped,
    because the event files under the job dir are read again from their start. Never raises:
    a metric that cannot be read must not fail the job.
    """

    def __init__(self, job_pk: int, *, trial_id: str = "", job_dir: str | None = None,
                 metric_file: Path | None = None):
        self.job_pk = job_pk
        self.trial_id = trial_id
        self.metric_file = metric_file
        self.events = event_scanner(job_dir) if job_dir else None
        self._seen: set[tuple[str, int, float]] = set()
        self._metric_mtime = 0.0
        self._polled = 0.0
        self.stored = 0
        try:
            MetricPoint.objects.filter(job_id=job_pk, trial_id=trial_id).delete()
        except Exception:
            logger.exception("Could not clear the earlier metrics of job %s", job_pk)

    def poll(self, *, final: bool = False) -> int:
        """Store what was reported since the last poll (at most once a second unless ``final``)."""
        now = time.monotonic()
        if not final and now - self._polled < POLL_SECONDS:
            return 0
        self._polled = now
        try:
            points = self._hypertune_points() + self._event_points()
            insert(points)
            self.stored += len(points)
            return len(points)
        except Exception:
            logger.exception("Could not store the metrics of job %s", self.job_pk)
            return 0

    def _point(self, source: str, run: str, tag: str, step: int, value: float, wall_time: float) -> tuple:
        return (self.job_pk, self.trial_id, source, run[:255], tag[:255], step, value, wall_time)

    def _hypertune_points(self) -> list[tuple]:
        if self.metric_file is None:
            return []
        try:
            with storage.open_trainer_file(self.metric_file) as handle:  # the trainer's folder: no link followed
                mtime = os.fstat(handle.fileno()).st_mtime
                if mtime == self._metric_mtime:
                    return []
                text = handle.read().decode(errors="replace")
        except OSError:
            return []
        self._metric_mtime = mtime
        points = []
        for report in parse_hypertune(text):
            key = (report.tag, report.step, report.wall_time)
            if key not in self._seen:
                self._seen.add(key)
                points.append(self._point(MetricSource.HYPERTUNE.value, "", report.tag, report.step, report.value,
                                          report.wall_time))
        return points

    def _event_points(self) -> list[tuple]:
        if self.events is None:
            return []
        return [self._point(MetricSource.TFEVENTS.value, s.run, s.tag, s.step, s.value, s.wall_time)
                for s in self.events.poll() if math.isfinite(s.value)]


INSERT_COLUMNS = ("job_id", "trial_id", "source", "run", "tag", "step", "value", "wall_time")


def insert(rows: list[tuple]) -> None:
    """Store points given as ``INSERT_COLUMNS`` tuples, in one transaction. Plain ``executemany``:
    ``bulk_create`` builds a model instance per point and is about 7 times slower at 100,000."""
    if not rows:
        return
    quote = connection.ops.quote_name
    sql = (f"INSERT INTO {quote(MetricPoint._meta.db_table)} ({', '.join(quote(c) for c in INSERT_COLUMNS)}) "
           f"VALUES ({', '.join(['%s'] * len(INSERT_COLUMNS))})")
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), INSERT_BATCH):
            cursor.executemany(sql, rows[start:start + INSERT_BATCH])


# --- the read side ---------------------------------------------------------------------------------


def points_for(job, *, tag: str = "", trial_id: str = ""):
    """The job's points, in the order they were recorded, narrowed to a tag and/or a trial."""
    points = MetricPoint.objects.filter(job=job)
    if tag:
        points = points.filter(tag=tag)
    if trial_id:
        points = points.filter(trial_id=trial_id)
    return points


def rfc3339(wall_time: float) -> str:
    return datetime.fromtimestamp(wall_time, UTC).isoformat().replace("+00:00", "Z")


ROW_FIELDS = ("pk", "tag", "step", "value", "wall_time", "trial_id", "source", "run")


def wire(row: tuple) -> dict:
    """A ``values_list(*ROW_FIELDS)`` row in the API's form (``step`` an int64 string, as the
    API writes int64s; ``time`` RFC 3339)."""
    _, tag, step, value, wall_time, trial_id, source, run = row
    return {"tag": tag, "step": str(step), "value": value, "time": rfc3339(wall_time), "trialId": trial_id,
            "source": source, "run": run}


def page_size(raw: str | None) -> int:
    if raw in (None, ""):
        return DEFAULT_PAGE_SIZE
    if not str(raw).isdigit():
        raise InvalidArgument(f'Invalid value at \'page_size\' (TYPE_INT32), "{raw}"',
                              [FieldViolation("page_size", f'Invalid value "{raw}"')])
    return min(int(raw), MAX_PAGE_SIZE) or DEFAULT_PAGE_SIZE


def page(points, params) -> tuple[list[dict], str | None]:
    """One page by keyset on the id (no OFFSET: the last page of 100,000 points costs what the
    first does), and the next page's token."""
    size = page_size(params.get("pageSize"))
    after = paging.decode_token(PAGE_KIND, params.get("pageToken"))
    if after is not None:
        if not after.isdigit():
            raise InvalidArgument("The page token is not valid.", [FieldViolation("page_token", "not valid")])
        points = points.filter(pk__gt=int(after))
    rows = list(points.order_by("pk").values_list(*ROW_FIELDS)[: size + 1])
    next_token = paging.encode_token(PAGE_KIND, rows[size - 1][0]) if len(rows) > size else None
    return [wire(row) for row in rows[:size]], next_token


def all_rows(points, chunk: int = 10_000) -> Iterator[tuple]:
    """Every row, read in keyset chunks (a download of 100,000 points never holds them all)."""
    last = 0
    while True:
        rows = list(points.filter(pk__gt=last).order_by("pk").values_list(*ROW_FIELDS)[:chunk])
        if not rows:
            return
        yield from rows
        last = rows[-1][0]


def csv_lines(rows: Iterable[tuple]) -> Iterator[str]:
    """The CSV download: a header, then one line per point (the CLI writes the same columns)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\n")
    writer.writerow(CSV_COLUMNS)
    for row in rows:
        point = wire(row)
        writer.writerow(csvsafe.row(point[column] for column in CSV_COLUMNS))  # tags and runs are the trainer's
        if buffer.tell() > 64_000:
            yield buffer.getvalue()
            buffer.seek(0)
            buffer.truncate()
    yield buffer.getvalue()
