"""Plotly figures for a tuning job, from plain data: each comes with the same data as a table.

``points`` are plain dicts built from the API's HyperparameterOutput (``trainingOutput.trials``):
only trials with a final metric are plotted; trials that reported nothing have no point.
"""

from __future__ import annotations

import dataclasses
import math
import warnings

import numpy as np
import plotly.graph_objects as go

from jobs.metrics import charts
from jobs.metrics.studies import best_so_far
from jobs.tuning import noise as study_noise


def points(trials: list[dict]) -> list[dict]:
    """Trials with a result, in trial order: ``{"trial", "objective", "params"}``."""
    result = []
    for trial in sorted(trials, key=lambda t: int(t["trialId"])):
        metric = trial.get("finalMetric")
        if metric is None:
            continue
        result.append(
            {
                "trial": int(trial["trialId"]),
                "objective": float(metric["objectiveValue"]),
                "params": dict(trial.get("hyperparameters") or {}),
            }
        )
    return result


def optimization_history(
    data: list[dict], maximize: bool = True, noise: study_noise.Noise | None = None
) -> charts.Chart:
    """Each trial's objective and the best so far; with ``noise``, a band around the best so far as
    wide as the noise either side (a later trial inside it is no clear improvement)."""
    trials = [p["trial"] for p in data]
    objectives = [p["objective"] for p in data]
    best = best_so_far(objectives, maximize)
    band = _noise_band(trials, best, noise) if noise is not None else []
    figure = go.Figure(
        [
            go.Scatter(
                x=charts.array_of(trials),
                y=charts.array_of(objectives),
                mode="markers",
                name="Objective",
                marker={"symbol": "circle", "size": 9},
                customdata=charts.array_of(trials),  # the trial of each point: the page links it to the table
                hovertemplate="Trial %{customdata}<br>%{y}<extra></extra>",
            ),
            go.Scatter(
                x=charts.array_of(trials),
                y=charts.array_of(best),
                mode="lines",
                name="Best so far",
                line={"dash": "dash"},
            ),
            *band,
        ]
    )
    figure.update_layout(xaxis_title="Trial", yaxis_title="Objective value", margin={"t": 20})
    if noise is None:
        return charts.Chart(
            "Optimization history",
            figure,
            ["Trial", "Objective", "Best so far"],
            [[t, o, b] for t, o, b in zip(trials, objectives, best, strict=True)],
        )
    figure.update_layout(legend={"traceorder": "normal"})  # a filled band would turn the legend upside down
    return charts.Chart(
        "Optimization history",
        figure,
        ["Trial", "Objective", "Best so far", "Noise band from", "Noise band to"],
        [[t, o, b, b - noise.margin, b + noise.margin] for t, o, b in zip(trials, objectives, best, strict=True)],
        note=f"The band around the best so far is its noise, ±{noise.margin_text} (two standard deviations), "
        f"estimated from {noise.how}: a trial inside it is not told apart from the best.",
    )


def _noise_band(trials: list[int], best: list[float], noise: study_noise.Noise) -> list[go.Scatter]:
    """The best so far ± the noise's margin, as a filled band (its upper edge, then its lower)."""
    edge = {"width": 0, "color": charts.COLORWAY[1]}
    return [
        go.Scatter(
            x=charts.array_of(trials),
            y=charts.array_of([b + noise.margin for b in best]),
            mode="lines",
            line=edge,
            hoverinfo="skip",
            showlegend=False,
            name="Noise band (upper edge)",
        ),
        go.Scatter(
            x=charts.array_of(trials),
            y=charts.array_of([b - noise.margin for b in best]),
            mode="lines",
            line=edge,
            fill="tonexty",
            fillcolor="rgba(230, 159, 0, 0.25)",  # the best-so-far line's colour, faint on light and dark
            hoverinfo="skip",
            name=f"Noise band (±{noise.margin_text})",
        ),
    ]


def slice_plot(data: list[dict], name: str, log: bool = False) -> charts.Chart:
    values = [p["params"].get(name, "") for p in data]
    numbers = charts.numeric(values)
    figure = go.Figure(
        go.Scatter(
            x=charts.array_of(numbers if numbers is not None else values),
            y=charts.array_of([p["objective"] for p in data]),
            mode="markers",
            text=charts.array_of([f"Trial {p['trial']}" for p in data]),
            customdata=charts.array_of([p["trial"] for p in data]),
        )
    )
    figure.update_layout(xaxis_title=name, yaxis_title="Objective value", margin={"t": 20})
    if log and numbers is not None:
        figure.update_xaxes(type="log")
    return charts.Chart(
        f"Slice: {name}",
        figure,
        ["Trial", name, "Objective"],
        [[p["trial"], v, p["objective"]] for p, v in zip(data, values, strict=True)],
    )


