"""Jobs compared in Chromium: tick two jobs on the list, press Compare, see both, their differences,
their final metrics and their overlaid curves, in the page's theme."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser import trainers
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
    expect(page.locator("#compare-parallel .parcoords")).to_have_count(1)
    assert axe_violations(page) == []

    # The curves follow the page into dark mode, as the job page's charts do.
    tick = chart.locator(".xtick text").first
    expect(tick).to_have_css("fill", "rgb(27, 31, 36)")
    page.emulate_media(color_scheme="dark")
    expect(tick).to_have_css("fill", "rgb(230, 232, 235)")

    # The link is shareable: opened afresh it shows the same comparison.
    page.goto(page.url)
    expect(page.locator("#compare-curves figure.metric-chart")).to_have_count(2)
