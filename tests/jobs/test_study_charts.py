"""The study page's contour, learning curves and parameter importance: pure builders, no database."""

from __future__ import annotations

import json
import math
import re

import pytest

from jobs.metrics import charts as chart_base
from jobs.tuning import charts

SPEC = {
    "goal": "MAXIMIZE",
    "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 1.0, "scaleType": "UNIT_LOG_SCALE"},
        {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 8, "scaleType": "UNIT_LINEAR_SCALE"},
        {"parameterName": "noise", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0},
    ],
}


def study(count: int) -> list[dict]:
    """Trials whose objective depends mostly on lr, a little on layers, not on noise."""
    trials = []
    for n in range(1, count + 1):
        lr = 10 ** (-3 + 3 * ((n * 0.618) % 1))
        layers = 1 + (n * 3) % 8
        noise = (n * 0.377) % 1
        objective = -((math.log10(lr) + 1.5) ** 2) + 0.02 * layers + 0.0 * noise
        trials.append(
            {
                "trialId": str(n),
                "state": "SUCCEEDED",
                "hyperparameters": {"lr": repr(lr), "layers": str(layers), "noise": repr(noise)},
                "finalMetric": {"trainingStep": "3", "objectiveValue": objective},
                "allMetrics": [
                    {"trainingStep": str(s), "objectiveValue": objective - 0.1 * (3 - s)} for s in (1, 2, 3)
                ],
            }
        )
    return trials


def test_contour_uses_log_axes_for_log_scaled_parameters_and_lists_every_trial():
    data = charts.points(study(30))
    chart = charts.contour_plot(data, "lr", "layers", log={"lr"})
    assert chart.key == "contour" and chart.title == "Contour: lr × layers"
    assert chart.figure.layout.xaxis.type == "log" and chart.figure.layout.yaxis.type != "log"
    contour, markers = chart.figure.data
    assert contour.type == "contour" and contour.connectgaps
    assert len(contour.z) == charts.CONTOUR_CELLS and all(len(row) == charts.CONTOUR_CELLS for row in contour.z)
    assert min(contour.x) >= 0.001 * 0.99 and max(contour.x) <= 1.0  # cell centres back on the value axis
    assert len(markers.x) == 30 and chart.columns == ["Trial", "lr", "layers", "Objective"]
    assert [row[0] for row in chart.rows] == list(range(1, 31))


def test_contour_with_categorical_axis_and_too_few_points_shows_only_the_trials():
    data = [
        {"trial": 1, "objective": 0.5, "params": {"opt": "adam", "x": "1"}},
        {"trial": 2, "objective": 0.7, "params": {"opt": "sgd", "x": "2"}},
    ]
    chart = charts.contour_plot(data, "opt", "x")
    assert [trace.type for trace in chart.figure.data] == ["scatter"]
    assert chart.figure.layout.xaxis.ticktext == ("adam", "sgd")


def test_intermediate_values_draw_the_best_trials_in_colour_and_the_rest_faint():
    trials = study(8)
    trials[1]["isTrialStoppedEarly"] = True
    trials[1]["finalMetric"]["objectiveValue"] = -100.0  # the worst: a faint line
    trials.append({"trialId": "9", "state": "FAILED", "hyperparameters": {}})  # no reports: no line
    finals = {t["trialId"]: t["finalMetric"]["objectiveValue"] for t in trials if t.get("finalMetric")}
    best_five = sorted(finals, key=lambda trial_id: -finals[trial_id])[:5]

    chart = charts.intermediate_values(trials, maximize=True)

    faint = [trace for trace in chart.figure.data if trace.meta.get("gaps")]  # the shared traces of many lines
    coloured = [trace for trace in chart.figure.data if "trial" in trace.meta]
    assert [trace.meta["trial"] for trace in coloured] == best_five  # best first, one legend entry each
    assert coloured[0].name == f"Trial {best_five[0]} (best)" and coloured[0].line.width == 3
    assert all(trace.opacity < 1 for trace in faint)
    others = {int(t) for t in finals} - {int(t) for t in best_five}
    drawn = {c for trace in faint for c in trace.customdata if c is not None}
    assert drawn == others  # every other trial is a faint line, each point naming its trial
    stopped = [trace for trace in faint if trace.line.dash == "dot"]
    assert len(stopped) == 1 and set(stopped[0].customdata) - {None} == {2}
    steps = [None if math.isnan(x) else x for x in faint[0].x]
    assert steps[:4] == [1, 2, 3, None]  # gaps split the trials' lines
    assert [row[:4] for row in chart.rows][:2] == [[1, "SUCCEEDED", "no", 3], [2, "SUCCEEDED", "yes", 3]]
    assert "best 5 trials" in chart.note


