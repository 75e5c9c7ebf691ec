"""Whether a study's best trials can be told apart: where the study repeated trials, its page shows
the objective's noise as a band on the best-so-far line and marks the trials within it of the best,
saying how the noise was estimated; where it holds no basis, it shows neither."""

from __future__ import annotations

import math

import pytest
from playwright.sync_api import expect

from tests.browser.studies import REPEAT_OFFSET, seed_study
from tests.browser.test_jobs_list_phone_keyboard import OVERFLOW
from tests.helpers.browser import JOBS, axe_violations, login

REPEATED = "repeated_study"
BARE = "bare_study"
DRAWN_MS = 30_000  # plotly.js parsed and the first charts drawn on a busy 2-core machine


@pytest.fixture(scope="module")
def repeated(console):
    seed_study(console, REPEATED, 20, "repeats")  # trials 11 to 20 repeat 1 to 10
    return console.job(REPEATED)


@pytest.fixture(scope="module")
def bare(console):
    seed_study(console, BARE, 12, "bare")
    return f"{JOBS}{BARE}/"


def test_repeated_trials_give_a_noise_band_and_mark_the_trials_within_it(page, repeated):
    # Each pair of runs lies REPEAT_OFFSET apart: one run's standard deviation is that over √2, and
    # the band two of them either side.
    margin = 2 * REPEAT_OFFSET / math.sqrt(2)
    objectives = {t["trialId"]: float(t["finalMetric"]["objectiveValue"]) for t in repeated["trainingOutput"]["trials"]}
    best = max(objectives, key=objectives.get)
    near = {t for t, v in objectives.items() if t != best and abs(v - objectives[best]) <= margin}
    assert near  # the best's own repeat at least

    login(page)
    page.goto(f"{JOBS}{REPEATED}/")
    notice = page.locator("#study-noise")
    expect(notice).to_contain_text(f"within noise of the best: {'it' if len(near) == 1 else 'they'} cannot be told")
    expect(notice).to_contain_text(f"The noise is ±{margin:.3g} (two standard deviations), estimated from the spread")
    expect(notice).to_contain_text("of repeated trials (10 groups of trials with the same parameters, 20 trials)")
    marked = page.locator("#trial-table tbody tr").filter(has=page.locator(".badge.within-noise"))
    expect(marked).to_have_count(len(near))
    assert set(marked.evaluate_all("(rows) => rows.map((r) => r.dataset.trial)")) == near
    expect(page.locator(f'#trial-table tr[data-trial="{best}"] .badge.within-noise')).to_have_count(0)
    expect(marked.first.locator(".badge.within-noise")).to_have_text("≈ within noise")
    assert not axe_violations(page)

    # The Charts tab: the band drawn around the best-so-far line, its data and its basis beside it.
    page.get_by_role("tab", name="Charts").click()
    history = page.locator("#study-charts figure.chart").filter(has_text="Optimization history")
    graph = history.locator(".js-plotly-plot")
    expect(graph.locator(".scatterlayer .trace")).to_have_count(4, timeout=DRAWN_MS)
    expect(graph.locator(".legendtext")).to_have_text(["Objective", "Best so far", f"Noise band (±{margin:.3g})"])
    band = graph.evaluate(
        "(gd) => [gd._fullData[2], gd._fullData[3]].map((t) => [t.fill, Array.from(t.y)])"
        ".concat([Array.from(gd._fullData[1].y)])"
    )
    (top_fill, top), (bottom_fill, bottom), line = band
    assert bottom_fill == "tonexty" and top_fill != "tonexty"
    assert all(math.isclose(u - b, margin, rel_tol=1e-6) for u, b in zip(top, line, strict=True))
    assert all(math.isclose(b - d, margin, rel_tol=1e-6) for b, d in zip(line, bottom, strict=True))
    expect(history.locator(".note")).to_contain_text("estimated from the spread of repeated trials")
    history.locator("summary", has_text="Data").click()  # the table arrives when Data is opened
    expect(history.locator("details table thead")).to_contain_text("Noise band from")
    page.emulate_media(color_scheme="dark")
    assert not axe_violations(page)


def test_a_study_without_repeats_or_step_to_step_reports_shows_no_band_and_no_mark(page, bare):
    login(page)
    page.goto(bare)
    expect(page.locator("#trial-table tbody tr")).to_have_count(12)
    expect(page.locator("#study-noise")).to_have_count(0)
    expect(page.locator(".badge.within-noise")).to_have_count(0)
    page.get_by_role("tab", name="Charts").click()
    graph = (
        page.locator("#study-charts figure.chart").filter(has_text="Optimization history").locator(".js-plotly-plot")
    )
    expect(graph.locator(".scatterlayer .trace")).to_have_count(2, timeout=DRAWN_MS)  # points and the line only
    expect(graph.locator(".legendtext")).to_have_text(["Objective", "Best so far"])
    expect(page.locator("#study-charts")).not_to_contain_text("Noise band")


def test_the_noise_notice_and_marks_fit_a_phone_in_dark_mode(browser, console, repeated):
    context = browser.new_context(base_url=console.url, viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = context.new_page()
    try:
        login(page)
        page.goto(f"{JOBS}{REPEATED}/")
        expect(page.locator("#study-noise")).to_be_visible()
        expect(page.locator(".badge.within-noise").first).to_be_attached()
        width = page.evaluate(OVERFLOW)
        assert width["document"] <= width["viewport"] and width["loose"] == [], width
        assert not axe_violations(page)
    finally:
        context.close()
