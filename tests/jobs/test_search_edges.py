"""The edge of a study's search space: which parameter's best trials sit at a bound, on its scale, and
the range widened for a study resumed over a wider space (jobs/tuning/edges.py), on the study page
and in the resume form it opens."""

from __future__ import annotations

import json
import math
import re

import pytest

from jobs.models import JobState, Trial
from jobs.tuning import edges
from tests.helpers.jobs import body

LR = {
    "parameterName": "learning_rate",
    "type": "DOUBLE",
    "minValue": 1e-4,
    "maxValue": 0.1,
    "scaleType": "UNIT_LOG_SCALE",
}
LAYERS = {"parameterName": "layers", "type": "INTEGER", "minValue": 1, "maxValue": 8}
DROPOUT = {"parameterName": "dropout", "type": "DOUBLE", "minValue": 0.0, "maxValue": 0.5}
UNITS = {"parameterName": "units", "type": "DISCRETE", "discreteValues": [16, 32, 64, 128]}
OPTIMIZER = {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["adam", "sgd"]}
MOMENTUM = {
    "parameterName": "momentum",
    "type": "DOUBLE",
    "minValue": 0.9,
    "maxValue": 0.999,
    "scaleType": "UNIT_REVERSE_LOG_SCALE",
}


def spread(count: int, low: float, high: float, log: bool = False) -> list[float]:
    """``count`` values spread evenly over a range (on a log axis with ``log``)."""
    if log:
        return [10 ** (math.log10(low) + (math.log10(high) - math.log10(low)) * i / (count - 1)) for i in range(count)]
    return [low + (high - low) * i / (count - 1) for i in range(count)]


def study(param: dict, values: list, objective) -> list[tuple[dict, float]]:
    return [({param["parameterName"]: v}, objective(v)) for v in values]


# 30 rates spread over 1e-4..0.1 on a log axis, and five more a search drawn to the top would add:
# within 5 % of 3 decades of 0.1 (0.0708 and up), but only 0.1 itself within 5 % of the linear range.
RATES = [*spread(30, 1e-4, 0.1, log=True), 0.072, 0.075, 0.08, 0.085, 0.09]


def test_best_trials_at_the_top_of_a_log_range_are_found_on_the_log_axis():
    results = study(LR, RATES, lambda v: math.log10(v))  # the objective grows with the rate
    [edge] = edges.find({"params": [LR]}, results)
    assert (edge.parameter, edge.bound, edge.value) == ("learning_rate", "upper", 0.1)
    assert edge.best == 5 and edge.at_bound == 5
    assert edge.widened == 100.0  # three decades more: the range doubled on its scale


def test_a_linear_axis_would_not_call_the_same_trials_at_the_bound():
    linear = {**LR, "scaleType": "UNIT_LINEAR_SCALE"}
    assert edges.find({"params": [linear]}, study(linear, RATES, lambda v: math.log10(v))) == []


def test_trials_spread_evenly_are_not_at_a_bound_by_chance():
    # The best of evenly spread trials sit near the top, as many there as anywhere: 2 of 5 within 5 %.
    assert edges.find({"params": [LR]}, study(LR, spread(40, 1e-4, 0.1, log=True), math.log10)) == []


def test_best_trials_in_the_middle_say_nothing():
    results = study(DROPOUT, spread(40, 0.0, 0.5), lambda v: -((v - 0.25) ** 2))
    assert edges.find({"params": [DROPOUT]}, results) == []


def test_minimize_looks_at_the_lowest_objectives():
    results = study(LAYERS, [1 + n % 8 for n in range(40)], lambda v: v)  # lower is better: 1 layer
    [edge] = edges.find({"params": [LAYERS]}, results, maximize=False)
    assert (edge.bound, edge.value) == ("lower", 1)
    assert edge.widened is None and "counts from 1" in edge.limit  # layers start at 1: cannot go lower
    assert not edges.find({"params": [LAYERS]}, results, maximize=True)[0].bound == "lower"


def test_top_ten_percent_or_five_whichever_is_more():
    assert edges.top_count(10) == 5 and edges.top_count(49) == 5 and edges.top_count(200) == 20


def test_too_few_trials_say_nothing():
    results = study(LR, spread(9, 1e-4, 0.1, log=True), lambda v: v)
    assert edges.find({"params": [LR]}, results) == []


