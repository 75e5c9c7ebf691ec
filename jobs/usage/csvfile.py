"""Usage rows as CSV (one line per day, project and user), each cell safe to open in a spreadsheet."""

from __future__ import annotations

import csv
import io

from aiconsole import csvsafe

COLUMNS = ("date", "project", "user", "ml_units", "cpu_hours", "accelerator_hours", "jobs")


def usage_csv(rows: list[dict]) -> str:
    out = io.StringIO()
    writer = csv.writer(out, lineterminator="\n")
    writer.writerow(COLUMNS)
    for row in rows:
        writer.writerow(
            csvsafe.row(
                [
                    row["date"],
                    row["project"],
                    row["user"],
                    row["mlUnits"],
                    row["cpuHours"],
                    row["acceleratorHours"],
                    row["jobs"],
                ]
            )
        )
    return out.getvalue()


def filename(usage: dict) -> str:
    return f"usage-{usage.get('project', 'all-projects')}-{usage['from']}-{usage['to']}.csv"
