"""The study section of a tuning job's page: its trial table, sorted and filtered as asked.

Sorting and filtering run here, over the job's Trial rows (a few thousand at most: maxTrials is
the limit), so the page and its htmx fragment show the same rows for the same query string.
"""

from __future__ import annotations

from django.db.models import Count

from jobs.models import JobState

SORTS = {"best": "Best first", "number": "Trial number", "newest": "Newest first"}
STATES = [JobState.SUCCEEDED, JobState.FAILED, JobState.RUNNING, JobState.CANCELLED, "STOPPED_EARLY"]
ERROR_LINES = 6  # the last lines of a failed trial's traceback shown inline


def failure(message: str) -> tuple[str, list[str]]:
    """A failed trial's error message as its reason (first line) and its last error lines."""
    lines = [line for line in (message or "").splitlines() if line.strip()]
    if not lines:
        return "", []
    return lines[0].strip(), lines[1:][-ERROR_LINES:]


def trial_table(job, params) -> dict:
    """Rows and controls for the trial table; ``params`` is the page's query string."""
    sort = params.get("trial_sort") if params.get("trial_sort") in SORTS else "best"
    state = params.get("trial_state") if params.get("trial_state") in STATES else ""
    trials = job.trials.defer("all_metrics")
    if state == "STOPPED_EARLY":
        trials = trials.filter(is_stopped_early=True)
    elif state:
        trials = trials.filter(state=state)
    rows = list(trials.order_by("number"))
    maximize = goal(job) != "MINIMIZE"
    if sort == "newest":
        rows.reverse()
    elif sort == "best":
        sign = -1 if maximize else 1
        rows.sort(key=lambda t: (t.objective_value is None, sign * (t.objective_value or 0.0), t.number))
    for trial in rows:
        trial.failure_reason, trial.error_lines = failure(trial.error_message)
    counts = dict(job.trials.values_list("state").annotate(n=Count("pk")).order_by())
    return {
        "trial_rows": rows,
        "trial_sort": sort,
        "trial_state": state,
        "trial_sorts": SORTS,
        "trial_states": STATES,
        "trial_total": sum(counts.values()),
        "trial_counts": counts,
        "trial_completed": counts.get(JobState.SUCCEEDED, 0) + counts.get(JobState.FAILED, 0),
        "trial_running": counts.get(JobState.RUNNING, 0),
        "best_trial_id": best_trial_id(job, maximize),
        "trial_goal": goal(job),
    }


def goal(job) -> str:
    return ((job.training_input or {}).get("hyperparameters") or {}).get("goal") or "MAXIMIZE"


def best_trial_id(job, maximize: bool) -> str:
    """The succeeded trial with the best objective for the study's goal (the first on a tie)."""
    best = None
    for trial in job.trials.filter(state=JobState.SUCCEEDED).defer("all_metrics").order_by("number"):
        value = trial.objective_value
        if value is not None and (best is None or (value > best[0] if maximize else value < best[0])):
            best = (value, trial.trial_id)
    return best[1] if best else ""
