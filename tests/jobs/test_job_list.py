"""The console's jobs list: search, filters, sort order and pages, all kept in the URL; the new
job form's suggested job id."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest

from jobs import job_ids
from jobs.models import Job, JobState
from jobs.web.listing import JobListQuery

LIST = "/projects/project-a/jobs/"
DAY = datetime(2026, 3, 10, 12, 0, tzinfo=UTC)


@pytest.fixture
def jobs(project, admin, developer):
    """Five jobs: (id, state, labels, creator, created days before DAY, runtime, minutes run)."""
    rows = [
        ("census_1", JobState.SUCCEEDED, {"team": "ml", "env": "prod"}, admin, 4, "2.11", 30),
        ("census_2", JobState.FAILED, {"team": "ml"}, developer, 3, "2.8", 5),
        ("rnn_a", JobState.FAILED, {"team": "research"}, admin, 2, "2.11", 90),
        ("rnn_b", JobState.SUCCEEDED, {"owner": "census"}, developer, 1, "2.11", 1),
        ("mnist", JobState.CANCELLED, {}, None, 0, "1.15", 10),
    ]
    for job_id, state, labels, creator, days, runtime, minutes in rows:
        created = DAY - timedelta(days=days)
        Job.objects.create(
            project=project,
            job_id=job_id,
            state=state,
            labels=labels,
            created_by=creator,
            training_input={"scaleTier": "BASIC", "runtimeVersion": runtime},
            create_time=created,
            start_time=created,
            end_time=created + timedelta(minutes=minutes),
        )
    return rows


def listed(client, **params) -> list[str]:
    html = client.get(LIST, params).content.decode()
    return re.findall(r'name="jobs" value="([^"]+)"', html)


def test_search_matches_part_of_a_job_id_or_a_label(client, admin, jobs):
    client.force_login(admin)

    assert listed(client, q="CENSUS") == ["rnn_b", "census_2", "census_1"]  # rnn_b: owner=census
    assert listed(client, q="research") == ["rnn_a"]
    assert listed(client, q="nothing-like-it") == []


def test_filters_by_state_creator_label_and_date_combine(client, admin, developer, jobs):
    client.force_login(admin)

    assert listed(client, state="FAILED") == ["rnn_a", "census_2"]
    assert listed(client, creator=developer.username) == ["rnn_b", "census_2"]
    assert listed(client, label="team=ml") == ["census_2", "census_1"]
    assert listed(client, label="team:research") == ["rnn_a"]
    assert listed(client, label="env") == ["census_1"]
    assert listed(client, created_from="2026-03-07", created_to="2026-03-08") == ["rnn_a", "census_2"]
    assert listed(client, state="FAILED", creator=admin.username, label="team=research") == ["rnn_a"]


def test_columns_sort_both_ways(client, admin, jobs):
    client.force_login(admin)

    assert listed(client) == ["mnist", "rnn_b", "rnn_a", "census_2", "census_1"]  # newest first
    assert listed(client, sort="created") == ["census_1", "census_2", "rnn_a", "rnn_b", "mnist"]
    assert listed(client, sort="id") == ["census_1", "census_2", "mnist", "rnn_a", "rnn_b"]
    assert listed(client, sort="-id") == ["rnn_b", "rnn_a", "mnist", "census_2", "census_1"]
    assert listed(client, sort="-duration") == ["rnn_a", "census_1", "mnist", "census_2", "rnn_b"]
    assert listed(client, sort="state")[:2] == ["mnist", "rnn_a"]  # CANCELLED, then FAILED newest first


def test_the_list_shows_creator_runtime_and_duration(client, admin, jobs):
    client.force_login(admin)

    html = client.get(LIST, {"q": "rnn_a"}).content.decode()

    at = html.index('name="jobs" value="rnn_a"')
    row = html[at : html.index("</tr>", at)]
    assert admin.username in row and "2.11" in row and "1 h 30 min" in row


def test_the_list_shows_the_time_queued_apart_from_the_time_running(client, project, admin):
    created = DAY - timedelta(minutes=10)
    Job.objects.create(
        project=project,
        job_id="waited",
        state=JobState.SUCCEEDED,
        training_input={"scaleTier": "BASIC"},
        create_time=created,
        start_time=created + timedelta(minutes=2),
        end_time=created + timedelta(minutes=2, seconds=3),
    )
    client.force_login(admin)
    html = client.get(LIST).content.decode()
    row = html[html.index('data-job="waited"') : html.index("</tr>", html.index('data-job="waited"'))]
    assert "<td data-queued>2 min 00 s</td>" in row
    assert "<td data-duration>3.0 s</td>" in row  # a 3-second job, whatever it waited


def test_headings_link_to_the_other_order_and_keep_the_filters(client, admin, jobs):
    client.force_login(admin)

    html = client.get(LIST, {"q": "census", "sort": "id"}).content.decode()

    assert 'aria-sort="ascending"><a href="?q=census&amp;sort=-id"' in html
    assert '<a href="?q=census&amp;sort=-duration" data-sort="duration" title="From RUNNING to its end">' in html
    assert 'aria-sort="descending"' not in html


def test_form_shows_the_filters_from_the_url(client, admin, developer, jobs):
    client.force_login(admin)

    html = client.get(
        LIST,
        {
            "q": "rnn",
            "state": "FAILED",
            "creator": developer.username,
            "label": "team=ml",
            "created_from": "2026-03-01",
        },
    ).content.decode()

    assert 'name="q" type="search" value="rnn"' in html
    assert '<option value="FAILED" selected>' in html
    assert f"<option selected>{developer.username}</option>" in html
    assert 'value="team=ml"' in html and 'value="2026-03-01"' in html
    assert "No jobs match these filters." in html


def test_bad_values_in_the_url_are_ignored(client, admin, jobs):
    client.force_login(admin)

    response = client.get(LIST, {"sort": "password", "state": "BOGUS", "created_from": "yesterday", "page": "-3"})

    assert response.status_code == 200
    assert listed(client, sort="password", state="BOGUS") == ["mnist", "rnn_b", "rnn_a", "census_2", "census_1"]


def test_pages_follow_the_sort_and_the_filters(client, admin, project, monkeypatch):
    monkeypatch.setattr("jobs.web.views.JOBS_PER_PAGE", 2)
    for n in range(5):
        Job.objects.create(
            project=project,
            job_id=f"job_{n}",
            training_input={},
            state=JobState.SUCCEEDED,
            create_time=DAY + timedelta(minutes=n),
        )
    client.force_login(admin)

    first = client.get(LIST, {"sort": "id"}).content.decode()

    assert listed(client, sort="id") == ["job_0", "job_1"]
    assert 'href="?sort=id&amp;page=2" rel="next">Next page →' in first
    assert listed(client, sort="id", page="3") == ["job_4"]
    assert 'rel="prev"' in client.get(LIST, {"sort": "id", "page": "3"}).content.decode()


def test_query_round_trips_through_its_url():
    query = JobListQuery.from_params({"q": "x", "state": "FAILED", "sort": "-duration", "page": "2"})

    assert query.url() == "?q=x&state=FAILED&sort=-duration"  # a new order or filter starts on page 1
    assert JobListQuery.from_params(dict(p.split("=") for p in query.url(page=2)[1:].split("&"))) == query


def test_new_job_form_suggests_an_unused_job_id_and_focuses_it(client, admin, project, monkeypatch):
    stamp = "20260310_120000"
    monkeypatch.setattr("jobs.job_ids.timezone.now", lambda: DAY)
    Job.objects.create(project=project, job_id=f"trainer_{stamp}", training_input={})
    client.force_login(admin)

    html = client.get("/projects/project-a/jobs/new/").content.decode()

    field = re.search(r'<input[^>]*id="id_job_id"[^>]*>', html).group(0)
    assert f'value="trainer_{stamp}_2"' in field
    assert "autofocus" in field and f'data-suggested="trainer_{stamp}_2"' in field


def test_suggested_ids_are_valid_job_ids():
    taken = {"census_20260310_120000"}.__contains__

    assert job_ids.suggest_job_id(taken, "census.task", DAY) == "census_20260310_120000_2"
    assert job_ids.suggest_job_id(lambda _: False, "1st.task", DAY) == "job_1st_20260310_120000"
    assert job_ids.suggest_job_id(lambda _: False, "", DAY) == "job_20260310_120000"
