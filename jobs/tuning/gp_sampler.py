"""A Gaussian-process sampler for Optuna that needs only numpy.

Optuna's own ``GPSampler`` needs PyTorch and SciPy (gigabytes of wheels for a console that runs
no model); this one is small enough to read in one sitting and fast enough to call on every
trial. It is used for small, all-numeric spaces (``jobs.tuning.search.sampler_name``):

- Inputs are scaled to [0, 1] on each parameter's own axis (log axes for log-scaled ones).
  Objectives are standardized, and flipped so the GP always minimizes.
- Kernel: Matérn 5/2 with one lengthscale per parameter (ARD), at most the width of the space:
  a parameter judged irrelevant on a few trials would otherwise never be moved again. The
  constant mean is estimated by generalized least squares, not taken as the mean of the trials:
  those crowd into the good regions, and their mean would promise unexplored space too much.
  The signal variance is profiled out of the marginal likelihood; the lengthscales and the noise
  are chosen by a coarse-to-fine search on that likelihood (no gradient optimizer needed).
- Acquisition: expected improvement over the best observed value, maximized over random points
  plus local perturbations of the best trials, refined twice around the best candidates.
- Restarts: the basin of the best trial is the ellipsoid ``BASIN_RADIUS`` lengthscales around
  it. Once ``STALL_TRIALS`` trials inside it have not improved the best value by 0.1% of the
  observed range, the search has settled there, perhaps in a local optimum. If the basin is a
  small part of the space (a smooth function's is all of it), the next suggestions come from
  outside it: random points until enough trials lie outside, then expected improvement on a GP
  of those trials alone. A better value found there ends the stall and the whole history is
  modelled again. (On Hartmann-6 a third of the seeds otherwise stay in its −3.20 basin.)
- Trials still running are fantasized at the GP's mean ("kriging believer"), so a batch of asks
  (maxParallelTrials) spreads out instead of repeating one point.
- The first ``n_startup_trials`` trials, and any parameter outside the relative search space,
  are sampled at random.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import optuna
from optuna.distributions import FloatDistribution, IntDistribution
from optuna.samplers import BaseSampler, RandomSampler
from optuna.study import StudyDirection
from optuna.trial import TrialState

_MAX_LENGTHSCALE = 1.0
_LENGTHSCALES = np.geomspace(0.03, _MAX_LENGTHSCALE, 12)
FIT_MAX_TRIALS = 100
_NOISES = (1e-6, 1e-4, 1e-2, 1e-1)
_STEPS = (0.5, 0.7, 1.4, 2.0)


def _squared_differences(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    """(a_i − b_j)² per dimension: computed once, reused for every lengthscale tried."""
    return (a[:, None, :] - b[None, :, :]) ** 2


def _matern52(squared_differences: np.ndarray, lengthscales: np.ndarray) -> np.ndarray:
    d = np.sqrt(np.maximum(squared_differences @ (5.0 / lengthscales**2), 0.0))
    return (1 + d + d * d / 3) * np.exp(-d)


def _profile_likelihood(
    squared_differences: np.ndarray, y: np.ndarray, lengthscales: np.ndarray, noise: float
) -> float:
    """Log marginal likelihood with the signal variance at its optimum (up to a constant)."""
    k = _matern52(squared_differences, lengthscales) + noise * np.eye(len(y))
    try:
        chol = np.linalg.cholesky(k)
    except np.linalg.LinAlgError:
        return -math.inf
    alpha = _whitened_residuals(chol, y)[0]
    n = len(y)
    return -0.5 * n * math.log(max(float(alpha @ alpha) / n, 1e-300)) - float(np.log(np.diag(chol)).sum())


def _whitened_residuals(chol: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """L⁻¹(y − m) and m, the constant mean's generalized-least-squares estimate (K = LLᵀ)."""
    ones, values = np.linalg.solve(chol, np.column_stack([np.ones(len(y)), y])).T
    mean = float(ones @ values) / float(ones @ ones)
    return values - mean * ones, mean


