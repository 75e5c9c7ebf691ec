"""A project's notification rules: create, list, get (with its deliveries) and delete, each checked
through IAM (``monitoring.notificationChannels.*``, held by a project's admins) and audited.

A rule: ``{"displayName", "events": [...], "webhook": {"uri", "format": "json"|"slack"},
"email": {"addresses": [...]}, "waitingMinutes"}``. A webhook must be https (http only inside the
allowed networks) and reach an allowed address: public addresses by default, private and loopback
ones only inside ``AICONSOLE_WEBHOOK_ALLOWED_NETWORKS``. Its secret, made at create and answered
once, signs every body (``X-AIConsole-Signature: sha256=HMAC``).
"""

from __future__ import annotations

import ipaddress
import re
import secrets
import socket
from urllib.parse import urlsplit

from django.conf import settings
from django.core.validators import validate_email
from django.db import transaction

from aiconsole import audit, iam
from aiconsole.errors import FieldViolation, InvalidArgument, Violations
from aiconsole.models import Project
from jobs.models import NotificationEvent, NotificationRule

SERVICE = "monitoring.googleapis.com"
METHOD = "google.monitoring.v3.NotificationChannelService"
READ, WRITE = "monitoring.notificationChannels.list", "monitoring.notificationChannels.update"
FIELDS = {"displayName", "events", "webhook", "email", "waitingMinutes"}
FORMATS = ("json", "slack")
MAX_ADDRESSES = 20
MAX_WAITING_MINUTES = 7 * 24 * 60
_ID = re.compile(r"^[0-9]{1,20}$")


def _allowed_networks() -> list:
    return [ipaddress.ip_network(n, strict=False) for n in settings.WEBHOOK_ALLOWED_NETWORKS]


def address_refusal(host: str) -> str:
    """Why a webhook's host may not be reached ("" when it may): each address it resolves to must be
    public, or inside an allowed network."""
    return checked_address(host)[0]


def checked_address(host: str) -> tuple[str, str]:
    """(why not, "") or ("", the address to connect to): ``host`` resolved once and every address
    checked. A delivery connects to that very address, so a name that resolves elsewhere the next
    time (DNS rebinding) never takes it to a private one."""
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except (socket.gaierror, UnicodeError):
        return f"{host} does not resolve.", ""
    allowed = _allowed_networks()
    addresses = []
    for info in infos:
        address = ipaddress.ip_address(str(info[4][0]).split("%")[0])
        addresses.append(str(address))
        if any(address in network for network in allowed):
            continue
        if not address.is_global or address.is_multicast:
            return (
                f"{host} is {address}, not a public address: webhooks reach public addresses only, unless "
                "AICONSOLE_WEBHOOK_ALLOWED_NETWORKS allows the network."
            ), ""
    return ("", addresses[0]) if addresses else (f"{host} does not resolve.", "")


def check_webhook(uri: str, field: str, errors: Violations) -> None:
    parts = urlsplit(uri)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        errors.add(field, "webhook.uri must be an https:// (or, inside an allowed network, http://) URL.")
        return
    if parts.username or parts.password:
        errors.add(field, "webhook.uri must not carry credentials: the rule's secret signs each body.")
        return
    refusal = address_refusal(parts.hostname)
    if refusal:
        errors.add(field, refusal)
        return
    if parts.scheme == "http":
        inside = all(
            any(ipaddress.ip_address(str(i[4][0]).split("%")[0]) in n for n in _allowed_networks())
            for i in socket.getaddrinfo(parts.hostname, None, proto=socket.IPPROTO_TCP)
        )
        if not inside:
            errors.add(field, "webhook.uri must be https:// outside the allowed networks.")


