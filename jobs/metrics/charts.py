"""Plotly figures from plain data, each with the same data as a table: the chart every page draws
(``Chart``), its look (Okabe & Ito's colours, the toolbar), and parallel coordinates, which both a
study and the compare page draw. A study's own charts are in ``jobs.tuning.charts``, the data
analysis page's in ``jobs.builtin.charts``.
"""

from __future__ import annotations

import functools
import math
from dataclasses import dataclass
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
        return DrawnChart(self.title, self.html, self.table_html, self.key, self.note)


@dataclass(frozen=True)
class DrawnChart:
    """A :class:`Chart`'s page parts, already rendered (``jobs/_chart.html`` shows either)."""

    title: str
    html: str
    table_html: str
    key: str = ""
    note: str = ""


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


def _dimension(name: str, values: list[str], log: bool = False) -> dict:
    numbers = numeric(values)
    if numbers is not None and log and numbers and all(n > 0 for n in numbers):
        # Parcoords has no log axis: plot log10 and label the ticks with the values themselves.
        ticks = _log_ticks(min(numbers), max(numbers))
        return {
            "label": f"{name} (log)",
            "values": [math.log10(n) for n in numbers],
            "tickvals": [math.log10(t) for t in ticks],
            "ticktext": [f"{t:g}" for t in ticks],
        }
    if numbers is not None:
        return {"label": name, "values": numbers}
    categories = sorted(set(values))
    return {
        "label": name,
        "values": [categories.index(v) for v in values],
        "tickvals": list(range(len(categories))),
        "ticktext": categories,
    }


def _axis_meta(key: str, dimension: dict) -> dict:
    """How an axis' values map back to a column's: log10 of it, a category's index, or as is."""
    if str(dimension["label"]).endswith(" (log)"):
        return {"key": key, "log": True}
    if "ticktext" in dimension:
        return {"key": key, "categories": list(dimension["ticktext"])}
    return {"key": key}


def parallel_coordinates(
    data: list[dict], log: set[str] | frozenset = frozenset(), *, item: str = "Trial", objective: str = "Objective"
) -> Chart:
    """One axis per parameter and one for the objective; log-scaled parameters on log axes.
    ``item`` and ``objective`` name the table's first and last columns (the compare page's are
    the job and the chosen metric)."""
    names = list(data[0]["params"]) if data else []
    dimensions = [_dimension(name, [p["params"].get(name, "") for p in data], log=name in log) for name in names]
    objectives = [p["objective"] for p in data]
    dimensions.append({"label": objective, "values": objectives})
    dimensions = [{**d, "values": array_of(d["values"])} for d in dimensions]
    # Which trial-table column each axis is, so brushing an axis can filter the table by it.
    axes = [_axis_meta(f"p.{name}", dimension) for name, dimension in zip(names, dimensions, strict=False)]
    axes.append({"key": "objective"})
    figure = go.Figure(
        go.Parcoords(
            line={"color": array_of(objectives), "colorscale": "Viridis", "showscale": True},
            dimensions=dimensions,
            meta={"axes": axes},
        )
    )
    figure.update_layout(margin={"t": 40})
    return Chart(
        "Parallel coordinates",
        figure,
        [item, *names, objective],
        [[p["trial"], *[p["params"].get(n, "") for n in names], p["objective"]] for p in data],
    )
