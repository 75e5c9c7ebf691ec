"""The console's jobs list: search, filters and sort order, read from and written back to the URL.

A ``JobListQuery`` is the list's whole state as plain values (what the address bar holds, so a
list can be shared and the back button returns to it); ``apply`` turns it into a QuerySet.
Unknown or malformed values are ignored, as a hand-edited URL should not break the page.

Beside the fixed columns, the list shows the columns the user chose (``col=metric:accuracy``,
``col=arg:--lr``): a job's final metrics, read from its summary rows (:class:`~jobs.models.JobMetric`)
so that sorting and filtering by them stays in SQL, and the flags of its trainer ``args``. A chosen
column sorts (``sort=metric:accuracy``, ``sort=-arg:--lr``) and filters (``min.metric:accuracy=0.9``,
``max.…``, and for args ``eq.arg:--optimizer=adam``). A hyperparameter tuning job's value in the column of
the metric it tunes is its best trial's objective, the one its study page calls best.

The list's own columns (``LIST_COLUMNS``) may be hidden and reordered: ``columns=name,state,created``
says which show, in that order; the job's name is always there, first, and stays in view while the
table scrolls sideways, with the chosen columns right after it. A URL without ``columns`` opens the
order the user saved (``COLUMNS_PREFERENCE``), else all of them in the default order.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field, replace
from datetime import date
from urllib.parse import urlencode

from django.db.models import (
    Case,
    CharField,
    DateTimeField,
    DurationField,
    ExpressionWrapper,
    F,
    FloatField,
    OuterRef,
    Q,
    Subquery,
    TextField,
    Value,
    When,
)
from django.db.models.fields.json import KT, KeyTextTransform, KeyTransform
from django.db.models.functions import Cast, Coalesce
from django.db.models.lookups import Exact
from django.utils import timezone

from algorithms import definitions as algos
from jobs.metrics import compare
from jobs.models import Job, JobMetric, JobState, Trial

# Column → ordering, ascending; the second key keeps pages stable among equal values.
SORTS = {
    "id": ("job_id", "pk"),
    "created": ("create_time", "pk"),
    "state": ("state", "-create_time", "-pk"),
    "duration": ("duration", "pk"),
}
# The direction a column sorts in when first clicked: newest and longest first.
FIRST_DESCENDING = {"created", "duration"}
DEFAULT_SORT = "-created"

# The kinds of job, each job exactly one (the first that applies, in this order).
JOB_TYPES = {
    "prediction": "Batch prediction",
    "tuning": "Hyperparameter tuning",
    "builtin": "Built-in algorithm",
    "training": "Training",
}
BUILTIN_IMAGES = sorted(image for algorithm in algos.ALGORITHMS for image in algorithm.images)

# A chosen column: ``metric:NAME`` (a final metric, named as JobMetric names it) or ``arg:NAME``.
COLUMN_KINDS = ("metric", "arg")
MAX_COLUMNS = 8
MAX_NAME = 520
ARG_NAMES_FROM = 1000  # the chooser offers the flags of the project's latest this many jobs
NOTE_SHOWN = 60  # characters of a note the list shows before "…"

# The list's own columns, in their default order. The job's name (PINNED) is always shown, first;
# the others may be hidden and reordered, in the URL (``columns=``) and as the user's preference.
LIST_COLUMNS = {
    "name": "Job ID",
    "state": "State",
    "creator": "Creator",
    "runtime": "Runtime",
    "tier": "Scale tier",
    "created": "Created",
    "ended": "Ended",
    "queued": "Queued",
    "running": "Running",
    "type": "Type",
    "labels": "Labels",
    "note": "Note",
}
PINNED = "name"
DEFAULT_SHOWN = tuple(LIST_COLUMNS)
COLUMNS_PREFERENCE = "jobs.list.columns"  # aiconsole.preferences: the user's own order


def _date(text: str) -> date | None:
    try:
        return date.fromisoformat(text)
    except ValueError:
        return None


def _number(text: str) -> float | None:
    try:
        number = float(text)
    except (TypeError, ValueError):
        return None
    return number if math.isfinite(number) else None


def _column(text: str) -> str | None:
    kind, colon, name = text.partition(":")
    return text if colon and kind in COLUMN_KINDS and name.strip() and len(name) <= MAX_NAME else None


def read_shown(values) -> tuple[tuple[str, ...], list[str]]:
    """``columns`` values (comma-separated, or the parameter repeated) → the list's columns to show,
    in that order with the name first whatever they say, and the names that are no column of it."""
    shown: list[str] = [PINNED]
    unknown: list[str] = []
    for value in values:
        for key in str(value).split(","):
            key = key.strip()
            if key and key not in shown and key not in unknown:
                (shown if key in LIST_COLUMNS else unknown).append(key)
    return tuple(shown), unknown


def unknown_columns_message(unknown: list[str]) -> str:
    """Why a saved order was refused: which names are no column of the list, and which are."""
    named = ", ".join(f"“{name[:40]}”" for name in unknown[:3])
    if len(unknown) > 3:
        named += f" and {len(unknown) - 3} more"
    verb = "is" if len(unknown) == 1 else "are"
    return f"Columns: {named} {verb} not a column of the jobs list; the columns are {', '.join(LIST_COLUMNS)}."


def saved_shown(saved) -> tuple[str, ...]:
    """A user's saved columns as the list shows them (a saved name no longer a column is dropped)."""
    if not isinstance(saved, list) or not all(isinstance(key, str) for key in saved):
        return DEFAULT_SHOWN
    return read_shown(saved)[0]


