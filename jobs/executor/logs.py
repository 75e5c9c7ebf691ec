"""From replica output bytes to stored log lines.

``LineSplitter`` turns a byte stream into lines: carriage-return progress bars keep only their
latest state, very long lines are cut with a marker, undecodable bytes are replaced. ``LogSink``
collects lines from all of a job's replicas in a bounded buffer and writes them in batches
(every few tens of milliseconds), so a chatty trainer neither blocks on its pipe nor grows the
console's memory; lines dropped when the buffer is full are counted and said in the log.
"""

from __future__ import annotations

import logging
import re
import threading
from collections import Counter, deque
from collections.abc import Iterator
from dataclasses import dataclass

from django.db import close_old_connections, connection
from django.utils import timezone

logger = logging.getLogger(__name__)

SERVICE_TASK = "service"
CUT_MARKER = " … [line cut: {} more bytes]"

_LEVELS = {
    "DEBUG": "DEBUG", "INFO": "INFO", "WARNING": "WARNING", "WARN": "WARNING", "ERROR": "ERROR",
    "CRITICAL": "CRITICAL", "FATAL": "CRITICAL", "EXCEPTION": "ERROR",
}
# "INFO:root:…", "[ERROR] …", "2024-01-01 12:00:00,123 - WARNING - …", "2024-… INFO …"
_LEVEL_WORD = re.compile(
    r"^(?:\S+\s+\S+\s*[-|]?\s*)?(?:\S+\s*[-|]\s*)?\[?(DEBUG|INFO|WARNING|WARN|ERROR|CRITICAL|FATAL)\]?[:\s]"
)
# absl / glog, as TensorFlow prints: "I1121 12:00:00.123456  1234 file.cc:12] …", and
# TensorFlow's native logging: "2023-01-18 10:04:41.123456: W tensorflow/…cc:128] …"
_GLOG = re.compile(r"^(?:([DIWEF])\d{4} \d\d:\d\d:\d\d|\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d+: ([DIWEF]) )")
_GLOG_LEVELS = {"D": "DEBUG", "I": "INFO", "W": "WARNING", "E": "ERROR", "F": "CRITICAL"}


def detect_severity(text: str, stream: str) -> str:
    """Severity from a logging prefix when the line has one, else by stream."""
    head = text[:120]
    match = _GLOG.match(head)
    if match:
        return _GLOG_LEVELS[match.group(1) or match.group(2)]
    match = _LEVEL_WORD.match(head)
    if match:
        return _LEVELS[match.group(1)]
    if head.startswith("Traceback (most recent call last)"):
        return "ERROR"
    return "ERROR" if stream == "stderr" else "INFO"


def clean_text(raw: bytes) -> str:
    # NUL cannot be stored in PostgreSQL text; replace it like any other undecodable byte.
    return raw.decode("utf-8", errors="replace").replace("\x00", "\ufffd")


class LineSplitter:
    """Incremental bytes → lines, with progress-bar folding and a length cap.

    At most ``max_bytes`` of the current line are kept; the rest is counted and said in the cut
    marker when the line ends, however many reads it spans.
    """

    def __init__(self, max_bytes: int):
        self.max_bytes = max_bytes
        self.buffer = bytearray()
        self.dropped = 0  # bytes of the current line beyond what is kept

    def feed(self, data: bytes) -> Iterator[str]:
        start = 0
        while True:
            newline = data.find(b"\n", start)
            if newline < 0:
                self._append(data[start:])
                return
            self._append(data[start:newline])
            yield self._finish()
            start = newline + 1

    def close(self) -> Iterator[str]:
        if self.buffer or self.dropped:
            yield self._finish()

    def _append(self, chunk: bytes) -> None:
        if not chunk:
            return
        self.buffer += chunk
        # A progress bar redraws with \r: only its latest state matters. A trailing \r ends a
        # redraw (print(..., end="\r")), so look for the \r before it.
        carriage = self.buffer.rstrip(b"\r").rfind(b"\r")
        if carriage >= 0:
            del self.buffer[: carriage + 1]
            self.dropped = 0
        if len(self.buffer) > self.max_bytes:
            self.dropped += len(self.buffer) - self.max_bytes
            del self.buffer[self.max_bytes:]

    def _finish(self) -> str:
        text = clean_text(bytes(self.buffer).rstrip(b"\r"))
        if self.dropped:
            text += CUT_MARKER.format(self.dropped)
        self.buffer.clear()
        self.dropped = 0
        return text


