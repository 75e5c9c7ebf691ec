"""``aiconsole jobs metrics`` writes the same safe CSV as the console's download:
a planted formula is quoted as text, negative values stay numbers (no console: the points are
what the API would answer)."""

from __future__ import annotations

import csv
import io

from console.cli import jobs, main

POINTS = [
    {
        "tag": '=HYPERLINK("http://evil.example/","x")',
        "step": "1",
        "value": -0.5,
        "time": "2026-01-01T00:00:00Z",
        "trialId": "",
        "source": "tfevents",
        "run": "+cmd|' /C calc'!A0",
    },
    {
        "tag": "accuracy",
        "step": "2",
        "value": 0.75,
        "time": "2026-01-01T00:00:01Z",
        "trialId": "3",
        "source": "hypertune",
        "run": "\t=1+1",
    },
]


def test_the_metrics_csv_quotes_planted_formulas(monkeypatch, capsys, tmp_path):
    monkeypatch.setenv("AICONSOLE_URL", "http://127.0.0.1:9")  # never called: the points are given
    monkeypatch.setenv("AICONSOLE_TOKEN", "unused")
    monkeypatch.setenv("AICONSOLE_CONFIG", str(tmp_path / "cli-config.json"))
    monkeypatch.setattr(jobs, "fetch_metrics", lambda client, job_id, **_: POINTS)
    assert main(["jobs", "metrics", "planted"]) == 0
    rows = list(csv.DictReader(io.StringIO(capsys.readouterr().out)))
    assert [(r["tag"], r["run"], r["value"]) for r in rows] == [
        ('\'=HYPERLINK("http://evil.example/","x")', "'+cmd|' /C calc'!A0", "-0.5"),
        ("accuracy", "'\t=1+1", "0.75"),
    ]
