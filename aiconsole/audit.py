"""The one audit writer: Admin Activity for changes, Data Access for reads.

Services call ``record`` inside the transaction that makes the change, so an entry exists exactly
when the change does. Each log type is one chain of keyed hashes (HMAC with the console's secret
key), so Data Access entries can be purged sooner than Admin Activity ones without breaking
anything. A sealed ``AuditChain`` row per log type records where the chain starts (the hash of
the last purged entry) and where it ends, so ``verify_chain`` finds an entry that was altered,
removed (from the middle, the start or the end) or inserted, and someone with only database
access cannot recompute the hashes to hide an edit. Rolling the whole database back to an older
copy is what the Cloud Logging export (``aiconsole.cloud_logging``) guards against.

Append-only: nothing updates or deletes an entry except ``purge`` (retention). On PostgreSQL a
trigger enforces it (migration 0003); the purge turns on ``aiconsole.audit_purge`` for its own
transaction only.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.db import connection, transaction
from django.utils import timezone

from aiconsole import cloud_logging, iam
from aiconsole.middleware import current_request
from aiconsole.models import AuditChain, AuditEntry, AuditLogType, Project

SERVICE = "ml.googleapis.com"
CONSOLE_SERVICE = "aiconsole"
LogType = AuditLogType

# google.rpc.Code values used in audit statuses.
CODE_PERMISSION_DENIED = 7
CODE_NOT_FOUND = 5


def genesis_hash(log_type: str) -> str:
    return hashlib.sha256(f"aiconsole-audit-genesis:{log_type}".encode()).hexdigest()


def principal_of(actor) -> str:
    if actor is None or actor is iam.SYSTEM:
        return "system"
    if not getattr(actor, "is_authenticated", False):
        return "anonymous"
    return getattr(actor, "email", "") or actor.get_username()


# --- secrets never reach the log --------------------------------------------------------------

REDACTED = "[REDACTED]"
_SECRET_WORD = r"(?:pass(?:word|wd|phrase)?|secret|token|api[-_]?key|private[-_]?key|credentials?|authorization)"
_SECRET_KEY = re.compile(rf"^[\w.-]*{_SECRET_WORD}[\w.-]*$", re.IGNORECASE)
_SECRET_FLAG = re.compile(rf"^--?[\w.-]*{_SECRET_WORD}[\w.-]*$", re.IGNORECASE)
_SECRET_FLAG_VALUE = re.compile(rf"^(--?[\w.-]*{_SECRET_WORD}[\w.-]*)=.*$", re.IGNORECASE | re.DOTALL)
_NOT_SECRET = {"pagetoken", "nextpagetoken"}


def _secret_key(key) -> bool:
    return isinstance(key, str) and key.lower() not in _NOT_SECRET and bool(_SECRET_KEY.match(key))


def redact(value):
    """A copy of a request or response with secrets replaced: secret-named keys, ``--password=…``
    style arguments (and the value after ``--password``), and ``{"name": "API_KEY", "value": …}``."""
    if isinstance(value, dict):
        secret_pair = _secret_key(value.get("name")) and "value" in value
        return {
            key: REDACTED if _secret_key(key) or (secret_pair and key == "value") else redact(item)
            for key, item in value.items()
        }
    if isinstance(value, list | tuple):
        cleaned, hide_next = [], False
        for item in value:
            if hide_next and isinstance(item, str):
                cleaned.append(REDACTED)
                hide_next = False
                continue
            hide_next = isinstance(item, str) and bool(_SECRET_FLAG.match(item))
            if isinstance(item, str) and _SECRET_FLAG_VALUE.match(item):
                item = _SECRET_FLAG_VALUE.sub(rf"\1={REDACTED}", item)
            cleaned.append(redact(item))
        return cleaned
    return value


# --- writing ----------------------------------------------------------------------------------


def record(
    *,
    actor,
    project: Project | None,
    method: str,
    resource_name: str,
    permission: str,
    granted: bool = True,
    data_access: bool = False,
    request: dict | None = None,
    response: dict | None = None,
    status_code: int = 0,
    status_message: str = "",
    service_name: str | None = None,
    service_data: dict | None = None,
) -> AuditEntry | None:
    """Append one entry. Data Access entries are written only when the project enables them.

    ``project`` is None for server-wide events (tokens, users, purges): those are shown to
    platform admins only.
    """
    if data_access and (project is None or not project.data_access_logs):
        return None
    context = current_request.get()
    log_type = LogType.DATA_ACCESS if data_access else LogType.ADMIN_ACTIVITY
    with transaction.atomic():
        _lock_chain()
        chain = _chain_for_update(log_type)
        entry = AuditEntry(
            timestamp=timezone.now(),
            log_type=log_type,
            seq=chain.head_seq + 1,
            project_id=project.project_id if project is not None else "",
            principal=principal_of(actor),
            service_name=service_name or _service_for(method),
            method_name=method,
            resource_name=resource_name,
            permission=permission,
            granted=granted,
            status_code=status_code,
            status_message=status_message,
            caller_ip=context.caller_ip,
            user_agent=context.user_agent,
            request_id=context.request_id,
            request=redact(request or {}),
            response=redact(response or {}),
            service_data=service_data or {},
            prev_hash=chain.head_hash,
        )
        entry.entry_hash = entry.compute_hash()
        entry.save()
        chain.head_seq, chain.head_hash = entry.seq, entry.entry_hash
        chain.seal = chain.compute_seal()
        chain.save(update_fields=["head_seq", "head_hash", "seal"])
    if settings.CLOUD_LOGGING_PROJECT:
        transaction.on_commit(lambda: cloud_logging.export_audit_entry(entry))
    return entry


def _service_for(method: str) -> str:
    return CONSOLE_SERVICE if method.startswith("aiconsole.") else SERVICE


CHAIN_LOCK_ID = 0x41554449  # "AUDI": one advisory lock for both chains


def _lock_chain() -> None:
    """Serialise writers so every entry links to the one before it, across all projects.

    PostgreSQL: a transaction-scoped advisory lock. SQLite: IMMEDIATE transactions already let
    one writer in at a time.
    """
    if connection.vendor == "postgresql":
        with connection.cursor() as cursor:
            cursor.execute("SELECT pg_advisory_xact_lock(%s)", [CHAIN_LOCK_ID])


def _chain_for_update(log_type: str) -> AuditChain:
    chain = AuditChain.objects.select_for_update().filter(log_type=log_type).first()
    if chain is not None:
        return chain
    # Normally made by migration 0002. If the row went missing, continue from the newest entry so
    # the console keeps working; verify_chain still checks every link.
    last = AuditEntry.objects.filter(log_type=log_type).order_by("-seq").first()
    genesis = genesis_hash(log_type)
    chain = AuditChain(
        log_type=log_type,
        anchor_seq=0,
        anchor_hash=genesis,
        head_seq=last.seq if last else 0,
        head_hash=last.entry_hash if last else genesis,
    )
    chain.seal = chain.compute_seal()
    chain.save()
    return chain


def authorize(
    actor,
    permission: str,
    resource,
    *,
    method: str,
    data_access: bool = False,
    request: dict | None = None,
    service_name: str | None = None,
) -> None:
    """Check a permission through IAM; a refusal is itself audited, then re-raised.

    Call it outside the service's transaction, so the refusal's entry survives the rollback.
    """
    try:
        iam.require(actor, permission, resource)
    except iam.IamError as refusal:
        holder = iam.policy_holder(resource)
        project = holder if isinstance(holder, Project) else holder.project
        not_found = isinstance(refusal, iam.NotFound)
        record(
            actor=actor,
            project=project,
            method=method,
            resource_name=resource.resource_name,
            permission=permission,
            granted=False,
            data_access=data_access,
            request=request,
            status_code=CODE_NOT_FOUND if not_found else CODE_PERMISSION_DENIED,
            status_message=str(refusal),
            service_name=service_name,
        )
        raise


# --- verification -----------------------------------------------------------------------------


@dataclass(frozen=True)
class ChainBreak:
    """The first place where a chain is not what was written, or one malformed entry.

    ``kind`` is ``altered`` (an entry's content or hash changed), ``removed`` (entries missing;
    ``entry_id`` is the entry after the gap, None when they were the newest), ``inserted`` (an
    entry that was never written by the console) or ``malformed`` (a row the console could never
    have written, e.g. a timestamp that is not a date; verification goes on past it). ``seq`` is
    the chain position concerned.
    """

    log_type: str
    kind: str
    entry_id: int | None
    seq: int
    message: str

    def __str__(self) -> str:
        label = dict(AuditLogType.choices).get(self.log_type, f"Unknown ({self.log_type!r})")
        return f"{label} log: {self.message}"


def verify_chain() -> list[ChainBreak]:
    """Every malformed entry and the first break in each log type's chain: an empty list when
    the log is intact."""
    breaks = []
    for log_type in LogType.values:
        breaks += _verify_one(log_type)
    stray = AuditEntry.objects.exclude(log_type__in=LogType.values).order_by("pk")
    for pk, log_type, seq in stray.values_list("pk", "log_type", "seq"):
        breaks.append(
            ChainBreak(
                log_type,
                "malformed",
                pk,
                seq,
                f"entry #{pk} is malformed: its log type {log_type!r} is neither Admin Activity nor Data Access.",
            )
        )
    return breaks


# --- rows that may be malformed -----------------------------------------------------------------

_JSON_OBJECT_FIELDS = ("request", "response", "service_data")
_LOAD_CHUNK = 2000


def entry_problem(entry: AuditEntry) -> str | None:
    """What makes a stored entry one the console could never have written, or None."""
    if not isinstance(entry.timestamp, datetime):
        return "its timestamp is missing or not a date"
    if entry.log_type not in LogType.values:
        return f"its log type {entry.log_type!r} is unknown"
    for name in _JSON_OBJECT_FIELDS:
        if not isinstance(getattr(entry, name), dict):
            return f"its {name} is not a JSON object"
    return None


def _unreadable(pk: int, error: Exception) -> str:
    """Which column of a row that cannot be loaded is the cause, as far as one can tell."""
    for field in AuditEntry._meta.concrete_fields:
        try:
            AuditEntry.objects.filter(pk=pk).values_list(field.attname, flat=True).first()
        except Exception as column_error:
            return f"its {field.name} cannot be read ({column_error})"
    return f"it cannot be read ({error})"


def load_entries(pks: Iterable[int]) -> Iterator[tuple[int, AuditEntry | None, str | None]]:
    """``(id, entry, problem)`` for each id, in order: ``problem`` says what is wrong with a
    malformed row (``entry`` is None when the row cannot even be loaded), None for a sound one.
    Ids whose rows are gone are skipped."""
    pks = list(pks)
    unreadable: dict[int, str] = {}
    try:
        found = AuditEntry.objects.in_bulk(pks)
    except Exception:
        found = {}
        for pk in pks:
            try:
                found[pk] = AuditEntry.objects.get(pk=pk)
            except AuditEntry.DoesNotExist:
                pass
            except Exception as error:
                unreadable[pk] = _unreadable(pk, error)
    for pk in pks:
        entry = found.get(pk)
        if entry is not None:
            yield pk, entry, entry_problem(entry)
        elif pk in unreadable:
            yield pk, None, unreadable[pk]


@dataclass(frozen=True)
class _Link:
    """One row of a chain as verification sees it; ``entry`` is None for an unloadable row."""

    id: int
    seq: int
    prev_hash: str
    entry_hash: str
    entry: AuditEntry | None
    problem: str | None

    @property
    def hash_ok(self) -> bool:
        # A malformed row's content cannot be checked; it is reported, and its stored hashes
        # still tell whether the rest of the chain links up.
        return self.problem is not None or self.entry.compute_hash() == self.entry_hash


def _links(log_type: str) -> Iterator[_Link]:
    ids = (
        AuditEntry.objects.filter(log_type=log_type)
        .order_by("seq", "id")
        .values_list("pk", flat=True)
        .iterator(chunk_size=_LOAD_CHUNK)
    )
    while chunk := [pk for _, pk in zip(range(_LOAD_CHUNK), ids, strict=False)]:
        for pk, entry, problem in load_entries(chunk):
            if entry is not None:
                yield _Link(pk, entry.seq, entry.prev_hash, entry.entry_hash, entry, problem)
                continue
            try:
                seq, prev_hash, entry_hash = (
                    AuditEntry.objects.filter(pk=pk).values_list("seq", "prev_hash", "entry_hash").get()
                )
            except Exception:
                seq, prev_hash, entry_hash = 0, "", ""
            yield _Link(pk, seq, prev_hash, entry_hash, None, problem)


def _chain_state(log_type: str) -> AuditChain:
    chain = AuditChain.objects.filter(log_type=log_type).first()
    if chain is None:
        genesis = genesis_hash(log_type)
        chain = AuditChain(log_type=log_type, anchor_hash=genesis, head_hash=genesis)
        chain.seal = chain.compute_seal()
    return chain


def _verify_one(log_type: str) -> list[ChainBreak]:
    """Each malformed entry of one log type, then the chain's first break if there is one."""
    chain = _chain_state(log_type)
    malformed: list[ChainBreak] = []

    def broken(kind, entry_id, seq, message):
        return [*malformed, ChainBreak(log_type, kind, entry_id, seq, message)]

    if chain.seal != chain.compute_seal():
        return broken("altered", None, chain.head_seq, "the chain's sealed start/end record was altered.")
    expected_seq, expected_prev = chain.anchor_seq + 1, chain.anchor_hash
    previous: _Link | None = None
    entries = _links(log_type)
    pending = next(entries, None)
    while pending is not None:
        entry, pending = pending, next(entries, None)
        if entry.problem is not None:
            malformed.append(
                ChainBreak(
                    log_type,
                    "malformed",
                    entry.id,
                    entry.seq,
                    f"entry #{entry.id} (position {entry.seq}) is malformed: "
                    f"{entry.problem}; its content cannot be verified.",
                )
            )
        hash_ok = entry.hash_ok
        if entry.seq > chain.head_seq or entry.seq < expected_seq:
            return broken(
                "inserted",
                entry.id,
                entry.seq,
                f"entry #{entry.id} (position {entry.seq}) was inserted: the console never wrote it.",
            )
        if entry.seq > expected_seq:
            gap = f"{expected_seq}" if entry.seq == expected_seq + 1 else f"{expected_seq}–{entry.seq - 1}"
            return broken(
                "removed",
                entry.id,
                expected_seq,
                f"entries at position {gap} were removed, just before entry #{entry.id}.",
            )
        if hash_ok and entry.prev_hash == expected_prev:
            previous, expected_seq, expected_prev = entry, expected_seq + 1, entry.entry_hash
            continue
        if not hash_ok and pending is not None and pending.prev_hash == expected_prev != entry.entry_hash:
            # Skipping this entry mends the chain: it was slipped in between two real ones.
            return broken(
                "inserted",
                entry.id,
                entry.seq,
                f"entry #{entry.id} (position {entry.seq}) was inserted: the console never wrote it.",
            )
        if hash_ok and previous is not None:
            # This entry is intact but names another predecessor: the one before was rewritten.
            return broken(
                "altered",
                previous.id,
                previous.seq,
                f"entry #{previous.id} (position {previous.seq}) was altered and re-hashed.",
            )
        if hash_ok:
            return broken(
                "altered",
                entry.id,
                entry.seq,
                f"entry #{entry.id} (position {entry.seq}) does not link to the chain's start.",
            )
        return broken(
            "altered",
            entry.id,
            entry.seq,
            f"entry #{entry.id} (position {entry.seq}) was altered: its content no longer matches its hash.",
        )
    if expected_seq <= chain.head_seq:
        after = f" after entry #{previous.id}" if previous else ""
        gap = f"{expected_seq}" if expected_seq == chain.head_seq else f"{expected_seq}–{chain.head_seq}"
        return broken("removed", None, expected_seq, f"the newest entries (position {gap}) were removed{after}.")
    if previous is not None and previous.entry_hash != chain.head_hash:
        return broken(
            "altered",
            previous.id,
            previous.seq,
            f"entry #{previous.id} (position {previous.seq}) was altered and re-hashed.",
        )
    return malformed


