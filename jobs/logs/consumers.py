"""The live log WebSocket: one job's log, the stored backlog first, then lines as they are stored.

The client connects to ``/ws/projects/<project>/jobs/<job>/logs/`` with the page's filters
(``task``, ``trial``, ``severity``, ``text``), how many lines it wants back (``tail``) and, to
resume, ``after``: the ``cursor`` of the last message it handled. JSON frames come back:

- ``backlog``: the newest ``tail`` matching lines after ``after``; ``earlier`` says whether
  older matching lines remain in that range (when resuming: a gap the client cannot fill).
- ``lines``: lines as they are stored, with the new ``cursor`` and the ``stored`` line count.
- ``progress``: the latest state of progress bars being redrawn (never stored).
- ``count``: the stored line count, once after the backlog; ``state``: the job's new state.
- ``skipped``: ``count`` lines went by that this viewer was not sent (its ``message`` says so):
  the job printed faster than the viewer's share of what this process sends its viewers a second
  (``jobs.logs.stream.CHARS_BUDGET``, ``VIEWER_CHARS``), or the viewer read too slowly. The stream goes on after them
  at ``cursor``; the lines are stored (the page, the download, the API have them).
- ``earlier`` and ``firstError``: answers to ``{"action": "earlier", "before": id}`` and
  ``{"action": "firstError"}``.

Entries have the REST API's form (``jobs.logs.stream.entry``); the page renders them with the
markup of ``_log_rows.html``. No HTML is rendered here: one rendering per viewer per line does
not keep up with a chatty trainer watched by hundreds of people.

No gap and no duplicate across the seam: the consumer joins the job's group before it reads the
backlog, live messages wait in its channel until the backlog is sent, and lines at or below the
cursor (the highest id examined) are dropped. Each batch names the previous batch's last id; a
batch that does not follow on from the cursor means one went missing (a full channel, a new
writer), and the gap is read back from the database: a page of it; a larger gap is skipped and
said, as is a viewer further behind than its share. However many watch and however fast a job
prints, each viewer costs the process a bounded amount of memory and of its time.

A socket stays open long after the request that admitted it, so every
``AICONSOLE_STREAM_RECHECK_SECONDS`` it is admitted again as a new request would be: a session
that ended (signed out, the user deactivated, a password changed) closes it with 4401, a job the
viewer may no longer see with 4403 or 4404, and no line is sent after that answer.
"""

from __future__ import annotations

import asyncio
import json
import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncWebsocketConsumer
from django.conf import settings
from django.http import QueryDict

from aiconsole import accounts, iam
from aiconsole.middleware import holds_nul
from jobs import services
from jobs.logs import stream as logstream
from jobs.models import TERMINAL_STATES, Job, LogLine

logger = logging.getLogger(__name__)

CLOSE_UNAUTHENTICATED = 4401
CLOSE_FORBIDDEN = 4403
CLOSE_NOT_FOUND = 4404
CLOSE_BAD_REQUEST = 4400  # a NUL in the address, as HTTP's NulRefusalMiddleware answers 400
DEFAULT_TAIL = 1000
MAX_TAIL = 5000
PAGE = 1000
MIN_PAUSE = 0.005  # below this the pause between frames is not worth a timer
FRAME_CHARS = 1024 * 1024  # a frame of lines is sent once it holds this much
SKIPPED = (
    "{count:,} log lines were printed faster than this page can show them live. They are stored: "
    "reload the page or download the log to see them."
)


def _number(raw, default: int = 0, maximum: int | None = None) -> int:
    value = int(raw) if str(raw or "").isdigit() else default
    return min(value, maximum) if maximum else value


def _authorized_job(user, project_id: str, job_id: str) -> Job:
    project = accounts.find_project(project_id, actor=user)
    return services.get_job(project, job_id, actor=user, audited=False)


