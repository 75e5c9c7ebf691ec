"""A study's trials as a download: the rows and columns the trial table's view shows (its sort, its
filters, its chosen columns, every matching row, not only the first page), as CSV or JSON. The
page's links, the REST API (``GET /v1/projects/P/jobs/J/trials``) and ``aiconsole jobs trials``
all answer from here."""

from __future__ import annotations

import csv
import io

from aiconsole import csvsafe
from jobs.tuning import study

FORMATS = ("csv", "json")


def columns_and_rows(job, params) -> tuple[list[str], list[dict]]:
    """(column names, one dict per trial) for the view ``params`` describes (the page's query string):
    the trial's id and state always, then the shown columns in the table's order, then the failure
    reason where a trial has one."""
    whole = study.study_table(job)
    query = study.TrialQuery.from_params(params, whole.columns)
    maximize = study.goal(job) != "MINIMIZE"
    shown = [column for column in whole.columns if query.showing(column) and column.key != "state"]
    names = ["trial_id", "state", *(_name(column) for column in shown), "failure_reason"]
    spec = (job.training_input or {}).get("hyperparameters") or {}
    integers = {f"p.{p.get('parameterName')}" for p in spec.get("params", []) if p.get("type") == "INTEGER"}
    rows = []
    for row in study.select(whole.rows, query, maximize):
        item: dict = {"trial_id": row.trial.trial_id, "state": row.values.get("state")}
        for column in shown:
            value = row.values.get(column.key)
            if column.key in integers and isinstance(value, float) and value.is_integer():
                value = int(value)  # an INTEGER parameter, as the study's spec types it
            item[_name(column)] = value
        item["failure_reason"] = row.failure_reason
        rows.append(item)
    return names, rows


def _name(column: study.Column) -> str:
    """A column as a download names it: the parameter's or metric's own name, else the table's key."""
    if column.key.startswith(("p.", "m.")):
        return column.key[2:]
    return {"objective": "objective", "objective.best": "objective_best", "step": "step"}.get(
        column.key, column.key.replace(".", "_")
    )


def as_csv(names: list[str], rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out)
    writer.writerow(csvsafe.row(names))
    for item in rows:
        writer.writerow(csvsafe.row("" if item.get(name) is None else item.get(name) for name in names))
    return out.getvalue()


def as_json(names: list[str], rows: list[dict]) -> dict:
    return {"columns": names, "trials": rows}
