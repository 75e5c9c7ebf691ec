"""A Gaussian-process sampler for Optuna that needs only numpy.

Optuna's own ``GPSampler`` needs PyTorch and SciPy (gigabytes of wheels for a console that runs
no model); this one is small enough to read in one sitting and fast enough to call on every
trial. It is used for small, all-numeric spaces (``jobs.tuning.sampler_name``):

- Inputs are scaled to [0, 1] on each parameter's own axis (log axes for log-scaled ones).
  Objectives are standardized, and flipped so the GP always minimizes.
- Kernel: Matérn 5/2 with one lengthscale per parameter (ARD). Its signal variance is profiled
  out of the marginal likelihood; the lengthscales and the noise are chosen by a coarse-to-fine
  search on that likelihood (no gradient optimizer needed at these sizes).
- Acquisition: expected improvement over the best observed value, maximized over random points
  plus local perturbations of the best trials, refined twice around the best candidates.
- Trials still running are fantasized at the GP's mean ("kriging believer"), so a batch of asks
  (maxParallelTrials) spreads out instead of repeating one point.
- The first ``n_startup_trials`` trials, and any parameter outside the relative search space,
  are sampled at random.
"""

from __future__ import annotations

import math

import numpy as np
import optuna
from optuna.distributions import FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import TrialState

_LENGTHSCALES = np.geomspace(0.03, 3.0, 12)
_NOISES = (1e-6, 1e-4, 1e-2, 1e-1)
_STEPS = (0.5, 0.7, 1.4, 2.0)


def _matern52(a: np.ndarray, b: np.ndarray, lengthscales: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.maximum((((a[:, None, :] - b[None, :, :]) / lengthscales) ** 2).sum(-1), 0.0)) * math.sqrt(5)
    return (1 + d + d * d / 3) * np.exp(-d)


