"""A study's learning curves as the page's chart controls need them: the intermediate values chart's
wall times and gaps (static/charts.js smooths and times each trial's line on its own), and the
metrics panel drawing every trial's lines, not only the best ones', in a few shared faint traces."""

from __future__ import annotations

import json
import math
import re

import numpy as np

from jobs.metrics import curves
from jobs.models import JobState, MetricPoint, Trial
from jobs.tuning import charts, study
from tests.helpers.jobs import body

WALL = 1_700_000_000.0


def trial(n: int, reports: int = 3, stopped: bool = False) -> dict:
    metrics = [{"trainingStep": str(s), "objectiveValue": n + s / 10} for s in range(1, reports + 1)]
    return {
        "trialId": str(n),
        "state": "SUCCEEDED",
        "finalMetric": metrics[-1],
        "allMetrics": metrics,
        **({"isTrialStoppedEarly": True} if stopped else {}),
    }


def test_intermediate_values_carry_each_reports_wall_time_and_say_where_lines_part():
    trials = [trial(n) for n in range(1, 9)]
    times = {(str(n), s): WALL + 100 * n + s for n in range(1, 9) for s in range(1, 4)}
    del times[("1", 2)]  # a report with no point: no time
    chart = charts.intermediate_values(trials, maximize=True, times=times)
    figure = json.loads(chart.figure_json)
    assert figure["layout"]["meta"] == {"metric": "intermediate"}
    shared = [t for t in chart.figure.data if t.meta.get("gaps")]
    assert len(shared) == 1  # the three worst trials, one faint trace with gaps
    walls = list(shared[0].meta["wall"])  # trial 1's three reports (the second without a time), then a gap
    assert walls[0] == WALL + 101 and math.isnan(walls[1]) and walls[2] == WALL + 103 and math.isnan(walls[3])
    assert len(walls) == len(shared[0].x) and all(
        math.isnan(w) for w, x in zip(walls, shared[0].x, strict=True) if math.isnan(x)
    )
    best = next(t for t in chart.figure.data if t.meta.get("trial") == "8")
    assert list(best.meta["wall"]) == [WALL + 801, WALL + 802, WALL + 803]


def test_intermediate_values_without_times_leave_the_time_axes_out():
    chart = charts.intermediate_values([trial(n) for n in range(1, 3)], maximize=True)
    assert all("wall" not in trace.meta for trace in chart.figure.data)


def rows_of(trial_id: str, values: list[float], tag: str = "loss"):
    return [(tag, trial_id, "", "hypertune", s, v, WALL + 10 * s) for s, v in enumerate(values, start=1)]


def big_study(trials: int = 100):
    rows = [r for t in range(1, trials + 1) for r in rows_of(str(t), [1.0, 1.0 / t, 0.5 / t])]
    objectives = {str(t): float(t) for t in range(1, trials + 1)}
    objectives.pop("1")  # a trial with no result yet
    return rows, curves.Study(objectives, maximize=True, metric="accuracy")


def test_the_metrics_panel_draws_the_best_trials_and_says_how_many_it_left_out():
    rows, scores = big_study()
    (chart,) = curves.metric_charts(rows, study=scores)
    assert chart.beyond_cap == 60 and len([t for t in chart.figure.data if t.meta.get("trial")]) == 40
    assert not any(t.meta.get("faint") for t in chart.figure.data)


def test_every_trial_adds_the_others_as_a_few_faint_traces_under_the_best():
    rows, scores = big_study()
    (chart,) = curves.metric_charts(rows, study=scores, every=True)
    faint = [t for t in chart.figure.data if t.meta.get("faint")]
    own = [t for t in chart.figure.data if t.meta.get("trial")]
    assert len(own) == 40 and 1 < len(faint) <= curves.FAINT_BANDS + 1  # the bands, and grey for no result
    assert chart.figure.data[: len(faint)] == tuple(faint)  # drawn first: under the best trials' lines
    drawn = {int(i) for t in faint for i in t.customdata if i is not None}
    assert drawn == set(range(1, 61))  # every trial past the best 40 is in one
    one = faint[-1]
    assert one.meta["gaps"] and np.isnan(one.x[3]) and one.customdata[3] is None  # lines apart
    assert len(one.meta["wall"]) == len(one.x)
    grey = [t for t in faint if t.line.color == curves.NO_OBJECTIVE_COLOUR]
    assert [int(i) for i in grey[0].customdata if i is not None] == [1, 1, 1]
    assert "Every trial's lines are drawn" in chart.note
    assert {row[0] for row in chart.rows} == {t.name for t in own}  # the table: the best trials' points