def log_scaled(spec: dict | None) -> set[str]:
    """Parameters the spec puts on a log axis (UNIT_LOG_SCALE): their charts use log axes too."""
    return {
        p["parameterName"]
        for p in (spec or {}).get("params", [])
        if p.get("scaleType") == "UNIT_LOG_SCALE" and p.get("type") in ("DOUBLE", "INTEGER")
    }


# Contour: objectives averaged over a grid of this many cells a side, gaps interpolated by Plotly.
CONTOUR_CELLS = 24


def _axis(values: list[str], log: bool) -> tuple[list, list[float], dict]:
    """Plot values, their positions on a linear scale (for binning), and axis settings."""
    numbers = charts.numeric(values)
    if numbers is None:
        categories = sorted(set(values))
        positions = [float(categories.index(v)) for v in values]
        return positions, positions, {"tickvals": list(range(len(categories))), "ticktext": categories}
    if log and all(n > 0 for n in numbers):
        return numbers, [math.log10(n) for n in numbers], {"type": "log"}
    return numbers, numbers, {}


def _bins(positions: list[float], cells: int) -> tuple[list[float], list[int]]:
    low, high = min(positions), max(positions)
    width = (high - low) / cells or 1.0
    index = [min(cells - 1, int((v - low) / width)) for v in positions]
    return [low + width * (i + 0.5) for i in range(cells)], index


def contour_plot(
    data: list[dict], x_name: str, y_name: str, log: set[str] | frozenset = frozenset(), maximize: bool = True
) -> charts.Chart:
    """The objective over two parameters: trials as points over a contour of their objectives
    averaged on a grid (empty cells interpolated), on log axes where the parameter is log-scaled."""
    xs, x_pos, x_axis = _axis([p["params"].get(x_name, "") for p in data], x_name in log)
    ys, y_pos, y_axis = _axis([p["params"].get(y_name, "") for p in data], y_name in log)
    objectives = [p["objective"] for p in data]
    x_centres, x_index = _bins(x_pos, CONTOUR_CELLS)
    y_centres, y_index = _bins(y_pos, CONTOUR_CELLS)
    sums: dict[tuple[int, int], list[float]] = {}
    for i, j, value in zip(x_index, y_index, objectives, strict=True):
        sums.setdefault((i, j), []).append(value)
    z = [
        [(sum(sums[i, j]) / len(sums[i, j])) if (i, j) in sums else None for i in range(CONTOUR_CELLS)]
        for j in range(CONTOUR_CELLS)
    ]
    unlog = {"type": "log"}
    traces = []
    if len(sums) >= 3:
        traces.append(
            go.Contour(
                x=[10**c for c in x_centres] if x_axis == unlog else x_centres,
                y=[10**c for c in y_centres] if y_axis == unlog else y_centres,
                z=z,
                connectgaps=True,
                colorscale="Viridis",
                reversescale=not maximize,
                opacity=0.85,
                colorbar={"title": {"text": "Objective"}},
                hoverinfo="skip",
                name="Objective",
            )
        )
    traces.append(
        go.Scatter(
            x=charts.array_of(xs),
            y=charts.array_of(ys),
            mode="markers",
            name="Trials",
            marker={"color": "#000000", "size": 7, "line": {"color": "#FFFFFF", "width": 1}},
            text=charts.array_of([f"Trial {p['trial']}: {p['objective']:.6g}" for p in data]),
            hoverinfo="text",
        )
    )
    figure = go.Figure(traces)
    figure.update_layout(xaxis_title=x_name, yaxis_title=y_name, margin={"t": 20}, showlegend=False)
    figure.update_xaxes(**x_axis)
    figure.update_yaxes(**y_axis)
    return charts.Chart(
        f"Contour: {x_name} × {y_name}",
        figure,
        ["Trial", x_name, y_name, "Objective"],
        [[p["trial"], p["params"].get(x_name, ""), p["params"].get(y_name, ""), p["objective"]] for p in data],
        key="contour",
    )


INTERMEDIATE_MARKERS_MAX = 5_000


