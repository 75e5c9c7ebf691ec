"""Plotly figures for a tuning job, from plain data: each comes with the same data as a table.

``points`` are plain dicts built from the API's HyperparameterOutput (``trainingOutput.trials``):
only trials with a final metric are plotted; trials that reported nothing have no point.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go


@dataclass(frozen=True)
class Chart:
    title: str
    figure: go.Figure
    columns: list[str]
    rows: list[list]

    @property
    def html(self) -> str:
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
        go.Scatter(x=trials, y=objectives, mode="markers", name="Objective"),
        go.Scatter(x=trials, y=best, mode="lines", name="Best so far"),
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
