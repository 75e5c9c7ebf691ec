"""Jobs compared side by side: pure functions over plain data, shared by the compare page
(``jobs.metrics.compare_views``) and ``aiconsole jobs compare``.

An *entry* is a job (``jobId``) or one trial of a tuning job (``jobId/trialId``). For each entry the
caller gives its wire-format ``trainingInput``, labels, the trial's hyperparameters (if a trial) and
its metric points; these functions turn them into

- the inputs as rows (tier, machines, runtime, args parsed into flags, labels, hyperparameters),
  each marked when the entries differ on it;
- the final value of every metric (the last point by step, per tag and run), the best one marked.

Which value is best, per tag (first rule that applies):

1. the user's choice (``?lower=TAG`` / ``?higher=TAG`` on the page, ``--lower``/``--higher`` in the CLI);
2. the goal of a compared trial's study, for its ``hyperparameterMetricTag``;
3. lower is better when the tag's last path segment names a loss or an error (``LOWER_IS_BETTER``);
4. otherwise higher is better.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

from jobs import catalogue

MAX_ENTRIES = 20
# The name of a quantity to minimize: loss, error(s), mse, mae, rmse, perplexity, cost, regret, wer/cer,
# latency, time (as a word of the tag, so "timestep_accuracy" is not one).
LOWER_IS_BETTER = re.compile(
    r"loss|error|(^|[_\-. ])(err|mse|mae|rmse|mape|perplexity|ppl|cost|regret|wer|cer|"
    r"latency|time|seconds)($|[_\-. ])",
    re.IGNORECASE,
)
ROLE_NAMES = {"master": "Master", "worker": "Workers", "ps": "Parameter servers", "evaluator": "Evaluators"}
MISSING = "—"


@dataclass(frozen=True)
class Entry:
    job_id: str
    trial_id: str = ""

    @property
    def label(self) -> str:
        return f"{self.job_id}/{self.trial_id}" if self.trial_id else self.job_id


ENTRY = re.compile(r"^[A-Za-z][A-Za-z0-9_]{0,127}(/[0-9]{1,10})?$")


def parse_entries(values: Iterable[str]) -> tuple[list[Entry], list[str]]:
    """Entries from ``jobs=a,b/3`` values (comma-separated, repeatable), in order, each once; and
    the pieces that are not a job id or ``jobId/trialId``."""
    entries: list[Entry] = []
    malformed: list[str] = []
    for value in values:
        for piece in (p.strip() for p in value.split(",")):
            if not piece:
                continue
            if not ENTRY.match(piece):
                malformed.append(piece)
                continue
            job_id, _, trial_id = piece.partition("/")
            entry = Entry(job_id, trial_id)
            if entry not in entries:
                entries.append(entry)
    return entries, malformed


# --- inputs -------------------------------------------------------------------------------------------


def parse_args(args: Iterable[str]) -> dict[str, str]:
    """A trainer's ``args`` as flags: ``--lr=0.1`` and ``--lr 0.1`` are ``{"--lr": "0.1"}``, a flag
    followed by another flag (or nothing) is ``"true"``, anything else is ``arg 1``, ``arg 2``, …"""
    args = [str(a) for a in args or []]
    flags: dict[str, str] = {}
    positional = 0
    index = 0
    while index < len(args):
        arg = args[index]
        if arg.startswith("-") and len(arg) > 1 and not _is_number(arg):
            name, equals, value = arg.partition("=")
            if not equals:
                following = args[index + 1] if index + 1 < len(args) else None
                if following is not None and not (following.startswith("-") and not _is_number(following)):
                    value = following
                    index += 1
                else:
                    value = "true"
            flags[name] = value
        else:
            positional += 1
            flags[f"arg {positional}"] = arg
        index += 1
    return flags


def _is_number(text: str) -> bool:
    try:
        float(text)
    except ValueError:
        return False
    return True


def _machines(training_input: dict) -> dict[str, str]:
    """Each role's machines: ``n1-standard-8 × 4 + 1 NVIDIA_TESLA_T4 each``."""
    try:
        plans = catalogue.replica_plan(training_input)
    except Exception:  # a job stored by an older release, or with an unknown tier
        return {}
    roles: dict[str, list] = {}
    for plan in plans:
        roles.setdefault(plan.task_type, []).append(plan)
    result = {}
    for role, group in roles.items():
        first = group[0]
        text = f"{first.machine_type} × {len(group)}"
        if first.accelerator_type and first.accelerator_count:
            text += f" + {first.accelerator_count} {first.accelerator_type} each"
        result[ROLE_NAMES.get(role, role)] = text
    return result


