"""Plotly figures from plain data, each with the same data as a table: the chart every page draws
(``Chart``), its look (Okabe & Ito's colours, the toolbar), and parallel coordinates, which both a
study and the compare page draw (``ParallelChart``: plain data static/parallel.js draws as SVG). A
study's own charts are in ``jobs.tuning.charts``, the data analysis page's in ``jobs.builtin.charts``.
"""

from __future__ import annotations

import functools
import json
import math
from dataclasses import dataclass, field
from html import escape

import numpy as np
import plotly.graph_objects as go
import plotly.io as pio
from plotly.io.json import to_json_plotly

# Okabe & Ito's palette: told apart with any colour-vision deficiency. Continuous scales use Viridis.
COLORWAY = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]


PLOTLY_DEFAULT_HEIGHT = 450  # plotly.js's, for a figure whose layout sets none


# The toolbar keeps what works offline and is not said twice: zoom, pan, reset axes, download PNG
# (static/charts.js adds "Copy link to this chart" and makes it one Tab stop). Share needs Chart
# Studio; lasso and select do nothing here; autoscale and zoom in/out repeat reset and zoom.
MODEBAR_REMOVED = [
    "sendChartToCloud",
    "select2d",
    "lasso2d",
    "autoScale2d",
    "zoomIn2d",
    "zoomOut2d",
    "toggleSpikelines",
    "hoverClosestCartesian",
    "hoverCompareCartesian",
    "toggleHover",
    "resetViews",
    "hoverClosestPie",
    "hoverClosestGl2d",
]


CONFIG = {
    "displaylogo": False,
    "responsive": True,
    "showSendToCloud": False,
    "modeBarButtonsToRemove": MODEBAR_REMOVED,
}


@dataclass(frozen=True)
class Chart:
    title: str
    figure: go.Figure | None  # None: nothing to draw yet, ``note`` says why
    columns: list[str]
    rows: list[list]
    key: str = ""  # which chart it is, for the page's controls ("contour", "importance", …)
    note: str = ""

    @property
    def html(self) -> str:
        """The figure as JSON, and the element static/charts.js draws it in once the page shows
        (one chart per task; plotly.js is served from static/vendor/, never from a CDN)."""
        if self.figure is None:
            return ""
        return (
            f'<script type="application/json" class="chart-figure">{self.figure_json}</script>\n'
            f'<div class="plotly-graph-div" style="height:100%; width:100%; min-height:{self.height}px"></div>'
        )

    @property
    def figure_json(self) -> str:
        """The figure and its config as JSON for ``html``'s data script (``to_html``'s inline
        ``Plotly.newPlot`` scripts drew a 2,000-trial study's charts in one freeze of seconds).
        Not validated again: the figure was built through plotly's own classes."""
        if self.figure is None:
            return ""
        figure = self.figure.to_dict()
        # As update_layout(template=…) would set them, without validating the template each time.
        figure["layout"] = {**figure["layout"], "template": _template(), "colorway": COLORWAY}
        # to_json_plotly writes ``<``, ``>`` and ``/`` as \u escapes: no value can end the script.
        return to_json_plotly({**figure, "config": CONFIG})

    @property
    def height(self) -> int:
        """Pixels the drawn figure takes: the page keeps the room while it waits to draw it."""
        return (self.figure.layout.height if self.figure is not None else None) or PLOTLY_DEFAULT_HEIGHT

    @property
    def table_html(self) -> str:
        """The data as an HTML table, built here: a template loop over a 2,000-trial study's
        rows costs seconds, this costs milliseconds."""
        head = "".join(f'<th scope="col">{escape(str(c))}</th>' for c in self.columns)
        body = "".join("<tr>" + "".join(f"<td>{escape(str(cell))}</td>" for cell in row) + "</tr>" for row in self.rows)
        return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"

    def drawn(self) -> DrawnChart:
        """The chart as the page shows it, in plain strings: made where the figure was built
        (the data analysis page's child process), shown without building it again."""
        return DrawnChart(
            self.title, self.html, self.table_html, self.key, self.note, tuple(self.columns), len(self.rows)
        )


@dataclass(frozen=True)
class DrawnChart:
    """A :class:`Chart`'s page parts, already rendered (``jobs/_chart.html`` shows either)."""

    title: str
    html: str
    table_html: str
    key: str = ""
    note: str = ""
    columns: tuple[str, ...] = ()
    rows: int = 0  # how many rows its table has (the table itself is ``table_html``)

    @property
    def size(self) -> int:
        """Characters it holds: what keeping it costs."""
        return len(self.html) + len(self.table_html) + len(self.title) + len(self.note)


def array_of(values: list) -> np.ndarray:
    """A trace's data as numpy: Plotly checks a plain list item by item (slow at thousands of
    points) and sends numbers in an array as compact typed arrays to plotly.js."""
    numeric = all(isinstance(v, int | float) for v in values)
    return np.array(values) if numeric and values else np.array(values, dtype=object)


@functools.cache
def _template() -> dict:
    return pio.templates["plotly_white"].to_plotly_json()


