"""The study page's trial table: sorting, state filter, failure lines, log links, resume."""

from __future__ import annotations

import pytest
from django.utils import timezone

from jobs import services
from jobs.models import JobState, Trial
from jobs.tuning import study
from tests.helpers.jobs import body

SPEC = {
    "goal": "MINIMIZE",
    "maxTrials": 5,
    "hyperparameterMetricTag": "loss",
    "params": [{"parameterName": "depth", "type": "INTEGER", "minValue": 1, "maxValue": 9}],
}


def test_failure_splits_the_reason_from_the_last_error_lines():
    message = "The replica master 0 exited with a non-zero status of 1. \n" + "\n".join(f"line {n}" for n in range(10))
    reason, lines = study.failure(message)
    assert reason == "The replica master 0 exited with a non-zero status of 1."
    assert lines == [f"line {n}" for n in range(4, 10)]
    assert study.failure("") == ("", [])


@pytest.fixture
def tuned(project, admin):
    job = services.submit_job(project, body("tuned", hyperparameters=SPEC), actor=admin)
    now = timezone.now()
    for number, state, loss in [
        (1, JobState.SUCCEEDED, 0.5),
        (2, JobState.SUCCEEDED, 0.2),
        (3, JobState.FAILED, None),
        (4, JobState.SUCCEEDED, 0.9),
    ]:
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            hyperparameters={"depth": str(number)},
            state=state,
            start_time=now,
            final_metric={"trainingStep": "5", "objectiveValue": loss} if loss is not None else None,
            error_message=""
            if loss is not None
            else "The replica master 0 exited with a non-zero status of 1. \n"
            "Traceback (most recent call last):\nValueError: bad depth",
        )
    return job


def order(html: str) -> list[str]:
    import re

    return re.findall(r'<tr data-trial="(\d+)"', html)


def test_trials_are_sorted_best_first_for_the_goal_by_default(client, admin, tuned):
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/tuned/").content.decode()
    assert order(html) == ["2", "1", "4", "3"]  # MINIMIZE: lowest loss first, no result last
    html = client.get("/projects/project-a/jobs/tuned/?trial_sort=number").content.decode()
    assert order(html) == ["1", "2", "3", "4"]


def test_trial_table_filters_by_state_as_an_htmx_fragment(client, admin, tuned):
    client.force_login(admin)
    response = client.get("/projects/project-a/jobs/tuned/?part=trials&trial_state=FAILED", HTTP_HX_REQUEST="true")
    html = response.content.decode()
    assert order(html) == ["3"] and "<html" not in html
    assert "exited with a non-zero status of 1." in html and "ValueError: bad depth" in html
    assert 'href="?trial=3#logs"' in html


def test_resume_as_new_job_prefills_the_form_with_the_spec(client, admin, tuned):
    client.force_login(admin)
    tuned.state = JobState.SUCCEEDED
    tuned.save(update_fields=["state"])
    page = client.get("/projects/project-a/jobs/tuned/").content.decode()
    assert "/projects/project-a/jobs/new/?resume=tuned" in page
    form = client.get("/projects/project-a/jobs/new/?resume=tuned").context["form"]
    assert form.initial["job_id"] == "tuned_resumed"
    assert '"resumePreviousJobId": "tuned"' in form.initial["hyperparameters"]
    assert '"maxTrials": 5' in form.initial["hyperparameters"]


def test_viewer_sees_no_resume_button(client, viewer, tuned):
    tuned.state = JobState.SUCCEEDED
    tuned.save(update_fields=["state"])
    client.force_login(viewer)
    assert "?resume=tuned" not in client.get("/projects/project-a/jobs/tuned/").content.decode()


def test_submitted_form_spec_becomes_the_jobs_hyperparameters(client, admin, tuned, settings):
    from jobs.web.forms import JobSubmitForm

    form = JobSubmitForm(
        {
            "job_id": "again",
            "package_uris": "gs://b/t.tar.gz",
            "python_module": "trainer.task",
            "region": "us-central1",
            "runtime_version": tuned.training_input.get("runtimeVersion", "2.11"),
            "python_version": "3.7",
            "scale_tier": "BASIC",
            "hyperparameters": "trainingInput:\n  hyperparameters:\n    goal: MINIMIZE\n"
            "    resumePreviousJobId: tuned\n",
        }
    )
    form.fields["runtime_version"].choices = [(form.data["runtime_version"], "")]
    assert form.is_valid(), form.errors
    spec = form.job_body()["trainingInput"]["hyperparameters"]
    assert spec == {"goal": "MINIMIZE", "resumePreviousJobId": "tuned"}
    bad = JobSubmitForm({"hyperparameters": "- just\n- a list"})
    bad.is_valid()
    assert "mapping" in str(bad.errors["hyperparameters"])
