"""Following a job's log, as ``gcloud ai-platform jobs stream-logs`` does.

The console's log endpoint long-polls: ``GET …/jobs/{j}/logs?after=CURSOR&waitSeconds=20``
answers as soon as lines arrive or the job ends. We follow it until ``jobEnded`` and the last
lines are read, printing each entry as gcloud does, tab-separated:
``severity  time (%Y-%m-%d %H:%M:%S %z, local)  task name  trial id  message``.
"""

from __future__ import annotations

import sys
import time

from console.cli import common, output
from console.cli.client import ApiError, Client, CliError

PAGE_SIZE = 500
WAIT_SECONDS = 20
RETRY_FOR_SECONDS = 120.0


def format_entry(entry: dict, *, multiline: bool = False) -> list[str]:
    """One printed line per entry (one per message line unless ``multiline``)."""
    when = output.local_time(entry.get("timestamp"), "%Y-%m-%d %H:%M:%S %z")
    fields = [
        str(entry.get("severity") or "DEFAULT"),
        when,
        str(entry.get("taskName") or "unknown_task"),
        str(entry.get("trialId") or ""),
    ]
    message = str(entry.get("message") or "")
    lines = [message] if multiline else (message.split("\n") or [""])
    return ["\t".join([*fields, line]) for line in lines]


def _fetch(client: Client, path: str, params: dict, wait: int) -> dict:
    """One long poll, riding out a console restart or a dropped connection for a while."""
    deadline = time.monotonic() + RETRY_FOR_SECONDS
    delay = 0.5
    while True:
        try:
            return client.get(path, params=params, timeout=wait + 30)
        except ApiError as error:
            if error.code < 500 or time.monotonic() > deadline:
                raise
            problem = error.message
        except CliError as error:  # unreachable or timed out
            if time.monotonic() > deadline:
                raise
            problem = error.message
        output.status(f"Lost the log stream ({problem.splitlines()[0]}); retrying in {delay:.0f}s...")
        time.sleep(delay)
        delay = min(delay * 2, 10.0)


def follow(
    client: Client, job_id: str, *, task_name: str | None = None, multiline: bool = False, wait: int = WAIT_SECONDS
) -> str:
    """Print the job's log until it has ended; return its final state."""
    path = client.job_path(job_id, "/logs")
    cursor = ""
    shown_state = ""
    try:
        while True:
            answer = _fetch(
                client, path, {"after": cursor, "taskName": task_name, "pageSize": PAGE_SIZE, "waitSeconds": wait}, wait
            )
            entries = answer.get("entries") or []
            for entry in entries:
                for line in format_entry(entry, multiline=multiline):
                    print(line)
            sys.stdout.flush()
            cursor = answer.get("nextCursor") or cursor
            state = answer.get("jobState") or ""
            if state and state != shown_state and not answer.get("jobEnded"):
                output.status(f"Job [{job_id}] is {state}.")
                shown_state = state
            if answer.get("jobEnded") and len(entries) < PAGE_SIZE:
                return state
    except KeyboardInterrupt:
        output.status(
            "\nStopped following the log; the job goes on. Follow it again with: "
            + common.spoken(f"jobs stream-logs {job_id}")
        )
        raise


def outcome(client: Client, job_id: str, state: str) -> int:
    """Exit status 0 for SUCCEEDED, else 1 with the job's error message."""
    if state == "SUCCEEDED":
        return 0
    try:
        job = client.get(client.job_path(job_id))
    except CliError:
        job = {}
    state = job.get("state") or state or "UNKNOWN"
    message = (job.get("errorMessage") or "").strip()  # whole: every unsatisfiable requirement, the traceback
    output.status(f"Job [{job_id}] finished with state {state}" + (f": {message}" if message else "."))
    return 1
