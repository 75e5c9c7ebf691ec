"""Hyperparameter tuning: suggestions, grid enumeration, pruning and metric files.

Everything here is plain functions over plain data (the HyperparameterSpec as the API stores it,
and ``TrialRecord``s read from our database), so it is tested without a database. The Optuna study
is rebuilt in memory from those records on every call: our ``Trial`` rows are the source of truth
and a restarted console loses nothing.

How the wire types map onto Optuna distributions:

- DOUBLE → float, INTEGER → int, on a log axis for UNIT_LOG_SCALE. UNIT_REVERSE_LOG_SCALE is dense
  near the top of the range: Optuna samples ``y`` on a log axis and the trainer gets
  ``min + max - y`` (the mapping is its own inverse, so stored values convert back the same way).
- CATEGORICAL and DISCRETE → a categorical choice among the declared values.

Two things a v1 HyperparameterSpec cannot say, and a Vertex AI StudySpec can (``jobs.vertex``
adds them to the spec it hands the tuner; they never reach the wire):

- a param's ``condition`` (``{"parent": name, "values": [...]}``): the param exists only in trials
  whose parent, listed before it, took one of those values (as the trainer strings say them).
  Such a space is sampled define-by-run, by TPE with its group decomposition (or at random),
  and a grid expands a conditional param only under the parent values that activate it.
- ``measurementSelection``: ``BEST_MEASUREMENT`` makes a trial's final metric its best report for
  the goal instead of its last (``final_report``).
"""

from __future__ import annotations

import itertools
import json
import math
import warnings
from dataclasses import dataclass, field

import optuna
from optuna.distributions import CategoricalDistribution, FloatDistribution, IntDistribution
from optuna.trial import TrialState

from jobs.tuning.gp_sampler import NumpyGPSampler
from jobs.tuning.limits import max_trials, parallel_trials  # noqa: F401 (the executor reads them here)
from jobs.validation.param_values import format_value, parse_value

optuna.logging.set_verbosity(optuna.logging.WARNING)

DEFAULT_METRIC_TAG = "training/hptuning/metric"
# Pruning starts once this many trials have finished with a result (Optuna's MedianPruner).
PRUNER_STARTUP_TRIALS = 3
# The GP pays off on small, all-numeric spaces and modest budgets; TPE scales better beyond.
GP_MAX_PARAMS = 8
GP_MAX_TRIALS = 100


@dataclass(frozen=True)
class TrialRecord:
    """One trial as the tuner sees it: hyperparameters as strings, and how it went.

    ``state`` is ``RUNNING``, ``SUCCEEDED``, ``FAILED`` or ``CANCELLED``; ``objective`` is the final
    metric (None when the trial reported nothing); ``intermediate`` maps steps to reported values.
    """

    hyperparameters: dict[str, str]
    state: str
    objective: float | None = None
    intermediate: dict[int, float] = field(default_factory=dict)
    stopped_early: bool = False


# --- the spec -----------------------------------------------------------------------------------


def metric_tag(spec: dict) -> str:
    return spec.get("hyperparameterMetricTag") or DEFAULT_METRIC_TAG


def direction(spec: dict) -> str:
    return "minimize" if spec.get("goal") == "MINIMIZE" else "maximize"


def is_conditional(spec: dict) -> bool:
    return any(param.get("condition") for param in spec["params"])


def active(param: dict, values: dict[str, str]) -> bool:
    """Whether a param takes part in a trial whose earlier params have ``values``."""
    condition = param.get("condition")
    return condition is None or values.get(condition["parent"]) in condition["values"]


def final_report(spec: dict, reports: list[dict]) -> dict | None:
    """The report a trial's final metric is: its last, or with ``BEST_MEASUREMENT`` its best for the
    goal (the later one of equal values)."""
    if not reports:
        return None
    if spec.get("measurementSelection") != "BEST_MEASUREMENT":
        return reports[-1]
    sign = -1 if direction(spec) == "minimize" else 1
    return max(reversed(reports), key=lambda report: sign * report["objectiveValue"])


