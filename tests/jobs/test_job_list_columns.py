"""The jobs list's own columns, hidden and reordered in the URL and remembered per user, the chosen
columns right after the pinned name, and a study's best trial in the column of the metric it tunes."""

from __future__ import annotations

import html
import json
import re
from datetime import UTC, datetime, timedelta

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from aiconsole import preferences
from aiconsole.models import UserPreference
from jobs.models import Job, JobMetric, JobState, Trial
from jobs.web.listing import COLUMNS_PREFERENCE, DEFAULT_SHOWN

LIST = "/projects/project-a/jobs/"
SAVE = "/preferences/jobs-list-columns/"
T0 = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


def make_job(project, job_id, *, minutes=0, **training_input):
    return Job.objects.create(
        project=project,
        job_id=job_id,
        state=JobState.SUCCEEDED,
        training_input={"scaleTier": "BASIC", **training_input},
        create_time=T0 + timedelta(minutes=minutes),
    )


def study(project, job_id, finals, *, goal="MAXIMIZE", tag="accuracy", minutes=0):
    """A tuning job and its trials: ``finals`` is (state, final objective or None) per trial, in number order."""
    job = make_job(project, job_id, minutes=minutes, hyperparameters={"goal": goal, "hyperparameterMetricTag": tag})
    for number, (state, value) in enumerate(finals, 1):
        final = None if value is None else {"trainingStep": "3", "objectiveValue": value}
        Trial.objects.create(job=job, trial_id=str(number), number=number, state=state, final_metric=final)
    return job


def headings(page: str) -> list[str]:
    head = re.search(r"<thead>(.*?)</thead>", page, re.S)[1]
    return [re.sub(r"<[^>]+>", "", cell).strip() for cell in re.findall(r"<th [^>]*>(.*?)</th>", head, re.S)]


def metric_cells(page: str) -> dict[str, tuple[str, str]]:
    """Each row's first chosen cell: job id → (text, title)."""
    found = {}
    for job_id, row in re.findall(r'<tr data-job="(\w+)">(.*?)</tr>', page, re.S):
        cell = re.search(r'<td class="chosen-col[^"]*"(?: title="([^"]*)")?>(.*?)</td>', row)
        found[job_id] = (html.unescape(cell[2]), html.unescape(cell[1] or ""))
    return found


def listed(client, params) -> list[str]:
    return re.findall(r'name="jobs" value="([^"]+)"', client.get(LIST, params).content.decode())


@pytest.fixture
def studies(project):
    """Two studies of accuracy, one maximizing and one minimizing, a study of another metric, and a run."""
    best_high = study(
        project,
        "study_max",
        [
            (JobState.SUCCEEDED, 0.7),
            (JobState.SUCCEEDED, 0.9),
            (JobState.FAILED, 0.99),  # a failed trial's report is no result
            (JobState.SUCCEEDED, 0.9),  # a tie: the first by number is the best
            (JobState.SUCCEEDED, None),  # succeeded without reporting
        ],
        minutes=1,
    )
    best_low = study(
        project, "study_min", [(JobState.SUCCEEDED, 0.4), (JobState.SUCCEEDED, 0.2)], goal="MINIMIZE", minutes=2
    )
    other = study(project, "study_loss", [(JobState.SUCCEEDED, 0.3)], tag="loss", minutes=3)
    run = make_job(project, "plain_run", minutes=4)
    JobMetric.objects.create(job=run, name="accuracy", step=10, value=0.8)
    return best_high, best_low, other, run


def test_a_study_shows_its_best_trials_objective_in_the_column_of_the_metric_it_tunes(client, admin, studies):
    client.force_login(admin)

    page = client.get(LIST, {"col": "metric:accuracy"}).content.decode()

    cells = metric_cells(page)
    assert cells["study_max"] == ("0.9", "best trial: 2")
    assert cells["study_min"] == ("0.2", "best trial: 2")  # MINIMIZE: the lowest
    assert cells["study_loss"] == ("—", "")  # it tunes another metric
    assert cells["plain_run"] == ("0.8", "step 10")


