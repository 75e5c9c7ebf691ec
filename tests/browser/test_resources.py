"""The job page's Resources tab in Chromium: what the console sampled of each replica (CPU,
memory) drawn as one chart per resource, one line per replica, with its data table."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.helpers.browser import JOBS, login, mark_page, state

pytestmark = pytest.mark.browser


def test_resources_tab_draws_one_line_per_replica(page, console):
    package = trainers.package(
        console.storage / "browser-packages" / "default-project" / "sampled", trainers.STREAMING_TASK, name="sampled"
    )
    console.submit(
        "sampled",
        package,
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount="1",
    )
    login(page)
    page.goto(f"{JOBS}sampled/")
    mark_page(page)
    expect(state(page)).to_have_attribute("data-state", "SUCCEEDED", timeout=180_000)
    page.get_by_role("tab", name="Resources").click()
    memory = page.locator("#resources figure.metric-chart[data-tag='system/memory_bytes_used']")
    expect(memory.locator(".scatterlayer .trace")).to_have_count(2, timeout=30_000)  # master and worker
    expect(page.locator("#resources figure.metric-chart[data-tag='system/cpu_utilization']")).to_have_count(1)
    memory.get_by_text("Data table: system/memory_bytes_used").click()
    table = memory.locator("table tbody")
    expect(table).to_contain_text("master-replica-0")
    expect(table).to_contain_text("worker-replica-0")
    # The Metrics tab keeps the job's own metrics: this job reported none.
    page.get_by_role("tab", name="Metrics").click()
    expect(page.locator("#metrics figure.metric-chart")).to_have_count(0)
    expect(page.locator("#metrics")).to_contain_text("No metrics were reported")