def early_stopping(spec: dict) -> bool:
    value = spec.get("enableTrialEarlyStopping")
    return value is True or str(value).upper() == "TRUE"


def failure_limit(spec: dict) -> int | None:
    """maxFailedTrials, or None when the service decides (see ``too_many_failures``)."""
    value = int(spec.get("maxFailedTrials") or 0)
    return value if value > 0 else None


def too_many_failures(spec: dict, finished: list[str]) -> str | None:
    """Why the job should fail, given the states of its finished trials in trial order.

    With maxFailedTrials set, the job fails once that many trials failed. With 0 the service
    decides: the job fails when its first trials (up to 3) all failed, or when more than half of
    maxTrials failed, since the remaining budget could no longer produce a sound study.
    """
    failed = finished.count("FAILED")
    limit = failure_limit(spec)
    if limit is not None:
        if failed >= limit:
            return f"{failed} trials failed, reaching maxFailedTrials ({limit})."
        return None
    first = min(3, max_trials(spec))
    if len(finished) >= first and all(state == "FAILED" for state in finished[:first]):
        return f"The first {first} trial{'s' if first > 1 else ''} failed."
    if failed > max_trials(spec) // 2:
        return f"{failed} of {max_trials(spec)} trials failed."
    return None


def _is_log(param: dict) -> bool:
    return param.get("scaleType") in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE")


def _reversed(param: dict) -> bool:
    return param.get("scaleType") == "UNIT_REVERSE_LOG_SCALE"


def distribution(param: dict):
    kind = param["type"]
    if kind == "DOUBLE":
        return FloatDistribution(float(param["minValue"]), float(param["maxValue"]), log=_is_log(param))
    if kind == "INTEGER":
        return IntDistribution(int(param["minValue"]), int(param["maxValue"]), log=_is_log(param))
    if kind == "CATEGORICAL":
        return CategoricalDistribution(list(param["categoricalValues"]))
    return CategoricalDistribution([float(v) for v in param["discreteValues"]])


def _to_internal(param: dict, value):
    """Trainer value → the value Optuna samples (only reverse-log axes differ)."""
    if param["type"] in ("DOUBLE", "INTEGER") and _reversed(param):
        return param["minValue"] + param["maxValue"] - value
    return value


def _to_external(param: dict, value):
    """Optuna's value → the trainer's (``min + max - y`` is its own inverse), kept in range."""
    value = _to_internal(param, value)
    if param["type"] in ("DOUBLE", "INTEGER"):
        value = min(max(value, param["minValue"]), param["maxValue"])
    return value


# --- grid search --------------------------------------------------------------------------------


def grid_values(param: dict) -> list:
    kind = param["type"]
    if kind == "INTEGER":
        return list(range(int(param["minValue"]), int(param["maxValue"]) + 1))
    if kind == "CATEGORICAL":
        return list(param["categoricalValues"])
    return [float(v) for v in param["discreteValues"]]


def grid(spec: dict) -> list[dict[str, str]]:
    """Every combination, the first parameter varying slowest, as trainer strings; a conditional
    parameter varies only under the parent values that activate it."""
    params = spec["params"]
    if not is_conditional(spec):
        axes = [[format_value(p, v) for v in grid_values(p)] for p in params]
        names = [p["parameterName"] for p in params]
        return [dict(zip(names, combo, strict=True)) for combo in itertools.product(*axes)]
    points: list[dict[str, str]] = [{}]
    for param in params:
        choices = [format_value(param, v) for v in grid_values(param)]
        expanded = []
        for point in points:
            if active(param, point):
                expanded += [{**point, param["parameterName"]: choice} for choice in choices]
            else:
                expanded.append(point)
        points = expanded
    return points


def grid_size(spec: dict) -> int:
    if is_conditional(spec):
        return len(grid(spec))
    return math.prod(len(grid_values(p)) for p in spec["params"])


