"""Audit entries as Cloud Logging LogEntries, and the optional export to Google Cloud Logging.

``log_entry`` renders an entry in the shape of a real Cloud Audit Logs entry (used by the audit
viewer's JSON-lines export too). When ``AICONSOLE_CLOUD_LOGGING_PROJECT`` is set, audit entries
(after their transaction commits) and job log lines (``export_job_log_lines``) are also written
to that Google Cloud project by one background thread: a request never waits for Google and
never fails because of it; a full queue drops entries with a warning. Unset, nothing here imports
the Google client or starts a thread. The client is an optional extra
(``pip install 'aiconsole[cloud-logging]'``): set without it, ``manage.py check`` fails and the
export logs what to install instead of a traceback per batch.

Cloud Logging reserves the ``cloudaudit.googleapis.com`` log names, so exported audit entries go
to ``aiconsole-audit-activity`` and ``aiconsole-audit-data_access`` as JSON payloads holding the
AuditLog fields. Job lines go to a log per replica (``master-replica-0``, …) with the original's
``ml_job`` resource, so ``gcloud ai-platform jobs stream-logs``-style filters find them.
"""

from __future__ import annotations

import logging
import queue
import threading
from datetime import UTC

from django.conf import settings
from django.core import checks
from django.db import transaction

logger = logging.getLogger(__name__)

AUDIT_LOG_IDS = {
    "activity": "cloudaudit.googleapis.com%2Factivity",
    "data_access": "cloudaudit.googleapis.com%2Fdata_access",
}
EXPORT_LOG_NAMES = {"activity": "aiconsole-audit-activity", "data_access": "aiconsole-audit-data_access"}
SERVER_WIDE_PARENT = "organizations/aiconsole"
MAX_QUEUED = 10_000
BATCH_SIZE = 500


