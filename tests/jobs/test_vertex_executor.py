"""What the executor does for a Vertex AI study that it does not for a v1 one, run for real:
the trial job spec's ``scheduling.timeout`` limits each trial, not the study."""

from __future__ import annotations

import pytest

from bench.support.waiting import wait_for
from jobs.models import TERMINAL_STATES, Job, JobState
from jobs.vertex import services as vertex
from tests.helpers.vertex import package_pool, tuning_job

pytestmark = [pytest.mark.executor, pytest.mark.django_db(transaction=True)]

SLOW = """
print("trial starts", flush=True)
time.sleep(60)
"""


def test_a_trial_that_runs_past_its_timeout_is_stopped_and_fails(executor, project, admin, package_factory):
    package = package_factory(SLOW)
    body = tuning_job(
        "slow-study",
        trials=1,
        parallel=1,
        trial_job_spec={"workerPoolSpecs": [package_pool(package=str(package))], "scheduling": {"timeout": "3s"}},
    )
    job, _ = vertex.create_job(project, "us-central1", "hyperparameterTuningJobs", body, actor=admin)
    assert job.max_running_seconds == 604800  # the study itself keeps the default limit
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 120, message="the study to end")
    job.refresh_from_db()
    trial = job.trials.get()
    assert trial.state == JobState.FAILED
    assert trial.error_message == "The trial exceeded its timeout of 3s (scheduling.timeout)."
    assert job.state == JobState.FAILED and "exceeded its timeout of 3s" in job.error_message
    assert (trial.end_time - trial.start_time).total_seconds() < 30
