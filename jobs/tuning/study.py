"""The study section of a tuning job's page: its trial table, as the query string asks for it.

One column per parameter and per metric (the objective's final value and its best report for the
goal, and the final value of every other tag the trials reported), with state, step and duration.
Any column sorts; the rows filter by state, by a parameter's range or categories and by a metric
threshold; optional columns are chosen. All of it is read from the query string
(``TrialQuery.from_params``) and written back into links (``TrialQuery.url``), so a link shows the
same view. The rows come from the job's Trial rows (``maxTrials`` bounds them: a few thousand at
most) and one grouped query over its trials' metric points.
"""

from __future__ import annotations

import math
import threading
from collections import OrderedDict
from dataclasses import dataclass, field, replace
from urllib.parse import urlencode

from django.db.models import Count, Max
from django.utils import timezone

from jobs.models import JobState, MetricPoint, MetricSource
from jobs.tuning import edges, noise

# Named orders of earlier releases' links; a column key (``p.lr``, ``-objective``) sorts by it.
SORTS = {"best": "Best first", "number": "Trial number", "newest": "Newest first"}
STATES = [JobState.SUCCEEDED, JobState.FAILED, JobState.RUNNING, JobState.CANCELLED, "STOPPED_EARLY"]
ERROR_LINES = 6  # the last lines of a failed trial's traceback shown inline
NUMERIC_TYPES = ("DOUBLE", "INTEGER", "DISCRETE")
ROWS_SHOWN = 100  # rows drawn until "Show all" (trial_rows=all): the page paints fast at 2,000 trials
OTHER_METRICS_MAX = 12  # columns for tags other than the objective: the first ones by name


def failure(message: str) -> tuple[str, list[str]]:
    """A failed trial's error message as its reason (first line) and its last error lines."""
    lines = [line for line in (message or "").splitlines() if line.strip()]
    if not lines:
        return "", []
    return lines[0].strip(), lines[1:][-ERROR_LINES:]


def goal(job) -> str:
    return ((job.training_input or {}).get("hyperparameters") or {}).get("goal") or "MAXIMIZE"


def metric_tag(job) -> str:
    spec = (job.training_input or {}).get("hyperparameters") or {}
    return spec.get("hyperparameterMetricTag") or "training/hptuning/metric"


@dataclass(frozen=True)
class Column:
    """A column of the trial table. ``key`` names it in the query string: ``state``, ``step``,
    ``duration``, ``objective``, ``objective.best``, ``p.NAME`` (a parameter), ``m.NAME`` (another
    metric's final value)."""

    key: str
    label: str
    numeric: bool = True
    categories: tuple[str, ...] = ()  # a categorical parameter's values, for its filter
    log: bool = False  # a UNIT_LOG_SCALE parameter
    help: str = ""

    @property
    def parameter(self) -> str:
        return self.key[2:] if self.key.startswith("p.") else ""


def columns(job, other_metrics: list[str]) -> list[Column]:
    """The table's optional columns, in the order they are shown."""
    spec = (job.training_input or {}).get("hyperparameters") or {}
    result = [Column("state", "State", numeric=False)]
    for param in spec.get("params") or []:
        name = param.get("parameterName", "")
        numeric = param.get("type") in NUMERIC_TYPES
        result.append(
            Column(
                f"p.{name}",
                name,
                numeric=numeric,
                categories=() if numeric else tuple(param.get("categoricalValues") or ()),
                log=param.get("scaleType") == "UNIT_LOG_SCALE",
                help=f"Hyperparameter {name}",
            )
        )
    tag = metric_tag(job)
    result.append(Column("objective", tag, help=f"The last report of {tag}: the trial's final metric"))
    word = "lowest" if goal(job) == "MINIMIZE" else "highest"
    result.append(Column("objective.best", f"{tag} ({word})", help=f"The {word} of the trial's reports of {tag}"))
    result += [Column(f"m.{name}", name, help=f"The last report of {name}") for name in other_metrics]
    result += [Column("step", "Step", help="The training step of the final metric"), Column("duration", "Duration")]
    return result


