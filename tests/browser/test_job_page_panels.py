"""The job page a team uses every day, in Chromium against a live
console: panels that follow a running job to its end and then match a fresh load, stderr that is
not all ERROR, a study page in tabs with a readable trial table, and times and durations."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.helpers.browser import (
    JOBS,
    assert_matches_a_fresh_load,
    assert_not_reloaded,
    axe_violations,
    login,
    mark_page,
    state,
)

pytestmark = pytest.mark.browser

# What a page shows of the job, panel by panel: the live page and a fresh load must agree.
# Every refreshing panel has had its last refresh (its hx-get is gone once the job has ended).


def test_a_study_page_opened_while_it_runs_ends_as_a_fresh_load_shows_it(page, browser, console):
    package = trainers.package(
        console.storage / "browser-packages" / "default-project" / "live-study", trainers.TUNING_TASK
    )
    console.submit(
        "live_study",
        package,
        hyperparameters=trainers.TUNING,
        jobDir=str(console.storage / "out" / "default-project" / "live_study"),
    )
    login(page)
    page.goto(f"{JOBS}live_study/")
    mark_page(page)
    # The Charts tab, shown once, fetches its charts; they then refresh with the study in its tab.
    page.get_by_role("tab", name="Charts").click()
    expect(page.locator("#study-charts")).not_to_have_attribute("aria-busy", "true")
    page.get_by_role("tab", name="Trials").click()
    expect(state(page)).to_have_attribute("data-state", "SUCCEEDED", timeout=240_000)
    live = assert_matches_a_fresh_load(page, browser, console, tabs=("Charts",))
    assert_not_reloaded(page)
    assert live["counts"][:2] == ["4", "4"] and live["counts"][2]
    assert "4 of 4 trials completed" in live["trialSummary"]
    assert "No trials have started yet" not in live["trialSummary"]
    # 9 charts, the objective against ML units among them whatever rates its short trials' units came to
    assert len(live["charts"]) == 9 and live["logTrials"] == ["", "1", "2", "3", "4"]


# Prints what trainers print on stderr: a tqdm bar, a Python warning, then a logged error.
STDERR_TASK = (
    trainers.TASK_HEADER
    + """\
import logging, warnings
for i in range(1, 6):
    sys.stderr.write(f"\\r{i * 20}%|{'#' * i * 2:<10}| {i}/5 [00:0{i}<00:00, 5.00it/s]")
    sys.stderr.flush()
    time.sleep(0.05)
