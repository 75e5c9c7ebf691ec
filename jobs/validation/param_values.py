"""A tuning param's value as the trainer gets it on its command line, and back.

Plain functions over the HyperparameterSpec's param dicts, beside their rules and without Optuna: the
API's translations (``jobs.vertex.translate``) say values the way trials do without loading the tuner.
"""

from __future__ import annotations

import math


def format_value(param: dict, value) -> str:
    """The string the trainer gets: integers without a fraction, doubles at full precision."""
    kind = param["type"]
    if kind == "CATEGORICAL":
        return str(value)
    if kind == "INTEGER" or (kind == "DISCRETE" and float(value).is_integer()):
        return str(int(value))
    return repr(float(value))


def parse_value(param: dict, text: str):
    """A stored string back to its typed value; ValueError when it is outside the spec."""
    kind = param["type"]
    if kind == "CATEGORICAL":
        if text not in param["categoricalValues"]:
            raise ValueError(text)
        return text
    number = float(text)
    if kind == "DISCRETE":
        for choice in param["discreteValues"]:
            if math.isclose(float(choice), number, rel_tol=1e-9, abs_tol=1e-12):
                return float(choice)
        raise ValueError(text)
    if not float(param["minValue"]) <= number <= float(param["maxValue"]):
        raise ValueError(text)
    return int(number) if kind == "INTEGER" else number
