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


def test_trial_table_refreshes_itself_while_the_study_runs(client, project, admin):
    from aiconsole.models import AuditEntry
    from jobs import services

    spec = {"maxTrials": 3, "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}
    job = services.submit_job(project, body("live", hyperparameters=spec), actor=admin)
    Trial.objects.create(job=job, trial_id="1", number=1, hyperparameters={"x": "0.5"}, state=JobState.RUNNING,
                         start_time=timezone.now())
    project.data_access_logs = True
    project.save()
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/live/").content.decode()
    assert 'id="trial-table" hx-get="/projects/project-a/jobs/live/?part=trials' in html
    assert 'hx-trigger="every 3s"' in html

    Trial.objects.create(job=job, trial_id="2", number=2, hyperparameters={"x": "0.9"}, state=JobState.SUCCEEDED,
                         final_metric={"trainingStep": "1", "objectiveValue": 0.42})
    audited = AuditEntry.objects.count()
    fragment = client.get("/projects/project-a/jobs/live/?part=trials&trial_sort=&trial_state=",
                          HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div class="table-scroll" id="trial-table"')
    assert "x=0.9" in fragment and "0.42" in fragment
    assert AuditEntry.objects.count() == audited  # the page's own refresh is not a new Data Access read

    job.state = JobState.SUCCEEDED
    job.save()
    assert 'hx-trigger="every 3s"' not in client.get("/projects/project-a/jobs/live/").content.decode()


def test_study_charts_refresh_themselves_while_the_study_runs(client, project, admin):
    from jobs import services
    from jobs.executor.trials import training_output
    from jobs.models import Job

    spec = {"maxTrials": 4, "goal": "MAXIMIZE", "hyperparameterMetricTag": "score",
            "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}
    job = services.submit_job(project, body("charts", hyperparameters=spec), actor=admin)
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/charts/").content.decode()
    assert 'id="study-charts" hx-get="/projects/project-a/jobs/charts/?part=charts' in page
    assert "Optimization history" not in page  # no trial yet: nothing to draw

    for number, (x, score) in enumerate([("0.2", 0.4), ("0.7", 0.9)], start=1):
        Trial.objects.create(job=job, trial_id=str(number), number=number, hyperparameters={"x": x},
                             state=JobState.SUCCEEDED, final_metric={"trainingStep": "1", "objectiveValue": score})
    Job.objects.filter(pk=job.pk).update(training_output=training_output(job, spec))
    fragment = client.get("/projects/project-a/jobs/charts/?part=charts", HTTP_HX_REQUEST="true").content.decode()
    assert fragment.lstrip().startswith('<div id="study-charts"')
    assert "Optimization history" in fragment and "Plotly.newPlot" in fragment

    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED)
    assert 'hx-trigger="every 10s"' not in client.get("/projects/project-a/jobs/charts/").content.decode()
