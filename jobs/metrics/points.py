"""Every job's metric curves: cloudml-hypertune reports and TensorFlow summary scalars.

The executor side is :class:`Collector`: one per plain job and one per tuning trial, polled from
the runner's watch loop. It reads the master replica's hypertune file (``CLOUD_ML_HP_METRIC_FILE``,
which :func:`trainer_env` gives every replica) with :class:`HypertuneReader` and the event files
under the job dir with the one TF event reader (:class:`jobs.metrics.tfevents.EventScanner`), and stores
what is new as :class:`~jobs.models.MetricPoint` rows in bulk (:func:`insert`). The rows outlive
the job dir.

Trainer code is hostile: both files are read from where the last poll stopped, a few MB per poll
at most, so a multi-GB metric file costs the console no more memory than a small one; and a job
stores at most ``AICONSOLE_METRIC_POINTS_MAX`` points (its trials together), which its log says
when it is reached (the job's charts, its page and the CSV stay quick and bounded); what the console
samples of its replicas (``jobs.metrics.system``) has a bound of its own,
``AICONSOLE_SYSTEM_METRIC_POINTS_MAX``.

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
import threading
import time
import weakref
from collections import deque
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from django.conf import settings
from django.db import connection, transaction

from aiconsole import csvsafe, paging, storage
from aiconsole.errors import FieldViolation, InvalidArgument
from jobs.metrics import compare, tfevents
from jobs.models import Job, JobMetric, MetricPoint, MetricSource

logger = logging.getLogger(__name__)

METRIC_FILE = Path("hypertune") / "output.metrics"  # under each replica's working directory
POLL_SECONDS = 1.0  # a walk of the job dir at most this often while the job runs
INSERT_BATCH = 5000
HYPERTUNE_READ_BYTES = 4 * 1024 * 1024  # of a metric file per poll, at most
HYPERTUNE_LINE_BYTES = 64 * 1024  # a longer line is no report: skipped unread
EVENT_READ_BYTES = 4 * 1024 * 1024  # of the event files per poll, at most
RECENT_REPORTS = 1_000  # reports remembered to tell a rewritten file's old ones from new ones
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


class HypertuneReader:
    """The reports added to a cloudml-hypertune metric file since the last read, read in bounded
    steps: a trainer may write anything there, a file of many GB included.

    The library rewrites the whole file on each report, keeping its last 100, so the file either
    grew (what lay before the last read's end is unchanged: read on from there) or was rewritten
    (read it again from the start, leaving out the reports already returned; the last
    ``RECENT_REPORTS`` are remembered). A read takes ``HYPERTUNE_READ_BYTES`` at most, up to the
    last whole line; ``behind`` says the file holds more than the read took. A line longer than
    ``HYPERTUNE_LINE_BYTES`` is skipped.
    """

    TAIL = 64  # bytes before the read position that must be unchanged for the file to have grown

    def __init__(self, path: Path):
        self.path = path
        self.behind = False
        self._offset = 0
        self._tail = b""
        self._stamp: tuple[int, int] | None = None  # (size, mtime_ns) when last read to its end
        self._recent: deque[tuple] = deque()
        self._recent_keys: set[tuple] = set()
        self._skipping = False  # inside a line too long to be a report

    def read(self) -> list[Report]:
        try:
            with storage.open_trainer_file(self.path) as handle:  # the trainer's folder: no link followed
                status = os.fstat(handle.fileno())
                stamp = (status.st_size, status.st_mtime_ns)
                if stamp == self._stamp:
                    self.behind = False
                    return []
                if not self._grew(handle, status.st_size):
                    self._offset, self._tail, self._skipping = 0, b"", False
                handle.seek(self._offset)
                data = handle.read(HYPERTUNE_READ_BYTES)
        except OSError:
            return []
        self.behind = len(data) == HYPERTUNE_READ_BYTES
        if not self.behind:
            self._stamp = stamp
        end = data.rfind(b"\n") + 1
        if not end and not self.behind:
            return []  # a line still being written: read again once the file changes
        consumed = end or len(data)  # no line end in a whole read: one line too long to be a report
        lines = data[:end].split(b"\n")[:-1] if end else []
        if self._skipping and end:
            lines = lines[1:]  # the end of the long line
        self._skipping = not end
        self._offset += consumed
        self._tail = (self._tail + data[:consumed])[-self.TAIL :]
        text = "\n".join(line.decode(errors="replace") for line in lines if len(line) <= HYPERTUNE_LINE_BYTES)
        return [report for report in parse_hypertune(text) if self._new(report)]

    @property
    def position(self) -> int:
        return self._offset

    def _grew(self, handle, size: int) -> bool:
        if size < self._offset:
            return False
        handle.seek(self._offset - len(self._tail))
        return handle.read(len(self._tail)) == self._tail

    def _new(self, report: Report) -> bool:
        key = (report.tag, report.step, report.wall_time)
        if key in self._recent_keys:
            return False
        self._recent.append(key)
        self._recent_keys.add(key)
        if len(self._recent) > RECENT_REPORTS:
            self._recent_keys.discard(self._recent.popleft())
        return True


def event_scanner(
    job_dir: str, tags: set[str] | None = None, max_bytes: int | None = None, since: float | None = None
) -> tfevents.EventScanner:
    """The reader of a job dir's event files, opening them from its storage root down; ``since``:
    files last written before it (the job's creation) are another job's and never read."""
    if storage.is_gcs_uri(job_dir):
        return tfevents.EventScanner(job_dir, tags=tags, max_bytes=max_bytes, since=since)
    try:
        base = storage.base_of(Path(job_dir))
    except storage.StorageError:
        base = None
    return tfevents.EventScanner(Path(job_dir), tags=tags, base=base, max_bytes=max_bytes, since=since)


def job_started_after(job_pk: int) -> float | None:
    """The Unix time a job's event files must be newer than: its creation (its own trainers start
    after it, and write their first summaries later still)."""
    created = Job.objects.filter(pk=job_pk).values_list("create_time", flat=True).first()
    return created.timestamp() if created is not None else None


def earlier_users(job: Mapping, job_dir: str) -> list[str]:
    """The project's other jobs, created before ``job`` (its ``pk``, ``project_id`` and
    ``create_time``), that named the same job dir."""
    same = Job.objects.filter(project_id=job["project_id"], training_input__jobDir=job_dir)
    return list(
        same.filter(create_time__lt=job["create_time"])
        .exclude(pk=job["pk"])
        .order_by("-create_time")
        .values_list("job_id", flat=True)[:5]
    )


class _Budget:
    """How many more points one job may store of one kind: shared by its collectors (a tuning job's
    trials), or by its replicas' samplers (``system``, a bound of its own)."""

    def __init__(self, used: int, system: bool):
        self.used = used
        self.system = system
        self.said = False  # the job's log says when the limit was reached, once
        self.lock = threading.Lock()

    @property
    def limit(self) -> int:
        return settings.SYSTEM_METRIC_POINTS_MAX if self.system else settings.METRIC_POINTS_MAX

    def spent(self) -> str:
        """What the job's log says once this budget is spent."""
        if self.system:
            return (
                f"This job reached {self.limit:,} points of its replicas' use of the machine "
                "(AICONSOLE_SYSTEM_METRIC_POINTS_MAX): later samples are not stored."
            )
        return (
            f"This job reached {self.limit:,} metric points (AICONSOLE_METRIC_POINTS_MAX): later ones are not "
            "stored. TensorBoard still shows what its event files hold."
        )

    def take(self, wanted: int) -> int:
        with self.lock:
            granted = max(0, min(wanted, self.limit - self.used))
            self.used += granted
            return granted


