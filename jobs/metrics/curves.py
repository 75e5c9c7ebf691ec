"""A job's metric curves as Plotly figures, from plain rows: one chart per metric, one line per run.

Rows are ``(tag, trial_id, run, source, step, value, wall_time)`` as ``jobs.metrics.points`` stores them.
A chart holds one metric and its evaluation twin (``loss`` with ``val_loss``; ``train_acc`` with
``val_acc``), evaluation lines dashed. Each line carries its points' wall times in ``meta.wall`` so
the page (``static/charts.js``) can redraw it by wall or relative time, smoothed or on a log axis,
without asking the server again.

A tuning study's lines (one per trial) are coloured by the trial's objective on Viridis, the best
trial's on top and thicker; each per-trial trace says its trial in ``meta.trial`` so other code can
find a trial's lines across charts.
"""

from __future__ import annotations

import math
import re
from dataclasses import dataclass
from urllib.parse import urlencode

import numpy as np
import plotly.graph_objects as go
from plotly.colors import sample_colorscale

from jobs.metrics.charts import COLORWAY, Chart

METRIC_POINTS_PER_SERIES = 2_000  # drawn per line; the CSV download has every point
METRIC_SERIES_MAX = 40  # lines per chart (a large study's trials): the best ones, and a note
FAINT_BANDS = 10  # with every trial shown, the others' lines share this many traces, by objective
LEGEND_MAX = 8  # lines with a legend; past this the legend would cover the chart
EVALUATION_RUN_NAMES = ("validation", "eval", "evaluation", "val", "test")
# A tag's last path segment that names an evaluation of another tag: val_loss is loss's, as is
# validation_loss; train_acc and training_acc are acc itself.
EVALUATION_PREFIX = re.compile(r"^(val|validation|eval|evaluation|test)_(?P<base>.+)$")
TRAINING_PREFIX = re.compile(r"^(train|training)_(?P<base>.+)$")
SYSTEM_PREFIX = "system/"  # the tags of what the console samples of replicas (jobs.metrics.system)
NO_OBJECTIVE_COLOUR = "#8c959f"  # a trial with no result yet: grey, told apart from any Viridis colour

Row = tuple[str, str, str, str, int, float, float]
Point = tuple[int, float, float]  # step, value, wall time
SeriesKey = tuple[str, str, str, str]  # trial, run, source, tag


@dataclass(frozen=True)
class MetricChart(Chart):
    """A metric's chart and the tags it draws (its CSV link downloads them all)."""

    tags: tuple[str, ...] = ()
    beyond_cap: int = 0  # a study's lines past METRIC_SERIES_MAX: left out, or drawn faint with ``every``

    @property
    def csv_query(self) -> str:
        """The CSV download's query for this chart's points: every tag it draws."""
        return urlencode([("tag", tag) for tag in self.tags])

    @property
    def anchor(self) -> str:
        """The chart's element id on the page, for links to it."""
        return "chart-" + re.sub(r"[^A-Za-z0-9_-]+", "-", self.key).strip("-")


@dataclass(frozen=True)
class Study:
    """What colours a tuning study's lines: each trial's objective and which way is better."""

    objectives: dict[str, float]  # trial id → final objective (trials with a result)
    maximize: bool = True
    metric: str = "objective"

    def ranked(self, trial: str) -> tuple:
        """Sort key, best first; trials without a result last, by number."""
        value = self.objectives.get(trial)
        if value is None or not math.isfinite(value):
            return (1, 0.0, _number(trial))
        return (0, -value if self.maximize else value, _number(trial))

    @property
    def best(self) -> str | None:
        finite = [t for t, v in self.objectives.items() if math.isfinite(v)]
        return min(finite, key=self.ranked) if finite else None


def chart_tag(tag: str) -> tuple[str, bool]:
    """The chart a tag is drawn in, and whether it is an evaluation tag: ``val_loss`` →
    ``("loss", True)``, ``training_acc`` → ``("acc", False)``, ``epoch/val_loss`` → ``("epoch/loss", True)``."""
    head, slash, last = tag.rpartition("/")
    for pattern, evaluation in ((EVALUATION_PREFIX, True), (TRAINING_PREFIX, False)):
        match = pattern.match(last)
        if match:
            return f"{head}{slash}{match['base']}", evaluation
    return tag, False


