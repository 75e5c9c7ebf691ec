"""Notification rules: managed by a project's admins over REST, checked against where webhooks may
go, and delivered (signed, retried, by e-mail too) from the jobs' own rows by the watcher."""

from __future__ import annotations

import hashlib
import hmac
import json
import threading
from datetime import timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
from django.core import mail
from django.utils import timezone

from aiconsole.models import AuditEntry
from bench.support.waiting import wait_for
from jobs.models import DeliveryState, Job, JobState, NotificationDelivery, NotificationRule, Trial
from jobs.notifications import watch

RULES = "/v1/projects/project-a/notificationRules"


class Receiver:
    """A webhook target on the loopback: records each POST, answers the statuses it is given."""

    def __init__(self, statuses=(200,)):
        self.requests: list[tuple[dict, bytes]] = []
        self.statuses = list(statuses)
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.requests.append((dict(self.headers), body))
                status = receiver.statuses.pop(0) if len(receiver.statuses) > 1 else receiver.statuses[0]
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook?team=ml"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self):
        self.server.shutdown()


@pytest.fixture
def receiver(settings):
    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]  # the test's own loopback target
    target = Receiver()
    yield target
    target.close()


@pytest.fixture
def api(api_as):
    return api_as


def _job(project, job_id: str, state: str, **fields) -> Job:
    return Job.objects.create(
        project=project,
        job_id=job_id,
        training_input={"scaleTier": "BASIC", "region": "us-central1", **fields.pop("training_input", {})},
        state=state,
        end_time=timezone.now() if state in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED) else None,
        **fields,
    )


def test_admins_manage_rules_and_webhooks_reach_public_addresses_only(api, project, admin, developer, settings):
    rule = {"events": ["JOB_FAILED"], "webhook": {"uri": "http://127.0.0.1:9/hook"}}
    status, error = api(admin, "POST", RULES, rule)
    assert status == 400
    [violation] = error["error"]["details"][0]["fieldViolations"]
    assert violation["field"] == "rule.webhook.uri" and "not a public address" in violation["description"]
    assert api(developer, "POST", RULES, rule)[0] == 403  # only a project's admins

    status, error = api(admin, "POST", RULES, {"events": ["JOB_EXPLODED"], "email": {"addresses": ["nope"]}})
    fields = {v["field"] for v in error["error"]["details"][0]["fieldViolations"]}
    assert status == 400 and fields == {"rule.events", "rule.email.addresses"}

    settings.WEBHOOK_ALLOWED_NETWORKS = ["127.0.0.0/8"]
    status, created = api(admin, "POST", RULES, {**rule, "displayName": "on-call"})
    assert status == 200 and len(created["secret"]) == 64  # answered once
    status, got = api(admin, "GET", f"/v1/{created['name']}")
    assert status == 200 and "secret" not in got and got["deliveries"] == []
    assert [r["displayName"] for r in api(admin, "GET", RULES)[1]["notificationRules"]] == ["on-call"]
    assert api(developer, "GET", RULES)[0] == 403
    assert api(admin, "DELETE", f"/v1/{created['name']}") == (200, {})
    methods = set(AuditEntry.objects.values_list("method_name", flat=True))
    assert "google.monitoring.v3.NotificationChannelService.CreateNotificationChannel" in methods
    assert "google.monitoring.v3.NotificationChannelService.DeleteNotificationChannel" in methods


@pytest.mark.django_db(transaction=True)
def test_an_ended_job_is_told_once_signed_and_by_e_mail_by_the_running_watcher(api, project, admin, receiver):
    rule = {
        "events": ["JOB_FAILED", "JOB_SUCCEEDED"],
        "webhook": {"uri": receiver.url},
        "email": {"addresses": ["team@example.com"]},
    }
    created = api(admin, "POST", RULES, rule)[1]
    before = _job(project, "old_failure", JobState.FAILED)  # ended before the rule: not told
    Job.objects.filter(pk=before.pk).update(end_time=timezone.now() - timedelta(hours=1))
    failed = _job(project, "census_1", JobState.FAILED, error_message="The replica master 0 exited with status 1.")
    watcher = watch.Watcher(interval=0.05)
    watcher.start()
    try:
        wait_for(lambda: len(receiver.requests) >= 1 and mail.outbox, 30, message="the webhook and the e-mail")
    finally:
        watcher.stop()
    headers, body = receiver.requests[0]
    payload = json.loads(body)
    assert payload["event"] == "JOB_FAILED" and payload["job"]["jobId"] == failed.job_id
    assert payload["job"]["errorMessage"].startswith("The replica master 0")
    assert payload["job"]["link"].endswith("/projects/project-a/jobs/census_1/")
    expected = hmac.new(created["secret"].encode(), body, hashlib.sha256).hexdigest()
    assert headers["X-AIConsole-Signature"] == f"sha256={expected}"
    assert "census_1" in mail.outbox[0].subject and mail.outbox[0].to == ["team@example.com"]
    assert watch.scan() == 0 and len(receiver.requests) == 1  # once: a second pass finds nothing new
    delivery = NotificationDelivery.objects.get()
    assert delivery.state == DeliveryState.DELIVERED and delivery.attempts[0]["outcome"] == "delivered"