def inputs(
    training_input: dict | None, labels: dict | None = None, hyperparameters: dict | None = None
) -> dict[str, tuple[str, str]]:
    """One entry's inputs, ``row name → (kind, value)``; kinds: ``job``, ``machine``, ``flag``,
    ``label``. A trial's hyperparameters are flags (the trainer gets them as ``--name=value``
    after its args) and are listed in a ``Tuned hyperparameters`` row."""
    training_input = training_input or {}
    rows: dict[str, tuple[str, str]] = {"Scale tier": ("job", training_input.get("scaleTier") or "BASIC")}
    rows |= {name: ("machine", value) for name, value in _machines(training_input).items()}
    for name, key in (
        ("Runtime version", "runtimeVersion"),
        ("Python version", "pythonVersion"),
        ("Region", "region"),
        ("Python module", "pythonModule"),
    ):
        rows[name] = ("job", str(training_input.get(key) or MISSING))
    packages = training_input.get("packageUris") or []
    rows["Packages"] = ("job", ", ".join(str(p).rsplit("/", 1)[-1] for p in packages) or MISSING)
    if training_input.get("masterConfig", {}).get("imageUri"):
        rows["Container image"] = ("job", training_input["masterConfig"]["imageUri"])
    tuned = {f"--{name}": str(value) for name, value in (hyperparameters or {}).items()}
    if hyperparameters is not None:
        rows["Tuned hyperparameters"] = ("job", ", ".join(sorted(hyperparameters)) or MISSING)
    rows |= {name: ("flag", value) for name, value in (parse_args(training_input.get("args")) | tuned).items()}
    rows |= {f"label {key}": ("label", str(value)) for key, value in sorted((labels or {}).items())}
    return rows


@dataclass
class InputRow:
    name: str
    kind: str
    values: list[str]

    @property
    def differs(self) -> bool:
        return len(set(self.values)) > 1


KIND_ORDER = {"job": 0, "machine": 1, "flag": 2, "label": 3}


def input_rows(per_entry: list[dict[str, tuple[str, str]]]) -> list[InputRow]:
    """The entries' inputs side by side (``MISSING`` where an entry lacks a row), in a stable order:
    job settings, machines, flags (by name), labels."""
    names: dict[str, str] = {}
    for rows in per_entry:
        for name, (kind, _) in rows.items():
            names.setdefault(name, kind)
    order = list(names)
    ordered = sorted(
        order, key=lambda n: (KIND_ORDER[names[n]], n if names[n] in ("flag", "label") else "", order.index(n))
    )
    return [InputRow(name, names[name], [rows.get(name, ("", MISSING))[1] for rows in per_entry]) for name in ordered]


# --- final metrics --------------------------------------------------------------------------------------


def metric_name(tag: str, run: str) -> str:
    return f"{tag} ({run})" if run else tag


def final_values(points: Iterable[tuple[str, str, int, float]]) -> dict[str, tuple[int, float]]:
    """``metric name → (step, value)`` of the last point by step per tag and run, from
    ``(tag, run, step, value)`` in recorded order (at the same step the later report wins)."""
    last: dict[str, tuple[int, float]] = {}
    for tag, run, step, value in points:
        name = metric_name(tag, run)
        if name not in last or step >= last[name][0]:
            last[name] = (int(step), float(value))
    return last


# How the final-metrics table reads each metric's points (``?agg=`` on the page, ``at`` the step).
AGGREGATIONS = {"last": "Last value", "min": "Minimum", "max": "Maximum", "step": "Value at step"}


