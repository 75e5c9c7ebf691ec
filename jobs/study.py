"""The study section of a tuning job's page: its trial table, sorted and filtered as asked.

Sorting and filtering run here, over the job's Trial rows (a few thousand at most: maxTrials is
the limit), so the page and its htmx fragment show the same rows for the same query string.
"""

from __future__ import annotations

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
    if sort == "newest":
        rows.reverse()
    elif sort == "best":
        maximize = (job.training_input or {}).get("hyperparameters", {}).get("goal") != "MINIMIZE"
        sign = -1 if maximize else 1
        rows.sort(key=lambda t: (t.objective_value is None, sign * (t.objective_value or 0.0), t.number))
    for trial in rows:
        trial.failure_reason, trial.error_lines = failure(trial.error_message)
    return {"trial_rows": rows, "trial_sort": sort, "trial_state": state, "trial_sorts": SORTS,
            "trial_states": STATES, "trial_total": job.trials.count()}