def fit(x: np.ndarray, y: np.ndarray) -> tuple[np.ndarray, float]:
    """Lengthscales and noise: the best isotropic pair on a grid, then per-dimension steps.

    Past ``FIT_MAX_TRIALS`` trials (a study resumed from a long one) they are fitted on the best
    half of that many and an even spread of the rest: the search costs O(n³) per step, and the
    posterior still conditions on every trial."""
    if len(y) > FIT_MAX_TRIALS:
        ranked = np.argsort(y)
        rest = ranked[FIT_MAX_TRIALS // 2 :]
        keep = np.concatenate(
            [
                ranked[: FIT_MAX_TRIALS // 2],
                rest[np.linspace(0, len(rest) - 1, FIT_MAX_TRIALS - FIT_MAX_TRIALS // 2).astype(int)],
            ]
        )
        x, y = x[keep], y[keep]
    squared_differences = _squared_differences(x, x)
    scores: dict[tuple, float] = {}

    def likelihood(lengthscales: np.ndarray, noise: float) -> float:
        key = (*lengthscales, noise)
        if key not in scores:
            scores[key] = _profile_likelihood(squared_differences, y, lengthscales, noise)
        return scores[key]

    lengthscales, noise = max(
        ((np.full(x.shape[1], ls), noise) for ls in _LENGTHSCALES for noise in _NOISES[::2]),
        key=lambda pair: likelihood(*pair),
    )
    score = likelihood(lengthscales, noise)
    for _ in range(2):
        for dim in range(x.shape[1]):
            for step in _STEPS:
                trial = lengthscales.copy()
                trial[dim] = min(max(trial[dim] * step, 0.01), _MAX_LENGTHSCALE)
                value = likelihood(trial, noise)
                if value > score:
                    lengthscales, score = trial, value
        for option in _NOISES:
            value = likelihood(lengthscales, option)
            if value > score:
                noise, score = option, value
    return lengthscales, noise


class _Posterior:
    def __init__(self, x: np.ndarray, y: np.ndarray, lengthscales: np.ndarray, noise: float):
        self.x, self.lengthscales = x, lengthscales
        k = _matern52(_squared_differences(x, x), lengthscales) + noise * np.eye(len(x))
        self.chol = np.linalg.cholesky(k)
        residuals, self.mean = _whitened_residuals(self.chol, y)
        self.alpha = np.linalg.solve(self.chol.T, residuals)
        self.scale = float(residuals @ residuals) / len(y)  # the profiled signal variance
        # L⁻¹ once: predicting thousands of candidates is then one matrix product, not a solve.
        self.chol_inverse = np.linalg.inv(self.chol)

    def predict(self, points: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        cross = _matern52(_squared_differences(points, self.x), self.lengthscales)
        mean = self.mean + cross @ self.alpha
        v = self.chol_inverse @ cross.T
        var = np.maximum(1.0 - (v * v).sum(0), 1e-12) * self.scale
        return mean, np.sqrt(var)


def _standardized(values: np.ndarray) -> np.ndarray:
    return (values - values.mean()) / (values.std() or 1.0)


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
        return {
            name: dist
            for name, dist in space.items()
            if isinstance(dist, FloatDistribution | IntDistribution) and dist.low < dist.high
        }

    def sample_independent(self, study, trial, param_name, param_distribution):
        return self._random.sample_independent(study, trial, param_name, param_distribution)

    def sample_relative(self, study, trial, search_space):
        if not search_space:
            return {}
        names = sorted(search_space)
        trials = study.get_trials(deepcopy=False, states=(TrialState.COMPLETE, TrialState.RUNNING))
        done = [t for t in trials if t.state == TrialState.COMPLETE and all(n in t.params for n in names)]
        running = [
            t
            for t in trials
            if t.state == TrialState.RUNNING and t.number != trial.number and all(n in t.params for n in names)
        ]
        if len(done) < self._n_startup:
            return {}
        dists = [search_space[n] for n in names]

        def unit(trials):
            return np.array([[_to_unit(d, t.params[n]) for n, d in zip(names, dists, strict=True)] for t in trials])

        done.sort(key=lambda t: t.number)
        x, values = unit(done), np.array([t.value for t in done], dtype=float)
        if study.direction == StudyDirection.MAXIMIZE:
            values = -values
        lengthscales, noise = fit(x, _standardized(values))
        basin = self._settled_basin(x, values, lengthscales)
        if basin is not None:  # look outside it: a fresh start there, then a GP of those trials only
            outside = ~basin.contains(x)
            if outside.sum() < self._n_startup:
                pool = self._rng.random((1000, x.shape[1]))
                point = next(iter(pool[~basin.contains(pool)]), pool[0])
                return {n: _from_unit(d, v) for n, d, v in zip(names, dists, point, strict=True)}
            x, values = x[outside], values[outside]
            lengthscales, noise = fit(x, _standardized(values))
        y = _standardized(values)
        posterior = _Posterior(x, y, lengthscales, noise)
        if running:  # kriging believer: the running trials' outcomes are taken to be the GP's mean
            pending = unit(running)
            posterior = _Posterior(
                np.vstack([x, pending]), np.concatenate([y, posterior.predict(pending)[0]]), lengthscales, noise
            )
        best_point = self._maximize(posterior, x, y, lengthscales, basin)
        return {n: _from_unit(d, v) for n, d, v in zip(names, dists, best_point, strict=True)}

    def _settled_basin(self, x: np.ndarray, values: np.ndarray, lengthscales: np.ndarray) -> _Basin | None:
        """The best trial's basin if the search has settled there and it is a small part of the
        space (``x``, ``values``: the finished trials in trial order, to minimize)."""
        basin = _Basin(x[int(np.argmin(values))], lengthscales)
        if not _stalled(values, basin.contains(x)):
            return None
        return basin if basin.contains(self._rng.random((1000, x.shape[1]))).mean() < 0.5 else None

    def _maximize(
        self, posterior: _Posterior, x: np.ndarray, y: np.ndarray, lengthscales: np.ndarray, basin: _Basin | None = None
    ):
        """The candidate with the highest expected improvement, outside ``basin`` if given."""
        best = float(y.min())

        def score(candidates):
            scores = expected_improvement(*posterior.predict(candidates), best)
            if basin is not None:
                scores[basin.contains(candidates)] = -math.inf
            return scores

        dim = x.shape[1]
        top = x[np.argsort(y)[:5]]
        local = top[:, None, :] + self._rng.normal(size=(len(top), 200, dim)) * np.minimum(lengthscales, 0.5) * 0.3
        candidates = np.vstack([self._rng.random((self._n_candidates, dim)), local.reshape(-1, dim)])
        for scale in (0.1, 0.03, 0.01):
            candidates = np.clip(candidates, 0.0, 1.0)
            keep = candidates[np.argsort(-score(candidates))[:5]]
            candidates = np.vstack(
                [keep, (keep[:, None, :] + self._rng.normal(size=(5, 100, dim)) * scale).reshape(-1, dim)]
            )
        candidates = np.clip(candidates, 0.0, 1.0)
        return candidates[int(np.argmax(score(candidates)))]


STALL_TRIALS = 10
STALL_TOLERANCE = 1e-3  # of the range of the values seen
BASIN_RADIUS = 2.0  # in lengthscales


def _stalled(values: np.ndarray, inside: np.ndarray) -> bool:
    """Whether ``STALL_TRIALS`` trials inside the best trial's basin (``inside``) have come since
    the best of ``values`` (to minimize, in trial order) last improved by more than the tolerance."""
    tolerance = STALL_TOLERANCE * float(values.max() - values.min())
    best, improved = math.inf, 0
    for number, value in enumerate(values):
        if value < best - tolerance:
            best, improved = value, number
    return int(inside[improved + 1 :].sum()) >= STALL_TRIALS


@dataclass(frozen=True)
class _Basin:
    """The region the search settled in: an ellipsoid around the best trial, in lengthscales."""

    centre: np.ndarray
    lengthscales: np.ndarray

    def contains(self, points: np.ndarray) -> np.ndarray:
        return np.sqrt((((points - self.centre) / self.lengthscales) ** 2).sum(-1)) < BASIN_RADIUS


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