# --- the Optuna study ---------------------------------------------------------------------------


def sampler_name(spec: dict) -> str:
    """Which sampler a spec gets: ``random``, ``grid``, ``gp`` or ``tpe``."""
    algorithm = spec.get("algorithm") or "ALGORITHM_UNSPECIFIED"
    if algorithm == "RANDOM_SEARCH":
        return "random"
    if algorithm == "GRID_SEARCH":
        return "grid"
    numeric = all(p["type"] in ("DOUBLE", "INTEGER") for p in spec["params"])
    small = len(spec["params"]) <= GP_MAX_PARAMS and max_trials(spec) <= GP_MAX_TRIALS
    # The GP models one fixed space; a conditional space is TPE's, with its group decomposition.
    return "gp" if numeric and small and not is_conditional(spec) else "tpe"


def _sampler(spec: dict, seed: int | None):
    name = sampler_name(spec)
    if name in ("random", "grid"):
        return optuna.samplers.RandomSampler(seed=seed)
    if name == "gp":
        # A few random trials to fit the first GP on: enough for one per parameter, and a few.
        return NumpyGPSampler(seed=seed, n_startup_trials=min(10, len(spec["params"]) + 3))
    startup = max(2, min(10, max_trials(spec) // 3))
    with warnings.catch_warnings():
        # Optuna calls ``group`` experimental; it is how TPE models a conditional space.
        warnings.simplefilter("ignore", optuna.exceptions.ExperimentalWarning)
        return optuna.samplers.TPESampler(
            seed=seed, n_startup_trials=startup, multivariate=True, constant_liar=True, group=is_conditional(spec)
        )


def _internal_params(spec: dict, hyperparameters: dict[str, str]) -> dict | None:
    """A record's hyperparameters as Optuna params, or None when they do not fit this spec
    (a resumed job may have tuned a different space)."""
    params: dict = {}
    for param in spec["params"]:
        if not active(param, hyperparameters):
            continue  # a conditional param its parent's value left out of this trial
        text = hyperparameters.get(param["parameterName"])
        if text is None:
            return None
        try:
            params[param["parameterName"]] = _to_internal(param, parse_value(param, text))
        except ValueError:
            return None
    return params


def _frozen(spec: dict, record: TrialRecord, distributions: dict):
    params = _internal_params(spec, record.hyperparameters)
    if params is None:
        return None
    if record.state == "RUNNING":
        state, value = TrialState.RUNNING, None
    elif record.state == "SUCCEEDED" and record.objective is not None and not record.stopped_early:
        state, value = TrialState.COMPLETE, record.objective
    elif record.state == "SUCCEEDED" and record.intermediate:
        state, value = TrialState.PRUNED, None
    else:
        state, value = TrialState.FAIL, None  # failed, cancelled, or no metric to learn from
    return optuna.trial.create_trial(
        params=params,
        distributions={name: distributions[name] for name in params},
        value=value,
        state=state,
        intermediate_values=dict(record.intermediate),
    )


def build_study(spec: dict, history: list[TrialRecord], seed: int | None = None) -> optuna.Study:
    """An in-memory study holding every trial in ``history`` (this job's and a resumed job's)."""
    distributions = {p["parameterName"]: distribution(p) for p in spec["params"]}
    study = optuna.create_study(
        direction=direction(spec), sampler=_sampler(spec, seed), pruner=optuna.pruners.NopPruner()
    )
    for record in history:
        frozen = _frozen(spec, record, distributions)
        if frozen is not None:
            study.add_trial(frozen)
    return study


def suggest(spec: dict, history: list[TrialRecord], count: int, seed: int | None = None) -> list[dict[str, str]]:
    """Up to ``count`` new trials' hyperparameters, as strings in params order.

    Grid search returns the next untried grid points (fewer, or none, once the grid is
    exhausted); the others ask Optuna, which sees running trials (constant liar for TPE).
    ``seed`` should differ between calls (the number of trials so far works) or a seeded
    sampler would repeat itself.
    """
    if count <= 0:
        return []
    if sampler_name(spec) == "grid":
        tried = {json.dumps(r.hyperparameters, sort_keys=True) for r in history}
        fresh = [point for point in grid(spec) if json.dumps(point, sort_keys=True) not in tried]
        return fresh[:count]
    study = build_study(spec, history, seed)
    distributions = {p["parameterName"]: distribution(p) for p in spec["params"]}
    suggestions = []
    for _ in range(count):
        if not is_conditional(spec):
            trial = study.ask(distributions)
            suggestions.append(
                {
                    p["parameterName"]: format_value(p, _to_external(p, trial.params[p["parameterName"]]))
                    for p in spec["params"]
                }
            )
            continue
        trial = study.ask()  # define-by-run: a child is asked for only when its parent activates it
        values: dict[str, str] = {}
        for param in spec["params"]:
            if active(param, values):
                name = param["parameterName"]
                values[name] = format_value(param, _to_external(param, _ask(trial, name, distributions[name])))
        suggestions.append(values)
    return suggestions


def _ask(trial: optuna.Trial, name: str, dist):
    if isinstance(dist, FloatDistribution):
        return trial.suggest_float(name, dist.low, dist.high, log=dist.log)
    if isinstance(dist, IntDistribution):
        return trial.suggest_int(name, dist.low, dist.high, log=dist.log)
    return trial.suggest_categorical(name, dist.choices)


def should_stop_early(spec: dict, history: list[TrialRecord], current: TrialRecord) -> bool:
    """Whether a running trial falls behind: Optuna's MedianPruner over the finished trials'
    reports at the same step. Needs PRUNER_STARTUP_TRIALS finished trials with results."""
    if not early_stopping(spec) or not current.intermediate:
        return False
    others = [r for r in history if r.state != "RUNNING"]
    final_steps = [max(r.intermediate) for r in others if r.state == "SUCCEEDED" and r.intermediate]
    if final_steps and max(current.intermediate) >= min(final_steps):
        # At the step where finished trials made their last report, a trial is finishing, not
        # falling behind: a trainer that reports once, at the end, still gets to export.
        return False
    study = build_study(spec, others)
    distributions = {p["parameterName"]: distribution(p) for p in spec["params"]}
    frozen = _frozen(spec, current, distributions)
    if frozen is None:
        return False
    pruner = optuna.pruners.MedianPruner(n_startup_trials=PRUNER_STARTUP_TRIALS, n_warmup_steps=0)
    return bool(pruner.prune(study, frozen))


# --- the hypertune metric file ------------------------------------------------------------------


def parse_metric_file(text: str, tag: str) -> list[dict]:
    """Reports for ``tag`` in a cloudml-hypertune file, oldest first, in the API's Measurement
    shape ``{"trainingStep": "<int64>", "objectiveValue": <double>}`` plus the report's timestamp.

    The library rewrites the whole file on every report, so a read can catch it half written:
    lines that do not parse are skipped and picked up on the next read.
    """
    reports = []
    for line in text.splitlines():
        try:
            entry = json.loads(line)
            value = float(entry[tag])
            step = int(float(entry.get("global_step") or 0))
        except (ValueError, KeyError, TypeError):
            continue
        if not math.isfinite(value):
            continue
        reports.append({"trainingStep": str(step), "objectiveValue": value, "timestamp": entry.get("timestamp")})
    return reports


def merge_reports(known: list[dict], new: list[dict]) -> list[dict]:
    """All reports seen so far: the library keeps only its last 100, we keep them all."""
    seen = {(r["timestamp"], r["trainingStep"]) for r in known}
    return known + [r for r in new if (r["timestamp"], r["trainingStep"]) not in seen]


def intermediate_values(reports: list[dict]) -> dict[int, float]:
    return {int(r["trainingStep"]): r["objectiveValue"] for r in reports}
