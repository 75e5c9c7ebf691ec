"""Plotly figures for a tuning job, from plain data: each comes with the same data as a table.

``points`` are plain dicts built from the API's HyperparameterOutput (``trainingOutput.trials``):
only trials with a final metric are plotted; trials that reported nothing have no point.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

# Okabe & Ito's palette: told apart with any colour-vision deficiency. Continuous scales use Viridis.
COLORWAY = ["#0072B2", "#E69F00", "#009E73", "#CC79A7", "#56B4E9", "#D55E00", "#F0E442", "#000000"]


@dataclass(frozen=True)
class Chart:
    title: str
    figure: go.Figure
    columns: list[str]
    rows: list[list]

    @property
    def html(self) -> str:
        self.figure.update_layout(template="plotly_white", colorway=COLORWAY)
        # plotly.js is served from static/vendor/, never from a CDN.
        return self.figure.to_html(full_html=False, include_plotlyjs=False,
                                   config={"displaylogo": False, "responsive": True})


def points(trials: list[dict]) -> list[dict]:
    """Trials with a result, in trial order: ``{"trial", "objective", "params"}``."""
    result = []
    for trial in sorted(trials, key=lambda t: int(t["trialId"])):
        metric = trial.get("finalMetric")
        if metric is None:
            continue
        result.append({"trial": int(trial["trialId"]), "objective": float(metric["objectiveValue"]),
                       "params": dict(trial.get("hyperparameters") or {})})
    return result


def best_so_far(values: list[float], maximize: bool) -> list[float]:
    best: list[float] = []
    for value in values:
        if not best:
            best.append(value)
        else:
            best.append(max(best[-1], value) if maximize else min(best[-1], value))
    return best


def optimization_history(data: list[dict], maximize: bool = True) -> Chart:
    trials = [p["trial"] for p in data]
    objectives = [p["objective"] for p in data]
    best = best_so_far(objectives, maximize)
    figure = go.Figure([
        go.Scatter(x=trials, y=objectives, mode="markers", name="Objective", marker={"symbol": "circle", "size": 9}),
        go.Scatter(x=trials, y=best, mode="lines", name="Best so far", line={"dash": "dash"}),
    ])
    figure.update_layout(xaxis_title="Trial", yaxis_title="Objective value", margin={"t": 20})
    return Chart("Optimization history", figure, ["Trial", "Objective", "Best so far"],
                 [[t, o, b] for t, o, b in zip(trials, objectives, best, strict=True)])


def _numeric(values: list[str]) -> list[float] | None:
    try:
        return [float(v) for v in values]
    except ValueError:
        return None


def _dimension(name: str, values: list[str]) -> dict:
    numbers = _numeric(values)
    if numbers is not None:
        return {"label": name, "values": numbers}
    categories = sorted(set(values))
    return {"label": name, "values": [categories.index(v) for v in values],
            "tickvals": list(range(len(categories))), "ticktext": categories}


def parallel_coordinates(data: list[dict]) -> Chart:
    names = list(data[0]["params"]) if data else []
    dimensions = [_dimension(name, [p["params"].get(name, "") for p in data]) for name in names]
    objectives = [p["objective"] for p in data]
    dimensions.append({"label": "Objective", "values": objectives})
    figure = go.Figure(go.Parcoords(line={"color": objectives, "colorscale": "Viridis", "showscale": True},
                                    dimensions=dimensions))
    figure.update_layout(margin={"t": 40})
    return Chart("Parallel coordinates", figure, ["Trial", *names, "Objective"],
                 [[p["trial"], *[p["params"].get(n, "") for n in names], p["objective"]] for p in data])


def slice_plot(data: list[dict], name: str) -> Chart:
    values = [p["params"].get(name, "") for p in data]
    numbers = _numeric(values)
    figure = go.Figure(go.Scatter(x=numbers if numbers is not None else values, y=[p["objective"] for p in data],
                                  mode="markers", text=[f"Trial {p['trial']}" for p in data]))
    figure.update_layout(xaxis_title=name, yaxis_title="Objective value", margin={"t": 20})
    return Chart(f"Slice: {name}", figure, ["Trial", name, "Objective"],
                 [[p["trial"], v, p["objective"]] for p, v in zip(data, values, strict=True)])


def tuning_charts(training_output: dict, goal: str | None) -> list[Chart]:
    """Every chart for a tuning job's page; empty until a trial has a result."""
    data = points(training_output.get("trials") or [])
    if not data:
        return []
    charts = [optimization_history(data, maximize=goal != "MINIMIZE"), parallel_coordinates(data)]
    charts += [slice_plot(data, name) for name in data[0]["params"]]
    return charts


# --- data analysis (built-in algorithms) ------------------------------------------------------------


def distribution_chart(name: str, distribution: dict) -> Chart:
    """A numeric column's histogram, or a categorical column's most frequent values as bars."""
    if distribution["kind"] == "histogram":
        bins = distribution["bins"]
        labels = [f"{b['low']:g} – {b['high']:g}" for b in bins]
        figure = go.Figure(go.Bar(x=[(b["low"] + b["high"]) / 2 for b in bins], y=[b["count"] for b in bins],
                                  width=[(b["high"] - b["low"]) or 1 for b in bins], hovertext=labels, name=name))
        figure.update_layout(xaxis_title=name, yaxis_title="Rows", bargap=0.02, margin={"t": 20}, height=260)
        return Chart(f"Distribution of {name}", figure, ["Range", "Rows"],
                     [[label, b["count"]] for label, b in zip(labels, bins, strict=True)])
    values = distribution["values"]
    figure = go.Figure(go.Bar(x=[str(v) for v, _ in values], y=[c for _, c in values], name=name))
    figure.update_layout(xaxis_title=name, yaxis_title="Rows", margin={"t": 20}, height=260)
    return Chart(f"Most frequent values of {name}", figure, ["Value", "Rows"], [[v, c] for v, c in values])


def correlation_chart(correlations: list[dict]) -> Chart:
    names = [c["column"] for c in correlations]
    figure = go.Figure(go.Bar(x=[c["value"] for c in correlations], y=names, orientation="h",
                              hovertext=[c["measure"] for c in correlations]))
    figure.update_layout(xaxis_title="Strength of the relation with the target", margin={"t": 20},
                         height=max(200, 40 + 28 * len(names)), yaxis={"autorange": "reversed"})
    return Chart("Correlation with the target", figure, ["Column", "Measure", "Value"],
                 [[c["column"], c["measure"], c["value"]] for c in correlations])


def label_balance_chart(balance: list[list]) -> Chart:
    total = sum(count for _, count in balance) or 1
    figure = go.Figure(go.Bar(x=[str(v) for v, _ in balance], y=[c for _, c in balance]))
    figure.update_layout(xaxis_title="Class", yaxis_title="Rows", margin={"t": 20}, height=260)
    return Chart("Label balance", figure, ["Class", "Rows", "Share"],
                 [[v, c, f"{100 * c / total:.1f}%"] for v, c in balance])
