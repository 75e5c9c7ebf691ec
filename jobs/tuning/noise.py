"""How noisy a study's objective is, and which of its trials cannot be told apart from the best.

Two trials that ran with the same parameters rarely report the same objective: a seed, the order of
the data, the machine all move it. Where a study shows how much, its best trial is only "best" when
it beats the others by more than that. The noise is estimated from what the study itself holds, and
nothing is said where it holds no basis for it:

- **Repeated trials**: trials whose parameters are the same, or near enough (every numeric one
  within ``NEAR`` of its range's width on its own scale, as ``jobs.tuning.edges.position`` places
  it; every categorical one equal). Their objectives' spread around each group's mean, pooled over
  the groups, is the noise of one trial's objective.
- **Step-to-step variation**: otherwise, the last ``LAST_REPORTS`` reports of the best trials. The
  differences between successive reports (around their own mean, so a curve still rising does not
  count as noise) vary twice as much as one report does.

The band is ``SPREAD`` standard deviations either side; a trial whose objective is within it of the
best is "within noise". A noise of 0 (a trainer that gives the same result every time) is no band.

Pure: plain dicts and numbers, no database.
"""

from __future__ import annotations

import bisect
import math
from dataclasses import dataclass

from jobs.tuning import edges

NEAR = 0.001  # parameters this close, as a share of their range's width on their scale, are the same
LAST_REPORTS = 5  # a trial's last reports whose step-to-step variation is read
MIN_REPORTS = 3  # a trial needs this many reports (two differences) to say anything
SPREAD = 2.0  # the band is this many standard deviations either side
ROUNDING = 1e-9  # a noise below this share of the objectives' size is rounding, not noise


@dataclass(frozen=True)
class Result:
    """A succeeded trial, as the estimate reads it."""

    trial: str
    params: dict  # parameter name → value (a number or a string, as the trial ran with it)
    objective: float
    reports: list | None = None  # its reports of the objective (``allMetrics``), read only for the best trials


@dataclass(frozen=True)
class Noise:
    """One trial's objective's noise (a standard deviation) and how it was estimated."""

    sigma: float
    source: str  # "repeats" or "steps"
    groups: int  # groups of repeated trials, or trials whose reports were read
    trials: int  # trials in those groups (for "steps", as ``groups``)

    @property
    def margin(self) -> float:
        """How far from the best a trial's objective may be and still not be told apart from it."""
        return SPREAD * self.sigma

    @property
    def how(self) -> str:
        """How the noise was estimated, in words."""
        if self.source == "repeats":
            groups = "1 group" if self.groups == 1 else f"{self.groups} groups"
            return f"the spread of repeated trials ({groups} of trials with the same parameters, {self.trials} trials)"
        best = "the best trial" if self.groups == 1 else f"the {self.groups} best trials"
        return f"the step-to-step variation of the last {LAST_REPORTS} reported values of {best}"

    @property
    def margin_text(self) -> str:
        return f"{self.margin:.3g}"

    def within(self, objective: float, best: float) -> bool:
        return abs(objective - best) <= self.margin


def estimate(spec: dict, results: list[Result], maximize: bool = True) -> Noise | None:
    """The noise of ``results`` (a study's succeeded trials that ran to the end), or None where there
    is no basis: no repeated trials, and no best trial with ``MIN_REPORTS`` reports, or a noise of 0."""
    finite = [r for r in results if math.isfinite(r.objective)]
    found = from_repeats(spec, finite) or from_steps(finite, maximize)
    # Rounding leaves a straight line's differences a hair apart: that is no noise either.
    negligible = ROUNDING * max((abs(r.objective) for r in finite), default=0.0)
    return found if found is not None and found.sigma > negligible else None


def from_repeats(spec: dict, results: list[Result]) -> Noise | None:
    """The pooled standard deviation of the objective within groups of repeated trials."""
    groups = [g for g in repeats(spec, results) if len(g) >= 2]
    if not groups:
        return None
    squares, freedom = 0.0, 0
    for group in groups:
        values = [r.objective for r in group]
        mean = sum(values) / len(values)
        squares += sum((v - mean) ** 2 for v in values)
        freedom += len(values) - 1
    return Noise(math.sqrt(squares / freedom), "repeats", len(groups), sum(len(g) for g in groups))