INTERMEDIATE_TOP = 5  # the best trials' curves drawn in colour, named in the legend; the rest faint


def intermediate_values(
    trials: list[dict], maximize: bool = True, times: dict[tuple[str, int], float] | None = None
) -> charts.Chart:
    """Learning curves: every trial's reports (allMetrics) by training step, one line per trial.

    The best ``INTERMEDIATE_TOP`` trials (by final objective, for the goal) are drawn in colour, a
    legend entry each; every other trial is a faint line in one of two shared traces (ran to the
    end, stopped early) with gaps between trials, so a study of thousands of trials stays a light
    figure and its legend a handful of entries. Every point carries its trial (``customdata``).

    ``times`` ((trial id, step) → when the report was written, seconds since the epoch) go with
    each line as ``meta.wall``, as the metric charts' do, so the page's chart controls
    (static/charts.js) can draw it by wall or relative time, smoothed or on a log axis; a shared
    trace says ``meta.gaps``: its lines are apart, each smoothed and timed on its own.
    """
    times = times or {}
    ordered = sorted(trials, key=lambda t: int(t["trialId"]))
    finals = {t["trialId"]: float(t["finalMetric"]["objectiveValue"]) for t in ordered if t.get("finalMetric")}
    ranked = sorted(finals, key=lambda trial_id: -finals[trial_id] if maximize else finals[trial_id])
    top = ranked[:INTERMEDIATE_TOP]
    groups: dict[bool, tuple[list, list, list, list]] = {False: ([], [], [], []), True: ([], [], [], [])}
    curves: dict[str, list[tuple[int, float]]] = {}
    rows = []
    for trial in ordered:
        reports = [(int(m["trainingStep"]), float(m["objectiveValue"])) for m in trial.get("allMetrics") or []]
        if not reports:
            continue
        stopped = bool(trial.get("isTrialStoppedEarly"))
        if trial["trialId"] in top:
            curves[trial["trialId"]] = reports
        else:
            x, y, ids, walls = groups[stopped]
            for step, value in reports:
                x.append(step)
                y.append(value)
                ids.append(int(trial["trialId"]))
                walls.append(times.get((trial["trialId"], step), math.nan))
            x.append(math.nan)  # a gap: the next trial's line starts anew
            y.append(math.nan)
            ids.append(None)
            walls.append(math.nan)
        rows.append(
            [
                int(trial["trialId"]),
                trial.get("state", ""),
                "yes" if stopped else "no",
                len(reports),
                ", ".join(f"{step}: {value:.6g}" for step, value in reports),
            ]
        )
    # Past this many reports the faint lines go without markers: 20,000 SVG markers take the
    # browser half a second to draw and cover each other; hovering a line still names each report.
    markers = sum(len(x) for x, _, _, _ in groups.values()) <= INTERMEDIATE_MARKERS_MAX
    traces = []
    for stopped, (x, y, ids, walls) in groups.items():
        if x:
            # numpy arrays: Plotly checks plain lists item by item, which is slow at 20,000 points.
            traces.append(
                go.Scatter(
                    x=np.array(x),
                    y=np.array(y),
                    customdata=np.array(ids, dtype=object),
                    mode="lines+markers" if markers else "lines",
                    connectgaps=False,
                    name=("Other trials, stopped early" if stopped else "Other trials")
                    if top
                    else ("Stopped early" if stopped else "Ran to the end"),
                    hovertemplate="Trial %{customdata}<br>step %{x}: %{y}<extra></extra>",
                    opacity=0.45 if top else 1.0,
                    line={
                        "color": "#8c959f" if top else charts.COLORWAY[0],
                        "width": 1,
                        "dash": "dot" if stopped else "solid",
                    },
                    marker={"size": 4, "symbol": "x" if stopped else "circle"},
                    meta={"gaps": True, **_wall(walls)},
                )
            )
    for rank, trial_id in enumerate(top):
        if trial_id not in curves:
            continue
        steps, values = zip(*curves[trial_id], strict=True)
        traces.append(
            go.Scatter(
                x=np.array(steps),
                y=np.array(values),
                customdata=np.array([int(trial_id)] * len(steps), dtype=object),
                mode="lines+markers" if len(steps) <= 200 else "lines",
                name=f"Trial {trial_id}" + (" (best)" if rank == 0 else ""),
                meta={"trial": trial_id, **_wall([times.get((trial_id, step), math.nan) for step in steps])},
                hovertemplate=f"Trial {trial_id}<br>step %{{x}}: %{{y}}<extra></extra>",
                line={"color": charts.COLORWAY[rank % len(charts.COLORWAY)], "width": 3 if rank == 0 else 2},
                marker={"size": 5},
            )
        )
    figure = go.Figure(traces)
    figure.update_layout(
        xaxis_title="Training step",
        yaxis_title="Reported objective",
        margin={"t": 20},
        legend={"orientation": "h", "y": -0.3, "title": {"text": f"Best {len(top)}:" if top else ""}},
        meta={"metric": "intermediate"},  # the chart controls keep its zoom per axis kind by this
    )
    return charts.Chart(
        "Intermediate values",
        figure,
        ["Trial", "State", "Stopped early", "Reports", "Step: value"],
        rows,
        key="intermediate",
        note=f"The best {len(top)} trials by final objective are drawn in colour; the rest are faint. "
        "Hover a line to see its trial; click it to open the trial's logs."
        if len(finals) > INTERMEDIATE_TOP
        else "",
    )