def test_intermediate_values_of_a_minimizing_study_colour_its_lowest_trials():
    trials = study(8)
    finals = {t["trialId"]: t["finalMetric"]["objectiveValue"] for t in trials}
    chart = charts.intermediate_values(trials, maximize=False)
    coloured = [trace.meta["trial"] for trace in chart.figure.data if "trial" in trace.meta]
    assert coloured == sorted(finals, key=lambda trial_id: finals[trial_id])[:5]


def test_importance_ranks_the_parameter_that_matters_first():
    data = charts.points(study(40))
    scores = charts.importances(SPEC, data, maximize=True)
    assert set(scores) == {"lr", "layers", "noise"}
    assert next(iter(scores)) == "lr" and scores["lr"] > scores["noise"]
    chart = charts.parameter_importance(scores, len(data))
    assert chart.key == "importance" and chart.rows[0][0] == "lr"
    assert chart.figure.data[0].orientation == "h"


def test_importance_names_its_evaluator_so_optuna_4s_fanova_default_is_never_used(monkeypatch):
    import optuna

    real = optuna.importance.get_param_importances

    def like_optuna_4(study, *, evaluator=None, **kwargs):
        if evaluator is None:  # Optuna 4.x's default, fANOVA, imports scikit-learn
            raise ImportError("Tried to import 'sklearn' but failed.")
        return real(study, evaluator=evaluator, **kwargs)

    monkeypatch.setattr(optuna.importance, "get_param_importances", like_optuna_4)

    scores = charts.importances(SPEC, charts.points(study(40)), maximize=True)

    assert next(iter(scores)) == "lr"


def test_importance_waits_for_enough_trials():
    data = charts.points(study(charts.IMPORTANCE_MIN_TRIALS - 1))
    assert charts.importances(SPEC, data) == {}
    chart = charts.parameter_importance({}, len(data))
    assert chart.figure is None and chart.html == "" and chart.rows == []
    assert f"{len(data)} so far" in chart.note


@pytest.mark.parametrize(
    ("chosen", "expected"),
    [
        (("noise", "layers"), ("noise", "layers")),
        (("lr", "lr"), ("lr", "layers")),  # the same parameter twice: fall back
        (("lr", "missing"), ("lr", "layers")),
        (None, ("lr", "layers")),
    ],
)
def test_contour_pair_is_the_users_choice_or_the_two_most_important(chosen, expected):
    scores = {"lr": 0.7, "layers": 0.2, "noise": 0.1}
    assert charts.contour_pair(["noise", "layers", "lr"], scores, chosen) == expected


def test_contour_pair_without_importance_takes_the_first_two_declared():
    assert charts.contour_pair(["a", "b", "c"], {}, None) == ("a", "b")
    assert charts.contour_pair(["a"], {}, None) is None


def test_study_charts_with_a_spec_add_contour_curves_importance_and_log_slices():
    built = charts.tuning_charts({"trials": study(12)}, "MAXIMIZE", SPEC)
    assert [c.key for c in built][-3:] == ["contour", "intermediate", "importance"]
    slices = {c.title: c for c in built if c.title.startswith("Slice")}
    assert slices["Slice: lr"].figure.layout.xaxis.type == "log"
    assert slices["Slice: layers"].figure.layout.xaxis.type != "log"
    chosen = charts.tuning_charts({"trials": study(12)}, "MAXIMIZE", SPEC, contour=("noise", "lr"))
    assert next(c for c in chosen if c.key == "contour").title == "Contour: noise × lr"


def test_parallel_coordinates_put_log_scaled_parameters_on_a_log_axis_labelled_with_values():
    built = charts.tuning_charts({"trials": study(30)}, "MAXIMIZE", SPEC)
    lr, layers, noise, objective = built[1].spec["axes"]
    assert lr["label"] == "lr (log)" and layers["label"] == "layers" and objective["label"] == "Objective"
    # Each axis says which trial-table column it is, so that brushing it filters the table by it.
    assert [a["key"] for a in (lr, layers, noise, objective)] == ["p.lr", "p.layers", "p.noise", "objective"]
    assert lr["log"] is True and "log" not in layers
    # Ticks within the trials' range (0.00126 to 0.86), and equal ratios at equal distances.
    assert [text for _, text in lr["ticks"]] == ["0.002", "0.005", "0.01", "0.02", "0.05", "0.1", "0.2", "0.5"]
    positions = [value for value, _ in lr["ticks"]]
    assert positions[5] - positions[2] == pytest.approx(1.0)
    assert positions[2] - positions[0] == pytest.approx(math.log10(5))
    lrs = [float(t["hyperparameters"]["lr"]) for t in study(30)]
    assert lr["values"] == pytest.approx([math.log10(v) for v in lrs])
    assert noise["values"][0] == pytest.approx(0.377)
    # The data table keeps the values as the trainer got them.
    assert built[1].rows[0][1] == repr(lrs[0])