def _values(params, name: str) -> list[str]:
    """Every value of ``name`` (a QueryDict's list, or a plain dict's one value)."""
    getlist = getattr(params, "getlist", None)
    values = getlist(name) if getlist else ([params[name]] if name in params else [])
    return [str(v).strip()[: MAX_NAME + 20] for v in values]


@dataclass(frozen=True)
class Column:
    """A chosen column, as the heading and the filter fields show it."""

    key: str  # metric:accuracy

    @property
    def kind(self) -> str:
        return self.key.partition(":")[0]

    @property
    def name(self) -> str:
        return self.key.partition(":")[2]

    @property
    def is_metric(self) -> bool:
        return self.kind == "metric"


@dataclass(frozen=True)
class JobListQuery:
    q: str = ""
    state: str = ""
    creator: str = ""
    label: str = ""
    created_from: str = ""  # YYYY-MM-DD, inclusive
    created_to: str = ""
    type: str = ""  # a JOB_TYPES key
    sort: str = DEFAULT_SORT
    page: int = 1
    columns: tuple[str, ...] = ()  # chosen columns, in the order chosen
    # (column, bound) pairs: min./max. any chosen column (numbers), eq. an arg column (text)
    minimum: tuple[tuple[str, float], ...] = field(default=())
    maximum: tuple[tuple[str, float], ...] = field(default=())
    equal: tuple[tuple[str, str], ...] = field(default=())
    shown: tuple[str, ...] = DEFAULT_SHOWN  # the list's own columns shown, in order, the name first
    implied: tuple[str, ...] = DEFAULT_SHOWN  # what a URL without ``columns`` shows this user

    @classmethod
    def from_params(cls, params, saved=None) -> JobListQuery:
        """The list a URL asks for; ``saved``: the user's saved columns, for a URL that names none."""
        implied = DEFAULT_SHOWN if saved is None else saved_shown(saved)
        asked = [value for value in _values(params, "columns") if value.strip(", ")]
        text = {name: (_values(params, name) or [""])[0][:200] for name in SIMPLE_PARAMS}
        page = text["page"]
        columns: list[str] = []
        for value in _values(params, "col"):
            key = _column(value)
            if key and key not in columns and len(columns) < MAX_COLUMNS:
                columns.append(key)
        minimum: list[tuple[str, float]] = []
        maximum: list[tuple[str, float]] = []
        equal: list[tuple[str, str]] = []
        for key in columns:
            for bounds, prefix in ((minimum, "min."), (maximum, "max.")):
                number = _number((_values(params, prefix + key) or [""])[0])
                if number is not None:
                    bounds.append((key, number))
            wanted = (_values(params, "eq." + key) or [""])[0]
            if wanted and key.startswith("arg:"):
                equal.append((key, wanted[:200]))
        sort = text["sort"]
        known_sort = sort.lstrip("-") in SORTS or sort.lstrip("-") in columns
        return cls(
            q=text["q"],
            creator=text["creator"],
            label=text["label"],
            state=text["state"] if text["state"] in JobState.values else "",
            created_from=text["created_from"] if _date(text["created_from"]) else "",
            created_to=text["created_to"] if _date(text["created_to"]) else "",
            type=text["type"] if text["type"] in JOB_TYPES else "",
            sort=sort if known_sort else DEFAULT_SORT,
            page=int(page) if page.isdigit() and int(page) > 0 else 1,
            columns=tuple(columns),
            minimum=tuple(minimum),
            maximum=tuple(maximum),
            equal=tuple(equal),
            shown=read_shown(asked)[0] if asked else implied,
            implied=implied,
        )

    @property
    def filtered(self) -> bool:
        return any(
            (self.q, self.state, self.creator, self.label, self.created_from, self.created_to, self.type)
            + (self.minimum, self.maximum, self.equal)
        )

    @property
    def chosen(self) -> list[Column]:
        return [Column(key) for key in self.columns]

    def bound(self, kind: str, key: str) -> str:
        """A chosen column's filter value as its field shows it (``min``, ``max`` or ``eq``)."""
        pairs = {"min": self.minimum, "max": self.maximum, "eq": self.equal}[kind]
        value = next((v for k, v in pairs if k == key), None)
        return "" if value is None else (f"{value:g}" if isinstance(value, float) else str(value))

    def headings(self) -> list[dict]:
        """The chosen columns as their headings (sort link, aria-sort) and filter fields show them."""
        return [
            {
                "column": column,
                **self.sort_link(column.key),
                "min": self.bound("min", column.key),
                "max": self.bound("max", column.key),
                "eq": self.bound("eq", column.key),
            }
            for column in self.chosen
        ]

    @property
    def later(self) -> tuple[str, ...]:
        """The list's own columns shown after the name (and after the chosen ones), in order."""
        return self.shown[1:]

    def column_order(self) -> list[dict]:
        """What the chooser lists to hide and reorder: the shown columns in their order, then the
        hidden ones in the default order (the name, always first, apart)."""
        hidden = [key for key in DEFAULT_SHOWN if key not in self.shown]
        return [{"key": key, "title": LIST_COLUMNS[key], "shown": key in self.shown} for key in [*self.later, *hidden]]

    @property
    def columns_param(self) -> str:
        """``columns`` as this list's links carry it; empty where a URL without it opens the same
        columns for anyone (every column, in the default order)."""
        if self.shown == DEFAULT_SHOWN and self.implied == DEFAULT_SHOWN:
            return ""
        return ",".join(self.shown)

    @property
    def clear_url(self) -> str:
        """This list without its filters, in its order and with its columns."""
        return self.url(**{name: "" for name in FILTER_PARAMS}, minimum=(), maximum=(), equal=())

    def as_params(self) -> list[tuple[str, str]]:
        """The values that differ from the defaults, in a stable order."""
        default = JobListQuery()
        params = [
            (name, str(getattr(self, name))) for name in SIMPLE_PARAMS if getattr(self, name) != getattr(default, name)
        ]
        params += [("col", key) for key in self.columns]
        params += [(f"min.{key}", f"{value!r}") for key, value in self.minimum]
        params += [(f"max.{key}", f"{value!r}") for key, value in self.maximum]
        params += [(f"eq.{key}", value) for key, value in self.equal]
        if self.columns_param:
            params.append(("columns", self.columns_param))
        return params

    def url(self, **changes) -> str:
        """``?…`` for this list with ``changes``; a new filter or order starts at page 1."""
        changed = replace(self, **({"page": 1} | changes))
        return "?" + urlencode(changed.as_params())

    def sort_link(self, column: str) -> dict:
        """A column heading's link (the other direction once sorted by it) and its aria-sort."""
        current = self.sort.lstrip("-")
        descending = self.sort.startswith("-")
        if current == column:
            target = column if descending else f"-{column}"
            aria = "descending" if descending else "ascending"
        else:
            target = f"-{column}" if column in FIRST_DESCENDING else column
            aria = ""
        return {"url": self.url(sort=target), "aria_sort": aria}

    def apply(self, jobs):
        """The jobs this list shows, in its order: a QuerySet, or (sorted or filtered by an arg column,
        which SQL cannot read out of ``args``) a list of them."""
        if self.q:
            labels_text = Cast("labels", output_field=TextField())
            jobs = jobs.alias(labels_text=labels_text).filter(
                Q(job_id__icontains=self.q) | Q(labels_text__icontains=self.q)
            )
        if self.state:
            jobs = jobs.filter(state=self.state)
        if self.creator:
            jobs = jobs.filter(created_by__username=self.creator)
        if self.label:
            jobs = jobs.filter(_label_match(self.label))
        if self.created_from:
            jobs = jobs.filter(create_time__date__gte=_date(self.created_from))
        if self.created_to:
            jobs = jobs.filter(create_time__date__lte=_date(self.created_to))
        if self.type:
            jobs = jobs.alias(job_type=type_expression()).filter(job_type=self.type)
        jobs = self._metric_filters(jobs)
        column = self.sort.lstrip("-")
        descending = self.sort.startswith("-")
        if column.startswith("metric:"):
            alias = self._metric_alias(column)
            jobs = jobs.alias(**{alias: _final(column)})
            key = F(alias).desc(nulls_last=True) if descending else F(alias).asc(nulls_last=True)
            jobs = jobs.order_by(key, "-pk" if descending else "pk")
        elif column == "duration":
            # The running time (from RUNNING to its end, or to now), as the column shows it: a job
            # that never ran has none and sorts last either way; its time in the queue is apart.
            now = Value(timezone.now(), output_field=DateTimeField())
            running = ExpressionWrapper(Coalesce(F("end_time"), now) - F("start_time"), output_field=DurationField())
            key = F("duration").desc(nulls_last=True) if descending else F("duration").asc(nulls_last=True)
            jobs = jobs.alias(duration=running).order_by(key, "-pk" if descending else "pk")
        elif column in SORTS:
            order = SORTS[column]
            if descending:
                order = tuple(key[1:] if key.startswith("-") else f"-{key}" for key in order)
            jobs = jobs.order_by(*order)
        if self._arg_work:
            return self._arg_ordered(jobs)
        return jobs

    def _metric_alias(self, key: str) -> str:
        return f"final_{self.columns.index(key)}"

    def _metric_filters(self, jobs):
        for key, bound, lookup in [(k, v, "gte") for k, v in self.minimum] + [(k, v, "lte") for k, v in self.maximum]:
            if key.startswith("metric:"):
                alias = self._metric_alias(key)
                jobs = jobs.alias(**{alias: _final(key)}).filter(**{f"{alias}__{lookup}": bound})
        return jobs

    @property
    def _arg_work(self) -> bool:
        bounded = [k for k, _ in self.minimum] + [k for k, _ in self.maximum] + [k for k, _ in self.equal]
        return self.sort.lstrip("-").startswith("arg:") or any(k.startswith("arg:") for k in bounded)

    def _arg_ordered(self, jobs) -> ArgOrdered:
        """Filter and sort by arg columns in Python, over the ids and args of the jobs SQL kept (a
        project's jobs, read once as two small columns), then read only the ones shown."""
        flags_of = {
            pk: compare.parse_args(args if isinstance(args, list) else [])
            for pk, args in jobs.values_list("pk", KeyTransform("args", "training_input"))
        }
        return ArgOrdered(jobs, self._arg_keep(flags_of))

    def _arg_keep(self, flags_of: dict) -> list[int]:
        ordered = list(flags_of)
        for key, bound in self.minimum:
            if key.startswith("arg:"):
                ordered = [
                    pk for pk in ordered if (n := _number(flags_of[pk].get(key[4:], ""))) is not None and n >= bound
                ]
        for key, bound in self.maximum:
            if key.startswith("arg:"):
                ordered = [
                    pk for pk in ordered if (n := _number(flags_of[pk].get(key[4:], ""))) is not None and n <= bound
                ]
        for key, wanted in self.equal:
            ordered = [pk for pk in ordered if flags_of[pk].get(key[4:]) == wanted]
        column = self.sort.lstrip("-")
        if column.startswith("arg:"):
            name = column[4:]
            present = [pk for pk in ordered if name in flags_of[pk]]
            missing = [pk for pk in ordered if name not in flags_of[pk]]
            present.sort(key=lambda pk: _arg_sort_key(flags_of[pk][name]), reverse=self.sort.startswith("-"))
            ordered = present + missing  # a job without the flag sorts last either way
        return ordered


