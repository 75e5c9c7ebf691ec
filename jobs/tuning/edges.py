"""The edge of a study's search space: parameters whose best trials sit at a bound of the range the
study searched, and that parameter's range widened, for a study resumed over a wider space.

A bound is where the search stopped, not where the objective did: when most of the best trials sit
at it, the best value may lie beyond. "At a bound" is on the parameter's own scale (the one its
trials were sampled on): within ``EDGE_SHARE`` of the range's width of the bound, on a log axis for
``UNIT_LOG_SCALE``, on a reversed log axis for ``UNIT_REVERSE_LOG_SCALE`` (dense near the top), and
the first or last value of a ``DISCRETE`` list. A ``CATEGORICAL`` list has no order, so no bound.

Pure: plain dicts (the HyperparameterSpec's params) and numbers, no database.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass

EDGE_SHARE = 0.05  # a value this close to a bound, as a share of the range's width on its scale, is at it
MIN_TRIALS = 10  # succeeded trials with an objective before anything is said
TOP_SHARE = 0.10  # the best trials are the top 10 % …
TOP_MIN = 5  # … or the top 5, whichever is more
MAX_DISCRETE_VALUES = 1000  # as the validator allows
SIGNIFICANT = 6  # a widened bound is rounded to this many significant digits

# Names that say the parameter is a probability or a share: never widened past 0 or 1.
PROBABILITY_NAME = re.compile(r"dropout|prob|fraction|momentum|subsample|colsample|smoothing", re.IGNORECASE)


@dataclass(frozen=True)
class Edge:
    """The best trials of a study sitting at one bound of one parameter."""

    parameter: str
    bound: str  # "lower" or "upper"
    value: float  # the bound, as the spec says it
    at_bound: int  # how many of the best trials sit at it
    best: int  # of how many best trials (those with a value for the parameter)
    widened: float | None  # the bound widened (None: it is at a hard limit already)
    limit: str = ""  # why it cannot be widened, when it cannot
    discrete: bool = False  # a DISCRETE list's first or last value

    @property
    def query(self) -> str:
        """The resume form's ``widen`` value for this edge."""
        return f"{self.parameter}:{self.bound}"

    @property
    def value_text(self) -> str:
        return text(self.value)

    @property
    def widened_text(self) -> str:
        return "" if self.widened is None else text(self.widened)

    @property
    def how_close(self) -> str:
        """How many of the best trials sit at the bound, in words."""
        if self.discrete:
            return (
                f"{self.at_bound} of the {self.best} best take its {'first' if self.bound == 'lower' else 'last'} value"
            )
        return f"{self.at_bound} of the {self.best} best are within {EDGE_SHARE:.0%} of the range from it"


def top_count(succeeded: int) -> int:
    """How many of ``succeeded`` trials count as the best."""
    return max(TOP_MIN, math.ceil(TOP_SHARE * succeeded))


def position(param: dict, value: float) -> float | None:
    """Where ``value`` sits in the parameter's range on its scale: 0 at the lower bound, 1 at the
    upper (None for a categorical parameter or a value that has no place on the scale)."""
    kind = param.get("type")
    if kind == "DISCRETE":
        values = [float(v) for v in param.get("discreteValues") or []]
        if len(values) < 2:
            return None
        nearest = min(range(len(values)), key=lambda i: abs(values[i] - value))
        return nearest / (len(values) - 1)
    if kind not in ("DOUBLE", "INTEGER"):
        return None
    try:
        low, high = float(param["minValue"]), float(param["maxValue"])
    except (KeyError, TypeError, ValueError):
        return None
    if not high > low:
        return None
    scale = param.get("scaleType")
    if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and low > 0:
        # The reversed axis is a log axis of ``low + high - value`` (jobs.tuning.search): dense near the top.
        shown = low + high - value if scale == "UNIT_REVERSE_LOG_SCALE" else value
        if shown <= 0:
            return None
        share = (math.log(shown) - math.log(low)) / (math.log(high) - math.log(low))
        return 1 - share if scale == "UNIT_REVERSE_LOG_SCALE" else share
    return (value - low) / (high - low)


def _at(param: dict, spot: float, bound: str) -> bool:
    """Whether a value at ``spot`` (its ``position``) sits at the bound."""
    if param.get("type") == "DISCRETE":  # the first or the last value itself
        return spot == (0.0 if bound == "lower" else 1.0)
    return spot <= EDGE_SHARE if bound == "lower" else spot >= 1 - EDGE_SHARE


