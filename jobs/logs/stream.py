"""A job's log as readers see it: filters, keyset reads, the wire form, and live publishing.

The console page, the WebSocket consumer, the REST long-poll endpoint and the log writer all use
these pieces, so every reader filters, pages and spells a line the same way. Reads are keyset
reads on ``(job, id)``: the newest page of a ten-million-line log costs what the first one does.

Live publishing crosses threads: the log writer runs in executor threads, the consumers in the
server's event loop. Channels' in-memory layer is not thread-safe, so messages are handed to the
loop the listeners run on (``listen_here``); with no listener in this process (or with Redis) a
private loop thread sends them. Messages leave in the order they were published. In
``aiconsole up`` the log writer runs in the worker process: its messages are forwarded to the
web process and published there (``aiconsole.events.forward_to``), in the same order.

Live reading goes through one ``JobFeed`` per job per process, the only subscriber of the job's
group there; WebSocket consumers and long-polls read from it.
"""

from __future__ import annotations

import asyncio
import json
import logging
import threading
from collections import deque
from dataclasses import dataclass
from datetime import UTC
from itertools import islice

from channels.layers import get_channel_layer

from aiconsole.events import group_for_job, listen_here, send_to_group  # noqa: F401 (re-exported)
from jobs.models import LogLine, Severity

logger = logging.getLogger(__name__)

SEVERITIES = [s.value for s in Severity]
_FIELDS = ("id", "time", "severity", "task_name", "trial_id", "seq", "stream", "message")