def test_a_study_sorts_and_filters_by_its_best_value_among_the_runs(client, admin, studies):
    client.force_login(admin)
    params = {"col": "metric:accuracy", "sort": "-metric:accuracy"}

    assert listed(client, params) == ["study_max", "plain_run", "study_min", "study_loss"]
    assert listed(client, params | {"sort": "metric:accuracy"}) == ["study_min", "plain_run", "study_max", "study_loss"]
    assert listed(client, params | {"min.metric:accuracy": "0.85"}) == ["study_max"]


def test_the_studies_best_values_are_read_in_one_query_whatever_their_number(client, admin, project, studies):
    client.force_login(admin)
    params = {"col": "metric:accuracy"}
    with CaptureQueriesContext(connection) as few:
        client.get(LIST, params)
    for n in range(8):
        study(project, f"more_{n}", [(JobState.SUCCEEDED, n / 10), (JobState.SUCCEEDED, 0.5)], minutes=10 + n)
    with CaptureQueriesContext(connection) as many:
        page = client.get(LIST, params).content.decode()

    assert len(many.captured_queries) == len(few.captured_queries)
    assert metric_cells(page)["more_7"] == ("0.7", "best trial: 1")


def test_the_chooser_offers_the_metric_a_study_tunes(client, admin, studies):
    client.force_login(admin)

    page = client.get(LIST).content.decode()

    assert 'name="col" value="metric:loss"' in page  # only study_loss reports it, through its trials


def test_columns_in_the_url_hide_and_reorder_the_lists_own_columns_the_name_first(client, admin, studies):
    client.force_login(admin)

    page = client.get(LIST, {"columns": "created,state,nonsense,name,state"}).content.decode()

    assert headings(page) == ["Job ID", "Created", "State"]  # an unknown name is ignored, the name kept first
    row = re.search(r'<tr data-job="plain_run">(.*?)</tr>', page, re.S)[1]
    assert len(re.findall(r"<td[ >]", row)) == 3
    assert re.search(r'<td class="pinned"><input type="checkbox" name="jobs" value="plain_run"', row)
    # The same, the parameter repeated as a form without JavaScript sends it.
    assert headings(client.get(LIST, {"columns": ["name", "created", "state"]}).content.decode()) == headings(page)


def test_chosen_columns_come_right_after_the_name(client, admin, studies):
    client.force_login(admin)

    page = client.get(LIST, {"col": ["metric:accuracy", "arg:--lr"]}).content.decode()

    assert headings(page)[:4] == ["Job ID", "accuracy", "--lr", "State"]
    assert headings(page)[-1] == "Note"
    assert len(headings(page)) == len(DEFAULT_SHOWN) + 2


def test_links_in_the_list_keep_its_columns(client, admin, studies):
    client.force_login(admin)

    page = html.unescape(client.get(LIST, {"columns": "name,state"}).content.decode())

    sort = re.search(r'<a href="([^"]+)" data-sort="state">', page)[1]
    assert "columns=name%2Cstate" in sort
    assert 'data-columns-param="name,state"' in page


def test_a_list_without_columns_opens_the_users_saved_ones_and_its_links_name_them(client, admin, studies):
    preferences.put(admin, COLUMNS_PREFERENCE, ["name", "type", "state", "gone_since"])
    client.force_login(admin)

    page = html.unescape(client.get(LIST).content.decode())

    assert headings(page) == ["Job ID", "Type", "State"]  # a saved name that is no column any more is dropped
    assert 'data-columns-param="name,type,state"' in page  # so the address can name them
    assert "columns=name%2Ctype%2Cstate" in re.search(r'<a href="([^"]+)" data-sort="state">', page)[1]
    # A URL naming the columns wins, even the default ones: its links name them too.
    page = html.unescape(client.get(LIST, {"columns": ",".join(DEFAULT_SHOWN)}).content.decode())
    assert len(headings(page)) == len(DEFAULT_SHOWN)
    assert f'data-columns-param="{",".join(DEFAULT_SHOWN)}"' in page


