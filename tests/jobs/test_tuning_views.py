"""The job page's trials table."""

from __future__ import annotations

from django.utils import timezone

from jobs.models import JobState, Trial
from tests.conftest import body


def test_job_page_lists_trials_with_their_outcome(client, project, admin):
    from jobs import services

    spec = {"maxTrials": 3, "hyperparameterMetricTag": "Taxi Model Accuracy",
            "params": [{"parameterName": "max-depth", "type": "INTEGER", "minValue": 1, "maxValue": 9}]}
    job = services.submit_job(project, body("tuned", hyperparameters=spec), actor=admin)
    now = timezone.now()
    Trial.objects.create(job=job, trial_id="1", number=1, hyperparameters={"max-depth": "3"}, start_time=now,
                         end_time=now, state=JobState.SUCCEEDED, is_stopped_early=True,
                         final_metric={"trainingStep": "40", "objectiveValue": 0.875})
    Trial.objects.create(job=job, trial_id="2", number=2, hyperparameters={"max-depth": "7"},
                         state=JobState.SUCCEEDED)
    Trial.objects.create(job=job, trial_id="3", number=3, hyperparameters={"max-depth": "8"},
                         state=JobState.FAILED, error_message="ValueError: bad depth")
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/tuned/").content.decode()

    assert 'id="trials"' in html
    assert "max-depth=3" in html and "0.875" in html and "40" in html
    assert "no metric reported" in html
    assert "ValueError: bad depth" in html


def test_plain_job_page_has_no_trials_section(client, project, admin):
    from jobs import services

    services.submit_job(project, body("plain"), actor=admin)
    client.force_login(admin)
    assert 'id="trials"' not in client.get("/projects/project-a/jobs/plain/").content.decode()