def pareto_front(costs: list[float], objectives: list[float], maximize: bool = True) -> list[int]:
    """The indexes, cheapest first, of the points no other point beats: none costs as little or less
    and has a better objective for the goal (of equal points, the first)."""
    order = sorted(range(len(costs)), key=lambda i: (costs[i], -objectives[i] if maximize else objectives[i], i))
    front: list[int] = []
    for i in order:
        best = objectives[front[-1]] if front else None
        if best is None or (objectives[i] > best if maximize else objectives[i] < best):
            front.append(i)
    return front


def _duration_unit(longest: float) -> tuple[str, float]:
    """The unit a duration axis reads best in, and its length in seconds."""
    if longest < 120:
        return "s", 1.0
    return ("min", 60.0) if longest < 7200 else ("h", 3600.0)


def in_proportion(durations: dict[int, float], units: dict[int, float]) -> float | None:
    """The ML units an hour every trial used, when they all used them at one rate (within 5 %): a
    study's trials run on the same machines, so their units are usually their time at a rate.
    None when they did not, or recorded none."""
    rates = [units.get(t, 0.0) * 3600 / seconds for t, seconds in durations.items() if seconds > 0]
    if not rates or min(rates) <= 0 or max(rates) > 1.05 * min(rates):
        return None
    return sum(rates) / len(rates)


def objective_against_cost(
    data: list[dict],
    costs: dict[int, float],
    maximize: bool = True,
    *,
    cost: str = "duration",
    rate: float | None = None,
) -> charts.Chart:
    """Each finished trial's objective against what it cost (``cost``: its ``duration`` in seconds,
    or the ``ML units`` it consumed, by trial number), and the Pareto front: the best objective to be
    had for at most that cost, a step line through the trials that set it. ``rate``: the ML units an
    hour every trial used, when they used them at one rate (said under the ML units' chart: its
    front is then the duration's)."""
    shown = [p for p in data if math.isfinite(costs.get(p["trial"], math.nan))]
    if cost == "duration":
        unit, seconds = _duration_unit(max((costs[p["trial"]] for p in shown), default=0.0))
        label, key, scale = f"Duration ({unit})", "cost", seconds
    else:
        label, key, scale = "ML units", "ml-units", 1.0
    xs = [costs[p["trial"]] / scale for p in shown]
    ys = [p["objective"] for p in shown]
    trials = [p["trial"] for p in shown]
    front = pareto_front(xs, ys, maximize)
    on_front = set(front)
    better = "highest" if maximize else "lowest"
    figure = go.Figure(
        [
            go.Scatter(
                x=charts.array_of(xs),
                y=charts.array_of(ys),
                mode="markers",
                name="Trials",
                marker={"symbol": "circle", "size": 8, "color": charts.COLORWAY[0], "opacity": 0.75},
                customdata=charts.array_of(trials),
                hovertemplate=f"Trial %{{customdata}}<br>{label}: %{{x:.4g}}<br>Objective: %{{y:.6g}}<extra></extra>",
            ),
            go.Scatter(
                x=charts.array_of([xs[i] for i in front]),
                y=charts.array_of([ys[i] for i in front]),
                mode="lines+markers",
                line_shape="hv",
                name=f"Pareto front ({better} objective for at most this cost)",
                line={"color": charts.COLORWAY[5], "width": 2},
                marker={"symbol": "diamond", "size": 12, "color": charts.COLORWAY[5], "line": {"width": 1}},
                customdata=charts.array_of([trials[i] for i in front]),
                hovertemplate=f"Trial %{{customdata}} (on the front)<br>{label}: %{{x:.4g}}<br>"
                "Objective: %{y:.6g}<extra></extra>",
            ),
        ]
    )
    figure.update_layout(
        xaxis_title=label,
        yaxis_title="Objective value",
        margin={"t": 20},
        legend={"orientation": "h", "y": -0.25},
    )
    what = "duration" if cost == "duration" else "ML units"
    note = (
        f"{len(front)} of {len(shown)} trials are on the Pareto front: no trial that "
        + ("took as long or less" if cost == "duration" else "used as many ML units or fewer")
        + " did better."
    )
    if rate is not None and cost != "duration":
        note += f" Every trial used {rate:.3g} ML units an hour, so this front is the same as against duration."
    columns = ["Trial", label, "Objective", "On the Pareto front"]
    rows = [
        [t, round(x, 6), y, "yes" if i in on_front else ""]
        for i, (t, x, y) in enumerate(zip(trials, xs, ys, strict=True))
    ]
    return charts.Chart(f"Objective against {what}", figure, columns, rows, key=key, note=note)