FILTER_PARAMS = ("q", "state", "creator", "label", "created_from", "created_to", "type")
SIMPLE_PARAMS = ("q", "state", "creator", "label", "created_from", "created_to", "type", "sort", "page")


def _arg_sort_key(value: str) -> tuple:
    """Numbers in numeric order, before text in text order."""
    number = _number(value)
    return (0, number, "") if number is not None else (1, 0.0, value)


class ArgOrdered:
    """The list's jobs in an order decided in Python: sliced as the view slices a QuerySet."""

    def __init__(self, jobs, ordered: list[int]):
        self.jobs, self.ordered = jobs, ordered

    def __getitem__(self, window: slice) -> list:
        pks = self.ordered[window]
        found = self.jobs.order_by().in_bulk(pks)
        return [found[pk] for pk in pks if pk in found]

    def __len__(self) -> int:
        return len(self.ordered)


def _final(key: str) -> Case:
    """A job's value in the metric column ``key``, for sorting and filtering in SQL: its final value,
    or for a tuning job whose objective that metric is, its best trial's (as ``rows`` shows it)."""
    name = key.partition(":")[2]
    own = Subquery(JobMetric.objects.filter(job=OuterRef("pk"), name=name).values("value")[:1])
    return Case(When(_tunes(name), then=study_best()), default=own, output_field=FloatField())


