"""A finished tuning study of many trials in the live console, for the study page's browser tests.

A study is submitted through the API (its package does not exist, so it is cancelled at once);
then ``python -m tests.browser.studies JOB COUNT``, run with the console's own environment, gives it
``COUNT`` finished trials (bench/tuning.py's: four parameters, one on a log scale, one categorical,
ten reports each, every 25th failed), their metric points, and the training output the executor
would have left. Each trial ran for its own time (one to five minutes) and used ML units in
proportion. ``python -m tests.browser.studies JOB COUNT edge`` makes a study whose objective grows
with the learning rate, and whose last five trials the search drew to the top of its range (0.072
to 0.09 of 1e-4 to 0.1): its best trials sit at that bound on the rate's log scale. ``repeats``: its
second half ran with the first half's parameters again, each repeat ``REPEAT_OFFSET`` above or below
its first run (so the objective's noise is known); ``bare``: each trial reported its objective once
(no repeats, no step-to-step variation: nothing to estimate the noise from). ``goal`` overrides the
spec's.
"""

from __future__ import annotations

import subprocess
import sys

from bench.support import harness


def seed_study(console, job_id: str, count: int, shape: str = "", goal: str = "") -> None:
    # Imported here: bench/tuning.py imports numpy and the tests' harness; the spec is all this needs.
    from bench.tuning import STUDY_SPEC

    spec = {**STUDY_SPEC, "maxTrials": count, **({"goal": goal} if goal else {})}
    console.submit(job_id, "gs://missing-bucket/trainer-0.1.tar.gz", hyperparameters=spec)
    try:
        console.call("POST", f"/v1/projects/{harness.PROJECT}/jobs/{job_id}:cancel", {})
    except RuntimeError:
        pass  # it failed already: its package does not exist
    console.wait(job_id)
    subprocess.run(
        [sys.executable, "-m", "tests.browser.studies", job_id, str(count), *([shape] if shape else [])],
        env=console.env,
        cwd=harness.ROOT,
        check=True,
        timeout=120,
    )


EDGE_RATES = (0.072, 0.075, 0.08, 0.085, 0.09)  # the last trials of an "edge" study, near its top of 0.1


def trial_seconds(number: int) -> float:
    """How long trial ``number`` ran: one to five minutes, in no order."""
    return 60.0 + (number * 37) % 240


def _edge(trials: list) -> None:
    """The trials' objective made to grow with the learning rate, the last five drawn near its top."""
    import math

    for trial in trials:
        position = trial.number - (len(trials) - len(EDGE_RATES)) - 1
        if position >= 0:
            rate = EDGE_RATES[position]
        else:
            rate = 10 ** (-4 + 3 * (trial.number - 1) / max(1, len(trials) - len(EDGE_RATES) - 1))
        trial.hyperparameters = {**trial.hyperparameters, "learning_rate": repr(rate)}
        if trial.final_metric:
            score = 0.5 + 0.1 * (math.log10(rate) + 4)
            trial.all_metrics = [
                {**r, "objectiveValue": score - 0.02 * (10 - s)} for s, r in enumerate(trial.all_metrics, 1)
            ]
            trial.final_metric = trial.all_metrics[-1]
            values = [r["objectiveValue"] for r in trial.all_metrics]
            trial.report_max, trial.report_min = max(values), min(values)


REPEAT_OFFSET = 0.006  # how far each repeated trial's objective lies from its first run's


def _repeat(trials: list) -> None:
    """The second half of the trials made repeats of the first: the same parameters, the objective
    ``REPEAT_OFFSET`` higher or lower (alternately)."""
    half = len(trials) // 2
    for first, again in zip(trials[:half], trials[half : 2 * half], strict=True):
        again.hyperparameters = dict(first.hyperparameters)
        offset = REPEAT_OFFSET if first.number % 2 else -REPEAT_OFFSET
        if first.final_metric and again.final_metric:
            again.all_metrics = [{**r, "objectiveValue": r["objectiveValue"] + offset} for r in first.all_metrics]
            again.final_metric = again.all_metrics[-1]
            values = [r["objectiveValue"] for r in again.all_metrics]
            again.report_max, again.report_min = max(values), min(values)


def _bare(trials: list) -> None:
    """Each trial's reports cut to its last: its objective, reported once."""
    for trial in trials:
        trial.all_metrics = trial.all_metrics[-1:]
        if trial.final_metric:
            trial.report_max = trial.report_min = trial.final_metric["objectiveValue"]


def _fill(job_id: str, count: int, shape: str = "") -> None:
    import datetime

    import django

    from aiconsole import datadir

    datadir.prepare()
    django.setup()
    from bench.tuning import study_trials
    from jobs.executor.trials import training_output
    from jobs.metrics import points
    from jobs.models import Job, JobState, Trial

    job = Job.objects.get(job_id=job_id)
    job.trials.all().delete()
    made = study_trials(job, count)
    for trial in made:
        trial.start_time = trial.end_time - datetime.timedelta(seconds=trial_seconds(trial.number))
        trial.consumed_ml_units = round(trial_seconds(trial.number) / 3600 * 2, 4)  # 2 ML units an hour
    if shape == "edge":
        _edge(made)
    elif shape == "repeats":
        _repeat(made)
    elif shape == "bare":
        _bare(made)
    trials = Trial.objects.bulk_create(made, batch_size=500)
    rows = []
    for trial in trials:
        for n, report in enumerate(trial.all_metrics):
            step = int(report["trainingStep"])
            value = report["objectiveValue"]
            rows.append(
                (job.pk, trial.trial_id, "hypertune", "", "accuracy", step, value, 1.7e9 + trial.number * 60 + n)
            )
            rows.append(
                (job.pk, trial.trial_id, "tfevents", "", "loss", step, 1.0 - value, 1.7e9 + trial.number * 60 + n)
            )
    points.insert(rows)
    spec = job.training_input["hyperparameters"]
    Job.objects.filter(pk=job.pk).update(
        state=JobState.SUCCEEDED, error_message="", training_output=training_output(job, spec)
    )


if __name__ == "__main__":
    _fill(sys.argv[1], int(sys.argv[2]), *sys.argv[3:4])