def numeric(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def _log_ticks(low: float, high: float) -> list[float]:
    """Tick values for a log axis from ``low`` to ``high``: 1, 2 and 5 times each power of ten
    while the range spans less than three decades, the powers of ten alone after that."""
    steps = (1, 2, 5) if math.log10(high) - math.log10(low) < 3 else (1,)
    ticks = [m * 10.0**e for e in range(math.floor(math.log10(low)), math.ceil(math.log10(high)) + 1) for m in steps]
    inside = [t for t in ticks if low * (1 - 1e-9) <= t <= high * (1 + 1e-9)]
    return inside if len(inside) >= 2 else [low, high]


def _axis(name: str, key: str, values: list[str], log: bool = False) -> dict:
    """One axis of the parallel coordinates: its values where the line crosses it, ticks as
    [value, text], and how a value maps back to the trial table's column ``key`` (brushing
    filters by it): log10 of it (``log``), a category's index (``categories``), or as is."""
    numbers = numeric(values)
    if numbers is not None and not all(math.isfinite(n) for n in numbers):
        numbers = None  # "nan", "inf": drawn as categories
    if numbers is not None and log and numbers and all(n > 0 for n in numbers):
        # Drawn as log10, the ticks labelled with the values themselves.
        ticks = _log_ticks(min(numbers), max(numbers))
        return {
            "label": f"{name} (log)",
            "key": key,
            "log": True,
            "values": [math.log10(n) for n in numbers],
            "ticks": [[math.log10(t), f"{t:g}"] for t in ticks],
        }
    if numbers is not None:
        ticks = _ticks(min(numbers), max(numbers)) if numbers else []
        return {"label": name, "key": key, "values": numbers, "ticks": [[t, f"{t:.4g}"] for t in ticks]}
    categories = sorted(set(values))
    return {
        "label": name,
        "key": key,
        "categories": categories,
        "values": [categories.index(v) for v in values],
        "ticks": [[i, c] for i, c in enumerate(categories)],
    }


PARALLEL_HEIGHT = 450  # pixels, as plotly.js drew them


@dataclass(frozen=True)
class ParallelChart(Chart):
    """Parallel coordinates, drawn by static/parallel.js as plain SVG from ``spec`` (plain data):
    plotly.js draws them with WebGL in three contexts, which a browser without a GPU rasterizes in
    software for 1.5 s or more, however few the lines."""

    spec: dict = field(default_factory=dict)

    @property
    def html(self) -> str:
        if not self.spec:
            return ""
        # json.dumps leaves ``<`` as is: escaped, no value can end the script.
        text = json.dumps(self.spec, allow_nan=False, separators=(",", ":"))
        text = text.replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")
        return (
            f'<script type="application/json" class="chart-figure" data-chart="parallel">{text}</script>\n'
            f'<div class="parallel-plot" style="min-height:{self.height}px"></div>'
        )

    @property
    def figure_json(self) -> str:
        return ""

    @property
    def height(self) -> int:
        return PARALLEL_HEIGHT


def _finite(value: float) -> float | None:
    return value if math.isfinite(value) else None


def parallel_coordinates(
    data: list[dict],
    log: set[str] | frozenset = frozenset(),
    *,
    item: str = "Trial",
    objective: str = "Objective",
    maximize: bool | None = None,
) -> ParallelChart:
    """One axis per parameter and one for the objective; log-scaled parameters on log axes.
    ``item`` and ``objective`` name the table's first and last columns (the compare page's are
    the job and the chosen metric).

    Each line is coloured by its ``color``, drawn in front of the lines with lower ones, in the
    colour that stands out on the page's background at the high end (static/parallel.js: Viridis'
    dark purple on white, its yellow on a dark page, the low end receding into the background).
    With ``maximize`` (a study's goal) the best lines have the highest: a minimized objective is
    coloured by its negative, the colour bar labelled with the objective itself, and ``best`` says
    so."""
    names = list(data[0]["params"]) if data else []
    axes = [_axis(name, f"p.{name}", [p["params"].get(name, "") for p in data], log=name in log) for name in names]
    objectives = [float(p["objective"]) for p in data]
    finite = [v for v in objectives if math.isfinite(v)]
    ticks = _ticks(min(finite), max(finite)) if finite else []
    values = [_finite(v) for v in objectives]
    axes.append({"label": objective, "key": "objective", "values": values, "ticks": [[t, f"{t:.4g}"] for t in ticks]})
    colours = [-v for v in objectives] if maximize is False else objectives
    spec: dict = {
        "trials": [str(p["trial"]) for p in data],
        "axes": axes,
        "color": [_finite(v) for v in colours],
        "colorbar": [[-t if maximize is False else t, f"{t:.4g}"] for t in ticks],
    }
    if maximize is not None:
        spec["best"] = "high"
    return ParallelChart(
        "Parallel coordinates",
        None,
        [item, *names, objective],
        [[p["trial"], *[p["params"].get(n, "") for n in names], p["objective"]] for p in data],
        spec=spec,
    )


def _ticks(low: float, high: float, count: int = 5) -> list[float]:
    """About ``count`` round values from ``low`` to ``high`` (1, 2 or 5 times a power of ten apart)."""
    if not high > low:
        return [low]
    raw = (high - low) / count
    power = 10 ** math.floor(math.log10(raw))
    step = next(m * power for m in (1, 2, 5, 10) if m * power >= raw)
    first = math.ceil(low / step) * step
    return [round(first + i * step, 12) for i in range(int((high - first) / step + 1e-9) + 1)]