def _tunes(name: str) -> Q:
    """A hyperparameter tuning job whose objective (``hyperparameterMetricTag``) is the metric ``name``."""
    return Q(training_input__hyperparameters__hyperparameterMetricTag=name)


def objective_tag(job) -> str:
    """The metric a tuning job's study optimizes, as its spec names it ("" for any other job)."""
    spec = (job.training_input or {}).get("hyperparameters")
    tag = spec.get("hyperparameterMetricTag") if isinstance(spec, dict) else None
    return tag if isinstance(tag, str) else ""


def study_best(value: str = "objective") -> Case:
    """A tuning job's best trial, as its study page finds it: of the succeeded trials with a final
    objective, the highest (the lowest for a MINIMIZE goal), the first by number on a tie. Its
    objective, or with ``value="trial_id"`` its id; for SQL, over the job as ``OuterRef("pk")``."""
    objective = Cast(KeyTextTransform("objectiveValue", "final_metric"), FloatField())
    trials = (
        Trial.objects.filter(job=OuterRef("pk"), state=JobState.SUCCEEDED)
        .annotate(objective=objective)
        .filter(objective__isnull=False)
    )
    highest = Subquery(trials.order_by("-objective", "number").values(value)[:1])
    lowest = Subquery(trials.order_by("objective", "number").values(value)[:1])
    return Case(When(training_input__hyperparameters__goal="MINIMIZE", then=lowest), default=highest)


