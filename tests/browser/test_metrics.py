"""A job's metric charts on its page, in Chromium: live while it runs, runs overlaid, a data table
and CSV per tag, following the page's theme."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.helpers.browser import JOBS, assert_not_reloaded, login, mark_page, state

pytestmark = pytest.mark.browser

# Writes train and validation summaries and reports through cloudml-hypertune; after the first two
# steps it waits for a file the test creates, so the test sees the charts grow while it runs.
METRICS_TASK = (
    trainers.TASK_HEADER
    + """\
import hypertune
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter

job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
writers = {run: EventFileWriter(os.path.join(job_dir, run)) for run in ("train", "validation")}
reporter = hypertune.HyperTune()

def epoch(step):
    for run, writer in writers.items():
        loss = 1.0 / (step + 1) + (0.25 if run == "validation" else 0.0)
        value = summary_pb2.Summary.Value(tag="epoch_loss", simple_value=loss)
        writer.add_event(event_pb2.Event(step=step, wall_time=time.time(), summary=summary_pb2.Summary(value=[value])))
        writer.flush()
    reporter.report_hyperparameter_tuning_metric("accuracy", 0.5 + step / 10, global_step=step)

epoch(0)
epoch(1)
deadline = time.time() + 120
while not os.path.exists(os.path.join(job_dir, "go")) and time.time() < deadline:
    time.sleep(0.1)
epoch(2)
print("metrics written", flush=True)
"""
)


def test_job_page_charts_metrics_live_with_tables_csv_and_theme(page, console):
    job_dir = console.storage / "out" / "default-project" / "metrics_live"
    package = trainers.package(
        console.storage / "browser-packages" / "default-project" / "metered", METRICS_TASK, name="metered"
    )
    console.submit("metrics_live", package, jobDir=str(job_dir))
    login(page)
    page.goto(f"{JOBS}metrics_live/")
    mark_page(page)
    expect(state(page)).to_have_attribute("data-state", "RUNNING", timeout=180_000)
    page.get_by_role("tab", name="Metrics").click()  # a running job opens on its log
    charts = page.locator("#metrics figure.metric-chart")
    expect(charts).to_have_count(2, timeout=30_000)  # accuracy and epoch_loss, while the job runs
    loss = page.locator("#metrics figure.metric-chart[data-tag='epoch_loss']")
    expect(loss.locator(".scatterlayer .trace")).to_have_count(2)  # train and validation overlaid
    expect(loss.locator("table tbody tr")).to_have_count(4)

    (job_dir / "go").touch()
    expect(state(page)).to_have_attribute("data-state", "SUCCEEDED", timeout=60_000)
    expect(loss.locator("table tbody tr")).to_have_count(6, timeout=15_000)  # the last epoch streamed in
    assert_not_reloaded(page)
    loss.get_by_text("Data table: epoch_loss").click()
    expect(loss.locator("table thead")).to_contain_text("Run")
    expect(loss.locator("table tbody")).to_contain_text("validation")
    csv_link = loss.get_by_role("link", name="Download epoch_loss as CSV")
    assert csv_link.get_attribute("href").endswith("/metrics/download/?tag=epoch_loss")
    with page.expect_download() as download:
        page.locator("#metrics .actions").get_by_role("link", name="Download CSV").click()
    lines = open(download.value.path()).read().splitlines()
    assert lines[0] == "tag,step,value,time,trialId,source,run" and len(lines) == 1 + 6 + 3

    # The charts follow the page into dark mode and back.
    tick = loss.locator(".xtick text").first
    expect(tick).to_have_css("fill", "rgb(27, 31, 36)")
    page.emulate_media(color_scheme="dark")
    expect(tick).to_have_css("fill", "rgb(230, 232, 235)")
    page.emulate_media(color_scheme="light")
    expect(tick).to_have_css("fill", "rgb(27, 31, 36)")
