"""Creating a version in the background: fetch the files, detect the framework, load the model.

``versions.create`` commits the Version (CREATING) and its CREATE_VERSION operation, then hands
the version to ``enqueue``. A thread copies the deployment into the data dir, checks what is
there against the framework, and starts the version's first serving process, which must load
the model before the version is READY. Anything that goes wrong ends it FAILED with the reason,
in the version's errorMessage and the operation's error.

The database says what is unfinished, so ``resume`` (called when the console starts) picks up
versions a stopped console left CREATING, finishes deletions, and settles interrupted updates.
"""

from __future__ import annotations

import logging
import shutil
import threading
from pathlib import Path

from django.db import close_old_connections, connection, transaction
from django.utils import timezone

from aiconsole.errors import log_internal_error
from models_registry import conf, files
from models_registry.models import Model, Operation, OperationType, Version, VersionState, new_etag
from models_registry.resources import EMPTY, version_resource
from models_registry.serving import containers, supervisor
from models_registry.serving.processes import ServingError
from models_registry.vertex import operations

logger = logging.getLogger("aiconsole.models")

_slots = threading.BoundedSemaphore(2)  # deployments copying and loading at once
CODE_CANCELLED, CODE_INVALID_ARGUMENT, CODE_INTERNAL = 1, 3, 13


class Cancelled(Exception):
    pass


def enqueue(version_pk: int) -> None:
    """After the creating transaction commits, deploy the version in a thread of its own."""
    transaction.on_commit(lambda: start(version_pk))


def start(version_pk: int) -> threading.Thread:
    thread = threading.Thread(target=run, args=(version_pk,), name=f"deploy-{version_pk}", daemon=True)
    thread.start()
    return thread


def version_dir(version: Version) -> Path:
    return conf.models_dir() / version.project.project_id / version.model.name / f"{version.name}-{version.pk}"


def run(version_pk: int) -> None:
    close_old_connections()
    try:
        with _slots:
            version = Version.objects.select_related("model__project").filter(pk=version_pk).first()
            if version is None or version.state != VersionState.CREATING:
                return
            operation = version.operations.filter(operation_type=OperationType.CREATE_VERSION, done=False).first()
            if operation is not None:
                Operation.objects.filter(pk=operation.pk, start_time=None).update(start_time=timezone.now())
            try:
                _deploy(version, operation)
            except (files.DeployError, ServingError) as error:
                _fail(version, operation, str(error))
            except Cancelled:
                _fail(version, operation, "Version creation was cancelled.", code=CODE_CANCELLED)
            except Exception:
                error_id = log_internal_error(logger, f"Deploying {version} failed")
                _fail(
                    version,
                    operation,
                    f"Internal error while creating the version (id {error_id}); the console's log has the details.",
                    code=CODE_INTERNAL,
                )
    finally:
        connection.close()


def _check_cancel(operation: Operation | None) -> None:
    if operation is not None and Operation.objects.filter(pk=operation.pk, cancellation_requested=True).exists():
        raise Cancelled()


def _deploy(version: Version, operation: Operation | None) -> None:
    name, dest = str(version), version_dir(version)  # read before it is seen READY (as in _fail)
    shutil.rmtree(dest, ignore_errors=True)  # an earlier attempt a restart interrupted
    dest.parent.mkdir(parents=True, exist_ok=True)
    custom = containers.is_custom(version)
    if version.deployment_uri:
        files.fetch_deployment(
            version.deployment_uri, dest, lambda: _check_cancel(operation), project=version.model.project
        )
    if custom:  # its own serving container reads the artifacts as they are, whatever they hold
        Version.objects.filter(pk=version.pk).update(local_dir=str(dest) if version.deployment_uri else "")
        described = ("its serving container", (version.container_spec or {}).get("imageUri", ""))
    else:
        detected = files.detect_model(dest, version.framework, version.deployment_uri)
        Version.objects.filter(pk=version.pk).update(
            local_dir=str(detected.model_dir), model_file=detected.model_file, framework=detected.framework
        )
        described = (detected.framework, detected.model_file)
    _check_cancel(operation)
    version.refresh_from_db()
    load_ms = supervisor.get().warm(version)
    _check_cancel(operation)
    with transaction.atomic():  # the version and its operation are seen to change together
        ready = version.mark_ready()
        if ready and operation is not None:
            version.model.refresh_from_db(fields=["default_version"])
            operation.finish(response=version_resource(version, typed=True))
        if ready:
            operations.finish_uploads(version)
    if not ready:
        supervisor.get().retire(version.pk)
        return
    logger.info("%s is READY (%s, %s loaded in %.0f ms)", name, *described, load_ms)


def _fail(version: Version, operation: Operation | None, reason: str, code: int = CODE_INVALID_ARGUMENT) -> None:
    # Everything that reads the version's model and project comes before the failure is seen: once
    # it is, its caller may delete the model (and a test's database is emptied), and the rows are gone.
    name, folder = str(version), version_dir(version)
    supervisor.get().retire(version.pk)
    shutil.rmtree(folder, ignore_errors=True)
    message = (
        reason if code != CODE_INVALID_ARGUMENT else f"Create Version failed. Bad model detected with error: {reason}"
    )
    with transaction.atomic():  # the version and its operation are seen to change together
        version.mark_failed(message)
        if operation is not None:
            operation.finish(error={"code": code, "message": message})
        operations.finish_uploads(version)
    logger.warning("%s FAILED: %s", name, message)


def finish_delete_version(version: Version, operation: Operation | None = None) -> None:
    """Stop serving, remove the files and the row, complete the operation (also on a restart)."""
    supervisor.get().retire(version.pk)
    shutil.rmtree(version_dir(version), ignore_errors=True)
    with transaction.atomic():
        Model.objects.filter(default_version=version).update(default_version=None, etag=new_etag())
        operations = Operation.objects.filter(
            project=version.project,
            operation_type=OperationType.DELETE_VERSION,
            done=False,
            version__name=version.resource_name,
        )
        version.delete()
    for pending in [operation] if operation is not None else list(operations):
        pending.finish(response=EMPTY)


def resume() -> list[threading.Thread]:
    """What an earlier console process left unfinished: deploy again, finish deletes, settle updates."""

    threads = []
    for version in Version.objects.filter(state=VersionState.CREATING):
        threads.append(start(version.pk))
    Version.objects.filter(state=VersionState.UPDATING).update(state=VersionState.READY)
    for version in Version.objects.filter(state=VersionState.DELETING).select_related("model__project"):
        finish_delete_version(version)
    return threads
