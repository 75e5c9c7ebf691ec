"""The data analysis page's work, off the request path, bounded, and kept per file version.

A 3,000-column CSV once took 15 s of CPU in a request and two at once slowed every page 60×. So:
the file's first ``ANALYSIS_MAX_COLUMNS`` columns and ``ANALYSIS_MAX_ROWS`` rows are analysed, and
the page's charts drawn, in a child process (``jobs.builtin.analysis_child``: no GIL shared with the
console, a lower priority, killed at ``ANALYSIS_SECONDS``; only the analysed columns' cells are
kept); at most ``ANALYSIS_WORKERS`` run at once (a thread per
slot only reads the file and waits on its child); the request waits ``ANALYSIS_WAIT_SECONDS`` at
most and the page then polls. Outcomes, failures and time-outs included, are kept in an in-memory
LRU keyed by the file's version (resolved path, size, mtime_ns; a gs:// object's generation) and
the page's options, so a reload is instant and a changed file is analysed again. Each console
process has its own cache and slots.
"""

from __future__ import annotations

import logging
import multiprocessing
import os
import threading
import time
from collections import OrderedDict
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field

from django.conf import settings

from aiconsole import storage
from algorithms.table import DataError
from jobs.builtin import algorithm as builtin
from jobs.builtin import analysis_child

logger = logging.getLogger(__name__)

RUNNING, READY, TOO_LONG, FAILED = "running", "ready", "too_long", "failed"


@dataclass
class Analysis:
    """One file version's analysis: running, then ready (``report``, and its ``charts`` drawn), too
    long, or failed (``message``)."""

    state: str = RUNNING
    report: dict | None = None
    charts: dict | None = None
    message: str = ""
    queued_at: float = field(default_factory=time.monotonic)
    started_at: float | None = None
    done: threading.Event = field(default_factory=threading.Event, repr=False)

    @property
    def seconds(self) -> int:
        return int(time.monotonic() - (self.started_at or self.queued_at))

    def finish(self, state: str, report: dict | None = None, message: str = "", charts: dict | None = None) -> None:
        self.state, self.report, self.message, self.charts = state, report, message, charts
        self.done.set()


@dataclass
class Stats:
    hits: int = 0
    misses: int = 0
    computed: int = 0  # child processes started


_lock = threading.Lock()
_cache: OrderedDict[tuple, Analysis] = OrderedDict()
_pool: ThreadPoolExecutor | None = None
stats = Stats()


def analyse(uri: str, *, header: bool, model_type: str | None, compare: str | None, project) -> Analysis:
    """The analysis of ``uri`` (and ``compare``), files of ``project``'s area, waiting a bounded time for it."""
    limits = {"max_columns": settings.ANALYSIS_MAX_COLUMNS, "max_rows": settings.ANALYSIS_MAX_ROWS}
    key = (
        project.project_id,
        _version(uri, project),
        _version(compare, project) if compare else None,
        header,
        model_type or "",
        *limits.values(),
    )
    with _lock:
        entry = _cache.get(key)
        if entry is not None:
            stats.hits += 1
            _cache.move_to_end(key)
        else:
            stats.misses += 1
            entry = _cache[key] = Analysis()
            while len(_cache) > settings.ANALYSIS_CACHE_ENTRIES:
                _cache.popitem(last=False)
            _executor().submit(_run, key, entry, uri, compare, header, model_type or None, limits, project)
    entry.done.wait(settings.ANALYSIS_WAIT_SECONDS)
    return entry


def reset() -> None:
    """Forget every kept outcome and the counters (tests; a running analysis still finishes)."""
    global _pool
    with _lock:
        _cache.clear()
        stats.hits = stats.misses = stats.computed = 0
        if _pool is not None:
            _pool.shutdown(wait=False, cancel_futures=True)
        _pool = None


def _version(uri: str, project) -> tuple:
    if storage.is_gcs_uri(uri):
        return (uri, *storage.object_version(uri))
    try:
        with storage.open_local(uri, project=project) as handle:
            status = os.fstat(handle.fileno())
    except storage.StorageError as error:
        raise DataError(f"{uri} is not a file." if str(error).endswith("is not a file") else str(error)) from None
    return str(storage.resolve_local_path(uri, project=project)), status.st_size, status.st_mtime_ns


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=settings.ANALYSIS_WORKERS, thread_name_prefix="data-analysis")
    return _pool


def _run(
    key: tuple,
    entry: Analysis,
    uri: str,
    compare: str | None,
    header: bool,
    model_type: str | None,
    limits: dict,
    project,
) -> None:
    with _lock:
        if _cache.get(key) is not entry:  # evicted while it waited for a slot: nobody will look
            entry.finish(FAILED, message="The analysis was dropped; reload the page to start it again.")
            return
    entry.started_at = time.monotonic()
    deadline = entry.started_at + settings.ANALYSIS_SECONDS
    try:
        data, cut = builtin.read_csv_bytes(uri, project=project)
        other, other_cut = builtin.read_csv_bytes(compare, project=project) if compare else (None, False)
        arguments = {
            "source": uri,
            "cut": cut,
            "compare_source": compare or "",
            "compare_cut": other_cut,
            "header": header,
            "model_type": model_type,
            **limits,
        }
        ok, value = _in_child(arguments, [data, *([other] if other is not None else [])], deadline)
    except TimeoutError:
        entry.finish(
            TOO_LONG,
            message=f"The analysis took longer than {settings.ANALYSIS_SECONDS:g} seconds and "
            "was stopped. Analyse a smaller sample of the file, or ask an administrator to raise "
            "AICONSOLE_ANALYSIS_SECONDS.",
        )
    except (storage.StorageError, DataError) as error:
        entry.finish(FAILED, message=str(error))
    except Exception:  # the page must say it ended, not spin for ever
        logger.exception("Data analysis of %s failed", uri)
        entry.finish(FAILED, message="The analysis stopped unexpectedly.")
    else:
        if ok:
            entry.finish(READY, report=value["report"], charts=value["charts"])
        else:
            entry.finish(FAILED, message=value)


def _context():
    methods = multiprocessing.get_all_start_methods()
    context = multiprocessing.get_context("forkserver" if "forkserver" in methods else "spawn")
    if context.get_start_method() == "forkserver":
        context.set_forkserver_preload(["jobs.builtin.analysis_child"])  # not the console's __main__
    return context


def _in_child(arguments: dict, files: list[bytes], deadline: float) -> tuple[bool, object]:
    """The child's answer. The files' bytes go down the pipe as they are, after it starts: as
    part of its arguments they were pickled, a copy made while holding the GIL (60 MB, 50 ms in
    which no other request of this process ran)."""
    context = _context()
    receiver, sender = context.Pipe()
    child = context.Process(
        target=analysis_child.send_report, args=(sender, arguments, len(files)), daemon=True, name="data-analysis"
    )
    with _lock:
        stats.computed += 1
    child.start()
    sender.close()
    try:
        try:
            while files:
                receiver.send_bytes(files.pop(0))
        except OSError:
            pass  # the child is gone: its end of the pipe says how (below)
        if not receiver.poll(max(0.0, deadline - time.monotonic())):
            raise TimeoutError
        try:
            return receiver.recv()
        except EOFError:
            return False, "The analysis stopped unexpectedly (the file may be too large for this server)."
    finally:
        receiver.close()
        if child.is_alive():
            child.kill()
        child.join(5)


def outcomes() -> list[Analysis]:
    """The kept analyses, least recently used first."""
    with _lock:
        return list(_cache.values())
