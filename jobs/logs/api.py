"""``GET /v1/projects/{project}/jobs/{jobId}/logs``: a job's log after a cursor, long-polled.

What ``aiconsole jobs stream-logs`` reads. Entries come in stored order (id ascending) in the
wire form of ``jobs.logs.stream.entry``; ``nextCursor`` continues from there. With ``waitSeconds``
the call waits, when nothing new is there yet, for the next stored batch (woken by the job's
channel-layer group, with a database re-check as a fallback) or for the end of the job.

``jobEnded`` is true once the job is in a terminal state and every line up to its end has been
returned. Lines the platform writes around the end are stored within milliseconds; the answer
waits ``SETTLE_SECONDS`` after ``endTime`` before saying the log is complete, so a line written
just after the state changed is never cut off.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, replace
from datetime import timedelta

from asgiref.sync import async_to_sync, sync_to_async
from django.utils import timezone
from rest_framework.decorators import api_view
from rest_framework.response import Response

from aiconsole import accounts
from aiconsole.errors import InvalidArgument
from jobs import services
from jobs.logs import stream as logstream
from jobs.models import TERMINAL_STATES, Job

DEFAULT_PAGE_SIZE = 500
MAX_PAGE_SIZE = 1000
MAX_WAIT_SECONDS = 30
RECHECK_SECONDS = 0.25
SETTLE_SECONDS = 1.0


@dataclass(frozen=True)
class LogsQuery:
    cursor: int
    cursor_text: str
    filter: logstream.LogFilter
    page_size: int
    wait: float


def _number(params, name: str, default: int, maximum: int) -> int:
    raw = params.get(name, "")
    if raw == "":
        return default
    if not raw.isdigit() or int(raw) > maximum:
        raise InvalidArgument(f"Invalid value for '{name}': \"{raw}\" (expected 0 to {maximum}).")
    return int(raw)


def parse_query(params) -> LogsQuery:
    cursor_text = params.get("after", "")
    if cursor_text and not cursor_text.isdigit():
        raise InvalidArgument(f'The cursor "{cursor_text}" is not valid; pass a nextCursor back unchanged.')
    severity = params.get("severity", "").upper()
    if severity and severity not in logstream.SEVERITIES:
        raise InvalidArgument(f'Invalid severity "{params["severity"]}"; use one of {", ".join(logstream.SEVERITIES)}.')
    log_filter = logstream.LogFilter(
        task=params.get("taskName", ""), trial=params.get("trialId", ""), severity=severity, text=params.get("text", "")
    )
    page_size = _number(params, "pageSize", DEFAULT_PAGE_SIZE, 1_000_000) or DEFAULT_PAGE_SIZE
    return LogsQuery(
        cursor=int(cursor_text or 0),
        cursor_text=cursor_text,
        filter=log_filter,
        page_size=min(page_size, MAX_PAGE_SIZE),
        wait=_number(params, "waitSeconds", 0, MAX_WAIT_SECONDS),
    )


def _ended(state: str, end_time) -> bool:
    settled = end_time is None or timezone.now() - end_time >= timedelta(seconds=SETTLE_SECONDS)
    return state in TERMINAL_STATES and settled


def read_page(job_pk: int, query: LogsQuery) -> dict:
    """One answer. The job is read before the lines: a job seen ended has stored all of them."""
    state, end_time = Job.objects.filter(pk=job_pk).values_list("state", "end_time").get()
    edge = logstream.last_id(job_pk)
    entries = logstream.read_after(job_pk, query.filter, query.cursor, query.page_size, upto=edge)
    if entries:
        cursor = entries[-1]["id"]
    else:  # lines a filter skipped need not be read again
        cursor = str(edge) if edge > query.cursor else query.cursor_text
    complete = len(entries) < query.page_size
    return {
        "entries": entries,
        "nextCursor": cursor,
        "jobState": state,
        "jobEnded": complete and _ended(state, end_time),
    }


class JobListener:
    """A waiting request's place on the job's live feed (shared with the job's other viewers)."""

    def __init__(self, job_pk: int):
        self.job_pk = job_pk

    async def __aenter__(self):
        self.feed = await logstream.join_feed(self.job_pk)
        self.position = self.feed.next
        return self

    async def __aexit__(self, *exc_info):
        logstream.leave_feed(self.feed)

    async def next_event(self, timeout: float) -> None:
        """Return on the next event for the job, or after ``timeout`` seconds."""
        try:
            await asyncio.wait_for(self.feed.wait(self.position), timeout)
        except TimeoutError:
            return
        self.position = self.feed.next


async def wait_for_lines(job_pk: int, query: LogsQuery) -> dict:
    deadline = time.monotonic() + query.wait
    async with JobListener(job_pk) as listener:
        while True:
            body = await sync_to_async(read_page)(job_pk, query)  # in the request's own thread
            remaining = deadline - time.monotonic()
            if body["entries"] or body["jobEnded"] or remaining <= 0:
                return body
            query = replace(query, cursor=int(body["nextCursor"] or 0), cursor_text=body["nextCursor"])
            await listener.next_event(min(remaining, RECHECK_SECONDS))


@api_view(["GET"])
def job_logs(request, project_id, job_id):
    project = accounts.find_project(project_id, actor=request.user)
    job = services.get_job(project, job_id, actor=request.user, audited=False)
    query = parse_query(request.query_params)
    if not request.query_params.get("after"):
        services.record_log_read(job, actor=request.user, via="api")
    body = read_page(job.pk, query)
    if query.wait and not body["entries"] and not body["jobEnded"]:
        body = async_to_sync(wait_for_lines)(job.pk, query)
    return Response(body)