@dataclass(frozen=True)
class TrialQuery:
    """The trial table's whole state, as the query string holds it."""

    sort: str = "best"
    state: str = ""
    ranges: tuple[tuple[str, float | None, float | None], ...] = ()  # (column key, min, max)
    kept: tuple[tuple[str, tuple[str, ...]], ...] = ()  # (parameter column key, categories kept)
    shown: tuple[str, ...] | None = None  # the optional columns shown; None: all of them
    everything: bool = False  # every matching row, not the first ROWS_SHOWN

    @classmethod
    def from_params(cls, params, known: list[Column]) -> TrialQuery:
        """Malformed or unknown values are ignored, as a hand-edited URL should not break the page."""
        by_key = {c.key: c for c in known}
        sort = params.get("trial_sort") or "best"
        if sort not in SORTS and sort.lstrip("-") not in by_key and sort.lstrip("-") != "trial":
            sort = "best"
        state = params.get("trial_state") if params.get("trial_state") in STATES else ""
        ranges = []
        for column in known:
            if column.numeric:
                low, high = _number(params.get(f"min.{column.key}")), _number(params.get(f"max.{column.key}"))
                if low is not None or high is not None:
                    ranges.append((column.key, low, high))
        kept = []
        for column in known:
            if column.categories and f"in.{column.key}" in params:
                values = tuple(v for v in column.categories if v in params.getlist(f"in.{column.key}"))
                if len(values) < len(column.categories):  # all of them ticked: no filter
                    kept.append((column.key, values))
        shown = None
        if "cols" in params:
            chosen = params.getlist("col") or params.get("cols", "").split(",")
            shown = tuple(c.key for c in known if c.key in chosen)
            if len(shown) == len(known):  # every column: the default, and the shorter link
                shown = None
        everything = params.get("trial_rows") == "all"
        return cls(sort=sort, state=state, ranges=tuple(ranges), kept=tuple(kept), shown=shown, everything=everything)

    @property
    def filtered(self) -> bool:
        return bool(self.state or self.ranges or self.kept)

    @property
    def filter_count(self) -> int:
        return len(self.ranges) + len(self.kept)

    def showing(self, column: Column) -> bool:
        return self.shown is None or column.key in self.shown

    def range_of(self, key: str) -> tuple[float | None, float | None]:
        return next(((low, high) for k, low, high in self.ranges if k == key), (None, None))

    def range_text_of(self, key: str) -> tuple[str, str]:
        """The (from, to) a numeric column is filtered to, as the URL writes them; empty where open."""
        low, high = self.range_of(key)
        return ("" if low is None else number_text(low), "" if high is None else number_text(high))

    def kept_of(self, key: str) -> tuple[str, ...] | None:
        return next((values for k, values in self.kept if k == key), None)

    def as_params(self) -> list[tuple[str, str]]:
        params = []
        if self.sort != "best":
            params.append(("trial_sort", self.sort))
        if self.state:
            params.append(("trial_state", self.state))
        for key, low, high in self.ranges:
            if low is not None:
                params.append((f"min.{key}", number_text(low)))
            if high is not None:
                params.append((f"max.{key}", number_text(high)))
        for key, values in self.kept:
            params += [(f"in.{key}", v) for v in values] or [(f"in.{key}", "")]
        if self.shown is not None:
            params.append(("cols", ",".join(self.shown)))
        if self.everything:
            params.append(("trial_rows", "all"))
        return params

    def url(self, **changes) -> str:
        return "?" + urlencode(replace(self, **changes).as_params())

    @property
    def query_string(self) -> str:
        return urlencode(self.as_params())

    def sort_link(self, key: str) -> dict:
        """A heading's link (the other direction once sorted by it) and its aria-sort."""
        current = {"best": "", "number": "trial", "newest": "-trial"}.get(self.sort, self.sort)
        if current.lstrip("-") == key:
            descending = current.startswith("-")
            return {
                "url": self.url(sort=key if descending else f"-{key}"),
                "aria_sort": "descending" if descending else "ascending",
            }
        return {"url": self.url(sort=key), "aria_sort": ""}


def _number(text) -> float | None:
    try:
        number = float(text)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def number_text(number: float) -> str:
    return str(int(number)) if number == int(number) and abs(number) < 1e15 else repr(number)