def test_a_discrete_list_is_at_its_bound_only_at_its_first_or_last_value():
    values = [16, 32, 64, 128] * 10
    [edge] = edges.find({"params": [UNITS]}, study(UNITS, values, lambda v: v))
    assert (edge.bound, edge.value, edge.discrete) == ("upper", 128, True)
    assert edge.how_close == "5 of the 5 best take its last value"
    assert edges.widen(UNITS, "upper")["discreteValues"] == [16, 32, 64, 128, 256, 512, 1024]
    assert edges.find({"params": [UNITS]}, study(UNITS, values, lambda v: -((v - 50) ** 2))) == []  # 64 is best


def test_a_two_value_list_needs_every_best_trial_at_one_end():
    pair = {"parameterName": "batch", "type": "DISCRETE", "discreteValues": [32, 64]}
    values = [32, 64] * 20
    mixed = study(pair, values, lambda v: 0.0)  # a tie: the best are half of each, as by chance
    assert edges.find({"params": [pair]}, mixed) == []
    clear = study(pair, values, lambda v: v)
    assert [e.bound for e in edges.find({"params": [pair]}, clear)] == ["upper"]


def test_a_categorical_parameter_has_no_bound():
    results = [({"optimizer": "adam" if n % 2 else "sgd"}, float(n % 2)) for n in range(40)]
    assert edges.find({"params": [OPTIMIZER]}, results) == []
    assert edges.widen(OPTIMIZER, "upper") is None


def test_a_reverse_log_parameter_is_dense_near_its_top():
    # 0.997 is 2.2 % of the reversed log axis from 0.999, though 92 % of the linear range from 0.9.
    assert edges.position(MOMENTUM, 0.999) == pytest.approx(1.0)
    assert edges.position(MOMENTUM, 0.9) == pytest.approx(0.0)
    assert 0.95 < edges.position(MOMENTUM, 0.997) < 1.0
    assert edges.position({**MOMENTUM, "scaleType": "UNIT_LINEAR_SCALE"}, 0.997) < 0.99
    # momentum reads as a probability: widened up to 1 and no further.
    assert edges.widen(MOMENTUM, "upper")["maxValue"] == 1.0
    assert edges.widen({**MOMENTUM, "maxValue": 1.0}, "upper") is None


@pytest.mark.parametrize(
    ("param", "bound", "key", "expected"),
    [
        (LR, "upper", "maxValue", 100.0),
        (LR, "lower", "minValue", 1e-7),
        (LAYERS, "upper", "maxValue", 15),  # 1..8 is 7 wide: 15, a whole number
        ({**LAYERS, "minValue": 4, "maxValue": 9}, "lower", "minValue", 1),  # not below 1
        (DROPOUT, "upper", "maxValue", 1.0),  # a probability: 0.5 + 0.5, never past 1
        ({**DROPOUT, "maxValue": 0.8}, "upper", "maxValue", 1.0),
        ({**DROPOUT, "minValue": 0.1, "maxValue": 0.3}, "lower", "minValue", 0.0),  # 0.1 - 0.2, stopped at 0
        ({"parameterName": "shift", "type": "DOUBLE", "minValue": -1, "maxValue": 1}, "lower", "minValue", -3.0),
        ({"parameterName": "wd", "type": "DOUBLE", "minValue": 0.1, "maxValue": 0.3}, "lower", "minValue", 0.0),
        ({"parameterName": "scale", "type": "DOUBLE", "minValue": 1.5, "maxValue": 4.5}, "upper", "maxValue", 7.5),
        (
            {"parameterName": "n", "type": "INTEGER", "minValue": 2, "maxValue": 64, "scaleType": "UNIT_LOG_SCALE"},
            "upper",
            "maxValue",
            2048,
        ),
    ],
)
def test_a_bound_widens_by_the_ranges_width_on_its_scale_within_its_limits(param, bound, key, expected):
    widened = edges.widen(param, bound)
    assert widened[key] == pytest.approx(expected)
    assert type(widened[key]) is type(expected)  # an INTEGER parameter's bounds stay whole numbers
    other = "minValue" if key == "maxValue" else "maxValue"
    assert widened[other] == param[other]


def test_a_bound_at_its_hard_limit_is_not_widened():
    assert edges.widen({**DROPOUT, "minValue": 0.0}, "lower") is None
    assert (
        edges.widen({"parameterName": "keep_prob", "type": "DOUBLE", "minValue": 0.5, "maxValue": 1}, "upper") is None
    )
    edge_widened, why = edges.widen_bound(DROPOUT, "lower")
    assert edge_widened is None and "probability" in why


