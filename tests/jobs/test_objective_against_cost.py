"""A study's objective against what its trials cost (duration, ML units), with the Pareto front: the best
objective to be had for at most each cost, for the metric's goal (jobs/tuning/charts.py)."""

from __future__ import annotations

import base64
import datetime
import json
import re

import numpy as np
from django.utils import timezone

from jobs.models import JobState, Trial
from jobs.tuning import charts
from tests.helpers.jobs import body


def test_the_front_holds_the_trials_no_cheaper_or_equal_trial_beats():
    costs = [10, 20, 20, 30, 40, 5, 50]
    objectives = [0.5, 0.7, 0.6, 0.65, 0.9, 0.2, 0.9]
    # 5 s: 0.2; 10 s: 0.5; 20 s: 0.7 (not 0.6, same cost); 30 s: 0.65 < 0.7; 40 s: 0.9; 50 s ties 0.9.
    assert charts.pareto_front(costs, objectives, maximize=True) == [5, 0, 1, 4]


def test_the_front_of_a_minimized_metric_keeps_the_lowest():
    costs = [10, 20, 20, 30, 40]
    losses = [0.5, 0.7, 0.3, 0.4, 0.1]
    assert charts.pareto_front(costs, losses, maximize=False) == [0, 2, 4]


def test_equal_trials_put_the_first_on_the_front():
    assert charts.pareto_front([1.0, 1.0], [0.5, 0.5]) == [0]
    assert charts.pareto_front([], []) == []


def data(values):
    return [{"trial": n, "objective": v, "params": {}} for n, v in enumerate(values, start=1)]


def test_the_chart_marks_the_front_and_says_how_many_are_on_it():
    chart = charts.objective_against_cost(data([0.5, 0.7, 0.6, 0.9]), {1: 60, 2: 300, 3: 120, 4: 900}, maximize=True)
    trials, front = chart.figure.data
    assert chart.title == "Objective against duration" and chart.key == "cost"
    assert chart.figure.layout.xaxis.title.text == "Duration (min)"  # 1 to 15 minutes read in minutes
    assert list(trials.x) == [1.0, 5.0, 2.0, 15.0] and list(trials.customdata) == [1, 2, 3, 4]
    assert list(front.customdata) == [1, 3, 2, 4] and front.line.shape == "hv"  # a step: the best so far
    assert [row[3] for row in chart.rows] == ["yes", "yes", "yes", "yes"]
    assert chart.note.startswith("4 of 4 trials are on the Pareto front")
    slower_and_worse = charts.objective_against_cost(data([0.9, 0.5]), {1: 10, 2: 20})
    assert [row[3] for row in slower_and_worse.rows] == ["yes", ""]
    assert slower_and_worse.figure.layout.xaxis.title.text == "Duration (s)"


def test_trials_without_a_cost_are_left_out():
    chart = charts.objective_against_cost(data([0.5, 0.7]), {1: 30.0}, cost="ML units")
    assert chart.title == "Objective against ML units" and chart.key == "ml-units"
    assert [row[0] for row in chart.rows] == [1]


def trials_output(units_an_hour: list[float]):
    trials, costs = [], {}
    for n, (seconds, value) in enumerate([(60, 0.5), (120, 0.8), (240, 0.7)], start=1):
        trials.append(
            {
                "trialId": str(n),
                "state": "SUCCEEDED",
                "hyperparameters": {"x": str(n / 10)},
                "finalMetric": {"trainingStep": "1", "objectiveValue": value},
            }
        )
        costs[n] = (float(seconds), seconds / 3600 * units_an_hour[n - 1])
    return {"trials": trials}, costs


