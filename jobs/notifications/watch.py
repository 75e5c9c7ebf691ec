"""Noticing the events of notification rules, and delivering them.

``scan`` reads the jobs' own rows (no hook in any job's path): jobs that ended SUCCEEDED, FAILED or
CANCELLED after the rule was made, jobs QUEUED longer than the rule's ``waitingMinutes``, and each
succeeded trial whose objective beats every earlier one of its study (after the study's first).
Each becomes one ``NotificationDelivery`` per rule (a unique row: two processes that notice the
same event record it once). ``deliver`` sends what is due, each delivery claimed by one process
(PENDING → SENDING compare-and-set), retrying a failure after 10 s, 1, 5 and 30 minutes, then FAILED;
every attempt's outcome is kept on the delivery and shown with its rule.

A webhook is POSTed as JSON (or a Slack-compatible ``{"text": …}``), signed with the rule's secret
(``X-AIConsole-Signature: sha256=<HMAC-SHA256 of the body>``), never following a redirect, and its
address is checked again at each attempt (a name may resolve elsewhere later). E-mail goes through
Django's mail settings (``AICONSOLE_EMAIL_*``).
"""

from __future__ import annotations

import hashlib
import hmac
import http.client
import json
import logging
import socket
import threading
from datetime import timedelta
from urllib.parse import urlsplit

from django.conf import settings
from django.core.mail import send_mail
from django.db import IntegrityError, close_old_connections, connection, transaction
from django.utils import timezone

from aiconsole import audit, iam
from jobs.models import (
    DeliveryState,
    Job,
    JobState,
    NotificationDelivery,
    NotificationEvent,
    NotificationRule,
    Trial,
)
from jobs.notifications import rules

logger = logging.getLogger("aiconsole.notifications")

RETRY_SECONDS = (10, 60, 300, 1800)  # after each failed attempt; then the delivery is FAILED
SCAN_LIMIT = 200  # events recorded per rule and kind in one scan; the rest in the next
SEND_LIMIT = 50  # deliveries sent per pass
TIMEOUT_SECONDS = 10
INTERVAL_SECONDS = 2.0
_ENDED = {
    NotificationEvent.JOB_SUCCEEDED: JobState.SUCCEEDED,
    NotificationEvent.JOB_FAILED: JobState.FAILED,
    NotificationEvent.JOB_CANCELLED: JobState.CANCELLED,
}


def _link(job: Job) -> str:
    return f"{settings.CONSOLE_URL.rstrip('/')}/projects/{job.project.project_id}/jobs/{job.job_id}/"


def _payload(event: str, job: Job, **extra) -> dict:
    body: dict = {
        "event": event,
        "job": {
            "name": f"projects/{job.project.project_id}/jobs/{job.job_id}",
            "jobId": job.job_id,
            "state": job.state,
            "link": _link(job),
        },
        "time": timezone.now().isoformat().replace("+00:00", "Z"),
    }
    if job.error_message and job.state in (JobState.FAILED, JobState.CANCELLED):
        body["job"]["errorMessage"] = job.error_message[:2000]
    body.update(extra)
    return body


def _record(rule: NotificationRule, job: Job, event: str, payload: dict, key: str = "") -> bool:
    try:
        with transaction.atomic():
            NotificationDelivery.objects.create(rule=rule, job=job, event=event, key=key, payload=payload)
    except IntegrityError:
        return False  # another process recorded it first
    return True


def scan(now=None) -> int:
    """Record the deliveries of every rule's new events; how many were recorded."""
    now = now or timezone.now()
    recorded = 0
    for rule in NotificationRule.objects.select_related("project"):
        told = NotificationDelivery.objects.filter(rule=rule)
        for event in rule.events:
            if event in _ENDED:
                jobs = (
                    Job.objects.filter(project=rule.project, state=_ENDED[event], end_time__gte=rule.create_time)
                    .exclude(pk__in=told.filter(event=event).values("job_id"))
                    .select_related("project")
                    .order_by("end_time")[:SCAN_LIMIT]
                )
                recorded += sum(_record(rule, job, event, _payload(event, job)) for job in jobs)
            elif event == NotificationEvent.JOB_WAITING:
                since = now - timedelta(minutes=rule.waiting_minutes)
                jobs = (
                    Job.objects.filter(project=rule.project, state=JobState.QUEUED, create_time__lte=since)
                    .exclude(pk__in=told.filter(event=event).values("job_id"))
                    .select_related("project")[:SCAN_LIMIT]
                )
                waited = {"waitingMinutes": rule.waiting_minutes}
                recorded += sum(_record(rule, job, event, _payload(event, job, **waited)) for job in jobs)
            elif event == NotificationEvent.STUDY_BEST_IMPROVED:
                recorded += _scan_studies(rule, told)
    return recorded