def validate(body: object) -> dict:
    """A create body, normalised; every problem named by its field."""
    errors = Violations()
    if not isinstance(body, dict):
        raise InvalidArgument.from_violations([FieldViolation("rule", "Expected a JSON object.")])
    for key in sorted(set(body) - FIELDS):
        errors.add(f"rule.{key}", f"Unknown field {key!r}; a rule has {', '.join(sorted(FIELDS))}.")
    events = body.get("events")
    if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
        errors.add("rule.events", f"events must name at least one of {', '.join(NotificationEvent.values)}.")
        events = []
    for event in events:
        if event not in NotificationEvent.values:
            errors.add("rule.events", f"{event!r} is not an event; events are {', '.join(NotificationEvent.values)}.")
    webhook, email = body.get("webhook") or {}, body.get("email") or {}
    if not isinstance(webhook, dict) or not isinstance(email, dict):
        errors.add("rule.webhook", 'webhook and email are objects: {"uri": …} and {"addresses": [...]}.')
        webhook, email = {}, {}
    uri = webhook.get("uri", "")
    if webhook and (not isinstance(uri, str) or not uri):
        errors.add("rule.webhook.uri", "webhook.uri is required: the URL each notification is POSTed to.")
    elif uri:
        if len(uri) > 2048:
            errors.add("rule.webhook.uri", "webhook.uri is at most 2048 characters.")
        else:
            check_webhook(uri, "rule.webhook.uri", errors)
    form = webhook.get("format", "json")
    if form not in FORMATS:
        errors.add("rule.webhook.format", f"webhook.format is one of {', '.join(FORMATS)}.")
    addresses = email.get("addresses", [])
    if not isinstance(addresses, list) or len(addresses) > MAX_ADDRESSES:
        errors.add("rule.email.addresses", f"email.addresses is a list of at most {MAX_ADDRESSES} addresses.")
        addresses = []
    for address in addresses:
        try:
            validate_email(address)
        except Exception:
            errors.add("rule.email.addresses", f"{str(address)[:100]!r} is not an e-mail address.")
    if not uri and not addresses:
        errors.add("rule", "A rule needs a webhook.uri or email.addresses to tell.")
    waiting = body.get("waitingMinutes", 30)
    if not isinstance(waiting, int) or isinstance(waiting, bool) or not 1 <= waiting <= MAX_WAITING_MINUTES:
        errors.add("rule.waiting_minutes", f"waitingMinutes is a whole number from 1 to {MAX_WAITING_MINUTES}.")
    name = body.get("displayName", "")
    if not isinstance(name, str) or len(name) > 128:
        errors.add("rule.display_name", "displayName is text of at most 128 characters.")
    errors.raise_if_any()
    return {
        "display_name": name,
        "events": list(dict.fromkeys(events)),
        "webhook_uri": uri,
        "webhook_format": form,
        "emails": list(addresses),
        "waiting_minutes": waiting,
    }


def resource(rule: NotificationRule, *, deliveries: bool = False) -> dict:
    body: dict = {"name": rule.resource_name, "displayName": rule.display_name, "events": rule.events}
    if rule.webhook_uri:
        body["webhook"] = {"uri": rule.webhook_uri, "format": rule.webhook_format}
    if rule.emails:
        body["email"] = {"addresses": rule.emails}
    body["waitingMinutes"] = rule.waiting_minutes
    body["createTime"] = rule.create_time.isoformat().replace("+00:00", "Z")
    if deliveries:
        body["deliveries"] = [
            {
                "event": d.event,
                "job": d.payload.get("job", {}).get("name", ""),
                "state": d.state,
                "attempts": d.attempts,
                "createTime": d.create_time.isoformat().replace("+00:00", "Z"),
            }
            for d in rule.deliveries.order_by("-pk")[:50]
        ]
    return body


def create_rule(project: Project, body, *, actor) -> dict:
    """A new rule; its answer carries the signing secret, this once."""
    method = f"{METHOD}.CreateNotificationChannel"
    audit.authorize(actor, WRITE, project, method=method, service_name=SERVICE)
    data = validate(body)
    with transaction.atomic():
        rule = NotificationRule.objects.create(
            project=project,
            rule_id=str(secrets.randbelow(9 * 10**17) + 10**17),
            secret=secrets.token_hex(32),
            created_by=actor if getattr(actor, "pk", None) else None,
            **data,
        )
        answer = resource(rule)
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=project.resource_name,
            permission=WRITE,
            request={"parent": project.resource_name, "rule": body},
            response=answer,
            service_name=SERVICE,
        )
    return {**answer, "secret": rule.secret}


def find_rule(project: Project, rule_id: str, *, actor, permission: str, method: str) -> NotificationRule:
    audit.authorize(actor, permission, project, method=f"{METHOD}.{method}", service_name=SERVICE)
    rule = NotificationRule.objects.filter(project=project, rule_id=rule_id).first() if _ID.match(rule_id) else None
    if rule is None:
        raise iam.NotFound(f"{project.resource_name}/notificationRules/{rule_id}")
    return rule


def list_rules(project: Project, *, actor) -> list[NotificationRule]:
    audit.authorize(actor, READ, project, method=f"{METHOD}.ListNotificationChannels", service_name=SERVICE)
    return list(NotificationRule.objects.filter(project=project).select_related("project"))


def delete_rule(project: Project, rule_id: str, *, actor) -> None:
    rule = find_rule(project, rule_id, actor=actor, permission=WRITE, method="DeleteNotificationChannel")
    with transaction.atomic():
        audit.record(
            actor=actor,
            project=project,
            method=f"{METHOD}.DeleteNotificationChannel",
            resource_name=rule.resource_name,
            permission=WRITE,
            request={"name": rule.resource_name},
            service_name=SERVICE,
        )
        rule.delete()
