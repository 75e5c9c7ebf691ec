"""A job's log lines on their way to the database and the live viewers.

``LogSink`` collects lines from all of a job's replicas (split by ``jobs.logs.lines``) in a buffer
bounded in lines and in bytes and writes them in batches (every few tens of milliseconds, a few MB
at most), so a chatty trainer neither blocks on its pipe nor grows the console's memory, however
long its lines; lines dropped when the buffer is full are counted and said in the log.

After each batch commits, the sink publishes it to the job's group (one message per batch, ids
known), then the latest state of any progress bar still being redrawn: live viewers see a bar
as one updating row, and only its final state is stored.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter, deque
from collections.abc import Callable
from json.encoder import encode_basestring
from typing import Any

from django.db import close_old_connections, connection
from django.utils import timezone

from jobs.logs.lines import SERVICE_TASK, TracebackTracker, detect_severity, fitting

logger = logging.getLogger(__name__)

# pg_advisory_xact_lock(class, job id): serialises one job's log writers on PostgreSQL.
_LOG_LOCK_CLASS = 0x4C4F47  # "LOG"

# A pending line: (task_name, trial_id, seq, stream, severity or None, message, time). Tuples,
# not objects: a chatty trainer puts hundreds of thousands through here a second.
_TASK, _TRIAL, _SEQ, _STREAM, _SEVERITY, _MESSAGE, _TIME = range(7)
_INSERT = (
    "INSERT INTO jobs_logline (job_id, task_name, trial_id, seq, stream, severity, message, time) "
    "VALUES (%s, %s, %s, %s, %s, %s, %s, %s)"
)


class LogSink:
    """A job's bounded, batched path from replica output to the database and its live viewers.

    Reader threads hand over whole reads (``emit_lines``) and only split, number and queue them;
    the writer thread does the rest (severities, storing, publishing), so a trainer's pipe is
    drained as fast as it is filled and a flood is cut at ``max_pending`` lines or
    ``max_pending_chars`` characters waiting, not the trainer. A batch holds ``batch_size`` lines
    or ``batch_chars`` characters at most: 2,000 lines cut at 32 KB were a 64 MB message to every
    process that forwards or shows them.
    """

    def __init__(
        self,
        job_pk: int,
        *,
        max_pending: int = 50_000,
        max_pending_chars: int = 32 * 1024 * 1024,
        flush_interval: float = 0.03,
        batch_size: int = 2_000,
        batch_chars: int = 1024 * 1024,
        on_flush=None,
        publish: bool = True,
        fence: Callable[[object], bool] | None = None,
        late: Callable[[], str] | None = None,
    ):
        self.job_pk = job_pk
        # Scaled mode: called with a cursor inside each batch's transaction; False means this
        # writer was superseded (its replica started again elsewhere) and the batch is dropped,
        # unless ``late`` is given: then what it printed was printed before it was superseded (it
        # stopped itself in time, ``reaper.py --lease``) and is stored after the line ``late()``
        # says, once, so that a freeze loses none of the rightful run's lines.
        self.fence = fence
        self.fenced = False
        self.late = late
        self._late_noted = False
        self.max_pending = max_pending
        self.max_pending_chars = max_pending_chars
        self.flush_interval = flush_interval
        self.batch_size = batch_size
        self.batch_chars = batch_chars
        self.on_flush = on_flush
        self.publish = publish
        self._pending: deque[tuple] = deque()
        self._pending_chars = 0  # the characters of the messages in _pending
        self._progress: dict[tuple[str, str, str], dict] = {}
        self._lock = threading.Lock()
        # Held while a batch goes from the buffer to the database and the group, so a flush()
        # from another thread returns only once everything emitted before it is stored.
        self._writing = threading.Lock()
        self._last_id = 0  # the last id this sink published: the next batch's "after"
        self._job: Any = None  # its Job, read once when a batch first goes to Cloud Logging
        self._seq: Counter[tuple[str, str]] = Counter()
        self._tracebacks = TracebackTracker()  # used by the writer thread only
        self._dropped: Counter[str] = Counter()
        self._wake = threading.Event()
        self._closed = False
        self._thread = threading.Thread(target=self._run, name=f"logsink-{job_pk}", daemon=True)
        self._thread.start()

    # --- producers -------------------------------------------------------------------------

    def emit_lines(
        self, task_name: str, stream: str, lines: list[str], *, severity: str | None = None, trial_id: str = ""
    ) -> None:
        """Queue lines that arrived together; beyond ``max_pending`` lines or ``max_pending_chars``
        characters waiting they are counted, not kept."""
        if not lines:
            return
        now = timezone.now()
        key = (task_name, trial_id)
        chars = sum(map(len, lines))
        with self._lock:
            self._progress.pop((task_name, trial_id, stream), None)  # a bar's final state is a line
            room = len(lines) if stream == "service" else max(0, self.max_pending - len(self._pending))
            if stream != "service" and self._pending_chars + chars > self.max_pending_chars:
                room = min(room, fitting(lines, self.max_pending_chars - self._pending_chars))
            if room < len(lines):
                self._dropped[task_name] += len(lines) - room
                lines = lines[:room]
                chars = sum(map(len, lines))
            self._pending_chars += chars
            first = self._seq[key] + 1
            self._seq[key] += len(lines)
            self._pending.extend(
                (task_name, trial_id, seq, stream, severity, message, now) for seq, message in enumerate(lines, first)
            )
        if stream == "service":
            self._wake.set()

    def emit(
        self, task_name: str, stream: str, message: str, *, severity: str | None = None, trial_id: str = ""
    ) -> None:
        self.emit_lines(task_name, stream, [message], severity=severity, trial_id=trial_id)

    def service(self, message: str, severity: str = "INFO", trial_id: str = "") -> None:
        self.emit_lines(SERVICE_TASK, "service", message.splitlines() or [""], severity=severity, trial_id=trial_id)

    def progress(self, task_name: str, stream: str, message: str, *, trial_id: str = "") -> None:
        """The latest state of a progress bar being redrawn: published, not stored."""
        # deferred: `aiconsole local train` runs this module without Django, which the models need
        from jobs.logs.stream import timestamp

        item = {
            "taskName": task_name,
            "trialId": trial_id,
            "stream": stream,
            "message": message,
            "severity": detect_severity(message, stream),
            "timestamp": timestamp(timezone.now()),
        }
        with self._lock:
            self._progress[(task_name, trial_id, stream)] = item

    # --- the writer --------------------------------------------------------------------------

    def close(self) -> None:
        self._closed = True
        self._wake.set()
        self._thread.join()

    def flush(self) -> None:
        """Write everything pending now (from the calling thread)."""
        while self._write_batch():
            pass

    def _run(self) -> None:
        try:
            self._load_sequences()
            while not self._closed:
                self._wake.wait(self.flush_interval)
                self._wake.clear()
                while self._write_batch():
                    pass
                self._publish_progress()
            while self._write_batch():
                pass
        except Exception:
            logger.exception("Log writer for job %s failed", self.job_pk)
        finally:
            connection.close()

    def _load_sequences(self) -> None:
        """Continue numbering after lines an earlier run of the same job stored."""
        from django.db.models import Max

        # deferred: `aiconsole local train` runs this module without Django, which the models need
        from jobs.logs.stream import last_id
        from jobs.models import LogLine

        close_old_connections()
        with self._writing:
            self._last_id = last_id(self.job_pk)
        rows = LogLine.objects.filter(job_id=self.job_pk).values("task_name", "trial_id").annotate(last=Max("seq"))
        stored = {(row["task_name"], row["trial_id"]): row["last"] for row in rows}
        with self._lock:
            # Lines emitted before loading were numbered from 1: shift them past the stored ones.
            self._pending = deque(
                line[:_SEQ] + (line[_SEQ] + stored.get(line[:_SEQ], 0),) + line[_SEQ + 1 :] for line in self._pending
            )
            for key, last in stored.items():
                self._seq[key] += last

    def _take_batch(self) -> list[tuple]:
        with self._lock:
            batch = [self._pending.popleft() for _ in range(min(self.batch_size, len(self._pending)))]
            chars = sum(len(line[_MESSAGE]) for line in batch)
            if chars > self.batch_chars and len(batch) > 1:  # long lines: fewer of them
                keep = max(1, fitting([line[_MESSAGE] for line in batch], self.batch_chars))
                self._pending.extendleft(reversed(batch[keep:]))
                batch = batch[:keep]
                chars = sum(len(line[_MESSAGE]) for line in batch)
            self._pending_chars -= chars
            dropped = dict(self._dropped)
            self._dropped.clear()
            for task_name, count in dropped.items():
                self._seq[(SERVICE_TASK, "")] += 1
                batch.append(
                    (
                        SERVICE_TASK,
                        "",
                        self._seq[(SERVICE_TASK, "")],
                        "service",
                        "WARNING",
                        f"{count} log lines from {task_name} were dropped: the trainer printed "
                        "faster than they could be stored.",
                        timezone.now(),
                    )
                )
        severity = self._tracebacks.severity
        return [
            line
            if line[_SEVERITY]
            else line[:_SEVERITY]
            + (severity((line[_TASK], line[_TRIAL], line[_STREAM]), line[_MESSAGE], line[_STREAM]),)
            + line[_SEVERITY + 1 :]
            for line in batch
        ]

    def _write_batch(self) -> bool:
        with self._writing:
            batch = self._take_batch()
            if not batch:
                return False
            if connection.vendor == "sqlite":
                ids = self._insert(batch)
            else:
                ids, batch = self._insert_shared(batch)
            if self.publish and ids:
                self._publish_rows(ids, batch)
            if ids:
                self._export(batch)
        if self.on_flush and ids:
            self.on_flush(self._as_rows(ids, batch))
        return True

    def _as_rows(self, ids, batch: list[tuple]) -> list:
        # deferred: `aiconsole local train` runs this module without Django, which the models need
        from jobs.models import LogLine

        return [
            LogLine(
                pk=pk,
                job_id=self.job_pk,
                task_name=line[_TASK],
                trial_id=line[_TRIAL],
                seq=line[_SEQ],
                stream=line[_STREAM],
                severity=line[_SEVERITY],
                message=line[_MESSAGE],
                time=line[_TIME],
            )
            for pk, line in zip(ids or [None] * len(batch), batch, strict=True)
        ]

    def _insert(self, batch: list[tuple]) -> list[int] | range:
        """Store a batch in one transaction (SQLite, one writer per job); return the new ids in order."""
        from django.db import transaction

        stamps = {}
        for line in batch:  # lines of one read share a timestamp: convert each once
            if id(line[_TIME]) not in stamps:
                stamps[id(line[_TIME])] = connection.ops.adapt_datetimefield_value(line[_TIME])
        params = [(self.job_pk, *line[:_TIME], stamps[id(line[_TIME])]) for line in batch]
        # Plain executemany: model instances cost more than the insert. SQLite hands out rowids
        # one after another inside a write transaction, which no other writer can enter.
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.executemany(_INSERT, params)
            cursor.execute("SELECT last_insert_rowid()")
            last = cursor.fetchone()[0]
        return range(last - len(batch) + 1, last + 1)

    def _insert_shared(self, batch: list[tuple]) -> tuple[list[int], list[tuple]]:
        """Store a batch on PostgreSQL, where several writers may log for one job (the workers of
        its replicas, the coordinator's service lines, a replica's restarted copy).

        A per-job advisory lock, held to commit, makes a job's ids rise in commit order, so a
        reader that has id N has everything before it. Under the lock each line's ``seq`` follows
        the highest stored for its task, and ``after`` is the job's last id before this batch.
        """
        from django.db import transaction

        # deferred: `aiconsole local train` runs this module without Django, which the models need
        from jobs.models import LogLine

        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s, %s)", [_LOG_LOCK_CLASS, self.job_pk])
            if self.fence is not None and not self.fence(cursor):
                self.fenced = True
                if self.late is None:
                    return [], batch
                if not self._late_noted:
                    self._late_noted = True
                    note = (SERVICE_TASK, "", 0, "service", "WARNING", self.late(), timezone.now())
                    batch = [note, *batch]
            last_seq = {}
            for key in {(line[_TASK], line[_TRIAL]) for line in batch}:
                # Under the lock seq rises with id, so the newest row holds the highest seq: one
                # index step on (job, task_name, id), however long the log.
                cursor.execute(
                    "SELECT seq FROM jobs_logline WHERE job_id = %s AND task_name = %s AND trial_id = %s "
                    "ORDER BY id DESC LIMIT 1",
                    [self.job_pk, *key],
                )
                row = cursor.fetchone()
                last_seq[key] = row[0] if row else 0
            renumbered = []
            for line in batch:
                key = (line[_TASK], line[_TRIAL])
                last_seq[key] += 1
                renumbered.append(line[:_SEQ] + (last_seq[key],) + line[_SEQ + 1 :])
            cursor.execute("SELECT max(id) FROM jobs_logline WHERE job_id = %s", [self.job_pk])
            self._last_id = cursor.fetchone()[0] or 0
            rows = LogLine.objects.bulk_create(self._as_rows(None, renumbered))
        return [row.pk for row in rows], renumbered

    def _export(self, batch: list[tuple]) -> None:
        """The stored lines to Google Cloud Logging too, where AICONSOLE_CLOUD_LOGGING_PROJECT
        says so (after the batch commits, off this thread; never raising into it)."""
        # deferred: `aiconsole local train` runs this module without Django, which both need
        from aiconsole import cloud_logging
        from jobs.models import Job

        if not cloud_logging.enabled():
            return
        if self._job is None:
            self._job = Job.objects.select_related("project").only("job_id", "project__project_id").get(pk=self.job_pk)
        rows = [
            {
                "task_name": line[_TASK],
                "trial_id": line[_TRIAL],
                "severity": line[_SEVERITY],
                "message": line[_MESSAGE],
                "time": line[_TIME],
            }
            for line in batch
        ]
        cloud_logging.export_job_log_lines(self._job, rows)

    def _publish_rows(self, ids, batch: list[tuple]) -> None:
        """One message for the batch, its entries already JSON (jobs.logs.stream.entry's form):
        encoded once here rather than once per viewer."""
        # deferred: `aiconsole local train` runs this module without Django, which the models need
        from jobs.logs.stream import publish_lines, timestamp

        texts: dict = {}  # task names, trials and times repeat within a batch: encode each once

        def text(value) -> str:
            if value not in texts:
                texts[value] = encode_basestring(value if isinstance(value, str) else timestamp(value))
            return texts[value]

        entries = ",".join(
            f'{{"id":"{pk}","timestamp":{text(line[_TIME])},"severity":"{line[_SEVERITY]}",'
            f'"taskName":{text(line[_TASK])},"trialId":{text(line[_TRIAL])},"seq":"{line[_SEQ]}",'
            f'"stream":"{line[_STREAM]}","message":{encode_basestring(line[_MESSAGE])}}}'
            for pk, line in zip(ids, batch, strict=True)
        )
        publish_lines(self.job_pk, after=self._last_id, last=ids[-1], count=len(batch), entries_json=f"[{entries}]")
        self._last_id = ids[-1]

    def _publish_progress(self) -> None:
        # deferred: `aiconsole local train` runs this module without Django, which the models need
        from jobs.logs.stream import publish_progress

        with self._lock:
            items, self._progress = list(self._progress.values()), {}
        if items and self.publish:
            publish_progress(self.job_pk, items)