@dataclass(frozen=True)
class TrialFacts:
    """What the table says of a trial besides its columns' values (read without building a Trial)."""

    trial_id: str
    state: str
    is_stopped_early: bool
    objective_value: float | None

    @property
    def reported_no_metric(self) -> bool:
        return self.state == JobState.SUCCEEDED and self.objective_value is None


@dataclass
class TrialRow:
    trial: TrialFacts
    values: dict[str, float | str | None] = field(default_factory=dict)
    failure_reason: str = ""
    error_lines: list[str] = field(default_factory=list)


def _trials_own(job):
    """The points the trials reported, not what the console sampled of their replicas (``system``)."""
    return MetricPoint.objects.filter(job=job).exclude(trial_id="").exclude(source=MetricSource.SYSTEM)


def other_metric_tags(job) -> list[str]:
    """Tags the trials reported besides the objective (``tag (run)`` for a summary run's)."""
    tag = metric_tag(job)
    pairs = _trials_own(job).values_list("tag", "run").distinct().order_by("tag", "run")
    names = [f"{t} ({run})" if run else t for t, run in pairs if not (t == tag and not run)]
    return names[:OTHER_METRICS_MAX]


def _final_values(job, names: list[str]) -> dict[tuple[str, str], float]:
    """(trial id, metric name) → the trial's last report of it (by the order reports arrived)."""
    if not names:
        return {}
    last_ids = _trials_own(job).values("trial_id", "tag", "run").annotate(last=Max("id")).values_list("last", flat=True)
    values = {}
    for trial_id, tag, run, value in MetricPoint.objects.filter(id__in=last_ids).values_list(
        "trial_id", "tag", "run", "value"
    ):
        values[(trial_id, f"{tag} ({run})" if run else tag)] = value
    return values


def rows(job, known: list[Column]) -> list[TrialRow]:
    """Every trial with its value in each column, in trial order. Read as plain values: model
    instances cost a 2,000-trial study's table a third of its time."""
    maximize = goal(job) != "MINIMIZE"
    others = [c.key[2:] for c in known if c.key.startswith("m.")]
    finals = _final_values(job, others)
    parameters = [(c.key, c.parameter, c.numeric) for c in known if c.key.startswith("p.")]
    now = timezone.now()
    result = []
    fields = ("trial_id", "number", "state", "is_stopped_early", "hyperparameters", "final_metric")
    best = "report_max" if maximize else "report_min"
    for trial_id, number, state, stopped, hyperparameters, metric, reported, start, end, error in job.trials.order_by(
        "number"
    ).values_list(*fields, best, "start_time", "end_time", "error_message"):
        metric = metric or {}
        objective = metric.get("objectiveValue")
        step = metric.get("trainingStep")
        values: dict[str, float | str | None] = {
            "trial": number,
            "state": "STOPPED_EARLY" if stopped else state,
            "objective": objective,
            "objective.best": reported if reported is not None else objective,
            "step": int(str(step)) if str(step or "").lstrip("-").isdigit() else None,
            "duration": ((end or now) - start).total_seconds() if start else None,
        }
        for key, name, numeric in parameters:
            raw = (hyperparameters or {}).get(name)
            values[key] = _number(raw) if numeric else raw
        for name in others:
            values[f"m.{name}"] = finals.get((trial_id, name))
        row = TrialRow(TrialFacts(trial_id, state, stopped, objective), values)
        if error:
            row.failure_reason, row.error_lines = failure(error)
        result.append(row)
    return result


def select(table: list[TrialRow], query: TrialQuery, maximize: bool) -> list[TrialRow]:
    """The rows the query keeps, in its order; rows without a value sort last either way."""
    kept = table
    if query.state == "STOPPED_EARLY":
        kept = [r for r in kept if r.trial.is_stopped_early]
    elif query.state:
        kept = [r for r in kept if r.trial.state == query.state]
    for key, low, high in query.ranges:
        kept = [
            r
            for r in kept
            if isinstance(value := r.values.get(key), int | float)
            and (low is None or value >= low)
            and (high is None or value <= high)
        ]
    for key, values in query.kept:
        kept = [r for r in kept if r.values.get(key) in values]
    sort = query.sort
    if sort == "best":
        sign = -1 if maximize else 1
        return sorted(kept, key=lambda r: (r.trial.objective_value is None, sign * (r.trial.objective_value or 0.0)))
    if sort == "newest":
        return list(reversed(kept))
    if sort == "number":
        return list(kept)
    key, descending = sort.lstrip("-"), sort.startswith("-")
    present = [r for r in kept if r.values.get(key) is not None]
    missing = [r for r in kept if r.values.get(key) is None]
    numeric = all(isinstance(r.values[key], int | float) for r in present)

    def order(row: TrialRow) -> float | str:
        value = row.values[key]
        return value if numeric and isinstance(value, int | float) else str(value)

    present.sort(key=order, reverse=descending)
    return present + missing