def _scan_studies(rule: NotificationRule, told) -> int:
    """Each trial that beat its study's best so far (not the first), ended since the rule was made."""
    trials = (
        Trial.objects.filter(job__project=rule.project, state=JobState.SUCCEEDED, end_time__gte=rule.create_time)
        .values_list("job_id", flat=True)
        .distinct()
    )
    recorded = 0
    for job in Job.objects.filter(pk__in=list(trials)[:SCAN_LIMIT]).select_related("project"):
        hyper = (job.training_input or {}).get("hyperparameters") or {}
        maximize = hyper.get("goal", "MAXIMIZE") != "MINIMIZE"
        done = set(told.filter(event=NotificationEvent.STUDY_BEST_IMPROVED, job=job).values_list("key", flat=True))
        best: float | None = None
        rows = job.trials.filter(state=JobState.SUCCEEDED, end_time__isnull=False).order_by("end_time", "number")
        for trial in rows.values("trial_id", "final_metric", "end_time"):
            value = (trial["final_metric"] or {}).get("objectiveValue")
            if value is None:
                continue
            improved = best is not None and (value > best if maximize else value < best)
            if best is None or improved:
                previous, best = best, value
                ended = trial["end_time"]
                if improved and ended is not None and ended >= rule.create_time and trial["trial_id"] not in done:
                    extra = {
                        "trial": {"trialId": trial["trial_id"], "objectiveValue": value, "previousBest": previous},
                        "metric": hyper.get("hyperparameterMetricTag", ""),
                    }
                    payload = _payload(NotificationEvent.STUDY_BEST_IMPROVED, job, **extra)
                    recorded += _record(rule, job, NotificationEvent.STUDY_BEST_IMPROVED, payload, trial["trial_id"])
    return recorded


# --- delivering ----------------------------------------------------------------------------------


def _text(payload: dict) -> str:
    job = payload["job"]
    if payload["event"] == NotificationEvent.STUDY_BEST_IMPROVED:
        trial = payload["trial"]
        metric = payload.get("metric") or "its objective"
        what = f"found a better trial: {trial['trialId']} reached {metric} {trial['objectiveValue']:.6g}"
    elif payload["event"] == NotificationEvent.JOB_WAITING:
        what = f"has waited in the queue for over {payload['waitingMinutes']} minutes"
    else:
        what = f"ended {job['state']}" + (f": {job['errorMessage']}" if job.get("errorMessage") else "")
    return f"Job {job['jobId']} {what}. {job['link']}"


class _PinnedHTTP(http.client.HTTPConnection):
    """A connection to the one address its host was checked at; the name is still the Host header
    and, over TLS, what the certificate must name."""

    pinned = ""

    def connect(self):
        self.sock = socket.create_connection((self.pinned, self.port), self.timeout)


class _PinnedHTTPS(http.client.HTTPSConnection, _PinnedHTTP):
    """HTTPS's ``connect`` asks the class after it for the socket (``_PinnedHTTP``), then wraps it
    with TLS for the host's name."""


def _post(rule: NotificationRule, payload: dict) -> None:
    """POST the payload to the rule's webhook; raises with the reason when it was not taken."""
    parts = urlsplit(rule.webhook_uri)
    refusal, address = rules.checked_address(parts.hostname or "")
    if refusal:
        raise OSError(refusal)
    body = json.dumps({"text": _text(payload)} if rule.webhook_format == "slack" else payload).encode()
    signature = hmac.new(rule.secret.encode(), body, hashlib.sha256).hexdigest()
    kind = _PinnedHTTPS if parts.scheme == "https" else _PinnedHTTP
    connection_ = kind(parts.hostname or "", parts.port, timeout=TIMEOUT_SECONDS)
    connection_.pinned = address  # the address checked, not the name resolved again
    path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    headers = {
        "Content-Type": "application/json",
        "User-Agent": "AI-Console-Notifications",
        "X-AIConsole-Event": payload["event"],
        "X-AIConsole-Signature": f"sha256={signature}",
    }
    try:
        connection_.request("POST", path, body=body, headers=headers)
        response = connection_.getresponse()
        response.read(4096)
    finally:
        connection_.close()
    if not 200 <= response.status < 300:  # a redirect is not followed: it is an answer like any other
        raise OSError(f"the webhook answered HTTP {response.status}")


