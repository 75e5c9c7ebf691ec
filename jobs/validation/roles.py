"""The four replica roles of a TrainingInput, and the machines a job will really use.

Each role (master, worker, parameter server, evaluator) names its machine type, replica count
and config fields; every TrainingInput rule that walks the cluster reads them from ``ROLES``.
A scale tier other than CUSTOM fixes the cluster, which ``role_machines`` resolves.
"""

from __future__ import annotations

from jobs.catalogue import SCALE_TIERS

ROLES = (
    # task type, machine type field, count field, config field, words for messages
    ("master", "masterType", None, "masterConfig", "master"),
    ("worker", "workerType", "workerCount", "workerConfig", "worker"),
    ("ps", "parameterServerType", "parameterServerCount", "parameterServerConfig", "parameter server"),
    ("evaluator", "evaluatorType", "evaluatorCount", "evaluatorConfig", "evaluator"),
)


def count(data: dict, key: str | None) -> int:
    return 1 if key is None else int(data.get(key) or 0)


def tier(ti: dict) -> str:
    # proto3 cannot tell an unset enum from its first value, so a missing tier is BASIC.
    return ti.get("scaleTier", "BASIC")


def role_machines(ti: dict) -> dict[str, tuple[str | None, int]]:
    """Task type -> (machine type, replica count) the job will really use."""
    if tier(ti) == "CUSTOM":
        return {task: (ti.get(type_key), count(ti, count_key)) for task, type_key, count_key, _, _ in ROLES}
    machines: dict[str, tuple[str | None, int]] = {task: (None, 0) for task, *_ in ROLES}
    for role in SCALE_TIERS[tier(ti)].roles:
        machines[role.task_type] = (role.machine_type, role.count)
    return machines
