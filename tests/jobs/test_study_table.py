"""The study page's trial table: sorting, state filter, failure lines, log links, resume."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from bench.tuning import STUDY_SPEC, study_trials
from jobs import services
from jobs.executor.trials import training_output
from jobs.models import Job, JobState, Trial
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
    response = client.get("/projects/project-a/jobs/tuned/fragments/trials/?trial_state=FAILED", HTTP_HX_REQUEST="true")
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


@pytest.fixture
def large_study(project, admin):
    """2,000 finished trials of bench/tuning.py's four-parameter study (one on a log scale, one
    categorical), ten reports each and every 25th failed: what bench/pages.py measures the page with."""
    spec = {**STUDY_SPEC, "maxTrials": 2000}
    job = services.submit_job(project, body("large", hyperparameters=spec), actor=admin)
    Trial.objects.bulk_create(study_trials(job, 2000), batch_size=500)
    return job


def cells(html: str, key: str) -> list[str]:
    """The text of one column's cells, by its heading's sort key."""
    head = re.search(r"<thead>(.*?)</thead>", html, re.S).group(1)
    keys = re.findall(r'<th scope="col"[^>]*>(?:<a [^>]*data-sort-key="([^"]+)")?', head)
    index = keys.index(key)
    body = re.search(r"<tbody>(.*?)</tbody>", html, re.S).group(1)
    rows = re.findall(r"<tr data-trial=.*?</tr>", body, re.S)
    return [re.sub(r"<[^>]+>", "", re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", row, re.S)[index]).strip() for row in rows]


def test_a_2000_trial_table_sorts_by_a_parameter_column_in_a_few_queries(
    client, admin, large_study, django_assert_max_num_queries
):
    client.force_login(admin)
    with django_assert_max_num_queries(12):  # session, project, job, trials, metric tags, counts: not one per trial
        html = client.get(
            "/projects/project-a/jobs/large/fragments/trials/?trial_sort=-p.learning_rate&trial_rows=all",
            HTTP_HX_REQUEST="true",
        ).content.decode()
    values = [float(v) for v in cells(html, "p.learning_rate")]
    assert len(values) == 2000 and values == sorted(values, reverse=True)
    assert "data-more" not in html
    layers = [int(v) for v in cells(html, "p.layers")]
    assert set(layers) == set(range(1, 9))
    # Without trial_rows=all the page draws the first rows of that order, and offers the rest.
    first = client.get("/projects/project-a/jobs/large/?trial_sort=-p.learning_rate").content.decode()
    assert [float(v) for v in cells(first, "p.learning_rate")] == values[: study.ROWS_SHOWN]
    assert f"Showing the first {study.ROWS_SHOWN} of 2000 trials in this order." in first
    assert (
        'hx-get="/projects/project-a/jobs/large/fragments/trials/?trial_sort=-p.learning_rate&amp;trial_rows=all"'
        in first
    )


def test_a_2000_trial_table_filters_by_range_category_and_metric_threshold(client, admin, large_study):
    client.force_login(admin)
    response = client.get(
        "/projects/project-a/jobs/large/fragments/trials/?min.p.layers=3&max.p.layers=4&in.p.optimizer=sgd"
        "&min.objective=0.8&trial_sort=objective&trial_rows=all",
        HTTP_HX_REQUEST="true",
    )
    html = response.content.decode()
    expected = [
        t
        for t in large_study.trials.all()
        if 3 <= int(t.hyperparameters["layers"]) <= 4
        and t.hyperparameters["optimizer"] == "sgd"
        and t.objective_value is not None
        and t.objective_value >= 0.8
    ]
    assert 0 < len(expected) < 2000
    shown = re.findall(r'<tr data-trial="(\d+)"', html)
    assert sorted(shown, key=int) == sorted((t.trial_id for t in expected), key=int)
    objectives = [float(v) for v in cells(html, "objective")]
    assert objectives == sorted(objectives)
    # The address bar follows the table: the same view from a link.
    address = re.search(r'data-page-url="([^"]+)"', html).group(1).replace("&amp;", "&")
    assert address == (
        "/projects/project-a/jobs/large/?trial_sort=objective&min.p.layers=3&max.p.layers=4"
        "&min.objective=0.8&in.p.optimizer=sgd&trial_rows=all"
    )
    page = client.get(address).content.decode()
    assert re.findall(r'<tr data-trial="(\d+)"', page) == shown


def test_malformed_table_parameters_are_ignored_and_a_failed_trial_sorts_last(client, admin, large_study):
    client.force_login(admin)
    html = client.get(
        "/projects/project-a/jobs/large/fragments/trials/?trial_sort=p.nope&min.p.learning_rate=abc&in.p.optimizer=rmsprop&cols=nope",
        HTTP_HX_REQUEST="true",
    ).content.decode()
    shown = re.findall(r'<tr data-trial="(\d+)"', html)
    assert len(shown) == 0  # only the unknown category was kept: nothing matches, and the table says so
    assert "No trial matches these filters." in html
    html = client.get(
        "/projects/project-a/jobs/large/fragments/trials/?trial_sort=-objective&trial_rows=all", HTTP_HX_REQUEST="true"
    ).content.decode()
    shown = re.findall(r'<tr data-trial="(\d+)"', html)
    assert len(shown) == 2000 and shown[-1] in {str(n) for n in range(25, 2001, 25)}  # no objective: last either way


def test_the_best_report_column_follows_the_goal(client, admin, tuned):
    trial = tuned.trials.get(trial_id="1")
    trial.record_metrics([{"trainingStep": 1, "objectiveValue": 0.3}, {"trainingStep": 2, "objectiveValue": 0.5}])
    assert (trial.report_max, trial.report_min) == (0.5, 0.3)
    client.force_login(admin)
    html = client.get("/projects/project-a/jobs/tuned/fragments/trials/?trial_sort=number", HTTP_HX_REQUEST="true")
    text = html.content.decode()
    assert "loss (lowest)" in text  # MINIMIZE: the lowest report is the best
    assert cells(text, "objective.best")[0] == "0.3" and cells(text, "objective")[0] == "0.5"


def test_a_finished_study_keeps_its_table_and_a_late_trial_change_is_seen(
    admin, large_study, django_assert_max_num_queries
):
    large_study.state, large_study.end_time = JobState.SUCCEEDED, timezone.now()
    large_study.save()
    first = study.study_table(large_study)
    with django_assert_max_num_queries(1):  # only the trials' marker: the rows are kept
        assert study.study_table(large_study) is first
    trial = large_study.trials.get(trial_id="7")
    trial.end_time = timezone.now()
    trial.final_metric = {"trainingStep": "1000", "objectiveValue": 0.99}
    trial.save()
    again = study.study_table(large_study)
    assert again is not first and next(r for r in again.rows if r.trial.trial_id == "7").values["objective"] == 0.99


def test_a_finished_studys_page_and_table_leave_its_output_unread(client, admin, large_study):
    """A 2,000-trial study's trainingOutput holds every trial with its reports (megabytes of JSON):
    its page and a re-sort of its table read none of it, and the page still says its ML units."""
    output = training_output(large_study, large_study.training_input["hyperparameters"])
    Job.objects.filter(pk=large_study.pk).update(
        state=JobState.SUCCEEDED, end_time=timezone.now(), training_output=output
    )
    client.force_login(admin)
    with CaptureQueriesContext(connection) as queries:
        page = client.get("/projects/project-a/jobs/large/").content.decode()
        resorted = client.get(
            "/projects/project-a/jobs/large/fragments/trials/?trial_sort=-p.layers", HTTP_HX_REQUEST="true"
        ).content.decode()
    # The column read whole, not inside the expression that takes its ML units out of it.
    whole = [q["sql"] for q in queries if re.search(r'(?<!\()"jobs_job"\."training_output"', q["sql"])]
    assert whole == []
    assert f'<dt>ML units consumed</dt><dd title="{output["consumedMLUnits"]}">' in page
    assert [int(v) for v in cells(resorted, "p.layers")][:3] == [8, 8, 8]
    # Read that way, the job still has its whole output where something asks for it.
    job = Job.objects.without_output().get(pk=large_study.pk)
    assert job.consumed_ml_units == output["consumedMLUnits"]
    assert len(job.training_output["trials"]) == 2000


def test_a_rounded_value_keeps_its_whole_value_in_its_cells_title(client, admin, large_study):
    client.force_login(admin)
    html = client.get(
        "/projects/project-a/jobs/large/fragments/trials/?trial_sort=-p.learning_rate", HTTP_HX_REQUEST="true"
    ).content.decode()
    shown = cells(html, "p.learning_rate")
    titled = re.findall(r'<td class="number" title="([^"]+)">([^<]+)</td>', html)
    assert len(titled) >= len(shown)  # every learning rate is rounded, with dropout and accuracy
    whole = {text: float(title) for title, text in titled}
    assert all(f"{whole[text]:.4g}" == text for text in shown)
    assert float(shown[0]) <= 0.1 and len(shown[0]) <= 7


def test_a_studys_header_says_its_progress_and_best_so_far_and_a_running_one_opens_on_its_trials(client, admin, tuned):
    client.force_login(admin)
    Job.objects.filter(pk=tuned.pk).update(state=JobState.RUNNING, start_time=timezone.now())
    Trial.objects.create(job=tuned, trial_id="5", number=5, hyperparameters={"depth": "5"}, state=JobState.RUNNING)
    page = client.get("/projects/project-a/jobs/tuned/").content.decode()
    progress = re.search(r"<span data-progress>(.*?)</span>", page, re.S)[1]
    assert re.sub(r"<[^>]+>", "", progress) == "4 of 5 trials done, 1 running · best so far 0.2 (trial 2)"
    assert 'data-open="trials"' in page  # a running study opens on its trials, not its log
    plain = services.submit_job(tuned.project, body("plain_run"), actor=admin)
    Job.objects.filter(pk=plain.pk).update(state=JobState.RUNNING, start_time=timezone.now())
    page = client.get("/projects/project-a/jobs/plain_run/").content.decode()
    assert "data-progress" not in page and 'data-open="logs"' in page