def find(spec: dict, results: list[tuple[dict, float]], maximize: bool = True) -> list[Edge]:
    """Where the best of ``results`` (each a succeeded trial's ``(parameter name → number, objective)``)
    sit at a bound: at least half of them, and at least twice the share of all the trials that sit
    there (a two-value list has half its trials at each end by chance). Most telling first."""
    finite = [(values, objective) for values, objective in results if math.isfinite(objective)]
    if len(finite) < MIN_TRIALS:
        return []
    ranked = sorted(finite, key=lambda r: -r[1] if maximize else r[1])
    count = top_count(len(finite))
    found = []
    for param in spec.get("params") or []:
        name = param.get("parameterName", "")
        if param.get("type") not in ("DOUBLE", "INTEGER", "DISCRETE"):
            continue
        if param.get("type") == "DISCRETE":
            places = _discrete_places(param)
            spots = [places.get(_number(values.get(name))) for values, _ in ranked]
        else:
            spots = [_spot(param, values.get(name)) for values, _ in ranked]
        top = [spot for spot in spots[:count] if spot is not None]
        every = [spot for spot in spots if spot is not None]
        if len(top) < TOP_MIN:
            continue
        for bound in ("lower", "upper"):
            at_top = sum(_at(param, spot, bound) for spot in top)
            chance = sum(_at(param, spot, bound) for spot in every) / len(every)
            if at_top / len(top) >= max(0.5, min(1.0, 2 * chance)):
                widened, limit = widen_bound(param, bound)
                discrete = param.get("type") == "DISCRETE"
                found.append(Edge(name, bound, _bound(param, bound), at_top, len(top), widened, limit, discrete))
    return sorted(found, key=lambda e: -e.at_bound / e.best)


def _spot(param: dict, value) -> float | None:
    number = _number(value)
    return None if number is None else position(param, number)


def _discrete_places(param: dict) -> dict[float | None, float]:
    """A DISCRETE list's values → their ``position`` (a value off the list has none)."""
    values = [float(v) for v in param.get("discreteValues") or []]
    return {v: i / (len(values) - 1) for i, v in enumerate(values)} if len(values) >= 2 else {}


def _number(value) -> float | None:
    try:
        number = float(value)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _bound(param: dict, bound: str) -> float:
    if param.get("type") == "DISCRETE":
        values = param["discreteValues"]
        return values[0] if bound == "lower" else values[-1]
    return param["minValue"] if bound == "lower" else param["maxValue"]


def limits(param: dict) -> tuple[float, float, str]:
    """The values a parameter's range may never pass, and what they are: a probability (by its name)
    stays within 0 and 1; a range of non-negative values stays so (of whole numbers from 1, at 1 or
    more); a log scale stays above 0."""
    name = param.get("parameterName", "")
    if PROBABILITY_NAME.search(name):
        return 0.0, 1.0, f"{name} reads as a probability, which stays within 0 and 1"
    values = [float(v) for v in param.get("discreteValues") or []] or [
        float(param.get("minValue", 0)),
        float(param.get("maxValue", 0)),
    ]
    whole = param.get("type") == "INTEGER" or (param.get("type") == "DISCRETE" and all(v.is_integer() for v in values))
    if whole and min(values) >= 1:
        return 1.0, math.inf, "its range counts from 1"
    if min(values) >= 0:
        return 0.0, math.inf, "its range is of values of 0 or more"
    return -math.inf, math.inf, ""


def widen_bound(param: dict, bound: str) -> tuple[float | None, str]:
    """The bound moved out by the range's width on the parameter's scale (a doubled range), within
    its limits and whole for an INTEGER parameter; for a DISCRETE list, its new last (or first) value.
    ``(None, why)`` when the bound is at its limit already."""
    widened = widen(param, bound)
    if widened is None:
        return None, limits(param)[2]
    return _bound(widened, bound), ""


def widen(param: dict, bound: str) -> dict | None:
    """The parameter with that bound widened (see ``widen_bound``), or None when it cannot be."""
    kind = param.get("type")
    if kind == "DISCRETE":
        values = _extended(param, bound)
        return {**param, "discreteValues": values} if values else None
    if kind not in ("DOUBLE", "INTEGER") or bound not in ("lower", "upper"):
        return None
    low, high = float(param["minValue"]), float(param["maxValue"])
    floor, ceiling, _ = limits(param)
    scale = param.get("scaleType")
    if scale == "UNIT_LOG_SCALE" and low > 0:
        ratio = high / low
        new = high * ratio if bound == "upper" else low / ratio
    elif scale == "UNIT_REVERSE_LOG_SCALE" and low > 0:
        # One width further on the reversed log axis of ``low + high - value``.
        new = low + high - (low * low / high if bound == "upper" else high * high / low)
        if bound == "lower" and new <= 0:
            new = low * low / high  # a log axis stays above 0: the plain log axis' widening
    else:
        width = high - low
        new = _snapped(high + width if bound == "upper" else low - width, width)
    if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"):
        floor = max(floor, math.ulp(0.0))  # above 0
    new = min(max(new, floor), ceiling)
    if kind == "INTEGER":
        new = math.ceil(new) if bound == "upper" else math.floor(new)
        if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"):
            new = max(new, 1)
        new = int(min(max(new, math.ceil(floor)), ceiling))
    else:
        new = _rounded(new)
        if scale in ("UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE") and new <= 0:
            return None
    current = high if bound == "upper" else low
    if (bound == "upper" and not new > current) or (bound == "lower" and not new < current):
        return None
    return {**param, ("maxValue" if bound == "upper" else "minValue"): new}


