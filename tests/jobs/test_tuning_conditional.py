"""What a Vertex AI study adds to the tuner: conditional parameters (sampled define-by-run, expanded
in a grid only under the parent values that activate them) and the measurement selection."""

from __future__ import annotations

import json

from jobs.tuning import search as tuning
from jobs.tuning.search import TrialRecord

OPTIMIZER = {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]}
MOMENTUM = {
    "parameterName": "momentum",
    "type": "DISCRETE",
    "discreteValues": [0.5, 0.9],
    "condition": {"parent": "optimizer", "values": ["sgd"]},
}
LAYERS = {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 3}
BETA = {
    "parameterName": "beta",
    "type": "DOUBLE",
    "minValue": 0.8,
    "maxValue": 0.999,
    "condition": {"parent": "optimizer", "values": ["adam"]},
}


def spec(*params, **fields) -> dict:
    return {"goal": "MAXIMIZE", "maxTrials": 40, "params": list(params), **fields}


def test_a_grid_expands_a_conditional_parameter_only_under_its_parent_values():
    points = tuning.grid(spec(OPTIMIZER, MOMENTUM, LAYERS, algorithm="GRID_SEARCH"))
    # adam × 3 layers, sgd × 2 momentums × 3 layers: the parent still varies slowest
    assert len(points) == tuning.grid_size(spec(OPTIMIZER, MOMENTUM, LAYERS)) == 3 + 6
    assert points[0] == {"optimizer": "adam", "layers": "1"}
    assert points[3] == {"optimizer": "sgd", "momentum": "0.5", "layers": "1"}
    assert len({json.dumps(p, sort_keys=True) for p in points}) == 9


def test_suggestions_carry_a_child_exactly_when_its_parent_activates_it():
    for algorithm in ("RANDOM_SEARCH", "ALGORITHM_UNSPECIFIED"):
        study = spec(OPTIMIZER, MOMENTUM, BETA, LAYERS, algorithm=algorithm)
        history = []
        for round_ in range(6):
            for values in tuning.suggest(study, history, 4, seed=round_):
                assert ("momentum" in values) == (values["optimizer"] == "sgd")
                assert ("beta" in values) == (values["optimizer"] == "adam")
                assert 1 <= int(values["layers"]) <= 3
                history.append(TrialRecord(values, "SUCCEEDED", objective=float(values["layers"])))
        assert {r.hyperparameters["optimizer"] for r in history} == {"adam", "sgd"}


def test_a_conditional_space_is_searched_by_tpe_not_the_gp():
    numeric_child = dict(BETA, condition={"parent": "layers", "values": ["2"]})
    assert tuning.sampler_name(spec(LAYERS, numeric_child)) == "tpe"
    assert tuning.sampler_name(spec(LAYERS, {k: v for k, v in BETA.items() if k != "condition"})) == "gp"


def test_the_study_learns_from_trials_that_lack_an_inactive_child():
    study = spec(OPTIMIZER, MOMENTUM)
    history = [
        TrialRecord({"optimizer": "adam"}, "SUCCEEDED", objective=0.5),
        TrialRecord({"optimizer": "sgd", "momentum": "0.9"}, "SUCCEEDED", objective=0.7),
    ]
    assert len(tuning.build_study(study, history).trials) == 2
    # an active child missing (a different space): left out, as a resumed job's foreign trials are
    assert len(tuning.build_study(study, [TrialRecord({"optimizer": "sgd"}, "SUCCEEDED", 0.1)]).trials) == 0


def test_best_measurement_takes_the_best_report_for_the_goal_and_last_the_last():
    reports = [
        {"trainingStep": "1", "objectiveValue": 0.3},
        {"trainingStep": "2", "objectiveValue": 0.9},
        {"trainingStep": "3", "objectiveValue": 0.6},
    ]
    assert tuning.final_report(spec(OPTIMIZER), reports)["trainingStep"] == "3"
    best = spec(OPTIMIZER, measurementSelection="BEST_MEASUREMENT")
    assert tuning.final_report(best, reports)["trainingStep"] == "2"
    lowest = {**best, "goal": "MINIMIZE"}
    assert tuning.final_report(lowest, reports)["trainingStep"] == "1"
    assert tuning.final_report(best, []) is None
