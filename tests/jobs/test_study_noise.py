"""How noisy a study's objective is (``jobs.tuning.noise``): from repeated trials, else from the best
trials' last reports, and nothing where the study holds no basis for it."""

from __future__ import annotations

import math

import pytest

from jobs.tuning import noise

SPEC = {
    "params": [
        {"parameterName": "lr", "type": "DOUBLE", "minValue": 1e-4, "maxValue": 1e-1, "scaleType": "UNIT_LOG_SCALE"},
        {"parameterName": "units", "type": "INTEGER", "minValue": 1, "maxValue": 100},
        {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]},
    ]
}


def result(trial: int, lr: float, units: int, objective: float, optimizer: str = "adam", reports=()) -> noise.Result:
    steps = [{"trainingStep": str(100 * (s + 1)), "objectiveValue": v} for s, v in enumerate(reports)]
    return noise.Result(str(trial), {"lr": lr, "units": units, "optimizer": optimizer}, objective, steps)


def test_same_or_near_parameters_on_their_scale_are_one_group_of_repeats():
    results = [
        result(1, 0.01, 50, 0.80),
        result(2, 0.01, 50, 0.82),  # the same
        result(3, 0.01001, 50, 0.81),  # 0.1 % more lr is 0.014 % of the log range: near
        result(4, 0.01001, 50, 0.81, optimizer="sgd"),  # another optimizer: apart
        result(5, 0.0101, 50, 0.70),  # 1 % more lr is 0.14 % of the log range: apart
        result(6, 0.01, 51, 0.70),  # 1 more unit is 1 % of the range: apart
    ]
    groups = [[r.trial for r in group] for group in noise.repeats(SPEC, results)]
    assert sorted(groups) == [["1", "2", "3"], ["4"], ["5"], ["6"]]


def test_the_noise_of_repeats_is_their_pooled_standard_deviation_and_says_so():
    results = [
        result(1, 0.01, 50, 0.80),
        result(2, 0.01, 50, 0.84),
        result(3, 0.05, 10, 0.60),
        result(4, 0.05, 10, 0.62),
        result(5, 0.05, 10, 0.64),
        result(6, 0.001, 90, 0.50),
    ]
    found = noise.estimate(SPEC, results)
    # Squares around each group's mean: 0.0008 (one degree of freedom) + 0.0008 (two).
    assert found.source == "repeats" and found.sigma == pytest.approx(math.sqrt(0.0016 / 3))
    assert found.margin == pytest.approx(2 * found.sigma)
    assert found.how == "the spread of repeated trials (2 groups of trials with the same parameters, 5 trials)"
    assert found.within(0.80, 0.84) and not found.within(0.75, 0.84)


def test_without_repeats_the_best_trials_last_reports_give_the_noise():
    wiggle = [0.0, 0.01, -0.01, 0.01, -0.01]
    results = [
        # A rising curve with a wiggle of ±0.01 on it: the rise is no noise, the wiggle is.
        result(n, 10 ** (-4 + n / 4), n * 7, 0.9 - n / 100, reports=[0.5 + 0.01 * s + w for s, w in enumerate(wiggle)])
        for n in range(1, 8)
    ]
    found = noise.estimate(SPEC, results)
    assert found.source == "steps" and found.groups == 5  # the best five (of seven) trials
    # Reports 0.5, 0.52, 0.51, 0.54, 0.53: differences 0.02, -0.01, 0.03, -0.01, whose squares
    # around their mean (0.0075) sum to 0.001275 over three degrees of freedom; one report varies half as much.
    assert found.sigma == pytest.approx(math.sqrt(0.001275 / 3 / 2))
    assert found.how == "the step-to-step variation of the last 5 reported values of the 5 best trials"


def test_a_straight_rising_curve_has_no_step_to_step_noise():
    results = [result(n, 10 ** (-4 + n / 4), n * 7, 0.5, reports=[0.1 * s for s in range(10)]) for n in range(1, 8)]
    assert noise.from_steps(results).sigma == pytest.approx(0.0, abs=1e-12)
    assert noise.estimate(SPEC, results) is None  # a noise of 0 is no band


def test_no_repeats_and_no_reports_is_no_basis():
    results = [result(n, 10 ** (-4 + n / 4), n * 7, 0.5 + n / 100, reports=[0.5 + n / 100]) for n in range(1, 12)]
    assert noise.estimate(SPEC, results) is None
    assert noise.estimate(SPEC, []) is None


def test_the_apis_trials_are_read_in_trial_order_and_only_those_that_ran_to_the_end():
    trials = [
        {
            "trialId": "10",
            "state": "SUCCEEDED",
            "hyperparameters": {"lr": "0.01"},
            "finalMetric": {"objectiveValue": 1},
        },
        {
            "trialId": "2",
            "state": "SUCCEEDED",
            "hyperparameters": {"lr": "0.01"},
            "finalMetric": {"trainingStep": "2", "objectiveValue": 0.5},
            "allMetrics": [
                {"trainingStep": "2", "objectiveValue": 0.5},
                {"trainingStep": "1", "objectiveValue": 0.25},
            ],
        },
        {"trialId": "3", "state": "SUCCEEDED", "isTrialStoppedEarly": True, "finalMetric": {"objectiveValue": 0.1}},
        {"trialId": "4", "state": "FAILED"},
    ]
    read = noise.results_of(trials)
    assert [(r.trial, r.objective, noise.reported(r.reports)) for r in read] == [
        ("2", 0.5, (0.25, 0.5)),  # in step order
        ("10", 1.0, ()),
    ]
