"""How many trials a study runs, and how many at once: plain arithmetic on its spec, without the
search (Optuna), for the processes that only need to count a study's replicas (admission, the
queue's explanation on a job's page)."""

from __future__ import annotations


def max_trials(spec: dict) -> int:
    return max(1, int(spec.get("maxTrials") or 1))


def parallel_trials(spec: dict, replicas_per_trial: int, max_replicas: int) -> int:
    """Trials run at once: maxParallelTrials, no more than maxTrials, and no more than fit on
    this machine (at least one: a trial larger than the machine runs alone)."""
    wanted = min(max(1, int(spec.get("maxParallelTrials") or 1)), max_trials(spec))
    fit = max(1, max_replicas // max(1, replicas_per_trial))
    return max(1, min(wanted, fit))