def thin(points: list, limit: int = METRIC_POINTS_PER_SERIES) -> list:
    """At most ``limit`` evenly spaced points of a line, the last one always kept (the points are
    whole tuples: a point's step, value and wall time stay together)."""
    if len(points) <= limit:
        return points
    stride = math.ceil(len(points) / limit)
    kept = points[::stride]
    return kept if kept[-1] == points[-1] else [*kept, points[-1]]


def metric_charts(
    rows,
    *,
    groups: dict[str, str] | None = None,
    points_per_series: int = METRIC_POINTS_PER_SERIES,
    study: Study | None = None,
    baseline: str = "",
    every: bool = False,
) -> list[MetricChart]:
    """One chart per metric (a tag and its evaluation twin), one line per run and tag (per trial in
    a tuning job), from rows in any order.

    ``groups`` (the compare page) names what the second field holds instead of a trial id: each
    group's lines are called ``NAME · run`` and share a colour, groups in the order of their keys
    (``"00"``, ``"01"``, …); ``baseline`` is the group drawn as a thick reference line under the
    others. ``study`` colours a tuning job's trials by their objective; with ``every``, the lines of
    trials past the best METRIC_SERIES_MAX are drawn too, faint, a few shared traces of them
    (``_faint_lines``), so that thousands of trials stay a light figure."""
    charts: dict[str, dict[SeriesKey, list[Point]]] = {}
    for tag, trial, run, source, step, value, wall_time in rows:
        base, _ = chart_tag(tag)
        charts.setdefault(base, {}).setdefault((trial, run, source, tag), []).append((step, value, wall_time))
    # A lone val_accuracy keeps its own name; loss with val_loss is "loss".
    return [
        _metric_chart(base, series, groups, points_per_series, study, baseline, every)
        for base, series in sorted(charts.items())
    ]


def _number(trial: str) -> int:
    return int(trial) if trial.isdigit() else -1


def _evaluation(key: SeriesKey) -> bool:
    return key[1].rsplit("/", 1)[-1] in EVALUATION_RUN_NAMES or chart_tag(key[3])[1]


def _series_order(key: SeriesKey) -> tuple:
    trial, run, source, tag = key
    return (_number(trial), trial, _evaluation(key), run, source, tag)


def _series_name(key: SeriesKey, with_trial: bool, several_tags: bool, groups: dict[str, str] | None) -> str:
    trial, run, source, tag = key
    name = (f"{run} · {tag}" if run else tag) if several_tags else (run or source)
    if groups is not None:
        return f"{groups.get(trial, trial)} · {name}"
    return f"trial {trial} · {name}" if with_trial and trial else name


def _capped(keys: list[SeriesKey], study: Study | None) -> tuple[list[SeriesKey], str]:
    """The lines drawn (at most METRIC_SERIES_MAX: a study's best trials first) and a note."""
    if len(keys) <= METRIC_SERIES_MAX:
        return keys, ""
    if study is not None and study.objectives:
        kept = sorted(keys, key=lambda k: (study.ranked(k[0]), _series_order(k)))[:METRIC_SERIES_MAX]
        trials = len({k[0] for k in kept})
        note = (
            f"The {METRIC_SERIES_MAX} lines of the {trials} best trials by {study.metric} are drawn "
            f"(of {len(keys)} lines); the CSV has them all."
        )
        return sorted(kept, key=_series_order), note
    return keys[
        :METRIC_SERIES_MAX
    ], f"The first {METRIC_SERIES_MAX} of {len(keys)} lines are drawn; the CSV has them all."


def _trial_colours(
    study: Study, trials: set[str], scale_over: set[str] | None = None
) -> tuple[dict[str, str], float, float]:
    """Each of ``trials``' colour on Viridis by its objective, on a scale from the lowest to the
    highest objective of ``scale_over`` (``trials`` themselves by default), and those ends."""
    values = [v for t, v in study.objectives.items() if t in (scale_over or trials) and math.isfinite(v)]
    low, high = (min(values), max(values)) if values else (0.0, 1.0)
    span = (high - low) or 1.0
    colours = {}
    shares: dict[str, float] = {}
    for trial in trials:
        value = study.objectives.get(trial)
        if value is None or not math.isfinite(value):
            colours[trial] = NO_OBJECTIVE_COLOUR
        else:
            # Bright yellow is the best end of the scale whichever way the study goes.
            shares[trial] = min(1.0, max(0.0, (value - low) / span if study.maximize else (high - value) / span))
    # One call for them all: plotly reads its named scales anew on each call (2 ms a call).
    sampled = sample_colorscale("Viridis", list(shares.values()), colortype="rgb") if shares else []
    colours.update(zip(shares, sampled, strict=True))
    return colours, low, high


