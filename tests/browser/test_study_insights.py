"""What a study's page tells that no peer's does: the best trials sitting at the edge of the search
space (with a resume over a wider one, one click away), and the objective against what each trial
cost, its Pareto front marked."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from tests.browser.studies import seed_study
from tests.browser.test_jobs_list_phone_keyboard import OVERFLOW
from tests.helpers.browser import JOBS, axe_violations, login

EDGE = "edge_study"


@pytest.fixture(scope="module")
def edge_study(console):
    seed_study(console, EDGE, 30, "edge")
    return f"{JOBS}{EDGE}/"


def test_the_study_says_its_best_trials_sit_at_a_bound_and_resumes_with_it_widened(page, edge_study):
    login(page)
    page.goto(edge_study)
    notices = page.locator("#search-edges li")
    expect(notices).to_have_count(1)  # the rate only: layers and dropout are not what the objective follows
    notice = notices.first
    expect(notice).to_contain_text("The best trials sit at the upper bound of learning_rate (0.1): widen it.")
    expect(notice).to_contain_text("5 of the 5 best are within 5% of the range from it")
    # Over the rows of the tab the study opens on: nothing to open or scroll through to find it.
    expect(notice).to_be_visible()
    assert notice.bounding_box()["y"] < page.locator("#trial-table tbody tr").first.bounding_box()["y"]
    assert not axe_violations(page)

    notice.get_by_role("link", name=re.compile(r"^Resume with this bound widened")).click()
    expect(page).to_have_url(re.compile(r"/jobs/new/\?resume=edge_study&widen=learning_rate%3Aupper$"))
    expect(page.locator(".messages")).to_contain_text(
        "The upper bound of learning_rate is widened from 0.1 to 100 in the hyperparameters below."
    )
    spec = json.loads(page.locator("textarea[name=hyperparameters]").input_value())
    rate = next(p for p in spec["params"] if p["parameterName"] == "learning_rate")
    assert (rate["minValue"], rate["maxValue"], rate["scaleType"]) == (0.0001, 100.0, "UNIT_LOG_SCALE")
    assert spec["resumePreviousJobId"] == EDGE  # the new study starts from these trials
    expect(page.locator("[data-cloned-from]")).to_contain_text("Resuming the study of edge_study")


def test_the_edge_notice_wraps_at_phone_width_in_dark_mode(browser, console, edge_study):
    context = browser.new_context(base_url=console.url, viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = context.new_page()
    try:
        login(page)
        page.goto(edge_study)
        expect(page.locator("#search-edges li")).to_be_visible()
        width = page.evaluate(OVERFLOW)
        assert width["document"] <= width["viewport"] and width["loose"] == [], width
        assert not axe_violations(page)
    finally:
        context.close()


def test_the_objective_against_cost_marks_the_pareto_front_and_its_trials(page, edge_study):
    login(page)
    page.goto(f"{edge_study}?tab=charts")
    figure = page.locator("#chart-cost")
    expect(figure.locator("figcaption")).to_have_text("Objective against duration")
    graph = figure.locator(".js-plotly-plot")
    expect(graph.locator(".scatterlayer .trace")).to_have_count(2, timeout=30_000)  # the tenth chart drawn
    # The trials used 2 ML units an hour each: their own chart says its front is the duration's.
    units = page.locator("#chart-ml-units")
    expect(units.locator("figcaption")).to_have_text("Objective against ML units")
    expect(units.locator(".note")).to_contain_text(
        "Every trial used 2 ML units an hour, so this front is the same as against duration."
    )
    expect(figure.locator(".note")).not_to_contain_text("ML units")
    # The front is every trial that no quicker (or as quick) trial beats, and the table says which.
    figure.locator("summary", has_text="Data").click()  # the table arrives when Data is opened
    rows = figure.locator("details table tbody tr")
    expect(rows).to_have_count(29)  # every trial with a result (the 25th failed)
    data = rows.evaluate_all("(rows) => rows.map((r) => [...r.children].map((c) => c.textContent))")
    quickest_first = sorted(data, key=lambda row: float(row[1]))  # no two trials ran equally long
    expected, best = [], -1.0
    for trial, _minutes, value, _ in quickest_first:
        if float(value) > best:  # better than every quicker trial (the goal is MAXIMIZE)
            expected.append(int(trial))
            best = float(value)
    assert {int(row[0]) for row in data if row[3] == "yes"} == set(expected)
    front = graph.evaluate("(gd) => Array.from(gd._fullData[1].customdata).map(Number)")
    assert front == expected and len(expected) > 1
    expect(figure.locator(".note")).to_contain_text(f"{len(expected)} of 29 trials are on the Pareto front")
    # A front point is a trial: hovering it marks its row in the table, as in the other charts.
    point = graph.locator(".scatterlayer .trace").nth(1).locator("path.point").first
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    page.mouse.move(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(page.locator(f'#trial-table tr[data-trial="{front[0]}"]')).to_have_class(re.compile(r"\bmarked-trial\b"))