def from_steps(results: list[Result], maximize: bool = True) -> Noise | None:
    """The noise of one report, from the successive differences of the best trials' last reports."""
    ranked = sorted(results, key=lambda r: -r.objective if maximize else r.objective)
    top = ranked[: edges.top_count(len(ranked))]
    squares, freedom, read = 0.0, 0, 0
    for result in top:
        last = [v for v in reported(result.reports) if math.isfinite(v)][-LAST_REPORTS:]
        if len(last) < MIN_REPORTS:
            continue
        steps = [b - a for a, b in zip(last, last[1:], strict=False)]
        mean = sum(steps) / len(steps)
        squares += sum((s - mean) ** 2 for s in steps)
        freedom += len(steps) - 1
        read += 1
    if not read:
        return None
    # A difference of two reports varies twice as much as one report: var(a - b) = 2 σ².
    return Noise(math.sqrt(squares / freedom / 2), "steps", read, read)


def repeats(spec: dict, results: list[Result]) -> list[list[Result]]:
    """``results`` in groups of the same (or near-identical) parameters, each group in the order its
    trials came; a trial joins the first group whose first trial it is near."""
    params = [p for p in spec.get("params") or [] if p.get("parameterName")]
    numeric = [p for p in params if p.get("type") in ("DOUBLE", "INTEGER", "DISCRETE")]
    others = [p["parameterName"] for p in params if p not in numeric]
    groups: dict[tuple, list[list[Result]]] = {}  # the categorical values → groups with them
    firsts: dict[tuple, list[tuple[float, int]]] = {}  # … → (first coordinate, group index), sorted
    coordinates: dict[tuple, list[tuple[float | None, ...]]] = {}  # … → each group's first trial's
    for result in results:
        key = tuple(str(result.params.get(name)) for name in others)
        spots = tuple(_spot(p, result.params.get(p["parameterName"])) for p in numeric)
        kept, starts, places = groups.setdefault(key, []), firsts.setdefault(key, []), coordinates.setdefault(key, [])
        group = _near(spots, starts, places)
        if group is None:
            kept.append([result])
            places.append(spots)
            bisect.insort(starts, (_first(spots), len(kept) - 1))
        else:
            kept[group].append(result)
    return [group for kept in groups.values() for group in kept]


def _near(spots: tuple, starts: list[tuple[float, int]], places: list[tuple]) -> int | None:
    """The first group (by when it started) whose first trial sits within ``NEAR`` of ``spots``."""
    first = _first(spots)
    low = bisect.bisect_left(starts, (first - NEAR, -1))
    found = None
    for start, index in starts[low:]:
        if start > first + NEAR:
            break
        if (found is None or index < found) and _close(spots, places[index]):
            found = index
    return found


def _first(spots: tuple) -> float:
    """The coordinate groups are sorted by: the first numeric parameter's (a missing one sorts apart)."""
    return -math.inf if not spots or spots[0] is None else spots[0]


def _close(a: tuple, b: tuple) -> bool:
    return all(x == y if x is None or y is None else abs(x - y) <= NEAR for x, y in zip(a, b, strict=True))


def _spot(param: dict, value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return edges.position(param, number) if math.isfinite(number) else None


def reported(reports) -> tuple[float, ...]:
    """A trial's reports (``allMetrics``: ``{"trainingStep", "objectiveValue"}``) as values in step order."""
    pairs = []
    for report in reports or []:
        try:
            pairs.append((int(str(report.get("trainingStep") or 0)), float(report["objectiveValue"])))
        except (KeyError, TypeError, ValueError):
            continue
    return tuple(value for _, value in sorted(pairs, key=lambda pair: pair[0]))


def results_of(trials: list[dict]) -> list[Result]:
    """The succeeded trials that ran to the end of a HyperparameterOutput's ``trials`` (the API's), in
    trial order (as the trial table reads them: the best of equal objectives is the first)."""
    found = []
    for trial in sorted(trials, key=lambda t: int(t.get("trialId") or 0)):
        metric = trial.get("finalMetric") or {}
        if trial.get("state") != "SUCCEEDED" or trial.get("isTrialStoppedEarly") or "objectiveValue" not in metric:
            continue
        try:
            objective = float(metric["objectiveValue"])
        except (TypeError, ValueError):
            continue
        found.append(
            Result(
                str(trial.get("trialId", "")), trial.get("hyperparameters") or {}, objective, trial.get("allMetrics")
            )
        )
    return found