def test_a_failing_target_is_retried_with_backoff_and_every_attempt_is_shown(api, project, admin, receiver):
    receiver.statuses = [500, 200]
    api(admin, "POST", RULES, {"events": ["JOB_SUCCEEDED"], "webhook": {"uri": receiver.url, "format": "slack"}})
    _job(project, "census_2", JobState.SUCCEEDED)
    assert watch.scan() == 1
    assert watch.deliver() == 0
    delivery = NotificationDelivery.objects.get()
    assert delivery.state == DeliveryState.PENDING and "HTTP 500" in delivery.attempts[0]["outcome"]
    assert delivery.next_attempt_time > timezone.now() + timedelta(seconds=5)
    assert watch.deliver() == 0  # not due yet
    assert watch.deliver(now=timezone.now() + timedelta(seconds=11)) == 1
    delivery.refresh_from_db()
    assert [a["outcome"] for a in delivery.attempts][-1] == "delivered"
    assert json.loads(receiver.requests[-1][1])["text"].startswith("Job census_2 ended SUCCEEDED.")
    rule = api(admin, "GET", RULES)[1]["notificationRules"][0]["name"]
    shown = api(admin, "GET", f"/v1/{rule}")[1]["deliveries"]
    assert [len(d["attempts"]) for d in shown] == [2]
    sent = AuditEntry.objects.filter(method_name="google.monitoring.v3.NotificationChannelService.SendNotification")
    assert [(e.status_code, e.resource_name == rule) for e in sent.order_by("pk")] == [(14, True), (0, True)]
    assert "HTTP 500" in sent.order_by("pk")[0].status_message


def test_a_study_tells_each_trial_that_beat_its_best_and_a_job_that_waited(api, project, admin, receiver):
    api(admin, "POST", RULES, {"events": ["STUDY_BEST_IMPROVED", "JOB_WAITING"], "webhook": {"uri": receiver.url}})
    study = _job(
        project,
        "tuned",
        JobState.RUNNING,
        training_input={"hyperparameters": {"goal": "MAXIMIZE", "hyperparameterMetricTag": "accuracy"}},
    )
    start = timezone.now()
    for number, value in enumerate([0.5, 0.7, 0.6, 0.9], start=1):
        Trial.objects.create(
            job=study,
            trial_id=str(number),
            number=number,
            state=JobState.SUCCEEDED,
            end_time=start + timedelta(seconds=number),
            final_metric={"trainingStep": "1", "objectiveValue": value},
        )
    waiting = _job(project, "waiting", JobState.QUEUED)
    Job.objects.filter(pk=waiting.pk).update(create_time=timezone.now() - timedelta(minutes=31))
    assert watch.scan() == 3
    improved = NotificationDelivery.objects.filter(event="STUDY_BEST_IMPROVED").order_by("key")
    assert [d.key for d in improved] == ["2", "4"]
    assert improved[1].payload["trial"] == {"trialId": "4", "objectiveValue": 0.9, "previousBest": 0.7}
    assert NotificationDelivery.objects.get(event="JOB_WAITING").job_id == waiting.pk
    assert watch.scan() == 0


def test_the_page_lists_rules_creates_one_and_names_a_refusal_where_it_was_typed(client, project, admin, developer):
    page = "/projects/project-a/notifications/"
    client.force_login(developer)
    assert client.get(page).status_code == 403
    client.force_login(admin)
    assert "Notifications</a>" in client.get("/projects/project-a/jobs/").content.decode()  # in the admin's menu
    refused = client.post(page, {"events": ["JOB_FAILED"], "webhook": "http://10.1.2.3/hook", "waiting_minutes": 30})
    assert refused.status_code == 200 and "not a public address" in refused.content.decode()
    created = client.post(
        page,
        {
            "display_name": "on-call",
            "events": ["JOB_FAILED", "STUDY_BEST_IMPROVED"],
            "emails": "a@example.com, b@example.com",
            "waiting_minutes": 30,
        },
        follow=True,
    )
    text = created.content.decode()
    assert "signing secret, shown this once" in text and "on-call" in text and "a@example.com, b@example.com" in text
    from jobs.models import NotificationRule

    rule = NotificationRule.objects.get()
    assert rule.emails == ["a@example.com", "b@example.com"] and rule.secret not in client.get(page).content.decode()
    client.post(f"{page}{rule.rule_id}/delete/")
    assert not NotificationRule.objects.exists()


def test_a_webhook_is_posted_to_the_address_its_name_was_checked_at_not_a_second_lookup(
    api, project, admin, receiver, monkeypatch
):
    import socket

    port = receiver.server.server_address[1]
    api(admin, "POST", RULES, {"events": ["JOB_FAILED"], "webhook": {"uri": receiver.url}})
    NotificationRule.objects.update(webhook_uri=f"http://hooks.example.test:{port}/hook")  # the one rule
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1"])  # the first lookup: the allowed loopback; any later one: a private host

    def rebinding(host, *args, **kwargs):
        if host != "hooks.example.test":
            return real(host, *args, **kwargs)
        address = next(answers, "10.9.8.7")
        return [(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP, "", (address, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    _job(project, "rebound", JobState.FAILED)
    watch.scan()
    watch.deliver()
    assert len(receiver.requests) == 1  # reached where it was checked: a second lookup would have gone to 10.9.8.7
    assert receiver.requests[0][0]["Host"] == f"hooks.example.test:{port}"