def timestamp(moment) -> str:
    """RFC 3339 in UTC with microseconds, as Cloud Logging writes entry timestamps."""
    if moment.utcoffset():
        moment = moment.astimezone(UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def entry(pk, time, severity, task_name, trial_id, seq, stream, message) -> dict:
    """One stored line in the wire form shared by the REST API and the WebSocket."""
    return {
        "id": str(pk),
        "timestamp": timestamp(time),
        "severity": severity,
        "taskName": task_name,
        "trialId": trial_id,
        "seq": str(seq),
        "stream": stream,
        "message": message,
    }


@dataclass(frozen=True)
class LogFilter:
    """Which lines a reader wants: one replica, one trial, a minimum severity, a substring."""

    task: str = ""
    trial: str = ""
    severity: str = ""  # minimum; "" for any
    text: str = ""  # case-insensitive substring

    @classmethod
    def from_page(cls, params) -> LogFilter:
        """From the console's query parameters; unknown severities mean any."""
        severity = params.get("severity", "")
        return cls(
            task=params.get("task", ""),
            trial=params.get("trial", ""),
            severity=severity if severity in SEVERITIES else "",
            text=params.get("text", "")[:200],
        )

    @property
    def empty(self) -> bool:
        return not (self.task or self.trial or self.severity or self.text)

    @property
    def severities(self) -> list[str]:
        return SEVERITIES[SEVERITIES.index(self.severity) :] if self.severity else SEVERITIES

    def apply(self, lines):
        if self.task:
            lines = lines.filter(task_name=self.task)
        if self.trial:
            lines = lines.filter(trial_id=self.trial)
        if self.severity:
            lines = lines.filter(severity__in=self.severities)
        if self.text:
            lines = lines.filter(message__icontains=self.text)
        return lines

    def matches(self, item: dict) -> bool:
        """The same test as ``apply``, on a wire-form entry."""
        return (
            (not self.task or item["taskName"] == self.task)
            and (not self.trial or item["trialId"] == self.trial)
            and (not self.severity or item["severity"] in self.severities)
            and (not self.text or self.text.lower() in item["message"].lower())
        )

    def as_params(self) -> dict:
        return {
            name: value
            for name, value in (
                ("task", self.task),
                ("trial", self.trial),
                ("severity", self.severity),
                ("text", self.text),
            )
            if value
        }


# --- keyset reads ------------------------------------------------------------------------------


def _lines(job_pk: int, log_filter: LogFilter):
    return log_filter.apply(LogLine.objects.filter(job_id=job_pk))


def last_id(job_pk: int) -> int:
    """The newest stored line's id (0 for none): the edge of a consistent read."""
    return LogLine.objects.filter(job_id=job_pk).order_by("-id").values_list("id", flat=True).first() or 0


def read_after(job_pk: int, log_filter: LogFilter, after: int, limit: int, upto: int | None = None) -> list[dict]:
    """Matching lines with ``after < id <= upto``, oldest first."""
    lines = _lines(job_pk, log_filter).filter(id__gt=after)
    if upto is not None:
        lines = lines.filter(id__lte=upto)
    return [entry(*row) for row in lines.order_by("id").values_list(*_FIELDS)[:limit]]


def read_newest(
    job_pk: int, log_filter: LogFilter, limit: int, *, after: int = 0, before: int | None = None
) -> tuple[list[dict], bool]:
    """The newest ``limit`` matching lines in ``(after, before)``, oldest first, and whether
    older matching lines remain in that range."""
    lines = _lines(job_pk, log_filter)
    if after:
        lines = lines.filter(id__gt=after)
    if before is not None:
        lines = lines.filter(id__lt=before)
    rows = list(lines.order_by("-id").values_list(*_FIELDS)[: limit + 1])
    more = len(rows) > limit
    return [entry(*row) for row in reversed(rows[:limit])], more


def first_error_id(job_pk: int, log_filter: LogFilter) -> int | None:
    """The first line of severity ERROR or worse that the filter lets through."""
    strictest = log_filter.severity if log_filter.severity in ("ERROR", "CRITICAL") else "ERROR"
    wanted = LogFilter(log_filter.task, log_filter.trial, strictest, log_filter.text)
    return _lines(job_pk, wanted).order_by("id").values_list("id", flat=True).first()


def build_line(job_pk: int) -> str | None:
    """The service line saying which runtime, Python and build the job's environment is
    (``Runtime version 2.11, Python 3.7.16 (CPU build): …``), the first one written; None before."""
    lines = LogLine.objects.filter(job_id=job_pk, task_name="service", message__startswith="Runtime version ")
    return lines.order_by("id").values_list("message", flat=True).first()


_counted: dict[int, tuple[int, int]] = {}  # job → (an id, how many of its lines are at or below it)
_counted_lock = threading.Lock()


def stored_count(job_pk: int, upto: int) -> int:
    """How many lines the job has stored up to ``upto``. Counting ten million rows takes most of
    a second, so each process counts a job once and then only the lines stored since (lines are
    never removed from a job that exists)."""
    with _counted_lock:
        known = _counted.get(job_pk)
    lines = LogLine.objects.filter(job_id=job_pk, id__lte=upto)
    if known and known[0] <= upto:
        count = known[1] + lines.filter(id__gt=known[0]).count()
    else:
        count = lines.count()
    with _counted_lock:
        if job_pk not in _counted or _counted[job_pk][0] < upto:
            _counted[job_pk] = (upto, count)
    return count


# --- live publishing (through aiconsole.events, safe from any thread) ---------------------------


def publish_lines(job_pk: int, *, after: int, last: int, count: int, entries_json: str) -> None:
    """One stored batch. ``after`` is the last id of the writer's previous batch, so a listener
    that sees ``after`` beyond what it has knows a batch went missing and reads the gap back."""
    send_to_group(
        group_for_job(job_pk),
        {"type": "log.lines", "after": after, "last": last, "count": count, "entries": entries_json},
    )


def publish_progress(job_pk: int, entries: list[dict]) -> None:
    """In-progress states of carriage-return progress bars: shown, never stored."""
    send_to_group(group_for_job(job_pk), {"type": "log.progress", "entries": entries})


# --- live reading: one feed per job per process ------------------------------------------------

FEED_BATCHES = 1_000  # messages a feed keeps for viewers that fall behind…
FEED_LINES = 100_000  # …and lines…
FEED_CHARS = 64 * 1024 * 1024  # …and characters; a viewer further behind reads the gap back from the database


class JobFeed:
    """One job's live messages in this process, shared by everyone watching the job here.

    The feed, not each viewer, subscribes to the job's group: a batch arrives once per process
    (one copy, one decode) however many tabs show the job. Viewers take everything new since
    they last looked, so one that falls behind catches up in fewer, larger frames instead of a
    longer queue, and the server does less work the busier it is.
    """

    def __init__(self, job_pk: int, loop: asyncio.AbstractEventLoop):
        self.job_pk = job_pk
        self.loop = loop
        self.items: deque[list] = deque()  # [number, message, its entries once decoded]
        self.next = 0  # the number the next message gets
        self.lines = 0
        self.chars = 0  # of the entries' JSON: 100,000 lines cut at 32 KB would be 3 GB
        self.viewers = 0
        self.broken = False
        self.ready = loop.create_future()  # done once the group subscription is in place
        self._changed = loop.create_future()
        self._task = loop.create_task(self._subscribe()) if get_channel_layer() else None
        if self._task is None:
            self.ready.set_result(None)

    async def _subscribe(self) -> None:
        layer, group = get_channel_layer(), group_for_job(self.job_pk)
        try:
            channel = await layer.new_channel()
            await layer.group_add(group, channel)
        except Exception as error:
            self.ready.set_exception(error)
            raise
        self.ready.set_result(None)
        try:
            while True:
                self._append(await layer.receive(channel))
        except Exception:
            logger.exception("The live log feed of job %s broke", self.job_pk)
            self.broken = True
            if _feeds.get(self.job_pk) is self:
                del _feeds[self.job_pk]  # the next viewer starts a new one
            self._changed.set_result(None)
        finally:
            await layer.group_discard(group, channel)

    def _append(self, message: dict) -> None:
        self.items.append([self.next, message, None])
        self.next += 1
        self.lines += message.get("count", 0)
        self.chars += len(message.get("entries", ""))
        while len(self.items) > 1 and (
            len(self.items) > FEED_BATCHES or self.lines > FEED_LINES or self.chars > FEED_CHARS
        ):
            dropped = self.items.popleft()[1]
            self.lines -= dropped.get("count", 0)
            self.chars -= len(dropped.get("entries", ""))
        changed, self._changed = self._changed, self.loop.create_future()
        changed.set_result(None)

    async def wait(self, position: int) -> None:
        """Until there is a message numbered ``position`` or later."""
        while self.next <= position:
            if self.broken:
                raise ConnectionError(f"the live log feed of job {self.job_pk} broke")
            await asyncio.shield(self._changed)  # a waiter given up must not cancel the others' wait

    def since(self, position: int) -> list[list]:
        """Messages from ``position`` on (those not let go already)."""
        if not self.items:
            return []
        return list(islice(self.items, max(0, position - self.items[0][0]), None))

    @staticmethod
    def entries(item: list) -> list[dict]:
        """A batch's entries, decoded once for every filtered viewer."""
        if item[2] is None:
            item[2] = json.loads(item[1]["entries"])
        return item[2]

    def close(self) -> None:
        if self._task is not None:
            self._task.cancel()


_feeds: dict[int, JobFeed] = {}
# Frames per second this process sends to all live viewers together, at most. With few viewers
# each gets every batch as it is stored; with many, each frame carries a few batches, so the
# server keeps up (and latency grows by tens of milliseconds) instead of falling behind.
FRAME_BUDGET = 2_000


# Characters of lines a second: for all live viewers together, and for one. Past its share a
# viewer skips ahead (told how many lines it missed) instead of falling further behind: 500
# viewers of a job printing 2,000 lines a second were 250 MB a second to send, and the web process
# grew by 100 MB a second holding what it could not; one viewer of a job printing 40 KB lines
# flat out took 40 MB a second, and everyone else's requests waited 6 times longer. 200 viewers
# of 1,000 lines a second (bench/logs.py) stay within both.
CHARS_BUDGET = 48 * 1024 * 1024
VIEWER_CHARS = 2 * 1024 * 1024
SHARE_MIN_CHARS = 64 * 1024  # what a viewer may always be behind by, however many watch


def _viewers() -> int:
    return sum(feed.viewers for feed in _feeds.values())


def frame_interval(chars: int = 0) -> float:
    """The pause a viewer takes after sending ``chars`` for everyone to share the budgets."""
    viewers = _viewers()
    return max(viewers / FRAME_BUDGET, chars * viewers / CHARS_BUDGET, chars / VIEWER_CHARS)


def viewer_share() -> int:
    """How many characters of lines a viewer may be behind by before it skips ahead: what its
    share of the budgets sends in a second."""
    return max(SHARE_MIN_CHARS, min(VIEWER_CHARS, CHARS_BUDGET // max(1, _viewers())))


async def join_feed(job_pk: int) -> JobFeed:
    """The job's feed in this process, subscribed before this returns (so nothing stored from
    now on is missed); every ``join_feed`` needs a ``leave_feed``."""
    listen_here()
    loop = asyncio.get_running_loop()
    feed = _feeds.get(job_pk)
    if feed is None or feed.loop is not loop or feed.broken:
        feed = _feeds[job_pk] = JobFeed(job_pk, loop)
    feed.viewers += 1
    try:
        await asyncio.shield(feed.ready)
    except BaseException:
        leave_feed(feed)
        raise
    return feed


def leave_feed(feed: JobFeed) -> None:
    feed.viewers -= 1
    if feed.viewers <= 0:
        feed.close()
        if _feeds.get(feed.job_pk) is feed:
            del _feeds[feed.job_pk]