def _study_bests(jobs: list, names: list[str]) -> dict[int, tuple[float, str]]:
    """The best trial's objective and id of each tuning job among ``jobs`` whose objective is one of
    the metrics ``names``: one query for all of them."""
    studies = [job.pk for job in jobs if objective_tag(job) in names]
    if not studies:
        return {}
    found = (
        Job.objects.filter(pk__in=studies)
        .annotate(best_value=study_best(), best_trial=study_best("trial_id"))
        .values_list("pk", "best_value", "best_trial")
    )
    return {pk: (value, trial) for pk, value, trial in found if value is not None}


def type_expression() -> Case:
    """The job's JOB_TYPES key, as SQL (the first that applies, as :func:`job_type` says)."""
    tuning = Q(training_input__has_key="hyperparameters") & ~Q(training_input__hyperparameters={})
    return Case(
        When(prediction_input__isnull=False, then=Value("prediction")),
        When(tuning & ~Q(training_input__hyperparameters=None), then=Value("tuning")),
        When(training_input__masterConfig__imageUri__in=BUILTIN_IMAGES, then=Value("builtin")),
        default=Value("training"),
        output_field=CharField(),
    )


def job_type(job) -> str:
    if job.prediction_input is not None:
        return "prediction"
    if job.is_hyperparameter_job:
        return "tuning"
    if algos.for_training_input(job.training_input) is not None:
        return "builtin"
    return "training"