def test_the_chooser_lists_shown_columns_in_order_then_hidden_ones(client, admin, studies):
    client.force_login(admin)

    page = client.get(LIST, {"columns": "name,note,state"}).content.decode()

    order = re.findall(r'<input type="checkbox" name="columns" value="(\w+)"[^>]*?( checked)?>', page)
    assert [key for key, _ in order][:3] == ["note", "state", "creator"]
    assert [key for key, checked in order if checked] == ["note", "state"]
    assert '<input type="hidden" name="columns" value="name">' in page  # the name cannot be hidden
    assert "Move Note down" in page and "Move State up" in page


# --- saving the columns ---------------------------------------------------------------------------


def test_saving_columns_keeps_them_for_the_signed_in_user_only(client, admin, developer, studies):
    client.force_login(admin)

    answer = client.post(SAVE, {"columns": "name,state,created"})

    assert answer.status_code == 200 and answer.json() == {"columns": ["name", "state", "created"]}
    assert preferences.get(admin, COLUMNS_PREFERENCE) == ["name", "state", "created"]
    assert headings(client.get(LIST).content.decode()) == ["Job ID", "State", "Created"]
    other = Client()
    other.force_login(developer)
    assert len(headings(other.get(LIST).content.decode())) == len(DEFAULT_SHOWN)  # not theirs
    assert other.post(SAVE, {"columns": "name,note", "user": str(admin.pk)}).status_code == 200
    assert preferences.get(admin, COLUMNS_PREFERENCE) == ["name", "state", "created"]  # no way to name another user
    assert preferences.get(developer, COLUMNS_PREFERENCE) == ["name", "note"]


def test_saving_the_default_columns_forgets_the_saved_ones(client, admin):
    client.force_login(admin)
    client.post(SAVE, {"columns": "name,state"})

    assert client.post(SAVE, {"columns": ",".join(DEFAULT_SHOWN)}).status_code == 200

    assert not UserPreference.objects.filter(user=admin).exists()


def test_saving_columns_needs_the_csrf_token(admin):
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin)

    answer = client.post(SAVE, {"columns": "name,state"})

    assert answer.status_code == 403
    assert not UserPreference.objects.exists()


def test_anonymous_cannot_save_columns(client, admin):
    answer = client.post(SAVE, {"columns": "name,state"})

    assert answer.status_code == 302 and answer["Location"].startswith("/login/")
    assert not UserPreference.objects.exists()


def test_saving_columns_is_a_post(client, admin):
    client.force_login(admin)

    assert client.get(SAVE, {"columns": "name,state"}).status_code == 405
    assert not UserPreference.objects.exists()


def test_unknown_column_names_are_refused_naming_them_and_the_columns(client, admin):
    client.force_login(admin)
    preferences.put(admin, COLUMNS_PREFERENCE, ["name", "state"])

    answer = client.post(SAVE, {"columns": "name,state,cost,<script>"})

    assert answer.status_code == 400
    message = answer.json()["error"]
    assert message.startswith("Columns: “cost”, “<script>” are not a column of the jobs list;")
    assert "the columns are name, state, creator," in message
    assert answer["Content-Type"] == "application/json"  # the name is data, never markup
    assert preferences.get(admin, COLUMNS_PREFERENCE) == ["name", "state"]  # unchanged


@pytest.mark.parametrize(
    "columns, words",
    [
        ("", "say which of the list's columns to show"),
        (" , ,", "say which of the list's columns to show"),
        (",".join(["state"] * 400), "at most 1,000 characters"),
    ],
)
def test_no_columns_or_too_many_characters_are_refused(client, admin, columns, words):
    client.force_login(admin)

    answer = client.post(SAVE, {"columns": columns})

    assert answer.status_code == 400 and words in answer.json()["error"]
    assert not UserPreference.objects.exists()


def test_a_saved_value_that_is_not_a_list_opens_the_default_columns(client, admin, studies):
    UserPreference.objects.create(user=admin, name=COLUMNS_PREFERENCE, value=json.loads('{"name": 1}'))
    client.force_login(admin)

    assert len(headings(client.get(LIST).content.decode())) == len(DEFAULT_SHOWN)
