"""The numpy GP sampler behind ALGORITHM_UNSPECIFIED: its model, and its restarts out of a basin."""

from __future__ import annotations

import numpy as np
import optuna
import pytest
from optuna.distributions import FloatDistribution

from jobs.tuning import gp_sampler
from jobs.tuning import search as tuning

optuna.logging.set_verbosity(optuna.logging.WARNING)


def test_fit_gives_the_parameter_that_matters_the_shorter_lengthscale_and_caps_the_other():
    rng = np.random.default_rng(0)
    x = rng.random((30, 2))
    y = np.sin(6 * x[:, 0])
    lengthscales, noise = gp_sampler.fit(x, (y - y.mean()) / y.std())
    assert lengthscales[0] < 0.5 < lengthscales[1] <= 1.0  # never longer than the space is wide
    assert noise <= 1e-4  # a deterministic function is not explained as noise


def test_the_posterior_interpolates_and_does_not_promise_unexplored_space_the_trials_mean():
    # 20 trials crowd into a good region (value -3), 6 spread ones see the plain (value 0).
    rng = np.random.default_rng(1)
    crowd = 0.2 + 0.05 * rng.random((20, 2))
    plain = np.array([[0.9, 0.1], [0.1, 0.9], [0.6, 0.6], [0.95, 0.5], [0.5, 0.95], [0.7, 0.2]])
    x = np.vstack([crowd, plain])
    y = np.concatenate([np.full(20, -3.0), np.zeros(6)])
    posterior = gp_sampler._Posterior(x, gp_sampler._standardized(y), np.array([0.1, 0.1]), 1e-6)
    mean, std = posterior.predict(np.vstack([plain[:1], [[0.9, 0.9]]]))
    mean = mean * y.std() + y.mean()  # back to the objective's units, as the sampler sees them
    assert mean[0] == pytest.approx(0.0, abs=1e-3) and std[0] < 0.01
    # Far from every trial: nearer the plain's level than the trials' mean of -2.3.
    assert y.mean() == pytest.approx(-2.31, abs=0.01) and mean[1] > -1.0


def test_stalled_counts_trials_inside_the_basin_since_the_last_real_improvement():
    values = np.array([5.0, 1.0, 0.5, *[0.4999] * 9, 0.4998])  # improvements below 0.1% of the range
    inside = np.ones(len(values), dtype=bool)
    assert gp_sampler._stalled(values, inside)
    assert not gp_sampler._stalled(values[:-1], inside[:-1])  # 9 trials since the improvement to 0.5
    elsewhere = inside.copy()
    elsewhere[5:] = False  # the trials went elsewhere: the basin itself was not worked out
    assert not gp_sampler._stalled(values, elsewhere)


def _study(points: list[tuple[list[float], float]]) -> optuna.Study:
    study = optuna.create_study(sampler=gp_sampler.NumpyGPSampler(seed=0, n_startup_trials=5))
    distributions = {f"x{i}": FloatDistribution(0.0, 1.0) for i in range(3)}
    for x, value in points:
        study.add_trial(
            optuna.trial.create_trial(
                params={f"x{i}": v for i, v in enumerate(x)}, distributions=distributions, value=value
            )
        )
    return study


def _ask(study: optuna.Study) -> np.ndarray:
    trial = study.ask({f"x{i}": FloatDistribution(0.0, 1.0) for i in range(3)})
    return np.array([trial.params[f"x{i}"] for i in range(3)])


def _bowl(x) -> float:
    return -float(np.exp(-((np.asarray(x) - 0.3) ** 2).sum() / 0.02))


def test_a_search_settled_in_a_basin_looks_outside_it_and_comes_back_when_it_finds_better():
    rng = np.random.default_rng(2)
    spread = [list(rng.random(3)) for _ in range(8)]
    crowd = [list(0.3 + 0.001 * rng.standard_normal(3)) for _ in range(12)]  # 12 tries, no real gain
    points = [(x, _bowl(x)) for x in spread + crowd]
    study = _study(points)
    sampler = study.sampler
    x = np.array([p for p, _ in points])
    values = np.array([v for _, v in points])
    basin = sampler._settled_basin(x, values, gp_sampler.fit(x, gp_sampler._standardized(values))[0])
    assert basin is not None and np.linalg.norm(basin.centre - 0.3) < 0.05
    asked = [_ask(study) for _ in range(3)]
    assert not basin.contains(np.array(asked)).any()
    # Something better outside the basin: the stall is over, the search goes there.
    study = _study([*points, ([0.8, 0.8, 0.8], -2.0)])
    assert np.linalg.norm(_ask(study) - 0.8) < 0.3


def test_a_smooth_function_whose_basin_is_the_whole_space_is_never_restarted():
    points = [([v, v, v], (v - 0.5) ** 2) for v in np.linspace(0.0, 1.0, 8)]
    points += [([0.5 + d, 0.5 - d, 0.5], d * d) for d in np.linspace(-0.001, 0.001, 12)]
    study = _study(points)
    x = np.array([p for p, _ in points])
    values = np.array([v for _, v in points])
    lengthscales = gp_sampler.fit(x, gp_sampler._standardized(values))[0]
    assert gp_sampler._stalled(values, np.ones(len(values), dtype=bool))
    assert study.sampler._settled_basin(x, values, lengthscales) is None


@pytest.mark.slow
def test_restarts_find_the_deeper_narrow_basin_that_plain_expected_improvement_misses(monkeypatch):
    """A wide shallow basin (-1.0) and a narrow deep one (-1.3), 60 trials, a seed on which the
    search first settles in the shallow one."""
    shallow, deep = np.array([0.25, 0.3, 0.7]), np.array([0.8, 0.75, 0.2])

    def objective(x):
        x = np.asarray(x)
        return float(-np.exp(-((x - shallow) ** 2).sum() / 0.08) - 1.3 * np.exp(-((x - deep) ** 2).sum() / 0.02))

    spec = {
        "goal": "MINIMIZE",
        "maxTrials": 60,
        "maxParallelTrials": 1,
        "hyperparameterMetricTag": "m",
        "params": [{"parameterName": f"x{i}", "type": "DOUBLE", "minValue": 0.0, "maxValue": 1.0} for i in range(3)],
    }

    def best(seed: int) -> float:
        history = []
        for number in range(60):
            (point,) = tuning.suggest(spec, history, 1, seed=seed * 1000 + number)
            history.append(tuning.TrialRecord(point, "SUCCEEDED", objective([float(point[f"x{i}"]) for i in range(3)])))
        return min(r.objective for r in history)

    assert best(2) < -1.25
    monkeypatch.setattr(gp_sampler, "STALL_TRIALS", 10**9)
    assert best(2) > -1.05