sys.stderr.write("\\n")
warnings.warn("the learning rate is high")
sys.stderr.write("Downloading data from https://example.invalid/data.npz\\n")
sys.stderr.flush()
logging.error("the validation split is empty")
print("done", flush=True)
"""
)


def test_plain_stderr_is_info_and_jump_to_first_error_lands_on_the_real_error(page, console):
    package = trainers.package(
        console.storage / "browser-packages" / "default-project" / "stderr", STDERR_TASK, name="stderrer"
    )
    console.submit("stderr_1", package)
    assert console.wait("stderr_1", timeout=240)["state"] == "SUCCEEDED"
    login(page)
    page.goto(f"{JOBS}stderr_1/")
    lines = page.locator("#log-lines tr")
    expect(lines.filter(has_text="5/5 [00:05")).to_have_class(re.compile(r"\bsev-info\b"))
    expect(lines.filter(has_text="Downloading data")).to_have_class(re.compile(r"\bsev-info\b"))
    expect(lines.filter(has_text="UserWarning: the learning rate is high")).to_have_class(
        re.compile(r"\bsev-warning\b")
    )
    expect(lines.filter(has_text="ERROR:root:the validation split is empty")).to_have_class(
        re.compile(r"\bsev-error\b")
    )
    page.get_by_role("link", name="Jump to first error").click()
    target = page.locator("#log-lines tr.first-error, #log-lines tr.highlight")
    expect(target).to_have_count(1)
    expect(target).to_contain_text("the validation split is empty")
    # The REST entry still says where the line came from.
    entries = console.call("GET", "/v1/projects/default-project/jobs/stderr_1/logs?pageSize=500")["entries"]
    bar = next(e for e in entries if "5/5 [00:05" in e["message"])
    assert (bar["stream"], bar["severity"]) == ("stderr", "INFO")


def test_a_study_page_has_keyboard_tabs_a_readable_trial_table_and_replicas_by_trial(page, console):
    assert console.wait(console.background["tuning"], timeout=240)["state"] == "SUCCEEDED"
    login(page)
    page.goto(f"{JOBS}study_1/")
    tablist = page.get_by_role("tablist", name="Job sections")
    tabs = tablist.get_by_role("tab")
    expect(tabs).to_have_text(["Trials", "Charts", "Logs", "Replicas", "Resources", "Outputs", "Training input"])
    expect(tabs.first).to_have_attribute("aria-selected", "true")
    expect(page.locator("#trials")).to_be_visible()
    expect(page.locator("#logs")).to_be_hidden()
    # Keyboard: Tab reaches the selected tab, arrows move and select, Home and End jump.
    tabs.first.focus()
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Charts")).to_be_focused()
    expect(page.get_by_role("tab", name="Charts")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#study-charts-section")).to_be_visible()
    expect(page.locator("#trials")).to_be_hidden()
    # Shown for the first time, the tab fetches its charts and Plotly draws them: seconds on a busy
    # 2-core machine, past the default five (the full suite failed here once, beside another console).
    expect(page.locator("#study-charts figure.chart").first.locator(".main-svg").first).to_be_visible(timeout=30_000)
    # The tab is in the address: a copied link, or a reload, opens the same view.
    expect(page).to_have_url(re.compile(r"[?&]tab=charts\b"))
    page.goto(page.url)
    expect(page.get_by_role("tab", name="Charts")).to_have_attribute("aria-selected", "true")
    page.get_by_role("tab", name="Charts").focus()
    page.keyboard.press("End")
    expect(page.get_by_role("tab", name="Training input")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowRight")  # wraps around
    expect(page.get_by_role("tab", name="Trials")).to_have_attribute("aria-selected", "true")
    page.keyboard.press("ArrowLeft")
    page.keyboard.press("Home")
    expect(page.get_by_role("tab", name="Trials")).to_be_focused()
    expect(page.get_by_role("tabpanel", name="Trials")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollHeight") < 3000
    assert not axe_violations(page)

    # The trial table: values to 4 significant digits, exact on hover, the best marked.
    first = page.locator("#trial-table tbody tr").first
    heads = page.locator("#trial-table thead th").evaluate_all(
        "(ths) => ths.map((th) => (th.querySelector('[data-sort-key]') || {dataset: {}}).dataset.sortKey || '')"
    )
    objective = first.locator("td, th").nth(heads.index("objective"))
    exact = objective.get_attribute("title") or objective.inner_text()  # the cell's title: the whole value
    assert len(objective.inner_text()) <= 7 and float(exact) == pytest.approx(float(objective.inner_text()), rel=1e-3)
    expect(first).to_have_class(re.compile(r"\bbest-trial\b"))  # sorted best first
    expect(first).to_contain_text("★ Best")
    expect(page.locator("#trial-table .badge.best")).to_have_count(1)
    for key in [k for k in heads if k.startswith("p.")]:  # a column per parameter, each value short
        assert len(first.locator("td, th").nth(heads.index(key)).inner_text()) <= 8
    # The replicas table, behind its own tab, says which trial each master ran.
    page.get_by_role("tab", name="Replicas").click()
    trials = page.locator("#replicas tbody tr td:first-child").all_inner_texts()
    assert sorted(trials) == ["1", "2", "3", "4"]
    page.get_by_role("tab", name="Trials").click()

    # A trial's "Logs" link opens the Logs tab with that trial's lines.
    first.get_by_role("link", name=re.compile("Logs of trial")).click()
    expect(page.get_by_role("tab", name="Logs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#logs")).to_be_visible()


def test_times_have_durations_a_time_zone_and_log_dates_once_a_day(page, console):
    assert console.wait(console.background["model"], timeout=240)["state"] == "SUCCEEDED"
    login(page)
    page.goto(JOBS)
    row = page.locator("#job-rows tr", has=page.get_by_role("link", name="train_model", exact=True))
    expect(row.locator("td[data-duration]")).to_have_text(re.compile(r"^\d+(\.\d)? s$|min|h"))
    page.goto(f"{JOBS}train_model/")
    facts = page.locator("#job-times")
    # The context runs in Europe/Berlin: absolute times name the zone, the title gives UTC.
    created = facts.locator("time").first
    expect(created).to_have_text(re.compile(r"(CES?T|GMT\+\d).*\(.*ago|(CES?T|GMT\+\d).*now"))
    expect(created).to_have_attribute("title", re.compile(r"Z \(UTC\)$"))
    expect(facts.locator("[data-durations]")).to_have_text(re.compile(r"queued .+ · running .+ · total .+"))
    units = facts.locator("dt:text('ML units consumed') + dd")
    assert float(units.inner_text()) > 0  # a short job is not 0.0
    # The log's Time column names its zone; the date shows on the first row of the day only.
    expect(page.locator("th[data-time-heading]")).to_have_text(re.compile(r"Time \((CES?T|GMT\+\d)\)"))
    times = page.locator("#log-lines tr time")
    expect(times.first).to_have_text(re.compile(r"\d{4} \d\d:\d\d:\d\d$"))
    dated = page.locator("#log-lines tr.new-day").count()
    assert dated == 1 or dated < times.count() // 2
    expect(times.nth(1)).to_have_text(re.compile(r"^\d\d:\d\d:\d\d$"))
