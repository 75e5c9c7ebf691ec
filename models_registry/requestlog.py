"""Online prediction request logging, when a model turns on ``onlinePredictionLogging``.

Every request of such a model gets an access row (time, caller, status, latency); the version's
``requestLoggingConfig.samplingPercentage`` decides which ones also keep their request and
response bodies (cut to a few KiB), as the original's request-response logging sampled them.
Rows are written in batches by one background thread, never in the request's own path.
"""

from __future__ import annotations

import json
import logging
import random
import threading
from collections import deque

from django.db import close_old_connections, connection
from django.utils import timezone

from aiconsole import audit
from models_registry.models import PredictionLog, Version

logger = logging.getLogger("aiconsole.models")

BODY_LIMIT = 8 * 1024
MAX_PENDING = 20_000
FLUSH_SECONDS = 0.5

_pending: deque = deque()
_wake = threading.Event()
_lock = threading.Lock()
_thread: threading.Thread | None = None
_dropped = 0


def _cut(body: bytes) -> str:
    text = body[:BODY_LIMIT].decode("utf-8", errors="replace")
    return text + (f" … [{len(body) - BODY_LIMIT} more bytes]" if len(body) > BODY_LIMIT else "")


def sampled(version) -> bool:
    rate = (version.request_logging_config or {}).get("samplingPercentage") or 0
    return rate > 0 and random.random() < rate


def record(version, actor, status: int, latency_ms: float, request: bytes, response: bytes) -> None:
    global _dropped
    keep = sampled(version)
    count = 0
    if keep:
        try:
            count = len(json.loads(request).get("instances") or [])
        except (ValueError, AttributeError, TypeError, RecursionError):
            count = 0
    row = (
        version.pk,
        timezone.now(),
        audit.principal_of(actor),
        status,
        latency_ms,
        count,
        _cut(request) if keep else "",
        _cut(response) if keep else "",
    )
    if len(_pending) >= MAX_PENDING:
        _dropped += 1
        return
    _pending.append(row)
    _ensure_writer()


def _ensure_writer() -> None:
    global _thread
    if _thread is not None and _thread.is_alive():
        return
    with _lock:
        if _thread is None or not _thread.is_alive():
            _thread = threading.Thread(target=_run, name="prediction-log", daemon=True)
            _thread.start()


def flush() -> None:
    """Write what is pending now (tests, shutdown)."""
    with _lock:
        _write()


def _run() -> None:
    while True:
        _wake.wait(FLUSH_SECONDS)
        _wake.clear()
        try:
            with _lock:
                _write()
        except Exception:
            logger.exception("Could not store prediction logs")
        finally:
            connection.close()


def _write() -> None:
    global _dropped

    rows = []
    while _pending and len(rows) < 5000:
        rows.append(_pending.popleft())
    if not rows:
        return
    close_old_connections()
    existing = set(Version.objects.filter(pk__in={r[0] for r in rows}).values_list("pk", flat=True))
    PredictionLog.objects.bulk_create(
        [
            PredictionLog(
                version_id=pk,
                time=time,
                principal=principal,
                status_code=status,
                latency_ms=latency,
                instance_count=count,
                request=request,
                response=response,
            )
            for pk, time, principal, status, latency, count, request, response in rows
            if pk in existing
        ]
    )
    if _dropped:
        logger.warning("%d prediction log rows were dropped: requests came faster than they could be stored", _dropped)
        _dropped = 0