def aggregate_values(
    points: Iterable[tuple[str, str, int, float]], how: str = "last", at: int | None = None
) -> dict[str, tuple[int, float]]:
    """``metric name → (step, value)`` by ``how``: the last point by step (``final_values``), the
    lowest or highest finite value (the first step it was reached), or the last report at or before
    step ``at`` (``step``; a metric with none by then has no value)."""
    if how not in ("min", "max", "step"):
        return final_values(points)
    result: dict[str, tuple[int, float]] = {}
    for tag, run, step, value in points:
        name, step, value = metric_name(tag, run), int(step), float(value)
        held = result.get(name)
        if how == "step":
            if at is not None and step <= at and (held is None or step >= held[0]):
                result[name] = (step, value)
        elif math.isfinite(value) and (
            held is None
            or (value < held[1] if how == "min" else value > held[1])
            or (value == held[1] and step < held[0])
        ):
            result[name] = (step, value)
    return result


@dataclass
class MetricRow:
    name: str
    tag: str
    lower_is_better: bool
    reason: str
    values: list[tuple[int, float] | None]
    best: set[int] = field(default_factory=set)  # indexes of the entries holding the best value
    baseline: int | None = None  # the entry the others are read against (``?baseline=``)

    @property
    def cells(self) -> list[dict | None]:
        base = self.values[self.baseline] if self.baseline is not None else None
        return [
            None
            if v is None
            else {
                "value": format_value(v[1]),
                "step": v[0],
                "best": i in self.best,
                "baseline": i == self.baseline,
                "delta": f"{v[1] - base[1]:+.6g}" if base is not None and i != self.baseline else "",
            }
            for i, v in enumerate(self.values)
        ]


def lower_is_better(
    tag: str, goals: dict[str, str], lower: Iterable[str] = (), higher: Iterable[str] = ()
) -> tuple[bool, str]:
    """Whether a lower value of ``tag`` is better, and why (see the module's docstring)."""
    if tag in set(lower):
        return True, "your choice"
    if tag in set(higher):
        return False, "your choice"
    if tag in goals:
        return goals[tag] == "MINIMIZE", f"the study's goal ({goals[tag]})"
    if LOWER_IS_BETTER.search(tag.rsplit("/", 1)[-1]):
        return True, "a loss or error, by its name"
    return False, "not a loss or error, by its name"


def metric_rows(
    per_entry: list[dict[str, tuple[int, float]]],
    tags: dict[str, str],
    goals: dict[str, str],
    lower: Iterable[str] = (),
    higher: Iterable[str] = (),
) -> list[MetricRow]:
    """Every metric's final value per entry, best marked. ``tags`` maps each metric name to its tag."""
    lower, higher = list(lower), list(higher)
    rows = []
    for name in sorted({n for values in per_entry for n in values}):
        tag = tags.get(name, name)
        minimize, reason = lower_is_better(tag, goals, lower, higher)
        values = [values.get(name) for values in per_entry]
        finite = [v[1] for v in values if v is not None and math.isfinite(v[1])]
        row = MetricRow(name, tag, minimize, reason, values)
        if finite:
            best = min(finite) if minimize else max(finite)
            row.best = {i for i, v in enumerate(values) if v is not None and v[1] == best}
        rows.append(row)
    return rows


def study_goals(spec: dict | None) -> dict[str, str]:
    """``{hyperparameterMetricTag: goal}`` of a tuning job's HyperparameterSpec (the original's
    default tag when none is named)."""
    if not spec or not spec.get("goal"):
        return {}
    return {spec.get("hyperparameterMetricTag") or "training/hptuning/metric": spec["goal"]}


def parallel_data(labels: list[str], inputs_rows: list[InputRow], metric: MetricRow | None) -> list[dict]:
    """Plain data for ``charts.parallel_coordinates``: one item per entry with the chosen metric,
    its flags (those that differ between the entries) against the metric's final value."""
    if metric is None:
        return []
    flags = [row for row in inputs_rows if row.kind == "flag" and row.differs]
    data = []
    for index, label in enumerate(labels):
        final = metric.values[index]
        if final is None or not math.isfinite(final[1]):
            continue
        data.append({"trial": label, "objective": final[1], "params": {row.name: row.values[index] for row in flags}})
    return data


def format_value(value: float) -> str:
    return f"{value:.6g}"
