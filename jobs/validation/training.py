"""TrainingInput rules: the check that runs them all, and the cluster's machines and counts.

``check_training_input`` runs every rule on a parsed TrainingInput: the cluster (here: machine
types, replica counts, mixing machine categories), then accelerators, code, region, scheduling,
identity and disks (their own modules), the HyperparameterSpec, and the built-in algorithms'
own rules.
"""

from __future__ import annotations

from aiconsole.errors import Violations
from aiconsole.protojson import snake
from jobs import kinds
from jobs.catalogue import CLOUD_TPU, COMPUTE_ENGINE, LEGACY, MACHINE_TYPES, TPU
from jobs.validation import roles
from jobs.validation.accelerators import check_accelerators
from jobs.validation.code import check_code
from jobs.validation.hyperparameters import check_hyperparameters
from jobs.validation.placement import check_identity, check_region, check_scheduling

_CATEGORY_WORDS = {COMPUTE_ENGINE: "Compute Engine", LEGACY: "legacy", TPU: "TPU"}


DEFAULT_MAX_REPLICA_COUNT = 100


def max_replica_count() -> int:
    """Most replicas of one role a job may ask for here (``settings.MAX_REPLICA_COUNT``)."""
    from django.conf import settings

    if not settings.configured:
        return DEFAULT_MAX_REPLICA_COUNT
    return getattr(settings, "MAX_REPLICA_COUNT", DEFAULT_MAX_REPLICA_COUNT)


def check_training_input(ti: dict, path: str, errors: Violations) -> None:
    _check_cluster(ti, path, errors)
    check_accelerators(ti, path, errors)
    check_code(ti, path, errors)
    check_region(ti, path, errors)
    check_scheduling(ti.get("scheduling"), f"{path}.scheduling", errors)
    check_identity(ti, path, errors)
    if "hyperparameters" in ti:
        check_hyperparameters(ti["hyperparameters"], f"{path}.hyperparameters", errors)
    for rule in kinds.training_rules():  # each feature's own (a built-in algorithm's image, args, machines)
        errors.extend(rule(ti, path))


def _check_cluster(ti: dict, path: str, errors: Violations) -> None:
    tier = roles.tier(ti)
    if tier == "CUSTOM" and not ti.get("masterType"):
        errors.add(f"{path}.master_type", "masterType is required when scaleTier is CUSTOM.")
    if tier != "CUSTOM":
        for _, type_key, count_key, _, _ in roles.ROLES:
            for key in (type_key, count_key):
                # A zero count is the proto3 default, indistinguishable from leaving it out.
                if key and ti.get(key) and ti[key] != "0":
                    errors.add(
                        f"{path}.{snake(key)}",
                        f"{key} can only be set when scaleTier is CUSTOM; {tier} has a fixed cluster.",
                    )
        return
    master = ti.get("masterType")
    _check_machine_name(master, "masterType", f"{path}.master_type", errors)
    most = max_replica_count()
    for task, type_key, count_key, _, _ in roles.ROLES[1:]:
        machine, count = ti.get(type_key), roles.count(ti, count_key)
        type_path, count_path = f"{path}.{snake(type_key)}", f"{path}.{snake(count_key)}"
        if count < 0:
            errors.add(count_path, f"{count_key} must be 0 or greater; got {count}.")
        if count > most:
            errors.add(
                count_path,
                f"{count_key} must be at most {most} on this server (AICONSOLE_MAX_REPLICA_COUNT); got {count}.",
            )
        if count > 0 and not machine:
            errors.add(type_path, f"{type_key} must be specified when {count_key} > 0.")
        if not machine:
            continue
        if machine == CLOUD_TPU and task != "worker":
            errors.add(type_path, f"cloud_tpu can only be used as masterType or workerType, not as {type_key}.")
            continue
        if not _check_machine_name(machine, type_key, type_path, errors):
            continue
        if machine == CLOUD_TPU and count != 1:
            errors.add(count_path, f"A cloud_tpu worker needs workerCount 1; got {count}.")
        _check_same_category(master, machine, type_key, type_path, errors)


def _check_machine_name(machine: str | None, key: str, field: str, errors: Violations) -> bool:
    if machine is None or machine in MACHINE_TYPES:
        return machine is not None
    compute_engine = [m for m, t in MACHINE_TYPES.items() if t.category == COMPUTE_ENGINE]
    legacy = [m for m, t in MACHINE_TYPES.items() if t.category == LEGACY]
    errors.add(
        field,
        f'{key} "{machine}" is not a supported machine type. Use a Compute Engine '
        f"type ({', '.join(compute_engine)}), a legacy type "
        f"({', '.join(legacy)}) or cloud_tpu.",
    )
    return False


def _check_same_category(master: str | None, machine: str, key: str, field: str, errors: Violations) -> None:
    master_category = MACHINE_TYPES[master].category if master in MACHINE_TYPES else None
    category = MACHINE_TYPES[machine].category
    # cloud_tpu pairs with either kind of master.
    if master_category in (None, TPU) or category == TPU or category == master_category:
        return
    errors.add(
        field,
        f"Compute Engine and legacy machine types cannot be mixed: masterType "
        f"{master} is a {_CATEGORY_WORDS[master_category]} type but {key} "
        f"{machine} is a {_CATEGORY_WORDS[category]} type.",
    )
