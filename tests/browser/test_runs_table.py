"""The runs table in Chromium: a metric column chosen and sorted orders the runs; a label and a note
saved on the job page show in the list, and a click on the label filters the list by it."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.helpers.browser import JOBS, axe_violations, login

pytestmark = pytest.mark.browser
RUNS = ("runs_low", "runs_high", "runs_mid")
LEARNING_RATES = {"runs_low": "0.1", "runs_high": "0.3", "runs_mid": "0.2"}
PHONE = {"width": 390, "height": 844}

# Reports accuracy (lr × step) and loss for three steps through cloudml-hypertune.
TASK = (
    trainers.TASK_HEADER
    + """\
import hypertune
lr = float(sys.argv[sys.argv.index("--lr") + 1])
reporter = hypertune.HyperTune()
for step in (1, 2, 3):
    reporter.report_hyperparameter_tuning_metric("accuracy", lr * step, global_step=step)
    reporter.report_hyperparameter_tuning_metric("loss", 1 - lr * step, global_step=step)
"""
)

# What sticks out past the viewport, outside a scroll container that says it scrolls.
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  return [...document.querySelectorAll("body *")].filter((el) => {
    const box = el.getBoundingClientRect();
    if (box.right <= width + 1 || box.width === 0) return false;
    const scroller = el.closest(".table-scroll, .log-scroll");
    return !(scroller && scroller !== el && scroller.getAttribute("aria-label"));
  }).map((el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "")).slice(0, 8);
}"""


@pytest.fixture(scope="module")
def runs(console):
    """Three finished runs of one trainer, each with its learning rate and the metrics it reported."""
    package = trainers.package(console.storage / "browser-packages" / "default-project" / "runs", TASK, name="runs")
    for job_id in RUNS:
        console.submit(job_id, package, args=["--lr", LEARNING_RATES[job_id]])
    for job_id in RUNS:
        assert console.wait(job_id)["state"] == "SUCCEEDED"
    return RUNS


def shown(page) -> list[str]:
    return page.locator("#job-rows tbody tr").evaluate_all("rows => rows.map((row) => row.dataset.job)")


def test_choosing_a_metric_column_and_sorting_by_it_orders_the_runs(page, console, runs):
    login(page)
    page.goto(JOBS + "?q=runs_")
    page.get_by_text("Columns", exact=True).click()
    page.get_by_role("checkbox", name="accuracy").check()
    page.get_by_role("checkbox", name="--lr").check()
    page.get_by_role("button", name="Show these columns").click()
    page.wait_for_url(re.compile(r"col=metric%3Aaccuracy"))
    heading = page.get_by_role("columnheader", name="accuracy")
    expect(heading).to_be_visible()

    heading.get_by_role("link").click()
    expect(heading).to_have_attribute("aria-sort", "ascending")
    assert shown(page) == ["runs_low", "runs_mid", "runs_high"]
    heading.get_by_role("link").click()
    expect(heading).to_have_attribute("aria-sort", "descending")
    assert shown(page) == ["runs_high", "runs_mid", "runs_low"]
    first = page.locator("#job-rows tbody tr").first
    expect(first.locator("td.chosen-col")).to_have_text(["0.9", "0.3"])  # accuracy 0.3 × 3, --lr
    assert parse_qs(urlsplit(page.url).query)["sort"] == ["-metric:accuracy"]

    page.get_by_label("accuracy at least").fill("0.5")
    page.get_by_role("button", name="Apply").click()
    expect(page.locator("#job-rows tbody tr")).to_have_count(2)
    assert axe_violations(page) == []
    page.emulate_media(color_scheme="dark")
    assert axe_violations(page) == []
    page.set_viewport_size(PHONE)
    assert page.evaluate(OVERFLOW) == []


def test_a_label_edited_on_the_job_page_shows_in_the_list_and_filters_it(page, console, runs):
    login(page)
    page.goto(f"{JOBS}runs_mid/")
    page.get_by_text("Edit labels and note").click()
    page.get_by_label("Labels", exact=True).fill("team=vision\nbatch=b2")
    page.get_by_role("button", name="Save labels and note").click()
    expect(page.locator("#job-annotations").get_by_role("status")).to_have_text("Labels saved.")
    expect(page.locator("#job-annotations .label-list")).to_contain_text("team=vision")

    page.get_by_label("Labels", exact=True).fill("Team=vision")
    page.get_by_role("button", name="Save labels and note").click()
    expect(page.locator("#job-annotations").get_by_role("alert")).to_contain_text("Labels: Label key")
    expect(page.get_by_label("Labels", exact=True)).to_have_value("Team=vision")  # kept as typed

    page.goto(JOBS + "?q=runs_")
    page.locator("#job-rows").get_by_role("link", name="team=vision").click()
    page.wait_for_url(re.compile(r"label=team%3Dvision"))
    assert shown(page) == ["runs_mid"]
    expect(page.get_by_label("Label", exact=True)).to_have_value("team=vision")


def test_a_note_saved_on_the_job_page_shows_in_the_list(page, console, runs):
    login(page)
    page.goto(f"{JOBS}runs_high/")
    note = "Best so far: lr 0.3. " + "Next, try a schedule that decays the rate after the second step. " * 2
    page.get_by_text("Edit labels and note").click()
    page.get_by_label("Note", exact=True).fill(note)
    page.get_by_role("button", name="Save labels and note").click()
    expect(page.locator("#job-annotations").get_by_role("status")).to_have_text("Note saved.")
    expect(page.locator("#job-annotations [data-note]")).to_have_text(note.strip())
    assert axe_violations(page) == []

    page.goto(JOBS + "?q=runs_")
    cell = page.locator("#job-rows tr[data-job='runs_high'] td.note")
    expect(cell.locator("summary")).to_contain_text("Best so far: lr 0.3.")
    cell.locator("summary").click()
    expect(cell.locator("details p")).to_have_text(note.strip())


def test_every_job_is_one_line_high_in_the_list_whatever_its_state_or_type(page, console, runs):
    # A queued or running job's "1 min 29 s so far" and a study's "Hyperparameter tuning" wrapped
    # onto three lines and two, so the list's rows were uneven, at any width.
    forever = trainers.package(console.storage / "browser-packages" / "default-project" / "rows", trainers.FOREVER_TASK)
    console.submit("rows_running", forever)
    console.wait("rows_running", states={"RUNNING"})
    try:
        login(page)
        page.set_viewport_size({"width": 1440, "height": 900})
        heights = {}
        for job_id in ("rows_running", "runs_low", console.background["tuning"]):
            page.goto(f"{JOBS}?q={job_id}")
            row = page.locator(f"#job-rows tr[data-job='{job_id}']")
            expect(row.locator("td[data-duration], td[data-queued]").first).to_be_visible()
            heights[job_id] = row.evaluate("row => Math.round(row.getBoundingClientRect().height)")
            if job_id == "rows_running":
                expect(row.locator("td[data-duration]")).to_contain_text("so far")
        assert len(set(heights.values())) == 1, heights
    finally:
        console.call("POST", "/v1/projects/default-project/jobs/rows_running:cancel", {})
