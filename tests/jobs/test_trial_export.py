"""A study's trials download as CSV and JSON: from the trial table, for the rows and columns its view
shows; through the REST API; and with ``aiconsole jobs trials``."""

from __future__ import annotations

import csv
import io
import json

import pytest
from django.utils import timezone

from aiconsole.tokens import create_token
from jobs import services
from jobs.models import JobState, Trial
from tests.helpers.jobs import body

SPEC = {
    "goal": "MINIMIZE",
    "maxTrials": 4,
    "hyperparameterMetricTag": "loss",
    "params": [
        {"parameterName": "depth", "type": "INTEGER", "minValue": 1, "maxValue": 9},
        {"parameterName": "optimizer", "type": "CATEGORICAL", "categoricalValues": ["=cmd|' /C calc'!A0", "sgd"]},
    ],
}


@pytest.fixture
def tuned(project, admin):
    job = services.submit_job(project, body("tuned", hyperparameters=SPEC), actor=admin)
    now = timezone.now()
    for number, state, loss, optimizer in [
        (1, JobState.SUCCEEDED, 0.5, "sgd"),
        (2, JobState.SUCCEEDED, 0.2, "=cmd|' /C calc'!A0"),
        (3, JobState.FAILED, None, "sgd"),
        (4, JobState.SUCCEEDED, 0.9, "sgd"),
    ]:
        Trial.objects.create(
            job=job,
            trial_id=str(number),
            number=number,
            hyperparameters={"depth": str(number), "optimizer": optimizer},
            state=state,
            start_time=now,
            end_time=now,
            final_metric={"trainingStep": "5", "objectiveValue": loss} if loss is not None else None,
            error_message="" if loss is not None else "The replica master 0 exited with a non-zero status of 1.",
        )
    return job


def _csv(text: str) -> list[dict]:
    return list(csv.DictReader(io.StringIO(text)))


def test_the_page_downloads_the_view_it_shows_as_csv_and_json(client, admin, tuned):
    client.force_login(admin)
    page = client.get("/projects/project-a/jobs/tuned/").content.decode()
    assert "/projects/project-a/jobs/tuned/trials/download/?" in page and 'data-download="json"' in page

    everything = client.get("/projects/project-a/jobs/tuned/trials/download/")
    assert everything["Content-Disposition"] == 'attachment; filename="tuned-trials.csv"'
    rows = _csv(everything.content.decode())
    assert [r["trial_id"] for r in rows] == ["2", "1", "4", "3"]  # best first for MINIMIZE, as the table
    assert rows[0]["objective"] == "0.2" and rows[0]["depth"] == "2"
    assert rows[0]["optimizer"] == "'=cmd|' /C calc'!A0"  # a formula a spreadsheet would run, made text
    assert rows[3]["failure_reason"] == "The replica master 0 exited with a non-zero status of 1."

    # The view's filter, sort and columns are the download's.
    view = "trial_state=SUCCEEDED&trial_sort=-p.depth&cols=p.depth"
    narrowed = _csv(client.get(f"/projects/project-a/jobs/tuned/trials/download/?{view}").content.decode())
    assert [r["trial_id"] for r in narrowed] == ["4", "2", "1"]
    assert list(narrowed[0]) == ["trial_id", "state", "depth", "failure_reason"]

    as_json = client.get(f"/projects/project-a/jobs/tuned/trials/download/?{view}&format=json").json()
    assert as_json["columns"] == ["trial_id", "state", "depth", "failure_reason"]
    assert [t["trial_id"] for t in as_json["trials"]] == ["4", "2", "1"] and as_json["trials"][0]["depth"] == 4


def test_the_rest_api_answers_the_trials_and_refuses_a_job_without_them(client, admin, project, tuned):
    _, raw = create_token(admin)
    auth = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
    answer = client.get("/v1/projects/project-a/jobs/tuned/trials?trial_state=FAILED", **auth).json()
    assert [t["trial_id"] for t in answer["trials"]] == ["3"] and "optimizer" in answer["columns"]
    text = client.get("/v1/projects/project-a/jobs/tuned/trials?alt=csv", **auth).content.decode()
    assert text.splitlines()[0].startswith("trial_id,state,")
    services.submit_job(project, body("plain"), actor=admin)
    refused = client.get("/v1/projects/project-a/jobs/plain/trials", **auth)
    assert refused.status_code == 400 and "not a hyperparameter tuning job" in refused.json()["error"]["message"]


def test_someone_outside_the_project_gets_nothing(client, outsider, tuned):
    client.force_login(outsider)
    assert client.get("/projects/project-a/jobs/tuned/trials/download/").status_code == 404
    _, raw = create_token(outsider)
    assert client.get("/v1/projects/project-a/jobs/tuned/trials", HTTP_AUTHORIZATION=f"Bearer {raw}").status_code == 404


@pytest.mark.django_db(transaction=True)
def test_the_cli_prints_the_trials(live_server, admin, tuned, monkeypatch, capsys):
    from console.cli import main

    _, raw = create_token(admin)
    for name, value in {
        "AICONSOLE_URL": live_server.url,
        "AICONSOLE_TOKEN": raw,
        "AICONSOLE_PROJECT": "project-a",
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["jobs", "trials", "tuned", "--state", "SUCCEEDED"]) == 0
    rows = _csv(capsys.readouterr().out)
    assert [r["trial_id"] for r in rows] == ["2", "1", "4"]
    assert main(["jobs", "trials", "tuned", "--format", "json"]) == 0
    assert len(json.loads(capsys.readouterr().out)["trials"]) == 4
