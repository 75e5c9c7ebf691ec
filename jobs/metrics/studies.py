"""Studies against each other on the compare page: the best-so-far line of each compared tuning job on
one chart (x the trial number, y the objective), a resumed study beside its parent, a random search
beside a Bayesian one.

One chart is only drawn where it can be read one way: the studies must share their goal (a line
going up is better for all of them, or for none) and their metric. Where they do not, the page
says so instead of drawing a chart that misleads.

Pure: plain dicts (a job's ``trainingInput`` and ``trainingOutput``), no database.
"""

from __future__ import annotations

from dataclasses import dataclass

import plotly.graph_objects as go

from jobs.metrics import charts

DEFAULT_METRIC = "training/hptuning/metric"  # the v1 API's tag when a spec names none


@dataclass(frozen=True)
class Study:
    """One compared study's results, in trial order."""

    job_id: str
    goal: str  # "MAXIMIZE" or "MINIMIZE"
    metric: str
    trials: list[int]
    objectives: list[float]

    @property
    def maximize(self) -> bool:
        return self.goal != "MINIMIZE"

    @property
    def best(self) -> list[float]:
        return best_so_far(self.objectives, self.maximize)


def best_so_far(values: list[float], maximize: bool) -> list[float]:
    """Each value replaced by the best of it and those before it, for the goal."""
    best: list[float] = []
    for value in values:
        if not best:
            best.append(value)
        else:
            best.append(max(best[-1], value) if maximize else min(best[-1], value))
    return best


def study_of(job_id: str, training_input: dict | None, training_output: dict | None) -> Study:
    """A tuning job's goal, metric and each trial's final objective (trials without one left out)."""
    spec = (training_input or {}).get("hyperparameters") or {}
    results = []
    for trial in (training_output or {}).get("trials") or []:
        metric = trial.get("finalMetric") or {}
        try:
            results.append((int(trial["trialId"]), float(metric["objectiveValue"])))
        except (KeyError, TypeError, ValueError):
            continue
    results.sort()
    return Study(
        job_id,
        "MINIMIZE" if spec.get("goal") == "MINIMIZE" else "MAXIMIZE",
        spec.get("hyperparameterMetricTag") or DEFAULT_METRIC,
        [t for t, _ in results],
        [v for _, v in results],
    )


def best_so_far_chart(studies: list[Study]) -> tuple[charts.Chart | None, str]:
    """The studies' best-so-far lines on one chart, and a note; no chart (the note says why) where
    their goals or metrics differ or fewer than two have a trial result."""
    if len({s.goal for s in studies}) > 1:
        said = ", ".join(f"{s.job_id} {'maximizes' if s.maximize else 'minimizes'} {s.metric}" for s in studies)
        return None, (
            f"The studies' goals differ ({said}): their best-so-far lines are not drawn on one chart, "
            "where a line going up would be better for some and worse for the others."
        )
    if len({s.metric for s in studies}) > 1:
        said = ", ".join(f"{s.job_id}: {s.metric}" for s in studies)
        return None, (
            f"The studies optimize different metrics ({said}): their best-so-far lines are not drawn on one chart."
        )
    shown = [s for s in studies if s.trials]
    waiting = [s.job_id for s in studies if not s.trials]
    if len(shown) < 2:
        return None, "Two studies with a trial result are needed to draw their best-so-far lines together."
    goal = "highest" if shown[0].maximize else "lowest"
    figure = go.Figure(
        [
            go.Scatter(
                x=charts.array_of(s.trials),
                y=charts.array_of(s.best),
                mode="lines+markers",
                line_shape="hv",  # the best so far holds until a trial beats it
                name=s.job_id,
                line={"color": charts.COLORWAY[i % len(charts.COLORWAY)], "width": 2},
                marker={"size": 5},
                hovertemplate=f"{s.job_id}<br>after trial %{{x}}: %{{y:.6g}}<extra></extra>",
            )
            for i, s in enumerate(shown)
        ]
    )
    figure.update_layout(
        xaxis_title="Trial",
        yaxis_title=f"Best {shown[0].metric} so far",
        margin={"t": 20},
        legend={"orientation": "h", "y": -0.25},
    )
    numbers = sorted({t for s in shown for t in s.trials})
    by_study = [dict(zip(s.trials, s.best, strict=True)) for s in shown]
    rows = [[n, *(line.get(n, "") for line in by_study)] for n in numbers]
    note = f"The {goal} {shown[0].metric} each study had found after each of its trials (trial numbers from 1 in each)."
    if waiting:
        note += f" No trial result yet: {', '.join(waiting)}."
    return charts.Chart(
        "Best so far, study against study",
        figure,
        ["Trial", *(s.job_id for s in shown)],
        rows,
        key="studies",
        note=note,
    ), ""