def _rounded(value: float) -> float:
    return float(f"{value:.{SIGNIFICANT}g}")


def _snapped(value: float, step: float) -> float:
    """``value`` rounded to SIGNIFICANT digits of ``step`` (0.1 - 0.1 is 0, not 1.4e-17)."""
    if step <= 0 or not math.isfinite(value):
        return value
    return round(value, SIGNIFICANT - 1 - math.floor(math.log10(step)))


def _extended(param: dict, bound: str) -> list | None:
    """A DISCRETE list with as many values again past ``bound`` (its range doubled), spaced as the
    list is: by a constant ratio if its values grow so (16, 32, 64), else by a constant step."""
    values = list(param.get("discreteValues") or [])
    if len(values) < 2 or bound not in ("lower", "upper"):
        return None
    numbers = [float(v) for v in values]
    floor, ceiling, _ = limits(param)
    whole = all(isinstance(v, int) or float(v).is_integer() for v in values)
    count = min(len(values) - 1, MAX_DISCRETE_VALUES - len(values))
    if _geometric(numbers):
        ratio = (numbers[-1] / numbers[0]) ** (1 / (len(numbers) - 1))
        step = (lambda v, n: v * ratio**n) if bound == "upper" else (lambda v, n: v / ratio**n)
    else:
        gap = (numbers[-1] - numbers[0]) / (len(numbers) - 1)
        step = (lambda v, n: v + gap * n) if bound == "upper" else (lambda v, n: v - gap * n)
    edge = numbers[-1] if bound == "upper" else numbers[0]
    added: list[float] = []
    for n in range(1, count + 1):
        value = step(edge, n)
        value = float(round(value)) if whole else _rounded(_snapped(value, abs(step(edge, 1) - edge)))
        if value < floor or value > ceiling:
            break
        last = added[-1] if added else edge
        if (bound == "upper" and value > last) or (bound == "lower" and value < last):
            added.append(value)
    if not added:
        return None
    shown = [int(v) if whole else v for v in added]
    return [*values, *shown] if bound == "upper" else [*reversed(shown), *values]


def _geometric(numbers: list[float]) -> bool:
    """Whether a list's values grow by a ratio more evenly than by a step (1e-4, 1e-3, 1e-2)."""
    if numbers[0] <= 0 or len(numbers) < 3:
        return len(numbers) == 2 and numbers[0] > 0 and numbers[1] / numbers[0] >= 4
    steps = [b - a for a, b in zip(numbers, numbers[1:], strict=False)]
    ratios = [math.log(b / a) for a, b in zip(numbers, numbers[1:], strict=False)]

    def spread(xs: list[float]) -> float:
        mean = sum(xs) / len(xs)
        return (max(xs) - min(xs)) / mean if mean else math.inf

    return spread(ratios) < spread(steps)


def widened_spec(spec: dict, widen_query: str) -> tuple[dict, str] | None:
    """``spec`` with the bound ``widen_query`` names (``NAME:upper``, ``NAME:lower``) widened, and a
    sentence saying so; None when it names no parameter or bound that can be widened."""
    name, _, bound = (widen_query or "").rpartition(":")
    params = list(spec.get("params") or [])
    for index, param in enumerate(params):
        if param.get("parameterName") != name:
            continue
        widened = widen(param, bound)
        if widened is None:
            return None
        params[index] = widened
        old, new = _bound(param, bound), _bound(widened, bound)
        said = f"The {bound} bound of {name} is widened from {text(old)} to {text(new)}"
        return {**spec, "params": params}, said + " in the hyperparameters below."
    return None


def text(value) -> str:
    """A bound as the page writes it: 100, 0.1, 1e-07."""
    number = float(value)
    return str(int(number)) if number.is_integer() and abs(number) < 1e15 else f"{number:g}"
