"""Holding a failed replica for its shell (label ``aiconsole-hold-failed-replica``): the one rule
for the embedded runner and a scaled-mode worker alike. A package replica's shell stays open the
minutes the job asked (its row's ``shell_until`` says until when); a container's cannot, since its
shell ends with its container, and the log says so."""

from __future__ import annotations

from datetime import timedelta

from django.db.models import QuerySet
from django.utils import timezone

from jobs.validation.names import HOLD_LABEL, hold_minutes
from jobs.webaccess.host import host_for, release


def begin(process, *, labels, training_input, address: str, row: QuerySet, say, where: str = "") -> float:
    """Hold ``process`` (a failed ``ReplicaProcess``) if its job asked; the seconds held, 0 when not.
    ``row``: its replica's row, ``say``: the job's log, ``where``: said of the place ("on this worker, ")."""
    minutes = hold_minutes(labels)
    if not minutes or not (training_input or {}).get("enableWebAccess"):
        release(address, process.replica_id)
        return 0
    if not process.holds_for_shell:
        say(
            f"{process.label} is not held for its shell: a container's shell ends with its container.",
            severity="WARNING",
        )
        release(address, process.replica_id)
        return 0
    if not host_for(address).hold(process.replica_id, minutes * 60):
        say(f"{process.label} failed; its shell had already ended, so it is not held.", severity="WARNING")
        return 0
    row.update(shell_until=timezone.now() + timedelta(minutes=minutes))
    say(
        f"{process.label} failed; its shell stays open {minutes} minutes (label {HOLD_LABEL}) to look at what "
        f"went wrong, {where}in its working folder with its environment. Cancel the job to end the hold sooner.",
        severity="WARNING",
    )
    return minutes * 60


def let_go(replica_pks, *, address: str) -> None:
    """These replicas (their rows' ids) are not held (they ended well, or were stopped): their
    shells end with them."""
    for replica_pk in replica_pks:
        release(address, replica_pk)


def end(process, *, address: str, row: QuerySet) -> None:
    """The hold is over: the replica's shells end with it."""
    release(address, process.replica_id)
    row.update(shell_until=None)