@dataclass
class _Pending:
    task_name: str
    trial_id: str
    seq: int
    stream: str
    severity: str
    message: str
    time: object


class LogSink:
    """A job's bounded, batched path from replica output to the database."""

    def __init__(self, job_pk: int, *, max_pending: int = 50_000, flush_interval: float = 0.03,
                 batch_size: int = 2_000, on_flush=None):
        self.job_pk = job_pk
        self.max_pending = max_pending
        self.flush_interval = flush_interval
        self.batch_size = batch_size
        self.on_flush = on_flush
        self._pending: deque[_Pending] = deque()
        self._lock = threading.Lock()
        self._seq: Counter[tuple[str, str]] = Counter()
        self._dropped: Counter[str] = Counter()
        self._wake = threading.Event()
        self._closed = False
        self._seq_loaded = False
        self._thread = threading.Thread(target=self._run, name=f"logsink-{job_pk}", daemon=True)
        self._thread.start()

    # --- producers -------------------------------------------------------------------------

    def emit(self, task_name: str, stream: str, message: str, *, severity: str | None = None,
             trial_id: str = "") -> None:
        severity = severity or detect_severity(message, stream)
        with self._lock:
            if len(self._pending) >= self.max_pending and stream != "service":
                self._dropped[task_name] += 1
                return
            key = (task_name, trial_id)
            self._seq[key] += 1
            self._pending.append(
                _Pending(task_name, trial_id, self._seq[key], stream, severity, message, timezone.now())
            )
        if stream == "service":
            self._wake.set()

    def service(self, message: str, severity: str = "INFO", trial_id: str = "") -> None:
        for line in message.splitlines() or [""]:
            self.emit(SERVICE_TASK, "service", line, severity=severity, trial_id=trial_id)

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
            while self._write_batch():
                pass
        except Exception:
            logger.exception("Log writer for job %s failed", self.job_pk)
        finally:
            connection.close()

    def _load_sequences(self) -> None:
        """Continue numbering after lines an earlier run of the same job stored."""
        from django.db.models import Max

        from jobs.models import LogLine

        close_old_connections()
        rows = LogLine.objects.filter(job_id=self.job_pk).values("task_name", "trial_id").annotate(last=Max("seq"))
        with self._lock:
            for row in rows:
                key = (row["task_name"], row["trial_id"])
                # Lines emitted before loading were numbered from 1: shift them past the stored ones.
                for pending in self._pending:
                    if (pending.task_name, pending.trial_id) == key:
                        pending.seq += row["last"]
                self._seq[key] += row["last"]

    def _write_batch(self) -> bool:
        from jobs.models import LogLine

        with self._lock:
            batch = [self._pending.popleft() for _ in range(min(self.batch_size, len(self._pending)))]
            dropped = dict(self._dropped)
            self._dropped.clear()
        for task_name, count in dropped.items():
            key = (SERVICE_TASK, "")
            with self._lock:
                self._seq[key] += 1
                seq = self._seq[key]
            batch.append(_Pending(SERVICE_TASK, "", seq, "service", "WARNING",
                                  f"{count} log lines from {task_name} were dropped: the trainer printed "
                                  "faster than they could be stored.", timezone.now()))
        if not batch:
            return False
        rows = [LogLine(job_id=self.job_pk, task_name=p.task_name, trial_id=p.trial_id, seq=p.seq,
                        stream=p.stream, severity=p.severity, message=p.message, time=p.time) for p in batch]
        LogLine.objects.bulk_create(rows)
        if self.on_flush:
            self.on_flush(rows)
        return True