def chain_lengths() -> dict[str, int]:
    return {log_type: AuditEntry.objects.filter(log_type=log_type).count() for log_type in LogType.values}


# --- retention --------------------------------------------------------------------------------


class ChainBroken(Exception):
    """The purge refuses to run over a broken chain: it would erase the evidence."""


def retention_days(log_type: str) -> int:
    if log_type == LogType.DATA_ACCESS:
        return settings.AUDIT_DATA_ACCESS_RETENTION_DAYS
    return settings.AUDIT_ADMIN_ACTIVITY_RETENTION_DAYS


PURGE_METHOD = "aiconsole.AuditService.PurgeEntries"


def purge(*, actor=iam.SYSTEM, now=None, dry_run: bool = False) -> dict[str, int]:
    """Delete entries older than their log type's retention; return how many per log type.

    The chain's new anchor is the hash of the last entry purged, so the remaining entries still
    verify. A chain that is already broken is left alone (ChainBroken).
    """
    now = now or timezone.now()
    removed = {}
    for log_type in LogType.values:
        cutoff = now - timedelta(days=retention_days(log_type))
        with transaction.atomic():
            _lock_chain()
            broken = _verify_one(log_type)
            if broken:
                raise ChainBroken(f"Refusing to purge: {broken[0]}")
            last = (
                AuditEntry.objects.filter(log_type=log_type, timestamp__lt=cutoff)
                .order_by("-seq")
                .only("id", "seq", "entry_hash", "timestamp")
                .first()
            )
            if last is None:
                removed[log_type] = 0
                continue
            count = AuditEntry.objects.filter(log_type=log_type, seq__lte=last.seq).count()
            removed[log_type] = count
            if dry_run:
                continue
            _delete_through(log_type, last.seq)
            chain = AuditChain.objects.select_for_update().get(log_type=log_type)
            chain.anchor_seq, chain.anchor_hash, chain.purged_through = last.seq, last.entry_hash, last.timestamp
            chain.seal = chain.compute_seal()
            chain.save(update_fields=["anchor_seq", "anchor_hash", "purged_through", "seal"])
    if not dry_run and any(removed.values()):
        record(
            actor=actor,
            project=None,
            method=PURGE_METHOD,
            resource_name="auditLogs",
            permission="",
            request={"retentionDays": {t: retention_days(t) for t in LogType.values}},
            response={"removedEntries": removed},
        )
    return removed