def test_a_discrete_list_widens_by_its_own_spacing():
    steps = {"parameterName": "w", "type": "DISCRETE", "discreteValues": [0.1, 0.2, 0.3]}
    assert edges.widen(steps, "upper")["discreteValues"] == [0.1, 0.2, 0.3, 0.4, 0.5]
    assert edges.widen(steps, "lower")["discreteValues"] == [0.0, 0.1, 0.2, 0.3]  # never negative here
    rates = {"parameterName": "lr", "type": "DISCRETE", "discreteValues": [1e-4, 1e-3, 1e-2]}
    assert edges.widen(rates, "lower")["discreteValues"] == pytest.approx([1e-6, 1e-5, 1e-4, 1e-3, 1e-2])
    long = {"parameterName": "k", "type": "DISCRETE", "discreteValues": list(range(1, 1001))}
    assert edges.widen(long, "upper") is None  # already as many values as a list may have


def test_widened_spec_names_the_change_and_ignores_what_it_cannot_widen():
    spec = {"goal": "MAXIMIZE", "params": [LR, OPTIMIZER], "resumePreviousJobId": "old"}
    widened, said = edges.widened_spec(spec, "learning_rate:upper")
    assert widened["params"][0]["maxValue"] == 100.0 and widened["params"][1] == OPTIMIZER
    assert widened["resumePreviousJobId"] == "old"
    assert said == "The upper bound of learning_rate is widened from 0.1 to 100 in the hyperparameters below."
    for query in ("optimizer:upper", "nothing:upper", "learning_rate:sideways", "", "learning_rate"):
        assert edges.widened_spec(spec, query) is None


# --- on the study page and in the resume form ----------------------------------------------------


def edge_study(project, admin, job_id: str = "edgy"):
    """A finished study whose best trials sit at the top of learning_rate (a log scale)."""
    from jobs import services
    from jobs.executor.trials import training_output
    from jobs.models import Job

    spec = {"maxTrials": 35, "goal": "MAXIMIZE", "hyperparameterMetricTag": "score", "params": [LR, OPTIMIZER]}
    job = services.submit_job(project, body(job_id, hyperparameters=spec), actor=admin)
    for n, rate in enumerate(RATES, start=1):
        Trial.objects.create(
            job=job,
            trial_id=str(n),
            number=n,
            state=JobState.SUCCEEDED,
            hyperparameters={"learning_rate": repr(rate), "optimizer": "adam"},
            final_metric={"trainingStep": "1", "objectiveValue": math.log10(rate)},
        )
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, training_output=training_output(job, spec))
    return job


def test_the_study_page_says_which_bound_and_offers_a_resume_with_it_widened(client, project, admin):
    edge_study(project, admin)
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/edgy/").content.decode()
    notice = re.search(r'<li class="notice" data-edge="learning_rate:upper">(.*?)</li>', page, re.S).group(1)
    text = re.sub(r"\s+", " ", re.sub(r"<[^>]+>", "", notice)).strip()
    assert text.startswith("The best trials sit at the upper bound of learning_rate (0.1): widen it.")
    assert "5 of the 5 best are within 5% of the range from it" in text
    assert 'href="/projects/project-a/jobs/new/?resume=edgy&amp;widen=learning_rate%3Aupper"' in notice
    assert "(to 100)" in text
    assert "data-edge=" not in page.replace('data-edge="learning_rate:upper"', "")  # optimizer: no order


def test_a_viewer_reads_the_notice_without_the_resume_button(client, project, admin, viewer):
    edge_study(project, admin)
    client.force_login(viewer)
    page = client.get("/projects/project-a/jobs/edgy/").content.decode()
    assert 'data-edge="learning_rate:upper"' in page
    assert "Resume with this bound widened" not in page
    client.force_login(viewer)
    assert client.get("/projects/project-a/jobs/new/?resume=edgy&widen=learning_rate:upper").status_code == 403


def test_the_resume_form_opens_with_the_bound_widened(client, project, admin):
    edge_study(project, admin)
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/new/?resume=edgy&widen=learning_rate%3Aupper").content.decode()
    assert "The upper bound of learning_rate is widened from 0.1 to 100 in the hyperparameters below." in page
    text = re.search(r'<textarea name="hyperparameters"[^>]*>(.*?)</textarea>', page, re.S).group(1)
    spec = json.loads(text.replace("&quot;", '"'))
    assert spec["params"][0] == {**LR, "maxValue": 100.0}
    assert spec["resumePreviousJobId"] == "edgy"  # still a resumed study: it starts from these trials
    # A link naming no such parameter (hand-edited) opens the plain resume form.
    plain = client.get("/projects/project-a/jobs/new/?resume=edgy&widen=nothing%3Aupper").content.decode()
    assert "widened" not in plain and '"maxValue": 0.1' in plain.replace("&quot;", '"')
