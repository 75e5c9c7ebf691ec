"""Plotly figures for the data analysis page (a CSV's columns, their correlations, the label's
balance), drawn in the analysis's child process (``jobs.builtin.analysis_child``)."""

from __future__ import annotations

import plotly.graph_objects as go

from jobs.metrics import charts


def distribution_chart(name: str, distribution: dict) -> charts.Chart:
    """A numeric column's histogram, or a categorical column's most frequent values as bars."""
    if distribution["kind"] == "histogram":
        bins = distribution["bins"]
        labels = [f"{b['low']:g} – {b['high']:g}" for b in bins]
        figure = go.Figure(
            go.Bar(
                x=[(b["low"] + b["high"]) / 2 for b in bins],
                y=[b["count"] for b in bins],
                width=[(b["high"] - b["low"]) or 1 for b in bins],
                hovertext=labels,
                name=name,
            )
        )
        figure.update_layout(xaxis_title=name, yaxis_title="Rows", bargap=0.02, margin={"t": 20}, height=260)
        return charts.Chart(
            f"Distribution of {name}",
            figure,
            ["Range", "Rows"],
            [[label, b["count"]] for label, b in zip(labels, bins, strict=True)],
        )
    values = distribution["values"]
    figure = go.Figure(go.Bar(x=[str(v) for v, _ in values], y=[c for _, c in values], name=name))
    figure.update_layout(xaxis_title=name, yaxis_title="Rows", margin={"t": 20}, height=260)
    return charts.Chart(f"Most frequent values of {name}", figure, ["Value", "Rows"], [[v, c] for v, c in values])


def analysis_charts(report: dict) -> dict[str, list[charts.DrawnChart] | charts.DrawnChart | None]:
    """The data analysis page's charts of a report, drawn: 200 columns' figures cost seconds of
    CPU to build, so they are built once, beside the analysis, not in each page view."""
    correlations, balance = report["correlations"], report["label_balance"]
    return {
        "distribution_charts": [distribution_chart(name, d).drawn() for name, d in report["distributions"].items()],
        "correlation_chart": correlation_chart(correlations).drawn() if correlations else None,
        "balance_chart": label_balance_chart(balance).drawn() if balance else None,
    }


def correlation_chart(correlations: list[dict]) -> charts.Chart:
    names = [c["column"] for c in correlations]
    figure = go.Figure(
        go.Bar(
            x=[c["value"] for c in correlations],
            y=names,
            orientation="h",
            hovertext=[c["measure"] for c in correlations],
        )
    )
    figure.update_layout(
        xaxis_title="Strength of the relation with the target",
        margin={"t": 20},
        height=max(200, 40 + 28 * len(names)),
        yaxis={"autorange": "reversed"},
    )
    return charts.Chart(
        "Correlation with the target",
        figure,
        ["Column", "Measure", "Value"],
        [[c["column"], c["measure"], c["value"]] for c in correlations],
    )


def label_balance_chart(balance: list[list]) -> charts.Chart:
    total = sum(count for _, count in balance) or 1
    figure = go.Figure(go.Bar(x=[str(v) for v, _ in balance], y=[c for _, c in balance]))
    figure.update_layout(xaxis_title="Class", yaxis_title="Rows", margin={"t": 20}, height=260)
    return charts.Chart(
        "Label balance", figure, ["Class", "Rows", "Share"], [[v, c, f"{100 * c / total:.1f}%"] for v, c in balance]
    )