def test_ml_units_get_their_chart_whenever_the_trials_recorded_them():
    spec = {"params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}]}
    output, costs = trials_output([0, 0, 0])  # recorded none
    drawn = charts.tuning_charts(output, "MAXIMIZE", spec, costs=costs)
    assert drawn[-1].title == "Objective against duration" and "ML units" not in drawn[-1].columns
    # Every trial on the same machines: ML units are the time at a rate, the chart says so (its
    # front is the duration's), and it is there as it is when the rates differ.
    output, costs = trials_output([2, 2, 2.05])
    drawn = charts.tuning_charts(output, "MAXIMIZE", spec, costs=costs)
    assert [c.title for c in drawn[-2:]] == ["Objective against duration", "Objective against ML units"]
    assert drawn[-1].columns == ["Trial", "ML units", "Objective", "On the Pareto front"]
    assert drawn[-1].rows[0][1] == round(60 / 3600 * 2, 6)
    assert "Every trial used 2.02 ML units an hour, so this front is the same as against duration." in drawn[-1].note
    assert "ML units" not in drawn[-2].note and "ML units" not in drawn[-2].columns
    # Trials that used ML units at different rates (as scaled mode's replicas may): the same charts.
    output, costs = trials_output([2, 8, 1])
    drawn = charts.tuning_charts(output, "MAXIMIZE", spec, costs=costs)
    assert [c.title for c in drawn[-2:]] == ["Objective against duration", "Objective against ML units"]
    assert "an hour" not in drawn[-1].note
    assert "Objective against duration" not in [c.title for c in charts.tuning_charts(output, "MAXIMIZE", spec)]


def test_in_proportion_needs_every_trial_at_one_rate():
    assert charts.in_proportion({1: 3600.0, 2: 1800.0}, {1: 2.0, 2: 1.0}) == 2.0
    assert charts.in_proportion({1: 3600.0, 2: 1800.0}, {1: 2.0, 2: 1.2}) is None
    assert charts.in_proportion({1: 3600.0, 2: 1800.0}, {1: 2.0}) is None  # one recorded none
    assert charts.in_proportion({}, {}) is None


def test_the_charts_fragment_draws_cost_from_the_trials_times_and_units(client, project, admin):
    from jobs import services
    from jobs.executor.trials import training_output
    from jobs.models import Job

    spec = {
        "maxTrials": 3,
        "goal": "MINIMIZE",
        "hyperparameterMetricTag": "loss",
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}],
    }
    job = services.submit_job(project, body("costly", hyperparameters=spec), actor=admin)
    end = timezone.now()
    for n, (seconds, loss) in enumerate([(30, 0.4), (90, 0.2), (60, 0.3)], start=1):
        Trial.objects.create(
            job=job,
            trial_id=str(n),
            number=n,
            state=JobState.SUCCEEDED,
            hyperparameters={"x": str(n / 10)},
            start_time=end - datetime.timedelta(seconds=seconds),
            end_time=end,
            consumed_ml_units=seconds / 3600,
            final_metric={"trainingStep": "1", "objectiveValue": loss},
        )
    Trial.objects.create(job=job, trial_id="4", number=4, state=JobState.RUNNING, start_time=end)  # not finished
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, training_output=training_output(job, spec))
    client.force_login(admin)
    fragment = client.get("/projects/project-a/jobs/costly/fragments/charts/", HTTP_HX_REQUEST="true").content.decode()
    assert 'id="chart-cost"' in fragment and 'id="chart-ml-units"' in fragment
    assert "Every trial used 1 ML units an hour" in fragment  # one ML unit an hour each
    figures = [
        json.loads(text)
        for text in re.findall(r'<script type="application/json" class="chart-figure">(.*?)</script>', fragment)
    ]
    duration = next(f for f in figures if f["layout"].get("xaxis", {}).get("title", {}).get("text") == "Duration (s)")
    front = duration["data"][1]["customdata"]  # plotly's typed array: base64 of int8s
    assert list(np.frombuffer(base64.b64decode(front["bdata"]), dtype=front["dtype"])) == [
        1,
        3,
        2,
    ]  # 30 s: 0.4, 60 s: 0.3, 90 s: 0.2 (lower is better)
    assert "2 of 3 trials" not in fragment and "3 of 3 trials are on the Pareto front" in fragment