def _send(delivery: NotificationDelivery) -> None:
    rule = delivery.rule
    if rule.webhook_uri:
        _post(rule, delivery.payload)
    if rule.emails:
        subject = f"[AI Console] {delivery.payload['job']['jobId']}: {delivery.event}"
        send_mail(subject, _text(delivery.payload), None, rule.emails, fail_silently=False)


def deliver(now=None) -> int:
    """Send the deliveries that are due; how many were sent."""
    now = now or timezone.now()
    sent = 0
    due = NotificationDelivery.objects.filter(state=DeliveryState.PENDING, next_attempt_time__lte=now)
    for delivery in due.select_related("rule__project").order_by("next_attempt_time")[:SEND_LIMIT]:
        claimed = NotificationDelivery.objects.filter(pk=delivery.pk, state=DeliveryState.PENDING).update(
            state=DeliveryState.SENDING
        )
        if not claimed:
            continue  # another process sends it
        attempt = {"time": timezone.now().isoformat().replace("+00:00", "Z")}
        try:
            _send(delivery)
        except Exception as error:  # the target's failure is the delivery's, never the watcher's
            attempt["outcome"] = str(error)[:500] or type(error).__name__
            failures = sum(1 for a in delivery.attempts if a.get("outcome") != "delivered") + 1
            if failures > len(RETRY_SECONDS):
                state, due_at = DeliveryState.FAILED, timezone.now()
            else:
                state, due_at = DeliveryState.PENDING, timezone.now() + timedelta(seconds=RETRY_SECONDS[failures - 1])
        else:
            attempt["outcome"] = "delivered"
            state, due_at = DeliveryState.DELIVERED, timezone.now()
            sent += 1
        with transaction.atomic():
            NotificationDelivery.objects.filter(pk=delivery.pk).update(
                state=state, attempts=[*delivery.attempts, attempt], next_attempt_time=due_at
            )
            _audit(delivery, attempt["outcome"])
    return sent


def _audit(delivery: NotificationDelivery, outcome: str) -> None:
    """Each attempt is an Admin Activity entry of the console itself: what was told, to whom, how it went."""
    rule = delivery.rule
    delivered = outcome == "delivered"
    audit.record(
        actor=iam.SYSTEM,
        project=rule.project,
        method=f"{rules.METHOD}.SendNotification",
        resource_name=rule.resource_name,
        permission=rules.WRITE,
        request={"event": delivery.event, "job": delivery.payload.get("job", {}).get("name", "")},
        response={"state": "delivered"} if delivered else None,
        status_code=0 if delivered else 14,  # UNAVAILABLE: the target did not take it
        status_message="" if delivered else outcome,
        service_name=rules.SERVICE,
    )


class Watcher:
    """The background service: a scan and a delivery pass every couple of seconds."""

    def __init__(self, interval: float = INTERVAL_SECONDS):
        self.interval = interval
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        NotificationDelivery.objects.filter(state=DeliveryState.SENDING).update(state=DeliveryState.PENDING)
        self._thread = threading.Thread(target=self._loop, name="notifications", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None:
            self._thread.join(TIMEOUT_SECONDS + 5)

    def _loop(self) -> None:
        while not self._stopping.wait(self.interval):
            close_old_connections()
            try:
                if NotificationRule.objects.exists():
                    scan()
                    deliver()
            except Exception:
                logger.exception("Notification pass failed")
        connection.close()


_watcher: list[Watcher] = []


def start() -> None:
    if not _watcher:
        _watcher.append(Watcher())
        _watcher[0].start()


def stop() -> None:
    while _watcher:
        _watcher.pop().stop()