_budgets: weakref.WeakValueDictionary[tuple[int, bool], _Budget] = weakref.WeakValueDictionary()
_budgets_lock = threading.Lock()


def budget_for(job_pk: int, cleared: int = 0, *, system: bool = False) -> _Budget:
    """The job's budget, shared by everything that stores its points (keep it while storing: the
    budget lives as long as someone holds it); ``cleared`` points of a run starting again were just
    deleted. ``system``: the budget of what the console samples of its replicas
    (``AICONSOLE_SYSTEM_METRIC_POINTS_MAX``), apart from the trainers' own, so that neither crowds
    out the other."""
    with _budgets_lock:
        budget = _budgets.get((job_pk, system))
        if budget is None:
            stored = MetricPoint.objects.filter(job_id=job_pk)
            if system:
                stored = stored.filter(source=MetricSource.SYSTEM)
            else:
                stored = stored.exclude(source=MetricSource.SYSTEM)
            budget = _budgets[(job_pk, system)] = _Budget(stored.count(), system)
        else:
            with budget.lock:
                budget.used = max(0, budget.used - cleared)
        return budget


class Collector:
    """Reads one run's metrics (a plain job, or one trial) while it runs and stores new points.

    Created when the run starts: points an earlier attempt of the same run stored are dropped,
    because the event files under the job dir are read again from their start. Never raises:
    a metric that cannot be read must not fail the job. ``say`` puts a line in the job's log
    (the executor's sink): where the job reached ``AICONSOLE_METRIC_POINTS_MAX``.
    """

    def __init__(
        self,
        job_pk: int,
        *,
        trial_id: str = "",
        job_dir: str | None = None,
        metric_file: Path | None = None,
        say: Callable[[str], None] | None = None,
    ):
        self.job_pk = job_pk
        self.trial_id = trial_id
        self.metric_file = metric_file
        self.hypertune = HypertuneReader(metric_file) if metric_file is not None else None
        job = Job.objects.filter(pk=job_pk).values("pk", "project_id", "create_time").first() if job_dir else None
        since = job["create_time"].timestamp() if job else None
        self.events = event_scanner(job_dir, max_bytes=EVENT_READ_BYTES, since=since) if job_dir else None
        self.say = say
        self._polled = 0.0
        self.stored = 0
        self.full = False  # the job stores no more points
        cleared = 0
        try:
            # The replicas' sampled use is cleared per replica as each starts (jobs.metrics.system).
            earlier = MetricPoint.objects.filter(job_id=job_pk, trial_id=trial_id).exclude(source=MetricSource.SYSTEM)
            cleared = earlier.delete()[0]
        except Exception:
            logger.exception("Could not clear the earlier metrics of job %s", job_pk)
        self.budget = budget_for(job_pk, cleared)
        if job and job_dir and not trial_id and say is not None:
            self._say_if_shared(job, job_dir)

    def _say_if_shared(self, job: Mapping, job_dir: str) -> None:
        """A job dir an earlier job of the project used: say that only this job's files count."""
        try:
            earlier = earlier_users(job, job_dir)
        except Exception:
            logger.exception("Could not look for earlier jobs of job dir %s", job_dir)
            return
        if earlier and self.say is not None:
            self.say(
                f"The job dir {job_dir} was used before by {', '.join(earlier)}: this job's metrics and curves "
                "are read only from the event files it writes (files already there are left out); TensorBoard "
                "shows the whole folder. Give each job a job dir of its own (<parent>/<job id>)."
            )

    def poll(self, *, final: bool = False) -> int:
        """Store what was reported since the last poll (at most once a second unless ``final``,
        which reads on to the files' ends)."""
        now = time.monotonic()
        if not final and now - self._polled < POLL_SECONDS:
            return 0
        self._polled = now
        stored = 0
        try:
            while not self.full:
                position = self._position()
                stored += self._store(self._hypertune_points() + self._event_points())
                if not (final and self._behind() and self._position() != position):
                    break
        except Exception:
            logger.exception("Could not store the metrics of job %s", self.job_pk)
        return stored

    def _position(self) -> tuple:
        return (self.hypertune.position if self.hypertune else 0, self.events.position if self.events else 0)

    def _behind(self) -> bool:
        return bool((self.hypertune and self.hypertune.behind) or (self.events and self.events.behind))

    def _store(self, points: list[tuple]) -> int:
        granted = store_within(self.budget, points, self.say)
        self.stored += granted
        if granted < len(points):
            self.full = True
        return granted

    def _point(self, source: str, run: str, tag: str, step: int, value: float, wall_time: float) -> tuple:
        return (self.job_pk, self.trial_id, source, run[:255], tag[:255], step, value, wall_time)

    def _hypertune_points(self) -> list[tuple]:
        if self.hypertune is None:
            return []
        return [
            self._point(MetricSource.HYPERTUNE.value, "", r.tag, r.step, r.value, r.wall_time)
            for r in self.hypertune.read()
        ]

    def _event_points(self) -> list[tuple]:
        if self.events is None:
            return []
        return [
            self._point(MetricSource.TFEVENTS.value, s.run, s.tag, s.step, s.value, s.wall_time)
            for s in self.events.poll()
            if math.isfinite(s.value)
        ]


