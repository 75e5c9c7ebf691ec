"""A finished tuning study of many trials in the live console, for the study page's browser tests.

A study is submitted through the API (its package does not exist, so it is cancelled at once);
then ``python -m tests.browser.studies JOB COUNT``, run with the console's own environment, gives it
``COUNT`` finished trials (bench/tuning.py's: four parameters, one on a log scale, one categorical,
ten reports each, every 25th failed), their metric points, and the training output the executor
would have left.
"""

from __future__ import annotations

import subprocess
import sys

from tests.browser import harness


def seed_study(console, job_id: str, count: int) -> None:
    # Imported here: bench/tuning.py imports numpy and the tests' harness; the spec is all this needs.
    from bench.tuning import STUDY_SPEC

    console.submit(job_id, "gs://missing-bucket/trainer-0.1.tar.gz", hyperparameters={**STUDY_SPEC, "maxTrials": count})
    try:
        console.call("POST", f"/v1/projects/{harness.PROJECT}/jobs/{job_id}:cancel", {})
    except RuntimeError:
        pass  # it failed already: its package does not exist
    console.wait(job_id)
    subprocess.run(
        [sys.executable, "-m", "tests.browser.studies", job_id, str(count)],
        env=console.env,
        cwd=harness.ROOT,
        check=True,
        timeout=120,
    )


def _fill(job_id: str, count: int) -> None:
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
    trials = Trial.objects.bulk_create(study_trials(job, count), batch_size=500)
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
    _fill(sys.argv[1], int(sys.argv[2]))
