"""Hyperparameter tuning, the pure parts: grid, sampling scales, types, pruning, metric files."""

from __future__ import annotations

import json
import math
import statistics

from jobs.tuning import search as tuning
from jobs.tuning.search import TrialRecord


def spec(*params, **fields) -> dict:
    return {"goal": "MAXIMIZE", "maxTrials": 10, "params": list(params), **fields}


def double(name="lr", low=0.001, high=1.0, scale="UNIT_LINEAR_SCALE"):
    return {"parameterName": name, "type": "DOUBLE", "minValue": low, "maxValue": high, "scaleType": scale}


def test_grid_enumerates_every_combination_exactly():
    grid_spec = spec(
        {"parameterName": "depth", "type": "INTEGER", "minValue": 2, "maxValue": 4},
        {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
        {"parameterName": "rate", "type": "DISCRETE", "discreteValues": [0.5, 1, 2.25]},
        algorithm="GRID_SEARCH",
        maxTrials=100,
    )
    points = tuning.grid(grid_spec)
    assert len(points) == tuning.grid_size(grid_spec) == 3 * 2 * 3
    assert len({json.dumps(p, sort_keys=True) for p in points}) == 18
    assert points[0] == {"depth": "2", "optimizer": "adam", "rate": "0.5"}
    assert {p["rate"] for p in points} == {"0.5", "1", "2.25"}
    assert {p["depth"] for p in points} == {"2", "3", "4"}


def test_grid_suggestions_skip_tried_points_and_run_out():
    grid_spec = spec(
        {"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 3}, algorithm="GRID_SEARCH", maxTrials=10
    )
    first = tuning.suggest(grid_spec, [], 2)
    assert first == [{"n": "1"}, {"n": "2"}]
    history = [TrialRecord(point, "SUCCEEDED", 1.0) for point in first]
    assert tuning.suggest(grid_spec, history, 5) == [{"n": "3"}]
    history.append(TrialRecord({"n": "3"}, "RUNNING"))
    assert tuning.suggest(grid_spec, history, 5) == []


def _random_values(param: dict, count: int = 400) -> list[float]:
    random_spec = spec(param, algorithm="RANDOM_SEARCH", maxTrials=count)
    suggestions = tuning.suggest(random_spec, [], count, seed=7)
    return [float(s[param["parameterName"]]) for s in suggestions]


def test_random_search_samples_log_scale_uniformly_in_log_space():
    values = _random_values(double(low=1e-4, high=1.0, scale="UNIT_LOG_SCALE"))
    assert all(1e-4 <= v <= 1.0 for v in values)
    logs = [math.log10(v) for v in values]
    # Uniform on [-4, 0] in log space: a quarter of the values in each decade.
    assert abs(statistics.mean(logs) - (-2.0)) < 0.2
    below = sum(1 for v in values if v < 1e-3) / len(values)
    assert 0.18 < below < 0.32


def test_random_search_reverse_log_scale_crowds_the_top_of_the_range():
    values = _random_values(double(low=0.0001, high=1.0, scale="UNIT_REVERSE_LOG_SCALE"))
    assert all(0.0001 <= v <= 1.0 for v in values)
    near_top = sum(1 for v in values if v > 0.999) / len(values)
    assert 0.18 < near_top < 0.32  # the mirror image of the log scale's lowest decade
    assert statistics.median(values) > 0.9


def test_random_search_linear_scale_is_uniform():
    values = _random_values(double(low=0.0, high=10.0))
    assert abs(statistics.mean(values) - 5.0) < 0.5


def test_suggestions_obey_types_and_bounds():
    mixed = spec(
        {"parameterName": "max-depth", "type": "INTEGER", "minValue": 1, "maxValue": 5},
        {"parameterName": "max_rate", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.2},
        {"parameterName": "kind", "type": "CATEGORICAL", "categoricalValues": ["a", "b c"]},
        {"parameterName": "size", "type": "DISCRETE", "discreteValues": [8, 16, 32.5]},
        {"parameterName": "n", "type": "INTEGER", "minValue": 1, "maxValue": 1000, "scaleType": "UNIT_LOG_SCALE"},
    )
    history: list[TrialRecord] = []
    for index in range(12):  # past TPE's random start-up trials
        (point,) = tuning.suggest(mixed, history, 1, seed=index)
        assert list(point) == ["max-depth", "max_rate", "kind", "size", "n"]
        assert point["max-depth"] in {"1", "2", "3", "4", "5"}
        assert 0.1 <= float(point["max_rate"]) <= 0.2
        assert point["kind"] in {"a", "b c"}
        assert point["size"] in {"8", "16", "32.5"}
        assert 1 <= int(point["n"]) <= 1000
        history.append(TrialRecord(point, "SUCCEEDED", float(point["max_rate"])))


def test_bayesian_default_moves_toward_the_optimum():
    quadratic = spec(double("x", -5.0, 5.0), goal="MINIMIZE", maxTrials=30)
    history: list[TrialRecord] = []
    for index in range(30):
        (point,) = tuning.suggest(quadratic, history, 1, seed=index)
        x = float(point["x"])
        history.append(TrialRecord(point, "SUCCEEDED", (x - 2.0) ** 2))
    late = [float(r.hyperparameters["x"]) for r in history[-10:]]
    assert statistics.median(abs(x - 2.0) for x in late) < 1.0


def test_goal_and_sampler_choice():
    assert tuning.direction({"goal": "GOAL_TYPE_UNSPECIFIED"}) == "maximize"
    assert tuning.direction({}) == "maximize"
    assert tuning.direction({"goal": "MINIMIZE"}) == "minimize"
    assert tuning.sampler_name(spec(double(), algorithm="RANDOM_SEARCH")) == "random"
    categorical = spec({"parameterName": "k", "type": "CATEGORICAL", "categoricalValues": ["a"]})
    assert tuning.sampler_name(categorical) == "tpe"
    assert tuning.sampler_name(spec(double(), maxTrials=500)) == "tpe"


def test_parallel_trials_are_capped_by_max_trials_and_capacity():
    assert tuning.parallel_trials({"maxParallelTrials": 5, "maxTrials": 3}, 1, 16) == 3
    assert tuning.parallel_trials({"maxParallelTrials": 5, "maxTrials": 10}, 4, 10) == 2
    assert tuning.parallel_trials({"maxParallelTrials": 5, "maxTrials": 10}, 40, 10) == 1


def test_failure_limits():
    assert tuning.too_many_failures({"maxFailedTrials": 2, "maxTrials": 10}, ["FAILED"]) is None
    assert "maxFailedTrials" in tuning.too_many_failures(
        {"maxFailedTrials": 2, "maxTrials": 10}, ["SUCCEEDED", "FAILED", "FAILED"]
    )
    decide = {"maxTrials": 10}
    assert tuning.too_many_failures(decide, ["FAILED", "FAILED"]) is None
    assert "first 3" in tuning.too_many_failures(decide, ["FAILED"] * 3)
    assert tuning.too_many_failures(decide, ["SUCCEEDED"] + ["FAILED"] * 5) is None
    assert tuning.too_many_failures(decide, ["SUCCEEDED"] + ["FAILED"] * 6)
    assert "first 1 trial" in tuning.too_many_failures({"maxTrials": 1}, ["FAILED"])


def _curve(x: str, values: list[float], state: str = "SUCCEEDED") -> TrialRecord:
    return TrialRecord({"x": x}, state, values[-1], dict(enumerate(values, 1)))


def test_median_pruner_stops_a_trial_that_falls_behind():
    pruned = spec(double("x", 0.0, 1.0), enableTrialEarlyStopping=True)
    finished = [_curve("0.1", [5, 6, 7]), _curve("0.2", [6, 7, 8]), _curve("0.3", [5, 7, 9])]
    assert tuning.should_stop_early(pruned, finished, _curve("0.4", [1, 2], "RUNNING"))
    assert not tuning.should_stop_early(pruned, finished, _curve("0.4", [9, 9], "RUNNING"))
    assert not tuning.should_stop_early(pruned, finished[:2], _curve("0.4", [1, 2], "RUNNING"))
    assert not tuning.should_stop_early(
        {**pruned, "enableTrialEarlyStopping": False}, finished, _curve("0.4", [1, 2], "RUNNING")
    )
    assert tuning.early_stopping({"enableTrialEarlyStopping": "TRUE"})


def test_metric_file_parsing_keeps_the_tag_and_skips_torn_lines():
    lines = [
        {"checkpoint_path": "", "global_step": "10", "my tag": "0.5", "timestamp": 1.0, "trial": "1"},
        {"checkpoint_path": "", "global_step": "20", "other": "0.9", "timestamp": 2.0, "trial": "1"},
        {"checkpoint_path": "", "global_step": "30", "my tag": "0.75", "timestamp": 3.0, "trial": "1"},
    ]
    text = "\n".join(json.dumps(line, sort_keys=True) for line in lines) + '\n{"global_st'
    reports = tuning.parse_metric_file(text, "my tag")
    assert [(r["trainingStep"], r["objectiveValue"]) for r in reports] == [("10", 0.5), ("30", 0.75)]
    merged = tuning.merge_reports(reports[:1], reports)
    assert len(merged) == 2
    assert tuning.intermediate_values(merged) == {10: 0.5, 30: 0.75}


def test_resumed_records_outside_the_spec_are_ignored():
    narrow = spec(double("x", 0.0, 1.0))
    history = [
        TrialRecord({"x": "5.0"}, "SUCCEEDED", 1.0),
        TrialRecord({"y": "0.5"}, "SUCCEEDED", 1.0),
        TrialRecord({"x": "0.5"}, "SUCCEEDED", 1.0),
    ]
    assert len(tuning.build_study(narrow, history).trials) == 1


# --- charts ------------------------------------------------------------------------------------

TRIALS = [
    {
        "trialId": "2",
        "hyperparameters": {"x": "3.0", "opt": "sgd"},
        "finalMetric": {"trainingStep": "1", "objectiveValue": 0.9},
    },
    {
        "trialId": "1",
        "hyperparameters": {"x": "1.0", "opt": "adam"},
        "finalMetric": {"trainingStep": "1", "objectiveValue": 0.5},
    },
    {"trialId": "3", "hyperparameters": {"x": "2.0", "opt": "adam"}, "state": "FAILED"},
    {
        "trialId": "4",
        "hyperparameters": {"x": "2.5", "opt": "adam"},
        "finalMetric": {"trainingStep": "1", "objectiveValue": 0.7},
    },
]


def test_charts_plot_results_with_matching_tables():
    from jobs.tuning import charts

    built = charts.tuning_charts({"trials": TRIALS}, "MAXIMIZE")
    assert [c.title for c in built] == ["Optimization history", "Parallel coordinates", "Slice: x", "Slice: opt"]
    history = built[0]
    assert history.rows == [[1, 0.5, 0.5], [2, 0.9, 0.9], [4, 0.7, 0.9]]
    assert list(history.figure.data[1].y) == [0.5, 0.9, 0.9]
    assert charts.best_so_far([3, 1, 2], maximize=False) == [3, 1, 1]
    axes = {axis["label"]: axis for axis in built[1].spec["axes"]}  # drawn as SVG by static/parallel.js
    assert axes["opt"]["categories"] == ["adam", "sgd"] and axes["Objective"]["key"] == "objective"
    assert built[2].rows == [[1, "1.0", 0.5], [2, "3.0", 0.9], [4, "2.5", 0.7]]
    assert "cdn" not in history.html.lower() and "<div" in history.html
    assert charts.tuning_charts({"trials": []}, "MAXIMIZE") == []