def test_a_plain_job_with_many_runs_is_not_a_study_to_show_every_trial_of():
    rows = [("loss", "", f"run{r:02d}", "tfevents", 1, 1.0, WALL) for r in range(50)]
    (chart,) = curves.metric_charts(rows, every=True)
    assert chart.beyond_cap == 0 and len(chart.figure.data) == curves.METRIC_SERIES_MAX


def finished_study(project, admin, trials: int = 45):
    from jobs import services
    from jobs.executor.trials import training_output
    from jobs.models import Job

    spec = {
        "maxTrials": trials,
        "goal": "MAXIMIZE",
        "hyperparameterMetricTag": "accuracy",
        "params": [{"parameterName": "x", "type": "DOUBLE", "minValue": 0, "maxValue": 1}],
    }
    job = services.submit_job(project, body("curvy", hyperparameters=spec), actor=admin)
    points = []
    for n in range(1, trials + 1):
        reports = [{"trainingStep": str(s), "objectiveValue": n / 100 + s / 1000} for s in (1, 2)]
        Trial.objects.create(
            job=job,
            trial_id=str(n),
            number=n,
            state=JobState.SUCCEEDED,
            hyperparameters={"x": str(n / 100)},
            final_metric=reports[-1],
            all_metrics=reports,
        )
        for s, report in enumerate(reports, start=1):
            wall = WALL + 60 * n + s
            points.append(
                MetricPoint(
                    job=job, trial_id=str(n), source="tfevents", tag="accuracy", step=s, value=0, wall_time=wall + 5
                )
            )
            points.append(
                MetricPoint(
                    job=job,
                    trial_id=str(n),
                    source="hypertune",
                    tag="accuracy",
                    step=s,
                    value=report["objectiveValue"],
                    wall_time=wall,
                )
            )
    MetricPoint.objects.bulk_create(points)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, training_output=training_output(job, spec))
    return job


def test_report_times_prefer_the_hypertune_report(project, admin):
    job = finished_study(project, admin, trials=2)
    assert study.report_times(job) == {
        ("1", 1): WALL + 61,
        ("1", 2): WALL + 62,
        ("2", 1): WALL + 121,
        ("2", 2): WALL + 122,
    }


def test_the_learning_curves_chart_has_the_metric_charts_controls(client, project, admin):
    finished_study(project, admin, trials=12)
    client.force_login(admin)
    fragment = client.get("/projects/project-a/jobs/curvy/fragments/charts/", HTTP_HX_REQUEST="true").content.decode()
    figure = re.search(r'<figure class="chart controlled-chart" id="chart-intermediate">(.*?)</figure>', fragment, re.S)
    assert 'data-chart-controls="intermediate"' in figure.group(1)
    assert fragment.count("controlled-chart") == 1  # only the learning curves


def test_the_metrics_panel_offers_every_trial_and_keeps_it_in_its_refresh(client, project, admin, outsider):
    finished_study(project, admin)
    client.force_login(admin)
    panel = client.get("/projects/project-a/jobs/curvy/metrics/").content.decode()
    assert 'data-lines="best"' in panel
    button = re.search(r"<button[^>]*data-every-trial[^>]*>Show every trial</button>", panel).group(0)
    assert 'aria-pressed="false"' in button and 'hx-get="/projects/project-a/jobs/curvy/metrics/?lines=all"' in button
    every = client.get("/projects/project-a/jobs/curvy/metrics/?lines=all").content.decode()
    assert 'data-lines="all"' in every and "Every trial&#x27;s lines are drawn" in every
    button = re.search(r"<button[^>]*data-every-trial[^>]*>", every).group(0)
    assert 'aria-pressed="true"' in button and 'hx-get="/projects/project-a/jobs/curvy/metrics/"' in button
    # The page opens the panel as its address says (static/charts.js keeps ?metric_lines=all there).
    page = client.get("/projects/project-a/jobs/curvy/?metric_lines=all").content.decode()
    assert 'hx-get="/projects/project-a/jobs/curvy/metrics/?lines=all"' in page
    client.force_login(outsider)
    assert client.get("/projects/project-a/jobs/curvy/metrics/?lines=all").status_code == 404


def test_a_small_study_has_nothing_more_to_show(client, project, admin):
    finished_study(project, admin, trials=5)
    client.force_login(admin)
    panel = client.get("/projects/project-a/jobs/curvy/metrics/").content.decode()
    assert "data-every-trial" not in panel and "data-lines" not in panel