@dataclass(frozen=True)
class Study:
    """A study's table before any query: its columns, every row, and its trials' count by state."""

    columns: list[Column]
    rows: list[TrialRow]
    counts: dict[str, int]
    edges: list[edges.Edge] = field(default_factory=list)  # where the best trials sit at a bound
    noise: noise.Noise | None = None  # how noisy its objective is, where it holds a basis to say


# A finished study's trials no longer change: its table is kept, so that each re-sort or filter of
# a large study is work in memory (the rows are read, never changed, by ``select`` and the page).
FINISHED_KEPT = 8
_finished: OrderedDict[tuple, Study] = OrderedDict()
_finished_lock = threading.Lock()


def study_table(job) -> Study:
    """The study's table, read from the database, or kept from an earlier read once the job ended."""
    key = None
    if job.is_terminal and job.end_time:  # and the trials as they are now: a late change is a new table
        marker = job.trials.aggregate(n=Count("pk"), last=Max("end_time"))
        key = (job.pk, job.job_id, job.end_time, marker["n"], marker["last"])
    if key is not None:
        with _finished_lock:
            if (kept := _finished.get(key)) is not None:
                _finished.move_to_end(key)
                return kept
    known = columns(job, other_metric_tags(job))
    counts = dict(job.trials.values_list("state").annotate(n=Count("pk")).order_by())
    read = rows(job, known)
    table = Study(known, read, counts, search_edges(job, read), objective_noise(job, read))
    if key is not None:
        with _finished_lock:
            _finished[key] = table
            while len(_finished) > FINISHED_KEPT:
                _finished.popitem(last=False)
    return table


def trial_table(job, params) -> dict:
    """Rows, columns and controls for the trial table; ``params`` is the page's query string."""
    whole = study_table(job)
    known, table, counts = whole.columns, whole.rows, whole.counts
    query = TrialQuery.from_params(params, known)
    maximize = goal(job) != "MINIMIZE"
    shown = [c for c in known if query.showing(c)]
    best = _best(table, maximize)
    return {
        "trial_rows": (matching := select(table, query, maximize))[: None if query.everything else ROWS_SHOWN],
        "trial_matching": len(matching),
        "trial_query": query,
        "trial_columns": known,
        "trial_shown": shown,
        "trial_sort": query.sort,
        "trial_state": query.state,
        "trial_states": STATES,
        "trial_total": sum(counts.values()),
        "trial_counts": counts,
        "trial_completed": counts.get(JobState.SUCCEEDED, 0) + counts.get(JobState.FAILED, 0),
        "trial_running": counts.get(JobState.RUNNING, 0),
        "trial_failures": any(r.failure_reason for r in table),
        "best_trial_id": best,
        "trial_goal": goal(job),
        "study_edges": whole.edges,
        "study_noise": whole.noise,
        "within_noise": within_noise(table, best, whole.noise),
    }


def search_edges(job, table: list[TrialRow]) -> list[edges.Edge]:
    """Parameters whose best succeeded trials sit at a bound of the searched range."""
    spec = (job.training_input or {}).get("hyperparameters") or {}
    names = [p.get("parameterName", "") for p in spec.get("params") or []]
    results = [
        ({name: row.values.get(f"p.{name}") for name in names}, value)
        for row in table
        if row.trial.state == JobState.SUCCEEDED
        and not row.trial.is_stopped_early
        and (value := _number(row.trial.objective_value)) is not None
    ]
    return edges.find(spec, results, maximize=goal(job) != "MINIMIZE")


