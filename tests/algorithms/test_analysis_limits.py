"""The data analysis page is bounded: capped columns and rows, off the request path with a time
budget, and cached per file version."""

from __future__ import annotations

import os
import re
import time

import pytest
from django.test import Client
from django.urls import reverse

from jobs.builtin import analysis as analysis_runner
from tests.helpers.algorithms import classification_rows


@pytest.fixture(autouse=True)
def fresh_runner(settings):
    settings.ANALYSIS_SECONDS = 60
    settings.ANALYSIS_WAIT_SECONDS = 0.2
    analysis_runner.reset()
    yield
    analysis_runner.reset()


def client_for(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def wide_rows(rows: int, columns: int) -> list[str]:
    return [",".join([str(r % 2)] + [str((r * 7 + c * 13) % 1000) for c in range(1, columns)]) for r in range(rows)]


def said(page: str) -> str:
    """What the page says went wrong (its alerts), for a failing assertion's message."""
    alerts = re.findall(r'role="alert">(.*?)</', page, re.S)
    return " | ".join(a.strip() for a in alerts) or "no alert on the page"


def analysis_page(client, project, params, *, deadline_s: float = 60) -> str:
    """The page, then its polling fragment (as htmx asks for it) until the analysis has ended."""
    url = reverse("jobs:data_analysis", args=[project.project_id])
    page = client.get(url, params).content.decode()
    deadline = time.monotonic() + deadline_s
    while 'aria-busy="true"' in page and time.monotonic() < deadline:
        for outcome in analysis_runner.outcomes():
            outcome.done.wait(max(0.0, deadline - time.monotonic()))
        page = client.get(url, params, headers={"HX-Request": "true"}).content.decode()
    return page


def test_a_3000_column_file_is_capped_said_so_and_the_page_stays_small(developer, project, csv_file, settings):
    settings.ANALYSIS_SECONDS = 30
    data = csv_file(wide_rows(300, 3000))
    client = client_for(developer)

    started = time.monotonic()
    first = client.get(reverse("jobs:data_analysis", args=[project.project_id]), {"path": str(data)})
    assert first.status_code == 200 and time.monotonic() - started < 5  # the request only waits briefly
    page = analysis_page(client, project, {"path": str(data)}, deadline_s=settings.ANALYSIS_SECONDS + 10)

    assert "Showing the first 200 of 3,000 columns" in page
    assert "300 rows, 200 columns" in page
    assert page.count("Distribution of ") + page.count("Most frequent values of ") <= 2 * 200
    assert "column_200" not in page and "column_199" in page
    assert len(page) < 3_000_000, len(page)


def test_rows_beyond_the_cap_are_left_out_and_the_page_says_so(developer, project, csv_file, settings):
    settings.ANALYSIS_MAX_ROWS = 50
    data = csv_file(classification_rows(120))
    page = analysis_page(client_for(developer), project, {"path": str(data)})
    assert "50 rows, 6 columns" in page and "these figures describe its first 50 rows" in page


def test_a_reload_is_served_from_the_cache_and_a_changed_file_is_analysed_again(developer, project, csv_file):
    data = csv_file(classification_rows(60))
    client = client_for(developer)
    page = analysis_page(client, project, {"path": str(data)})
    assert "60 rows" in page, said(page)
    assert analysis_runner.stats.computed == 1

    page = analysis_page(client, project, {"path": str(data)})
    assert "60 rows" in page, said(page)
    assert analysis_runner.stats.computed == 1 and analysis_runner.stats.hits >= 1

    data.write_text("\n".join(classification_rows(80)) + "\n")
    page = analysis_page(client, project, {"path": str(data)})
    assert "80 rows" in page, said(page)
    assert analysis_runner.stats.computed == 2

    before = data.stat()
    os.utime(data, ns=(before.st_atime_ns, before.st_mtime_ns + 1_000_000_000))  # same size, new version
    analysis_page(client, project, {"path": str(data)})
    assert analysis_runner.stats.computed == 3
    analysis_page(client, project, {"path": str(data), "header": "on"})  # other options: another entry
    assert analysis_runner.stats.computed == 4


@pytest.mark.slow
def test_other_pages_answer_while_a_heavy_analysis_runs_and_it_stops_at_the_budget(
    developer, project, csv_file, settings
):
    settings.ANALYSIS_SECONDS = 3
    settings.ANALYSIS_MAX_ROWS = 20_000
    data = csv_file(wide_rows(20_000, 200))  # tens of seconds of analysis: longer than the budget
    client = client_for(developer)

    page = client.get(reverse("jobs:data_analysis", args=[project.project_id]), {"path": str(data)}).content.decode()
    assert "is being analysed" in page and 'hx-trigger="every 2s"' in page
    [heavy] = analysis_runner.outcomes()
    other = client.get(reverse("jobs:list", args=[project.project_id]))
    assert other.status_code == 200
    assert heavy.state == analysis_runner.RUNNING  # the other page finished first

    assert heavy.done.wait(30)
    page = analysis_page(client, project, {"path": str(data)})
    assert heavy.state == analysis_runner.TOO_LONG
    assert "The analysis took longer than 3 seconds and was stopped" in page
    assert analysis_runner.stats.computed == 1  # the reload reports the time-out, it does not start again


def test_a_bad_file_found_by_the_worker_is_reported_on_the_path_field(developer, project, csv_file):
    data = csv_file("1,2\n3\n")
    page = analysis_page(client_for(developer), project, {"path": str(data)})
    assert "line 2 has 1 columns" in page