def _colour_bar(study: Study, low: float, high: float) -> go.Scatter:
    """An invisible trace whose only mark is the colour bar: lines cannot carry a colour scale."""
    return go.Scatter(
        x=[None],
        y=[None],
        mode="markers",
        showlegend=False,
        hoverinfo="skip",
        meta={"role": "scale"},
        marker={
            "color": [low],
            "cmin": low,
            "cmax": high,
            "colorscale": "Viridis",
            "reversescale": not study.maximize,
            "showscale": True,
            "colorbar": {"title": {"text": study.metric, "side": "right"}, "thickness": 12},
        },
    )


def _metric_chart(
    base: str,
    series: dict[SeriesKey, list[Point]],
    groups: dict[str, str] | None,
    points_per_series: int,
    study: Study | None,
    baseline: str,
    every: bool = False,
) -> MetricChart:
    ordered = sorted(series, key=_series_order)
    keys, note = _capped(ordered, study)
    tags = tuple(sorted({k[3] for k in series}, key=lambda t: (chart_tag(t)[1], t)))
    title = base if len(tags) > 1 or base in tags else tags[0]
    with_trial = any(k[0] for k in keys)
    several_tags = len(tags) > 1
    by_objective = study is not None and with_trial and groups is None and bool(study.objectives)
    beyond = len(ordered) - len(keys) if by_objective else 0
    kept = set(keys)
    rest = [k for k in ordered if k not in kept] if every and beyond else []
    if rest and study:
        note = (
            f"Every trial's lines are drawn: the {len(keys)} of the best trials by {study.metric} each on its "
            f"own, the other {len(rest)} faint, in the colour of their {study.metric}. The table has the best "
            "trials' points; the CSV has every point."
        )
    # The colour scale spans every trial drawn, each of its own lines coloured on it.
    drawn_trials = {k[0] for k in keys}
    every_trial = drawn_trials | {k[0] for k in rest}
    colours, low, high = (
        _trial_colours(study, drawn_trials, scale_over=every_trial) if by_objective and study else ({}, 0.0, 1.0)
    )
    best = study.best if by_objective and study else None
    group_colours = {group: n for n, group in enumerate(groups)} if groups is not None else {}
    # The best trial's lines last, drawn on top; a baseline's first, under the others.
    keys = sorted(keys, key=lambda k: (k[0] != baseline if baseline else False, k[0] == best))
    traces, rows, thinned = [], [], False
    for index, key in enumerate(keys):
        points = sorted(series[key], key=lambda p: p[0])
        drawn = thin(points, points_per_series)
        thinned |= len(drawn) < len(points)
        name = _series_name(key, with_trial, several_tags, groups)
        trial = key[0]
        line = {"width": 2, "dash": "dash" if _evaluation(key) else "solid"}
        extra: dict = {}
        if by_objective:
            line["color"] = colours[trial]
            objective = study.objectives.get(trial) if study else None
            shown = f"{objective:.6g}" if objective is not None else "no result yet"
            run = escape_hover(_series_name(key, False, several_tags, None))
            extra["hovertemplate"] = (
                f"Trial {trial} · {run}<br>%{{y:.6g}} at %{{x}}<br>"
                f"{escape_hover(study.metric if study else '')}: {shown}<extra></extra>"
            )
            if trial == best:
                line["width"] = 4
                name += " (best)"
        else:
            colour = group_colours.get(trial, index) if groups is not None else index
            line["color"] = COLORWAY[colour % len(COLORWAY)]
        if baseline and trial == baseline:
            line["width"] = 6
            extra["opacity"] = 0.45
            name += " (baseline)"
        traces.append(
            go.Scatter(
                x=np.array([p[0] for p in drawn]),
                y=np.array([p[1] for p in drawn]),
                name=name,
                mode="lines+markers" if len(drawn) <= 200 else "lines",
                line=line,
                marker={"size": 5},
                # ``customdata`` is left alone: the study page reads a point's trial from it.
                meta={
                    **({"trial": trial} if trial and groups is None else {"series": name}),
                    "wall": np.array([p[2] for p in drawn], dtype=float),
                },
                **extra,
            )
        )
        rows += [[name, step, value] for step, value, _ in drawn]
    if rest and study:
        traces[:0] = _faint_lines(rest, series, study, low, high, points_per_series)  # under the best
    if by_objective and study:
        traces.append(_colour_bar(study, low, high))
    if thinned:
        note = " ".join(
            filter(
                None,
                [
                    note,
                    f"Long lines are thinned to {points_per_series:,} points "
                    "in the chart and the table; the CSV has every point.",
                ],
            )
        )
    figure = go.Figure(traces)
    figure.update_layout(
        xaxis_title="Step",
        yaxis_title=title,
        margin={"t": 20},
        height=360,
        showlegend=len(keys) <= LEGEND_MAX and not by_objective,
        legend={"orientation": "h", "y": -0.25},
        uirevision=title,
        meta={"metric": title},
    )
    if all(tag.startswith(SYSTEM_PREFIX) and "bytes" in tag for tag in tags):
        # The console's own samples of memory and network: 16.1GB, not 16.106127361B (billions),
        # from zero, so a limit that never moves reads 0B … 15GB, not five ticks of 16.1GB.
        figure.update_yaxes(tickformat=".3~s", hoverformat=".4~s", ticksuffix="B", rangemode="tozero")
    return MetricChart(
        title, figure, ["Run", "Step", "Value"], rows, key=f"metric-{title}", note=note, tags=tags, beyond_cap=beyond
    )