def objective_noise(job, table: list[TrialRow]) -> noise.Noise | None:
    """How noisy the study's objective is (``jobs.tuning.noise``), from its succeeded trials that ran
    to the end: their parameters, and the reports of the best of them."""
    spec = (job.training_input or {}).get("hyperparameters") or {}
    names = [p.get("parameterName", "") for p in spec.get("params") or []]
    ran = [
        (row, value)
        for row in table
        if row.trial.state == JobState.SUCCEEDED
        and not row.trial.is_stopped_early
        and (value := _number(row.trial.objective_value)) is not None
    ]
    maximize = goal(job) != "MINIMIZE"
    # Only the best trials' reports are read (all the step-to-step estimate needs): a few rows'.
    top = sorted(ran, key=lambda r: -r[1] if maximize else r[1])[: edges.top_count(len(ran))]
    reports = dict(
        job.trials.filter(trial_id__in=[row.trial.trial_id for row, _ in top]).values_list("trial_id", "all_metrics")
    )
    results = [
        noise.Result(
            row.trial.trial_id,
            {name: row.values.get(f"p.{name}") for name in names},
            value,
            reports.get(row.trial.trial_id),
        )
        for row, value in ran
    ]
    return noise.estimate(spec, results, maximize)


def within_noise(table: list[TrialRow], best: str, found: noise.Noise | None) -> frozenset[str]:
    """The succeeded trials, the best left out, whose objective is within the noise of the best's."""
    if found is None or not best:
        return frozenset()
    values = {
        row.trial.trial_id: value
        for row in table
        if row.trial.state == JobState.SUCCEEDED and (value := _number(row.trial.objective_value)) is not None
    }
    return frozenset(t for t, v in values.items() if t != best and found.within(v, values[best]))


def _best(table: list[TrialRow], maximize: bool) -> str:
    """The succeeded trial with the best objective for the goal (the first on a tie)."""
    best = None
    for row in table:
        value = row.trial.objective_value
        if row.trial.state == JobState.SUCCEEDED and value is not None:
            if best is None or (value > best[0] if maximize else value < best[0]):
                best = (value, row.trial.trial_id)
    return best[1] if best else ""


def progress(job) -> dict | None:
    """What a study's header says while it runs and after: trials done (succeeded or failed) of its
    maximum, running now, and the best final objective so far with its trial. Two small queries, no
    table: the header refreshes every second."""
    if not job.is_hyperparameter_job:
        return None
    counts = dict(job.trials.values_list("state").annotate(n=Count("pk")).order_by())
    maximize = goal(job) != "MINIMIZE"
    best = None
    for trial_id, metric in job.trials.filter(state=JobState.SUCCEEDED).values_list("trial_id", "final_metric"):
        value = _number((metric or {}).get("objectiveValue"))
        if value is not None and (best is None or (value > best[0] if maximize else value < best[0])):
            best = (value, trial_id)
    spec = (job.training_input or {}).get("hyperparameters") or {}
    return {
        "done": counts.get(JobState.SUCCEEDED, 0) + counts.get(JobState.FAILED, 0),
        "running": counts.get(JobState.RUNNING, 0) + counts.get(JobState.PREPARING, 0),
        "max": spec.get("maxTrials") or 1,
        "best_value": number_text(best[0]) if best else "",
        "best_trial": best[1] if best else "",
    }


def trial_costs(job) -> dict[int, tuple[float, float]]:
    """What each finished trial cost, by trial number: (seconds it ran, ML units it consumed)."""
    return {
        number: (max(0.0, (end - start).total_seconds()), units or 0.0)
        for number, start, end, units in job.trials.filter(start_time__isnull=False, end_time__isnull=False)
        .values_list("number", "start_time", "end_time", "consumed_ml_units")
        .order_by()
    }


def report_times(job) -> dict[tuple[str, int], float]:
    """When each trial's report of the objective was written: (trial id, step) → seconds since the
    epoch, from its metric points (a cloudml-hypertune report's before a summary scalar's)."""
    times: dict[tuple[str, int], float] = {}
    points = _trials_own(job).filter(tag=metric_tag(job))
    for trial_id, step, wall in points.order_by("source", "pk").values_list("trial_id", "step", "wall_time"):
        times.setdefault((trial_id, step), wall)
    return times