def _profile_likelihood(x: np.ndarray, y: np.ndarray, lengthscales: np.ndarray, noise: float) -> float:
    """Log marginal likelihood with the signal variance at its optimum (up to a constant)."""
    k = _matern52(x, x, lengthscales) + noise * np.eye(len(x))
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return -math.inf
    alpha = np.linalg.solve(chol, y)
    n = len(y)
    return -0.5 * n * math.log(max(float(alpha @ alpha) / n, 1e-300)) - float(np.log(np.diag(chol)).sum())


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Lengthscales and noise: the best isotropic pair on a grid, then per-dimension steps."""
    best = max(((np.full(x.shape[1], ls), noise) for ls in _LENGTHSCALES for noise in _NOISES[::2]),
               key=lambda p: _profile_likelihood(x, y, *p))
    lengthscales, noise = best
    score = _profile_likelihood(x, y, lengthscales, noise)
    for _ in range(2):
        for dim in range(x.shape[1]):
            for step in _STEPS:
                trial = lengthscales.copy()
                trial[dim] = min(max(trial[dim] * step, 0.01), 10.0)
                value = _profile_likelihood(x, y, trial, noise)
                if value > score:
                    lengthscales, score = trial, value
        for option in _NOISES:
            value = _profile_likelihood(x, y, lengthscales, option)
            if value > score:
                noise, score = option, value
    return lengthscales, noise


class _Posterior:
    def __init__(self, x: np.ndarray, y: np.ndarray, lengthscales: np.ndarray, noise: float):
        self.x, self.lengthscales = x, lengthscales
        k = _matern52(x, x, lengthscales) + noise * np.eye(len(x))
        self.chol = np.linalg.cholesky(k)
        self.alpha = np.linalg.solve(self.chol.T, np.linalg.solve(self.chol, y))
        self.scale = float(y @ self.alpha) / len(y)  # the profiled signal variance

    def predict(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cross = _matern52(points, self.x, self.lengthscales)
        mean = cross @ self.alpha
        v = np.linalg.solve(self.chol, cross.T)
        var = np.maximum(1.0 - (v * v).sum(0), 1e-12) * self.scale
        return mean, np.sqrt(var)


def _erfc(z: np.ndarray) -> np.ndarray:
    """Abramowitz & Stegun 7.1.26 (|error| < 1.5e-7): numpy has no erf of its own."""
    a = np.abs(z)
    t = 1 / (1 + 0.3275911 * a)
    poly = t * (0.254829592 + t * (-0.284496736 + t * (1.421413741 + t * (-1.453152027 + t * 1.061405429))))
    tail = poly * np.exp(-a * a)
    return np.where(z >= 0, tail, 2 - tail)


def expected_improvement(mean: np.ndarray, std: np.ndarray, best: float) -> np.ndarray:
    z = (best - mean) / std
    cdf = 0.5 * _erfc(-z / math.sqrt(2))
    pdf = np.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)
    return std * (z * cdf + pdf)


class NumpyGPSampler(BaseSampler):
    """GP + expected improvement over the numeric parameters; random for the rest."""

    def __init__(self, *, seed: int | None = None, n_startup_trials: int = 5, n_candidates: int = 2000):
        self._rng = np.random.default_rng(seed)
        self._random = RandomSampler(seed=seed)
        self._n_startup = n_startup_trials
        self._n_candidates = n_candidates

    def reseed_rng(self) -> None:
        self._rng = np.random.default_rng()
        self._random.reseed_rng()

    def infer_relative_search_space(self, study, trial):
        space = optuna.search_space.intersection_search_space(study.get_trials(deepcopy=False))
        return {name: dist for name, dist in space.items()
                if isinstance(dist, FloatDistribution | IntDistribution) and dist.low < dist.high}

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def sample_relative(self, study, trial, search_space):
        if not search_space:
            return {}
        names = sorted(search_space)
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        done = [t for t in trials if t.state == TrialState.COMPLETE and all(n in t.params for n in names)]
        running = [t for t in trials if t.state == TrialState.RUNNING and t.number != trial.number
                   and all(n in t.params for n in names)]
        if len(done) < self._n_startup:
            return {}
        dists = [search_space[n] for n in names]
        x = np.array([[_to_unit(d, t.params[n]) for n, d in zip(names, dists, strict=True)] for t in done])
        values = np.array([t.value for t in done], dtype=float)
        if study.direction == StudyDirection.MAXIMIZE:
            values = -values
        y = (values - values.mean()) / (values.std() or 1.0)
        lengthscales, noise = fit(x, y)
        if running:  # kriging believer: the running trials' outcomes are taken to be the GP's mean
            pending = np.array([[_to_unit(d, t.params[n]) for n, d in zip(names, dists, strict=True)]
                                for t in running])
            x = np.vstack([x, pending])
            y = np.concatenate([y, _Posterior(x[: len(done)], y, lengthscales, noise).predict(pending)[0]])
        posterior = _Posterior(x, y, lengthscales, noise)
        best_point = self._maximize(posterior, x[: len(done)], y[: len(done)], lengthscales)
        return {n: _from_unit(d, v) for n, d, v in zip(names, dists, best_point, strict=True)}

    def _maximize(self, posterior: _Posterior, x: np.ndarray, y: np.ndarray, lengthscales: np.ndarray):
        best = float(y.min())
        dim = x.shape[1]
        top = x[np.argsort(y)[:5]]
        local = (top[:, None, :] + self._rng.normal(size=(len(top), 200, dim)) * np.minimum(lengthscales, 0.5) * 0.3)
        candidates = np.vstack([self._rng.random((self._n_candidates, dim)), local.reshape(-1, dim)])
        for scale in (0.1, 0.03, 0.01):
            candidates = np.clip(candidates, 0.0, 1.0)
            scores = expected_improvement(*posterior.predict(candidates), best)
            keep = candidates[np.argsort(-scores)[:5]]
            candidates = np.vstack([keep, (keep[:, None, :] + self._rng.normal(size=(5, 100, dim)) * scale
                                           ).reshape(-1, dim)])
        candidates = np.clip(candidates, 0.0, 1.0)
        return candidates[int(np.argmax(expected_improvement(*posterior.predict(candidates), best)))]


def _to_unit(dist, value) -> float:
    low, high, value = float(dist.low), float(dist.high), float(value)
    if dist.log:
        low, high, value = math.log(low), math.log(high), math.log(value)
    return (value - low) / (high - low)


def _from_unit(dist, unit: float):
    low, high = float(dist.low), float(dist.high)
    if dist.log:
        value = math.exp(math.log(low) + unit * (math.log(high) - math.log(low)))
    else:
        value = low + unit * (high - low)
    value = min(max(value, low), high)
    return int(round(value)) if isinstance(dist, IntDistribution) else value