def store_within(budget: _Budget, points: list[tuple], say: Callable[[str], None] | None) -> int:
    """Store what ``budget`` (the job's, :func:`budget_for`) still grants of ``points``
    (``INSERT_COLUMNS`` tuples); the job's log says once when it is spent. How many were stored."""
    granted = budget.take(len(points))
    insert(points[:granted])
    if granted < len(points):
        with budget.lock:
            said, budget.said = budget.said, True
        if not said and say is not None:
            say(budget.spent())
    return granted


INSERT_COLUMNS = ("job_id", "trial_id", "source", "run", "tag", "step", "value", "wall_time")


def insert(rows: list[tuple]) -> None:
    """Store points given as ``INSERT_COLUMNS`` tuples, in one transaction. Plain ``executemany``:
    ``bulk_create`` builds a model instance per point and is about 7 times slower at 100,000."""
    if not rows:
        return
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(MetricPoint._meta.db_table)} ({', '.join(quote(c) for c in INSERT_COLUMNS)}) "
        f"VALUES ({', '.join(['%s'] * len(INSERT_COLUMNS))})"
    )
    with transaction.atomic(), connection.cursor() as cursor:
        for start in range(0, len(rows), INSERT_BATCH):
            cursor.executemany(sql, rows[start : start + INSERT_BATCH])
        keep_final(rows)