def _timestamp(value) -> str:
    return value.astimezone(UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def _request_type(method: str) -> str:
    """``google.cloud.ml.v1.JobService.CreateJob`` → ``…/google.cloud.ml.v1.CreateJobRequest``."""
    package, _, rest = method.rpartition(".")
    package = package.rpartition(".")[0] if "." in package else package
    return f"type.googleapis.com/{package}.{rest}Request"


def severity_of(entry) -> str:
    if entry.status_code:
        return "ERROR"
    return "INFO" if entry.is_data_access else "NOTICE"


def log_entry(entry) -> dict:
    """The entry as a Cloud Logging LogEntry with an AuditLog protoPayload."""
    parent = f"projects/{entry.project_id}" if entry.project_id else SERVER_WIDE_PARENT
    payload: dict = {
        "@type": "type.googleapis.com/google.cloud.audit.AuditLog",
        "status": {"code": entry.status_code, "message": entry.status_message} if entry.status_code else {},
        "authenticationInfo": {"principalEmail": entry.principal},
        "requestMetadata": {
            "callerIp": entry.caller_ip,
            "callerSuppliedUserAgent": entry.user_agent,
            "requestAttributes": {"time": _timestamp(entry.timestamp), "auth": {}},
            "destinationAttributes": {},
        },
        "serviceName": entry.service_name,
        "methodName": entry.method_name,
        "authorizationInfo": [
            {
                "resource": entry.resource_name,
                "permission": entry.permission,
                "granted": entry.granted,
                "resourceAttributes": {},
            }
        ]
        if entry.permission
        else [],
        "resourceName": entry.resource_name,
    }
    if entry.request:
        payload["request"] = {"@type": _request_type(entry.method_name), **entry.request}
    if entry.response:
        payload["response"] = entry.response
    if entry.service_data:
        payload["serviceData"] = entry.service_data
    labels = {"method": entry.method_name, "service": entry.service_name}
    if entry.project_id:
        labels["project_id"] = entry.project_id
    return {
        "protoPayload": payload,
        "insertId": entry.entry_hash[:16],
        "resource": {"type": "audited_resource", "labels": labels},
        "timestamp": _timestamp(entry.timestamp),
        "severity": severity_of(entry),
        "logName": f"{parent}/logs/{AUDIT_LOG_IDS[entry.log_type]}",
        "receiveTimestamp": _timestamp(entry.timestamp),
        "labels": {"aiconsole/request_id": entry.request_id} if entry.request_id else {},
    }


# --- the export to Google ------------------------------------------------------------------------


def enabled() -> bool:
    return bool(settings.CLOUD_LOGGING_PROJECT)


def export_audit_entry(entry) -> None:
    """Queue one committed audit entry for Cloud Logging (no-op unless configured)."""
    if not enabled():
        return
    rendered = log_entry(entry)
    labels = {**rendered["resource"]["labels"], **rendered["labels"]}
    _enqueue(
        EXPORT_LOG_NAMES[entry.log_type],
        {
            "info": rendered["protoPayload"],
            "severity": rendered["severity"],
            "timestamp": entry.timestamp,
            "insert_id": rendered["insertId"],
            "labels": {f"aiconsole/{k}" if "/" not in k else k: v for k, v in labels.items()},
            "resource": ("global", {"project_id": settings.CLOUD_LOGGING_PROJECT}),
        },
    )


def _field(row, name: str):
    return row.get(name) if isinstance(row, dict) else getattr(row, name, None)


def export_job_log_lines(job, rows) -> None:
    """Queue a job's log lines for Cloud Logging, after the current transaction commits.

    ``rows`` are LogLine rows or dicts with task_name, trial_id, severity, message and time. A
    no-op unless AICONSOLE_CLOUD_LOGGING_PROJECT is set; never raises into the caller.
    """
    if not enabled():
        return
    items = []
    for row in rows:
        task = _field(row, "task_name") or "service"
        labels = {
            "ml.googleapis.com/task_name": task,
            "ml.googleapis.com/job_id": job.job_id,
            "aiconsole/project_id": job.project.project_id,
        }
        if _field(row, "trial_id"):
            labels["ml.googleapis.com/trial_id"] = str(_field(row, "trial_id"))
        items.append(
            (
                task,
                {
                    "info": {"message": _field(row, "message") or "", "levelname": _field(row, "severity") or "INFO"},
                    "severity": _field(row, "severity") or "INFO",
                    "timestamp": _field(row, "time"),
                    "labels": labels,
                    "resource": (
                        "ml_job",
                        {"job_id": job.job_id, "project_id": settings.CLOUD_LOGGING_PROJECT, "task_name": task},
                    ),
                },
            )
        )

    def send():
        for log_name, item in items:
            _enqueue(log_name, item)

    transaction.on_commit(send)


_queue: queue.Queue | None = None
_worker: threading.Thread | None = None
_start_lock = threading.Lock()


def _enqueue(log_name: str, item: dict) -> None:
    global _queue, _worker
    with _start_lock:
        if _queue is None:
            _queue = queue.Queue(maxsize=MAX_QUEUED)
        if _worker is None or not _worker.is_alive():
            _worker = threading.Thread(target=_run, args=(_queue,), name="cloud-logging-export", daemon=True)
            _worker.start()
    try:
        _queue.put_nowait((log_name, item))
    except queue.Full:
        logger.warning("Cloud Logging export queue is full; dropped an entry for %s", log_name)


MISSING_CLIENT = (
    "AICONSOLE_CLOUD_LOGGING_PROJECT is set, but the Google Cloud Logging client is not installed: "
    "install the console with its cloud-logging extra (pip install 'aiconsole[cloud-logging]'), "
    "or unset the variable."
)


class ClientMissing(ImportError):
    """The export is configured, and google-cloud-logging (an optional extra) is not installed."""


def _google_logging():
    """The Google client, imported only when the export is configured: it is an optional extra."""
    try:
        from google.cloud import logging as google_logging
    except ImportError as error:
        raise ClientMissing(MISSING_CLIENT) from error
    return google_logging


@checks.register()
def check_client_installed(app_configs=None, **kwargs) -> list[checks.CheckMessage]:
    """Configured without its client, the export would fail entry after entry in the background."""
    if not enabled():
        return []
    try:
        _google_logging()
    except ClientMissing:
        return [checks.Error(MISSING_CLIENT, id="aiconsole.E001")]
    return []


def _make_client():
    # Over HTTP, never gRPC (the client's default where grpcio is installed, as it is for the
    # Vertex front): the processes that export fork trainers and serving processes, and a child
    # forked beside gRPC's threads can abort before it runs (console/grpc_front.py keeps gRPC in a
    # process of its own for the same reason).
    return _google_logging().Client(project=settings.CLOUD_LOGGING_PROJECT, _use_grpc=False)


_client = None


def _run(pending: queue.Queue) -> None:
    global _client
    while True:
        batch = [pending.get()]
        while len(batch) < BATCH_SIZE:
            try:
                batch.append(pending.get_nowait())
            except queue.Empty:
                break
        try:
            _client = _client or _make_client()
            _write(_client, batch)
        except ClientMissing:
            logger.error("%s %d entries were not exported.", MISSING_CLIENT, len(batch))
        except Exception:  # Google being away must never reach a request; the entries stay local
            _client = None  # start afresh next time (expired credentials, a broken channel)
            logger.exception("Could not write %d entries to Cloud Logging", len(batch))
        finally:
            for _ in batch:
                pending.task_done()


def _write(client, batch: list[tuple[str, dict]]) -> None:
    resource_class = _google_logging().Resource
    by_log: dict[str, list[dict]] = {}
    for log_name, item in batch:
        by_log.setdefault(log_name, []).append(item)
    for log_name, items in by_log.items():
        with client.logger(log_name).batch() as writer:
            for item in items:
                resource_type, resource_labels = item["resource"]
                writer.log_struct(
                    item["info"],
                    severity=item["severity"],
                    timestamp=item["timestamp"],
                    insert_id=item.get("insert_id"),
                    labels=item["labels"],
                    resource=resource_class(type=resource_type, labels=resource_labels),
                )
