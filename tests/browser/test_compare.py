"""Jobs compared in Chromium: tick two jobs on the list, press Compare, see both, their differences,
their final metrics and their overlaid curves, in the page's theme."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.browser.studies import seed_study
from tests.helpers.browser import JOBS, axe_violations, login

pytestmark = pytest.mark.browser

# Reports accuracy and loss for three steps through cloudml-hypertune; --lr scales them.
COMPARED_TASK = (
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


def test_tick_two_jobs_press_compare_and_see_both_with_their_chart(page, console):
    package = trainers.package(
        console.storage / "browser-packages" / "default-project" / "compared", COMPARED_TASK, name="compared"
    )
    for job_id, lr in (("cmp_low", "0.1"), ("cmp_high", "0.3")):
        console.submit(job_id, package, args=["--lr", lr])
    for job_id in ("cmp_low", "cmp_high"):
        assert console.wait(job_id)["state"] == "SUCCEEDED"
    login(page)
    page.goto(JOBS)
    page.get_by_label("Compare cmp_low").check()
    page.get_by_label("Compare cmp_high").check()
    page.get_by_role("button", name="Compare", exact=True).click()
    page.wait_for_url(re.compile(r"/projects/default-project/compare/\?jobs=cmp_high,cmp_low$"))

    inputs = page.locator("#compare-inputs")
    expect(inputs.get_by_role("link", name="cmp_low")).to_be_visible()
    expect(inputs.get_by_role("link", name="cmp_high")).to_be_visible()
    expect(inputs.locator("tr.differs")).to_have_count(1)
    expect(inputs.locator("tr.differs")).to_contain_text("--lr")
    accuracy = page.locator("#compare-metrics tr[data-metric='accuracy']")
    expect(accuracy.locator("td.best")).to_have_count(1)
    expect(accuracy.locator("td.best")).to_contain_text("0.9")  # cmp_high's last accuracy: 0.3 × 3

    chart = page.locator("#compare-curves figure.metric-chart[data-tag='accuracy']")
    expect(chart.locator(".scatterlayer .trace")).to_have_count(2)  # one line per job
    # The list shows the newest first, so the ticked boxes send cmp_high first.
    expect(chart.locator(".legendtext")).to_have_text(["cmp_high · hypertune", "cmp_low · hypertune"])
    expect(page.locator("#compare-parallel .parallel-lines path")).to_have_count(2)  # a line per job
    expect(page.locator("#compare-parallel").get_by_role("group", name=re.compile(r"^--lr axis"))).to_be_visible()
    assert axe_violations(page) == []

    # The curves follow the page into dark mode, as the job page's charts do.
    tick = chart.locator(".xtick text").first
    expect(tick).to_have_css("fill", "rgb(27, 31, 36)")
    page.emulate_media(color_scheme="dark")
    expect(tick).to_have_css("fill", "rgb(230, 232, 235)")

    # The link is shareable: opened afresh it shows the same comparison.
    page.goto(page.url)
    expect(page.locator("#compare-curves figure.metric-chart")).to_have_count(2)


@pytest.fixture(scope="module")
def studies(console):
    """Two studies of one goal (their trials differ: an 'edge' study's last ones sit near its top
    rate) and one that minimizes."""
    seed_study(console, "cmp_random", 12)
    seed_study(console, "cmp_bayesian", 16, "edge")
    seed_study(console, "cmp_lowest", 10, goal="MINIMIZE")
    return {job_id: console.job(job_id) for job_id in ("cmp_random", "cmp_bayesian", "cmp_lowest")}


def best_so_far(job: dict) -> tuple[list[int], list[float]]:
    """A study's trial numbers and the best objective after each (it maximizes)."""
    results = sorted(
        (int(t["trialId"]), float(t["finalMetric"]["objectiveValue"]))
        for t in job["trainingOutput"]["trials"]
        if t.get("finalMetric")
    )
    best = [max(v for _, v in results[: i + 1]) for i in range(len(results))]
    return [t for t, _ in results], best


def test_two_studies_compared_draw_their_best_so_far_lines_on_one_chart(page, studies):
    login(page)
    page.goto("/projects/default-project/compare/?jobs=cmp_random,cmp_bayesian")
    section = page.locator("#compare-studies")
    expect(section.get_by_role("heading", name="Studies: best so far")).to_be_visible()
    graph = section.locator("#chart-studies .js-plotly-plot")
    expect(graph.locator(".scatterlayer .trace")).to_have_count(2, timeout=30_000)  # one line per study
    expect(graph.locator(".legendtext")).to_have_text(["cmp_random", "cmp_bayesian"])
    drawn = graph.evaluate("(gd) => gd._fullData.map((t) => [Array.from(t.x), Array.from(t.y)])")
    expected = [best_so_far(studies[job_id]) for job_id in ("cmp_random", "cmp_bayesian")]
    assert [(list(map(int, x)), y) for x, y in drawn] == [(x, y) for x, y in expected]
    assert drawn[0][1] != drawn[1][1][: len(drawn[0][1])]  # two different studies, told apart
    expect(section.locator(".note")).to_contain_text("The highest accuracy each study had found after each")
    table = section.locator("details table")
    expect(table.locator("thead th")).to_have_text(["Trial", "cmp_random", "cmp_bayesian"])
    expect(table.locator("tbody tr")).to_have_count(16)
    assert axe_violations(page) == []
    page.emulate_media(color_scheme="dark")
    assert axe_violations(page) == []


def test_studies_with_differing_goals_are_said_to_differ_and_not_drawn_together(page, studies):
    login(page)
    page.goto("/projects/default-project/compare/?jobs=cmp_random,cmp_lowest")
    section = page.locator("#compare-studies")
    expect(section.get_by_role("status")).to_have_text(
        "The studies' goals differ (cmp_random maximizes accuracy, cmp_lowest minimizes accuracy): their "
        "best-so-far lines are not drawn on one chart, where a line going up would be better for some and worse "
        "for the others."
    )
    expect(section.locator("figure")).to_have_count(0)
    expect(page.locator("#compare-curves figure.metric-chart").first).to_be_visible()  # the rest of the page stays
    assert axe_violations(page) == []


def test_the_inputs_start_with_those_that_differ_and_show_all_on_request(page, studies):
    login(page)
    page.goto("/projects/default-project/compare/?jobs=cmp_random,cmp_bayesian")
    rows = page.locator("#compare-inputs tbody tr")
    expect(rows.first).to_be_visible()
    differing = rows.count()
    assert differing == page.locator("#compare-inputs tbody tr.differs").count() > 0
    expect(page.locator("#compare-inputs").get_by_role("row", name=re.compile("Scale tier"))).to_have_count(0)
    # Keyboard: the control is a link, reached and followed with the keyboard.
    show_all = page.locator("#compare-inputs").get_by_role("link", name="Show all inputs")
    show_all.focus()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"[?&]inputs=all(&|$)"))
    expect(page.locator("#compare-inputs").get_by_role("row", name=re.compile("Scale tier"))).to_have_count(1)
    expect(rows).not_to_have_count(differing)
    assert rows.count() > differing
    # The link keeps the view: opened afresh it shows every input still.
    page.goto(page.url)
    expect(page.locator("#compare-inputs").get_by_role("row", name=re.compile("Scale tier"))).to_have_count(1)
    page.locator("#compare-inputs").get_by_role("link", name="Show only differences").click()
    expect(rows).to_have_count(differing)
    assert "inputs=" not in page.url