def _still_admitted(session_key: str | None, user_pk: int, project_id: str, job_id: str) -> int | None:
    """None while the viewer may go on watching; otherwise the close code: the session ended (signed
    out, deactivated, password changed), or the job is no longer theirs to see."""
    user = accounts.session_user(session_key)
    if user is None or user.pk != user_pk:
        return CLOSE_UNAUTHENTICATED
    try:
        _authorized_job(user, project_id, job_id)
    except iam.NotFound:
        return CLOSE_NOT_FOUND
    except iam.PermissionDenied:
        return CLOSE_FORBIDDEN
    return None


# A process's sockets share each answer of _still_admitted for a second: 500 tabs of one viewer on
# one job asked it 50 times a second, a new database connection and five queries each time.
ANSWER_SECONDS = 1.0
_answers: dict[tuple, tuple[float, asyncio.Future]] = {}


async def _admitted_again(*key) -> int | None:
    """``_still_admitted``, answered once for every socket that asks the same within a second."""
    loop = asyncio.get_running_loop()
    now = loop.time()
    known = _answers.get(key)
    if known is None or now - known[0] > ANSWER_SECONDS or known[1].get_loop() is not loop:
        for stale in [k for k, (asked, _) in _answers.items() if now - asked > ANSWER_SECONDS]:
            del _answers[stale]
        known = _answers[key] = (now, asyncio.ensure_future(database_sync_to_async(_still_admitted)(*key)))
    return await asyncio.shield(known[1])


def _state(job_pk: int) -> dict:
    state = Job.objects.filter(pk=job_pk).values_list("state", flat=True).first()
    return {"jobState": state, "jobEnded": state in TERMINAL_STATES}


def _opening(job_pk: int, log_filter, after: int, tail: int) -> dict:
    state = _state(job_pk)  # before the lines: a job seen ended has stored all of them
    edge = logstream.last_id(job_pk)
    after = min(after, edge)  # a cursor past the newest line (a database restored from a backup)
    entries, earlier = logstream.read_newest(job_pk, log_filter, tail, after=after, before=edge + 1)
    return {"type": "backlog", "entries": entries, "earlier": earlier, "cursor": str(edge), "edge": edge, **state}


def _page_after(job_pk: int, log_filter, cursor: int, upto: int) -> tuple[list[dict], int]:
    """Up to a page of matching lines in ``(cursor, upto]`` and the new cursor."""
    entries = logstream.read_after(job_pk, log_filter, cursor, PAGE, upto=upto)
    return entries, (int(entries[-1]["id"]) if len(entries) == PAGE else upto)


def _count_between(job_pk: int, after: int, upto: int) -> int:
    return LogLine.objects.filter(job_id=job_pk, id__gt=after, id__lte=upto).count()


def _earlier(job_pk: int, log_filter, before: int) -> dict:
    entries, earlier = logstream.read_newest(job_pk, log_filter, PAGE, before=before)
    return {"type": "earlier", "entries": entries, "earlier": earlier}


def _first_error(job_pk: int, log_filter) -> dict:
    found = logstream.first_error_id(job_pk, log_filter)
    return {"type": "firstError", "id": str(found) if found else None}


