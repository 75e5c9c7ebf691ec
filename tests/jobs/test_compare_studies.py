"""Studies against each other on the compare page: their best-so-far lines on one chart where they can
be read one way, a sentence where they cannot; and the compared inputs, only those that differ until
all are asked for."""

from __future__ import annotations

import json
import re

import pytest

from jobs import services
from jobs.executor.trials import training_output
from jobs.metrics import studies
from jobs.models import Job, JobState, Trial
from tests.helpers.jobs import body

# --- pure pieces -------------------------------------------------------------------------------------


def study(job_id: str, objectives: list[float], goal: str = "MAXIMIZE", metric: str = "accuracy") -> studies.Study:
    return studies.Study(job_id, goal, metric, list(range(1, len(objectives) + 1)), objectives)


def test_each_study_gets_its_best_so_far_line_labelled_with_its_job():
    chart, note = studies.best_so_far_chart([study("parent", [0.5, 0.7, 0.6]), study("resumed", [0.8, 0.75])])
    assert note == ""
    lines = chart.figure.data
    assert [line.name for line in lines] == ["parent", "resumed"]
    assert [list(line.y) for line in lines] == [[0.5, 0.7, 0.7], [0.8, 0.8]]
    assert [list(line.x) for line in lines] == [[1, 2, 3], [1, 2]]
    assert chart.columns == ["Trial", "parent", "resumed"]
    assert chart.rows == [[1, 0.5, 0.8], [2, 0.7, 0.8], [3, 0.7, ""]]


def test_a_minimizing_study_keeps_its_lowest():
    chart, _ = studies.best_so_far_chart([study("a", [3, 1, 2], "MINIMIZE"), study("b", [2, 4], "MINIMIZE")])
    assert [list(line.y) for line in chart.figure.data] == [[3, 1, 1], [2, 2]]
    assert "The lowest accuracy each study had found" in chart.note


def test_differing_goals_or_metrics_are_said_and_not_drawn_together():
    chart, note = studies.best_so_far_chart([study("a", [1.0]), study("b", [2.0], "MINIMIZE")])
    assert chart is None
    assert note.startswith("The studies' goals differ (a maximizes accuracy, b minimizes accuracy)")
    chart, note = studies.best_so_far_chart([study("a", [1.0]), study("b", [2.0], metric="auc")])
    assert chart is None and "different metrics (a: accuracy, b: auc)" in note


def test_a_study_without_results_is_named_and_the_others_drawn():
    chart, _ = studies.best_so_far_chart([study("a", [1.0]), study("b", [2.0]), study("c", [])])
    assert [line.name for line in chart.figure.data] == ["a", "b"]
    assert chart.note.endswith("No trial result yet: c.")
    chart, note = studies.best_so_far_chart([study("a", [1.0]), study("c", [])])
    assert chart is None and note.startswith("Two studies with a trial result are needed")


def test_a_studys_results_are_read_from_its_training_output_in_trial_order():
    output = {
        "trials": [
            {"trialId": "10", "finalMetric": {"objectiveValue": 0.9}},
            {"trialId": "2", "finalMetric": {"objectiveValue": "0.4"}},
            {"trialId": "3", "state": "FAILED"},
        ]
    }
    read = studies.study_of("s", {"hyperparameters": {"goal": "MINIMIZE"}}, output)
    assert (read.trials, read.objectives, read.goal, read.metric) == (
        [2, 10],
        [0.4, 0.9],
        "MINIMIZE",
        "training/hptuning/metric",
    )


# --- the page ------------------------------------------------------------------------------------------


def tuning_job(project, actor, job_id: str, objectives: list[float], goal: str = "MAXIMIZE", args=()):
    spec = {
        "goal": goal,
        "hyperparameterMetricTag": "accuracy",
        "maxTrials": len(objectives),
        "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1}],
    }
    job = services.submit_job(project, body(job_id, args=list(args), hyperparameters=spec), actor=actor)
    for number, value in enumerate(objectives, 1):
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            hyperparameters={"lr": str(0.001 * number)},
            state=JobState.SUCCEEDED,
            final_metric={"trainingStep": "3", "objectiveValue": value},
        )
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, training_output=training_output(job, spec))
    return job


def figure_of(page: str, chart_id: str) -> dict:
    script = re.search(
        rf'id="{chart_id}".*?<script type="application/json" class="chart-figure">(.*?)</script>', page, re.S
    )
    return json.loads(script.group(1))


@pytest.fixture
def random_and_bayesian(project, admin):
    return (
        tuning_job(project, admin, "random_search", [0.5, 0.7, 0.6, 0.65], args=["--seed", "1"]),
        tuning_job(project, admin, "bayesian_search", [0.6, 0.8, 0.85], args=["--seed", "2"]),
    )


def test_two_studies_compared_draw_both_best_so_far_lines_on_one_chart(client, viewer, random_and_bayesian):
    client.force_login(viewer)
    page = client.get("/projects/project-a/compare/", {"jobs": "random_search,bayesian_search"}).content.decode()
    assert 'id="compare-studies"' in page and page.count('id="chart-studies"') == 1
    figure = figure_of(page, "chart-studies")
    assert [trace["name"] for trace in figure["data"]] == ["random_search", "bayesian_search"]
    assert "Best so far, study against study: random_search, bayesian_search" in page


def test_two_trials_of_one_study_are_no_study_against_study(client, viewer, random_and_bayesian):
    client.force_login(viewer)
    page = client.get("/projects/project-a/compare/", {"jobs": "random_search/1,random_search/2"}).content.decode()
    assert 'id="compare-studies"' not in page


def test_studies_with_differing_goals_say_so_instead_of_one_chart(client, admin, project, random_and_bayesian):
    tuning_job(project, admin, "lowest_loss", [0.3, 0.2], goal="MINIMIZE")
    client.force_login(admin)
    page = client.get("/projects/project-a/compare/", {"jobs": "random_search,lowest_loss"}).content.decode()
    assert 'id="compare-studies"' in page and 'id="chart-studies"' not in page
    assert "The studies&#x27; goals differ (random_search maximizes accuracy, lowest_loss minimizes accuracy)" in page


def test_the_inputs_show_only_those_that_differ_until_all_are_asked_for(client, viewer, random_and_bayesian):
    client.force_login(viewer)
    page = client.get("/projects/project-a/compare/", {"jobs": "random_search,bayesian_search"}).content.decode()
    inputs = re.search(r'id="compare-inputs"(.*?)</section>', page, re.S).group(1)
    rows = re.findall(r'<tr class="(\w*)" data-kind', inputs)
    assert rows and set(rows) == {"differs"}  # the seed and the best trial's lr; not the tier or the runtime
    assert "<code>Scale tier</code>" not in inputs
    assert 'href="?jobs=random_search,bayesian_search&amp;inputs=all">Show all inputs</a>' in inputs
    page = client.get("/projects/project-a/compare/", {"jobs": "random_search,bayesian_search", "inputs": "all"})
    inputs = re.search(r'id="compare-inputs"(.*?)</section>', page.content.decode(), re.S).group(1)
    assert "<code>Scale tier</code>" in inputs and '<tr class="" data-kind' in inputs
    assert 'href="?jobs=random_search,bayesian_search">Show only differences</a>' in inputs


def test_jobs_that_differ_in_no_input_say_so(client, viewer, project, admin):
    tuning_job(project, admin, "same_a", [0.5])
    tuning_job(project, admin, "same_b", [0.5])
    client.force_login(viewer)
    page = client.get("/projects/project-a/compare/", {"jobs": "same_a,same_b"}).content.decode()
    assert "0 of " in page and "No input differs between these jobs." in page