def keep_final(rows: list[tuple]) -> None:
    """Bring the jobs' final metrics (:class:`~jobs.models.JobMetric`) up to date with ``rows``, new
    ``INSERT_COLUMNS`` points in recorded order: per job and metric, the last point by step, the later
    one at the same step. A job's own points only: a tuning job's trials are compared in its trial table,
    and what the console sampled of its replicas (``system``) is no result of the job's."""
    latest: dict[tuple[int, str], tuple[int, float]] = {}
    for job_id, trial_id, source, run, tag, step, value, _wall_time in rows:
        if trial_id or source == MetricSource.SYSTEM:
            continue
        key = (job_id, compare.metric_name(tag, run))
        kept = latest.get(key)
        if kept is None or step >= kept[0]:
            latest[key] = (step, value)
    if not latest:
        return
    stored = {
        (m.job_id, m.name): m
        for m in JobMetric.objects.filter(
            job_id__in={job_id for job_id, _ in latest}, name__in={name for _, name in latest}
        )
    }
    changed, new = [], []
    for (job_id, name), (step, value) in latest.items():
        metric = stored.get((job_id, name))
        if metric is None:
            new.append(JobMetric(job_id=job_id, name=name, step=step, value=value))
        elif step >= metric.step:
            metric.step, metric.value = step, value
            changed.append(metric)
    JobMetric.objects.bulk_create(new, batch_size=INSERT_BATCH)
    JobMetric.objects.bulk_update(changed, ["step", "value"], batch_size=INSERT_BATCH)


# --- the read side ---------------------------------------------------------------------------------


def points_for(job, *, tag: str = "", trial_id: str = "", source: str = ""):
    """The job's points, in the order they were recorded, narrowed to a tag, a trial and/or a source
    (``system``: what the console sampled of its replicas)."""
    points = MetricPoint.objects.filter(job=job)
    if source:
        points = points.filter(source=source)
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
    return {
        "tag": tag,
        "step": str(step),
        "value": value,
        "time": rfc3339(wall_time),
        "trialId": trial_id,
        "source": source,
        "run": run,
    }


def page_size(raw: str | None) -> int:
    if raw in (None, ""):
        return DEFAULT_PAGE_SIZE
    if not str(raw).isdigit():
        raise InvalidArgument(
            f"Invalid value at 'page_size' (TYPE_INT32), \"{raw}\"",
            [FieldViolation("page_size", f'Invalid value "{raw}"')],
        )
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