def _wall(times: list[float]) -> dict:
    """A line's points' wall times as the chart controls read them (none when no point has one)."""
    return {"wall": np.array(times, dtype=float)} if any(math.isfinite(t) for t in times) else {}


# Importance needs enough finished trials to say anything; below this the page says so instead.
IMPORTANCE_MIN_TRIALS = 10


# Above this many, importance is estimated on an evenly spaced sample (the page stays fast).
IMPORTANCE_MAX_TRIALS = 400


def importances(spec: dict, data: list[dict], maximize: bool = True) -> dict[str, float]:
    """Each parameter's share of the objective's variation (PED-ANOVA, on the trials with a
    result); empty below IMPORTANCE_MIN_TRIALS trials."""
    from jobs.tuning import (
        search as tuning,  # optuna is imported only when there is a study to look at
    )

    if len(data) < IMPORTANCE_MIN_TRIALS or len(spec.get("params") or []) < 1:
        return {}
    step = max(1, math.ceil(len(data) / IMPORTANCE_MAX_TRIALS))
    records = [
        tuning.TrialRecord(hyperparameters=p["params"], state="SUCCEEDED", objective=p["objective"])
        for p in data[::step]
    ]
    study = tuning.build_study({**spec, "goal": "MAXIMIZE" if maximize else "MINIMIZE"}, records)
    if len(study.trials) < IMPORTANCE_MIN_TRIALS:
        return {}
    # PED-ANOVA, named: Optuna 5's default, but 4.x's default is fANOVA, which needs scikit-learn
    # (not installed with the console) and raised ImportError here. 4.x calls PED-ANOVA experimental.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", tuning.optuna.exceptions.ExperimentalWarning)
        evaluator = tuning.optuna.importance.PedAnovaImportanceEvaluator()
    try:
        return dict(tuning.optuna.importance.get_param_importances(study, evaluator=evaluator))
    except (ValueError, RuntimeError):  # e.g. every trial has the same objective
        return {}


def parameter_importance(scores: dict[str, float], trials_with_result: int) -> charts.Chart:
    if not scores:
        return charts.Chart(
            "Parameter importance",
            None,
            [],
            [],
            key="importance",
            note=f"Parameter importance appears once {IMPORTANCE_MIN_TRIALS} trials have a result "
            f"({trials_with_result} so far).",
        )
    names = list(scores)
    figure = go.Figure(
        go.Bar(
            x=[scores[n] for n in names],
            y=names,
            orientation="h",
            marker={"color": charts.COLORWAY[0]},
            text=[f"{scores[n]:.2f}" for n in names],
        )
    )
    figure.update_layout(
        xaxis_title="Importance (share of the objective's variation)",
        margin={"t": 20},
        height=max(200, 60 + 30 * len(names)),
        yaxis={"autorange": "reversed"},
    )
    return charts.Chart(
        "Parameter importance",
        figure,
        ["Parameter", "Importance"],
        [[n, round(scores[n], 4)] for n in names],
        key="importance",
    )