def test_parallel_coordinates_put_a_categorical_parameter_on_an_axis_of_its_values():
    chart = chart_base.parallel_coordinates(
        [{"trial": n, "objective": 0.1 * n, "params": {"opt": o}} for n, o in enumerate(["sgd", "adam", "sgd"], 1)]
    )
    opt = chart.spec["axes"][0]
    assert opt["categories"] == ["adam", "sgd"] and opt["values"] == [1, 0, 1]
    assert opt["ticks"] == [[0, "adam"], [1, "sgd"]]


def test_parallel_coordinates_colour_the_best_trials_highest_whichever_the_goal():
    # The highest colour is drawn in front, in the colour that stands out: the best trials must have it.
    objectives = [t["finalMetric"]["objectiveValue"] for t in study(30)]
    up = charts.tuning_charts({"trials": study(30)}, "MAXIMIZE", SPEC)[1].spec
    assert up["best"] == "high" and up["color"] == objectives  # static/parallel.js colours that end
    down = charts.tuning_charts({"trials": study(30)}, "MINIMIZE", SPEC)[1].spec
    assert down["best"] == "high" and down["color"] == [-v for v in objectives]
    assert down["axes"][-1]["values"] == objectives  # the objective's axis reads as it is
    ticks = [float(text) for _, text in down["colorbar"]]  # and so does the colour bar
    assert [-value for value, _ in down["colorbar"]] == pytest.approx(ticks)
    assert min(objectives) <= ticks[0] < ticks[-1] <= max(objectives)
    # The compare page's chosen metric has no goal: coloured by the metric itself.
    plain = chart_base.parallel_coordinates(
        [{"trial": n, "objective": v, "params": {"x": "1"}} for n, v in enumerate([0.3, 0.1, 0.2], 1)]
    )
    assert "best" not in plain.spec and plain.spec["color"] == [0.3, 0.1, 0.2]


def test_parallel_coordinates_are_json_that_no_value_can_break_out_of():
    chart = chart_base.parallel_coordinates(
        [{"trial": n, "objective": 0.5, "params": {"x": f"</script><b>{n}&"}} for n in (1, 2)]
    )
    data = re.search(
        r'<script type="application/json" class="chart-figure" data-chart="parallel">(.*?)</script>', chart.html
    )
    assert data and "<" not in data.group(1) and "&" not in data.group(1)
    assert json.loads(data.group(1))["axes"][0]["categories"] == ["</script><b>1&", "</script><b>2&"]
    assert chart.drawn().html == chart.html  # kept as drawn, for a finished study


def test_log_ticks_fall_back_to_the_ends_within_a_narrow_range_and_to_decades_over_a_wide_one():
    assert chart_base._log_ticks(0.3, 0.4) == [0.3, 0.4]
    assert chart_base._log_ticks(1e-6, 1.0) == [1e-6, 1e-5, 1e-4, 1e-3, 1e-2, 1e-1, 1.0]


def test_a_large_studys_parallel_coordinates_draw_its_best_trials_and_a_spread_of_the_rest():
    data = charts.points(study(1000))
    sample = charts.parallel_sample(data, maximize=True)
    assert len(sample) == charts.PARALLEL_LINES
    trials = [p["trial"] for p in sample]
    assert trials == sorted(trials) and len(set(trials)) == len(trials)
    best = sorted(data, key=lambda p: -p["objective"])[: charts.PARALLEL_LINES // 2]
    assert {p["trial"] for p in best} <= set(trials)
    others = sorted(set(trials) - {p["trial"] for p in best})
    assert others[0] < 50 and others[-1] > 950  # spread over the whole study, not its first trials
    drawn = charts.tuning_charts({"trials": study(1000)}, "MAXIMIZE", SPEC)
    parallel = next(c for c in drawn if c.key == "parallel")
    assert len(parallel.rows) == charts.PARALLEL_LINES
    assert parallel.note.startswith("300 of 1,000 trials drawn: the best 150")
    # Every trial where the user asks for them, and always where there are few.
    drawn = charts.tuning_charts({"trials": study(1000)}, "MAXIMIZE", SPEC, every_line=True)
    parallel = next(c for c in drawn if c.key == "parallel")
    assert len(parallel.rows) == 1000 and parallel.note == ""
    small = next(c for c in charts.tuning_charts({"trials": study(30)}, "MAXIMIZE", SPEC) if c.key == "parallel")
    assert len(small.rows) == 30 and small.note == ""
    minimized = charts.parallel_sample(data, maximize=False)
    lowest = sorted(data, key=lambda p: p["objective"])[: charts.PARALLEL_LINES // 2]
    assert {p["trial"] for p in lowest} <= {p["trial"] for p in minimized}
