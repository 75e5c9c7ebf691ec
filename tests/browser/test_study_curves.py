"""A 60-trial study's learning curves in Chromium: the intermediate values chart takes the metric
charts' controls (smoothing each trial's line on its own, log y, time axes), and the metrics panel
draws every trial's lines, not only the 40 best, when asked, the view kept in the URL."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.studies import seed_study
from tests.helpers.browser import JOBS, axe_violations, login

STUDY = "many_trials"
TRIALS = 60  # every 25th failed: 58 with curves
WITH_CURVES = [n for n in range(1, TRIALS + 1) if n % 25]


@pytest.fixture(scope="module")
def study(console):
    seed_study(console, STUDY, TRIALS)
    return f"{JOBS}{STUDY}/"


TRACES = """(selector) => document.querySelector(selector).data.map((t) => ({
  meta: t.meta || {}, x: Array.from(t.x || [], (v) => (v === null || Number.isNaN(v) ? null : v)),
  y: Array.from(t.y || [], (v) => (v === null || Number.isNaN(v) ? null : v)),
  ids: t.customdata ? Array.from(t.customdata, (v) => (v === null ? null : String(v))) : null}))"""
CURVES = "#chart-intermediate .js-plotly-plot"
DRAWN_MS = 30_000


def segments(values: list) -> list[list]:
    """A shared trace's lines, split at its gaps."""
    lines, line = [], []
    for value in values:
        if value is None:
            if line:
                lines.append(line)
            line = []
        else:
            line.append(value)
    return [*lines, line] if line else lines


def smoothed(values: list[float], weight: float) -> list[float]:
    """TensorBoard's debiased moving average, as static/charts.js draws it."""
    out, last = [], 0.0
    for count, value in enumerate(values, start=1):
        last = last * weight + (1 - weight) * value
        out.append(last / (1 - weight**count))
    return out


def test_the_learning_curves_take_the_metric_charts_controls_one_trial_line_at_a_time(page, study):
    login(page)
    page.goto(f"{study}?tab=charts&smooth=0")
    # Eleven charts and the metric curves draw one after another: a loaded machine takes a while.
    expect(page.locator("#chart-intermediate .scatterlayer .trace").first).to_be_visible(timeout=DRAWN_MS)
    raw = page.evaluate(TRACES, CURVES)
    shared = next(t for t in raw if t["meta"].get("gaps") and not t["meta"].get("raw"))
    controls = page.get_by_role("group", name="Intermediate values chart settings")

    controls.get_by_label("Smoothing").fill("0.6")
    expect(page).to_have_url(re.compile(r"[?&]smooth=0\.6"))
    page.wait_for_function(f"() => document.querySelector('{CURVES}').data.some((t) => t.meta && t.meta.raw)")
    drawn = next(t for t in page.evaluate(TRACES, CURVES) if t["meta"].get("gaps") and not t["meta"].get("raw"))
    # Each trial's line is smoothed from its own first report: none carries the one before it.
    before, after = segments(shared["y"]), segments(drawn["y"])
    assert len(after) == len(before) > 40
    for line, smooth in zip(before, after, strict=True):
        assert smooth == pytest.approx(smoothed(line, 0.6))
    # The metric charts below share the setting, as one set of controls.
    expect(page.get_by_role("group", name="Metric chart settings").get_by_label("Smoothing")).to_have_value("0.6")

    controls.get_by_label("Log y axis").check()
    page.wait_for_function(f"() => document.querySelector('{CURVES}')._fullLayout.yaxis.type === 'log'")
    controls.get_by_label("X axis").select_option("relative")
    page.wait_for_function(f"() => document.querySelector('{CURVES}')._fullLayout.xaxis.title.text.startsWith('Rel')")
    drawn = next(t for t in page.evaluate(TRACES, CURVES) if t["meta"].get("gaps") and not t["meta"].get("raw"))
    # Seconds since each trial's own first report (its ten reports a second apart).
    assert all(line == list(range(10)) for line in segments(drawn["x"]))
    controls.get_by_label("X axis").select_option("wall")
    page.wait_for_function(f"() => document.querySelector('{CURVES}')._fullLayout.xaxis.type === 'date'")
    assert not axe_violations(page)


def test_the_metrics_panel_shows_every_trial_when_asked_and_the_link_keeps_it(page, study):
    login(page)
    page.goto(f"{study}?tab=charts")
    accuracy = "#metrics figure.metric-chart[data-tag='accuracy'] .js-plotly-plot"
    chart = page.locator(accuracy)
    expect(chart.locator(".scatterlayer .trace")).to_have_count(41, timeout=DRAWN_MS)  # the 40 best, the colour bar
    expect(page.locator("#metrics figure[data-tag='accuracy'] .note")).to_contain_text("40 best trials")

    button = page.get_by_role("button", name="Show every trial")
    expect(button).to_have_attribute("aria-pressed", "false")
    button.focus()
    page.keyboard.press("Enter")
    expect(page.get_by_role("button", name="Show every trial")).to_have_attribute("aria-pressed", "true")
    expect(page.get_by_role("button", name="Show every trial")).to_be_focused()  # still where the user was
    expect(page).to_have_url(re.compile(r"[?&]metric_lines=all"))
    expect(page.locator("#metrics figure[data-tag='accuracy'] .note")).to_contain_text("Every trial's lines are drawn")
    page.wait_for_function(f'() => document.querySelector("{accuracy}").data.some((t) => t.meta && t.meta.faint)')
    traces = page.evaluate(TRACES, accuracy)
    own = {t["meta"]["trial"] for t in traces if t["meta"].get("trial")}
    faint = {i for t in traces if t["meta"].get("faint") for i in t["ids"] if i is not None}
    assert len(own) == 40 and own | faint == {str(n) for n in WITH_CURVES} and not own & faint
    assert len([t for t in traces if t["meta"].get("faint")]) <= 11  # a few traces, not one per trial

    # A faint line is a trial like the others: its row marks it in the chart.
    worst = min(faint, key=int)
    page.get_by_role("tab", name="Trials").click()
    page.locator(f'#trial-table tr[data-trial="{worst}"] th').hover()
    marked = chart.evaluate(
        "(gd) => gd.data.filter((t) => t.meta && t.meta.highlight).map((t) => t.x.filter((x) => x !== null).length)"
    )
    assert marked == [10]  # its ten reports

    page.reload()
    page.get_by_role("tab", name="Charts").click()
    expect(page.get_by_role("button", name="Show every trial")).to_have_attribute(
        "aria-pressed", "true", timeout=DRAWN_MS
    )
    page.get_by_role("button", name="Show every trial").click()
    expect(page.get_by_role("button", name="Show every trial")).to_have_attribute("aria-pressed", "false")
    expect(page).not_to_have_url(re.compile(r"metric_lines"))
    expect(chart.locator(".scatterlayer .trace")).to_have_count(41)