def _delete_through(log_type: str, seq: int) -> None:
    table = AuditEntry._meta.db_table
    with connection.cursor() as cursor:
        if connection.vendor == "postgresql":
            cursor.execute("SELECT set_config('aiconsole.audit_purge', 'on', true)")
        cursor.execute(f"DELETE FROM {table} WHERE log_type = %s AND seq <= %s", [log_type, seq])
        if connection.vendor == "postgresql":
            cursor.execute("SELECT set_config('aiconsole.audit_purge', 'off', true)")


# --- reading ----------------------------------------------------------------------------------

READ_PERMISSION = "logging.privateLogEntries.list"
LIST_ENTRIES = "google.logging.v2.LoggingServiceV2.ListLogEntries"


def entries_for(project: Project | None, *, actor):
    """The audit entries an admin may read: one project's (roles/ml.admin), or all of them and the
    server-wide ones (platform admins, project None). Reading is itself a Data Access event."""
    if project is None:
        if not iam.is_platform_admin(actor):
            raise iam.NotFound("auditLogs")
        return AuditEntry.objects.all()
    authorize(
        actor, READ_PERMISSION, project, method=LIST_ENTRIES, data_access=True, service_name="logging.googleapis.com"
    )
    record(
        actor=actor,
        project=project,
        method=LIST_ENTRIES,
        resource_name=project.resource_name,
        permission=READ_PERMISSION,
        data_access=True,
        service_name="logging.googleapis.com",
    )
    return AuditEntry.objects.filter(project_id=project.project_id)