def _label_match(text: str) -> Q:
    """``key=value`` (or ``key:value``): that label with that value; ``key``: the label is set.
    The key is compared as data (KeyTextTransform), never spliced into a lookup path."""
    for separator in ("=", ":"):
        if separator in text:
            key, _, value = text.partition(separator)
            return Q(Exact(KeyTextTransform(key.strip(), "labels"), value.strip()))
    return Q(labels__has_key=text)


def creators(jobs) -> list[str]:
    """The usernames of whoever submitted ``jobs``, for the creator filter."""
    names = jobs.order_by().exclude(created_by=None).values_list("created_by__username", flat=True).distinct()
    return sorted(names)


def column_choices(jobs, query: JobListQuery) -> dict[str, list[str]]:
    """What the column chooser offers: the metric names of ``jobs`` and the arg flags of the latest
    ``ARG_NAMES_FROM`` of them, with the chosen ones always there."""
    metrics = set(
        JobMetric.objects.filter(job__in=jobs.order_by().values("pk")).values_list("name", flat=True).distinct()
    )
    args: set[str] = set()
    latest = jobs.order_by("-create_time").values_list(
        KeyTransform("args", "training_input"), KT("training_input__hyperparameters__hyperparameterMetricTag")
    )[:ARG_NAMES_FROM]
    for value, tag in latest:
        args.update(
            name for name in compare.parse_args(value if isinstance(value, list) else []) if name.startswith("-")
        )
        if tag:  # a study shows its best trial's objective in that metric's column
            metrics.add(tag)
    for column in query.chosen:
        (metrics if column.is_metric else args).add(column.name)
    return {"metric": sorted(metrics), "arg": sorted(args)}


@dataclass
class Row:
    """One job as the list shows it: its type, chosen cells, clickable labels and note."""

    job: object
    type: str
    cells: list[dict]
    labels: list[dict]
    note_short: str


def rows(jobs: list, query: JobListQuery) -> list[Row]:
    """The shown jobs with what the chosen columns say of them (one query for all their metrics, one
    for the best trials of the studies among them)."""
    metric_names = [c.name for c in query.chosen if c.is_metric]
    finals: dict[tuple[int, str], JobMetric] = {}
    if metric_names and jobs:
        for metric in JobMetric.objects.filter(job__in=[j.pk for j in jobs], name__in=metric_names):
            finals[(metric.job_id, metric.name)] = metric
    bests = _study_bests(jobs, metric_names) if metric_names else {}
    result = []
    for job in jobs:
        flags = compare.parse_args((job.training_input or {}).get("args") or []) if job.training_input else {}
        cells = []
        for column in query.chosen:
            if column.is_metric and job.pk in bests and objective_tag(job) == column.name:
                best, trial = bests[job.pk]
                cells.append({"text": f"{best:.6g}", "title": f"best trial: {trial}", "numeric": True})
            elif column.is_metric:
                final = finals.get((job.pk, column.name))
                cells.append(
                    {"text": f"{final.value:.6g}", "title": f"step {final.step}", "numeric": True}
                    if final
                    else {"text": "", "title": "", "numeric": True}
                )
            else:
                value = flags.get(column.name)
                cells.append({"text": value or "", "title": "", "numeric": _number(value or "") is not None})
        labels = [
            {"text": f"{k}={v}", "url": query.url(label=f"{k}={v}"), "current": query.label == f"{k}={v}"}
            for k, v in (job.labels or {}).items()
        ]
        note = job.note or ""
        short = note if len(note) <= NOTE_SHOWN else note[:NOTE_SHOWN].rstrip() + "…"
        result.append(Row(job=job, type=job_type(job), cells=cells, labels=labels, note_short=short))
    return result