class JobLogConsumer(AsyncWebsocketConsumer):
    """Streams one job's log to one browser tab (or any client speaking the protocol above)."""

    feed = None
    follower = None
    guard = None
    sent_chars = 0  # of lines, since the socket opened: what the send budget counts

    async def connect(self):
        query = QueryDict(self.scope.get("query_string", b""))
        self.filter = logstream.LogFilter.from_page(query)
        self.cursor = self.stored = 0
        refusal = await self._admit()
        await self.accept()
        if refusal:
            await self.close(code=refusal)
            return
        self.position = self.feed.next  # what the feed gets from now on is ours to send
        await self._send_backlog(_number(query.get("after")), _number(query.get("tail"), DEFAULT_TAIL, MAX_TAIL))
        self.follower = asyncio.create_task(self._follow())
        self.follower.add_done_callback(self._follower_ended)
        self.guard = asyncio.create_task(self._recheck())

    async def _admit(self) -> int | None:
        """Authenticate, authorize (404 and 403 as everywhere) and join the job's live feed."""
        user = self.scope.get("user")
        if user is None or not user.is_authenticated:
            return CLOSE_UNAUTHENTICATED
        route = self.scope["url_route"]["kwargs"]
        if holds_nul(self.scope["path"], self.scope.get("query_string", b"").decode("latin-1")):
            return CLOSE_BAD_REQUEST  # no name or filter holds one (PostgreSQL stores none)
        try:
            self.job = await database_sync_to_async(_authorized_job)(user, route["project_id"], route["job_id"])
        except iam.NotFound:
            return CLOSE_NOT_FOUND
        except iam.PermissionDenied:
            return CLOSE_FORBIDDEN
        self.feed = await logstream.join_feed(self.job.pk)
        if not _number(QueryDict(self.scope.get("query_string", b"")).get("after")):  # not a resume
            await database_sync_to_async(services.record_log_read)(self.job, actor=user, via="stream")
        return None

    async def _send_backlog(self, after: int, tail: int) -> None:
        opening = await database_sync_to_async(_opening)(self.job.pk, self.filter, after, tail)
        self.cursor = int(opening["cursor"])
        edge = opening.pop("edge")
        await self.send_json(opening)
        # Counted up to the backlog's edge: every later batch adds its own count.
        self.stored = await database_sync_to_async(logstream.stored_count)(self.job.pk, upto=edge)
        await self.send_json({"type": "count", "stored": self.stored})

    async def _recheck(self) -> None:
        """The socket outlives the request that admitted it: ask again, now and then, as a new
        request would be asked, and close it once the answer is no."""
        session = self.scope.get("session")
        session_key = session.session_key if session is not None else None
        route = self.scope["url_route"]["kwargs"]
        while True:
            await asyncio.sleep(settings.STREAM_RECHECK_SECONDS)
            refusal = await _admitted_again(session_key, self.scope["user"].pk, route["project_id"], route["job_id"])
            if refusal:
                if self.follower is not None:
                    self.follower.cancel()  # not one more line after the answer was no
                await self.close(code=refusal)
                return

    async def disconnect(self, code):
        for task in (self.follower, self.guard):
            if task is not None and task is not asyncio.current_task():
                task.cancel()
        if self.feed is not None:
            logstream.leave_feed(self.feed)
            self.feed = None

    async def send_json(self, content: dict) -> None:
        await self.send(text_data=json.dumps(content, ensure_ascii=False, separators=(",", ":")))

    # --- client requests -------------------------------------------------------------------

    async def receive(self, text_data=None, bytes_data=None):
        try:
            request = json.loads(text_data or "{}")
        except ValueError:
            return
        action = request.get("action") if isinstance(request, dict) and self.feed else None
        if action == "earlier":
            before = _number(request.get("before"), default=self.cursor + 1)
            await self.send_json(await database_sync_to_async(_earlier)(self.job.pk, self.filter, before))
        elif action == "firstError":
            await self.send_json(await database_sync_to_async(_first_error)(self.job.pk, self.filter))

    # --- live ------------------------------------------------------------------------------------

    async def _follow(self) -> None:
        """Everything new on the feed since the last look, in as few frames as it takes. Batches
        the feed let go before this viewer looked are read back by the check in _take_lines."""
        self.pieces: list[str] = []  # JSON arrays of entries, sent together as one frame
        self.piece_chars = 0
        while True:
            await self.feed.wait(self.position)
            items = self.feed.since(self.position)
            self.position = self.feed.next  # before any wait: what arrives meanwhile is the next look's
            items = await self._skip_if_behind(items)
            sent = self.sent_chars
            for item in items:
                await self._deliver(item[1]["type"], item)
            await self._flush_lines()
            pause = logstream.frame_interval(self.sent_chars - sent)
            if pause > MIN_PAUSE:
                await asyncio.sleep(pause)

    async def _skip_if_behind(self, items: list[list]) -> list[list]:
        """The items to send: the newest batches of lines up to this viewer's share, and what
        is not lines; the older batches are skipped and said."""
        batches = [item for item in items if item[1]["type"] == "log.lines" and item[1]["last"] > self.cursor]
        share = logstream.viewer_share()
        if sum(len(item[1]["entries"]) for item in batches) <= share:
            return items
        kept, chars = set(), 0
        for item in reversed(batches):
            chars += len(item[1]["entries"])
            if chars > share:
                break
            kept.add(item[0])
        skipped = [item for item in batches if item[0] not in kept]
        first = skipped[0][1]
        count = sum(item[1]["count"] for item in skipped[1:])
        count += (
            first["count"]
            if first["after"] >= self.cursor
            else sum(  # partly sent by a read-back
                1 for entry in self.feed.entries(skipped[0]) if int(entry["id"]) > self.cursor
            )
        )
        if first["after"] > self.cursor:  # and what came before it, which the feed let go
            count += await database_sync_to_async(_count_between)(self.job.pk, self.cursor, first["after"])
        await self._skipped(skipped[-1][1]["last"], count)
        return [item for item in items if item[1]["type"] != "log.lines" or item[0] in kept]

    async def _skipped(self, upto: int, count: int) -> None:
        await self._flush_lines()
        self.cursor = upto
        self.stored += count
        await self.send_json(
            {
                "type": "skipped",
                "count": count,
                "cursor": str(upto),
                "stored": self.stored,
                "message": SKIPPED.format(count=count),
            }
        )

    def _follower_ended(self, task: asyncio.Task) -> None:
        if not task.cancelled() and task.exception() is not None:
            logger.error("Live log stream of job %s failed", self.job.pk, exc_info=task.exception())
            asyncio.ensure_future(self.close(code=1011))  # the page reconnects and resumes

    async def _deliver(self, kind: str, item: list) -> None:
        if kind == "log.lines":
            await self._take_lines(item)
            return
        await self._flush_lines()
        if kind == "log.progress":
            entries = [e for e in item[1]["entries"] if self.filter.matches(e)]
            if entries:
                await self.send_json({"type": "progress", "entries": entries})
        elif kind == "job.state":
            state = item[1]["state"]
            await self.send_json({"type": "state", "jobState": state, "jobEnded": state in TERMINAL_STATES})

    async def _take_lines(self, item: list) -> None:
        message = item[1]
        if message["last"] <= self.cursor:
            return  # already sent with the backlog or a read-back
        if message["after"] > self.cursor:  # a batch that never reached us came first
            await self._read_back(message["after"])
        self.stored += message["count"]
        if message["after"] == self.cursor and self.filter.empty:
            self._add_piece(message["entries"])  # as published: no decoding, no encoding
        else:
            entries = [e for e in self.feed.entries(item) if int(e["id"]) > self.cursor and self.filter.matches(e)]
            if entries:
                self._add_piece(json.dumps(entries, ensure_ascii=False, separators=(",", ":")))
        self.cursor = message["last"]
        if self.piece_chars >= FRAME_CHARS:
            await self._flush_lines()

    def _add_piece(self, piece: str) -> None:
        self.pieces.append(piece)
        self.piece_chars += len(piece)

    async def _read_back(self, upto: int) -> None:
        """Lines stored between the cursor and ``upto`` never reached us: read them back, a page
        of them at most; more are skipped and said."""
        await self._flush_lines()
        entries, cursor = await database_sync_to_async(_page_after)(self.job.pk, self.filter, self.cursor, upto)
        if cursor < upto:
            await self._skipped(upto, await database_sync_to_async(_count_between)(self.job.pk, self.cursor, upto))
            return
        self.cursor = cursor
        if entries:
            self._add_piece(json.dumps(entries, ensure_ascii=False, separators=(",", ":")))
            await self._flush_lines()
        self.stored = await database_sync_to_async(logstream.stored_count)(self.job.pk, upto=upto)

    async def _flush_lines(self) -> None:
        """Send the lines gathered as one frame."""
        if not self.pieces:  # a filtered view stays quiet while nothing it shows arrives
            return
        joined = ",".join(piece[1:-1] for piece in self.pieces)
        self.pieces, self.piece_chars = [], 0
        self.sent_chars += len(joined)
        await self.send(
            text_data=f'{{"type":"lines","cursor":"{self.cursor}","stored":{self.stored},"entries":[{joined}]}}'
        )