def _faint_lines(
    keys: list[SeriesKey],
    series: dict[SeriesKey, list[Point]],
    study: Study,
    low: float,
    high: float,
    points_per_series: int,
) -> list[go.Scatter]:
    """Lines past the best ones, in FAINT_BANDS bands of the objective's range (and apart for
    evaluation lines, dashed): one trace per band, its lines apart (a gap between two, ``meta.gaps``),
    each point saying its trial (``customdata``), as the study's intermediate values chart does."""
    span = (high - low) or 1.0
    bands: dict[tuple[int, bool], tuple[list, list, list, list]] = {}
    for key in keys:
        value = study.objectives.get(key[0])
        if value is None or not math.isfinite(value):
            band = -1  # no result yet: grey
        else:
            share = (value - low) / span if study.maximize else (high - value) / span
            band = min(FAINT_BANDS - 1, max(0, int(share * FAINT_BANDS)))
        x, y, ids, walls = bands.setdefault((band, _evaluation(key)), ([], [], [], []))
        for step, value, wall in thin(sorted(series[key], key=lambda p: p[0]), points_per_series):
            x.append(step)
            y.append(value)
            ids.append(key[0])
            walls.append(wall)
        x.append(math.nan)
        y.append(math.nan)
        ids.append(None)
        walls.append(math.nan)
    traces = []
    band_colours = sample_colorscale(
        "Viridis", [(band + 0.5) / FAINT_BANDS for band in range(FAINT_BANDS)], colortype="rgb"
    )
    for (band, evaluation), (x, y, ids, walls) in sorted(bands.items()):
        colour = NO_OBJECTIVE_COLOUR if band < 0 else band_colours[band]
        traces.append(
            go.Scatter(
                x=np.array(x, dtype=float),
                y=np.array(y, dtype=float),
                customdata=np.array(ids, dtype=object),
                mode="lines",
                connectgaps=False,
                showlegend=False,
                opacity=0.5,
                line={"color": colour, "width": 1, "dash": "dash" if evaluation else "solid"},
                hovertemplate="Trial %{customdata}<br>%{y:.6g} at %{x}<extra></extra>",
                meta={"gaps": True, "faint": True, "wall": np.array(walls, dtype=float)},
            )
        )
    return traces


def escape_hover(text: str) -> str:
    """Text safe in a hovertemplate: ``%{`` would be read as a placeholder, ``<`` as markup."""
    return text.replace("%{", "% {").replace("<", "&lt;").replace(">", "&gt;")