def contour_pair(names: list[str], scores: dict[str, float], chosen: tuple[str, str] | None) -> tuple[str, str] | None:
    """The two parameters the contour shows: the user's choice when valid, else the two most
    important (the first two declared while importance is unknown)."""
    if len(names) < 2:
        return None
    if chosen and chosen[0] in names and chosen[1] in names and chosen[0] != chosen[1]:
        return chosen
    ranked = sorted(names, key=lambda n: -scores.get(n, 0.0)) if scores else names
    return ranked[0], ranked[1]


# Past this many trials the parallel coordinates draw this many (the page offers all): 2,000 lines
# over each other read as one blot, and each line is an SVG path the browser lays out and paints.
PARALLEL_LINES = 300


def parallel_sample(data: list[dict], maximize: bool = True, limit: int = PARALLEL_LINES) -> list[dict]:
    """At most ``limit`` of ``data``, in trial order: the best half of them by objective (the lines a
    reader follows to good values) and the others evenly spread over the rest of the study."""
    if len(data) <= limit:
        return data
    ranked = sorted(range(len(data)), key=lambda i: -data[i]["objective"] if maximize else data[i]["objective"])
    best = set(ranked[: limit // 2])
    rest = [i for i in range(len(data)) if i not in best]
    others = limit - len(best)
    spread = {rest[int(k * len(rest) / others)] for k in range(others)}
    return [data[i] for i in sorted(best | spread)]


def parallel_chart(data: list[dict], log: set[str], maximize: bool, everything: bool = False) -> charts.Chart:
    """The study's parallel coordinates: of a large study a sample (``parallel_sample``), said in its
    note, unless ``everything`` is asked for."""
    shown = data if everything else parallel_sample(data, maximize)
    chart = charts.parallel_coordinates(shown, log=log, maximize=maximize)
    note = (
        f"{len(shown):,} of {len(data):,} trials drawn: the best {len(shown) // 2:,} and others spread over the "
        "study (its data table lists these)."
        if len(shown) < len(data)
        else ""
    )
    return dataclasses.replace(chart, key="parallel", note=note)


def tuning_charts(
    training_output: dict,
    goal: str | None,
    spec: dict | None = None,
    contour: tuple[str, str] | None = None,
    costs: dict[int, tuple[float, float]] | None = None,
    times: dict[tuple[str, int], float] | None = None,
    every_line: bool = False,
) -> list[charts.Chart]:
    """Every chart for a tuning job's page; empty until a trial has a result.

    ``spec`` (the job's HyperparameterSpec) gives log axes and parameter importance; ``contour``
    is the pair of parameters the user picked for the contour plot; ``costs`` each finished trial's
    (seconds it ran, ML units it consumed) by trial number, for the objective against cost; ``times``
    when each report of the objective was written, for the learning curves' time axes;
    ``every_line``: the parallel coordinates draw every trial, however many.
    """
    trials = training_output.get("trials") or []
    data = points(trials)
    if not data:
        return []
    maximize = goal != "MINIMIZE"
    log = log_scaled(spec)
    names = list(data[0]["params"])
    scores = importances(spec, data, maximize) if spec else {}
    drawn = [
        optimization_history(
            data, maximize=maximize, noise=study_noise.estimate(spec or {}, study_noise.results_of(trials), maximize)
        ),
        parallel_chart(data, log, maximize, everything=every_line),
    ]
    drawn += [slice_plot(data, name, log=name in log) for name in names]
    pair = contour_pair(names, scores, contour) if spec else None
    if pair:
        drawn.append(contour_plot(data, *pair, log=log, maximize=maximize))
    if any(t.get("allMetrics") for t in trials):
        drawn.append(intermediate_values(trials, maximize=maximize, times=times))
    if spec:
        drawn.append(parameter_importance(scores, len(data)))
    with_result = {p["trial"] for p in data}
    durations = {t: c[0] for t, c in (costs or {}).items() if t in with_result}
    units = {t: c[1] for t, c in (costs or {}).items() if t in with_result}
    if durations:
        drawn.append(objective_against_cost(data, durations, maximize))
    # ML units get their chart whenever the trials recorded them, so a study shows the same charts
    # whatever its trials' rates came to (a short trial's units are rounded, its rate with them): at
    # one rate the chart says so, its front then the duration's.
    if any(units.values()):
        rate = in_proportion(durations, units)
        drawn.append(objective_against_cost(data, units, maximize, cost="ML units", rate=rate))
    return drawn
