"""The main flows of the console, in Chromium, against a live console with its real executor."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.helpers.browser import JOBS, assert_not_reloaded, login, mark_page, state

pytestmark = pytest.mark.browser


def test_sign_in_lands_on_the_projects_jobs_with_switcher_and_breadcrumbs(page):
    page.goto(JOBS)
    expect(page).to_have_url(re.compile(r"/login/\?next="))
    login(page)
    page.goto(JOBS)
    expect(page.get_by_role("heading", name="Training jobs")).to_be_visible()
    expect(page.get_by_label("Project")).to_have_value(JOBS)
    expect(page.get_by_role("navigation", name="Breadcrumb")).to_contain_text("default-project")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Jobs")).to_have_attribute(
        "aria-current", "page"
    )


def test_upload_a_package_and_submit_a_custom_job_then_watch_it_run(page, console, tmp_path):
    sdist = trainers.package(tmp_path, trainers.STREAMING_TASK, name="streamer")
    login(page)
    page.goto(JOBS)
    page.get_by_role("link", name="New training job").click()
    page.get_by_label("Job ID").fill("custom_1")
    page.get_by_label("Upload a trainer package").set_input_files(str(sdist))
    page.get_by_label("Runtime version").select_option("2.11")  # the stack the session builds (current's is large)
    page.get_by_role("radio", name=re.compile(r"CUSTOM")).check()
    page.get_by_label("Master: machine type").select_option("n1-standard-8")
    page.get_by_label("Master: accelerator", exact=True).select_option("NVIDIA_TESLA_T4")
    page.get_by_label("Master: accelerators per machine").fill("1")
    page.get_by_label("Workers: machine type").select_option("n1-standard-8")
    page.get_by_label("Workers: count").fill("2")
    page.get_by_label("Workers: accelerator", exact=True).select_option("NVIDIA_TESLA_T4")
    page.get_by_label("Workers: accelerators per machine").fill("1")
    page.get_by_role("button", name="Submit job").click()

    page.wait_for_url(f"**{JOBS}custom_1/", timeout=60_000)
    mark_page(page)
    expect(state(page)).to_have_attribute("data-state", "RUNNING", timeout=180_000)
    expect(page.locator("#job-replicas")).to_contain_text("1×NVIDIA_TESLA_T4")  # the Replicas tab, once they run
    # Lines from the master and both workers stream in over the socket.
    logs = page.locator("#log-lines")
    expect(logs).to_contain_text("chief step", timeout=30_000)  # the master is "chief" in TF_CONFIG
    expect(logs).to_contain_text("worker step")
    expect(page.locator("#log-lines tr", has_text="worker-replica-1")).not_to_have_count(0)
    expect(state(page)).to_have_attribute("data-state", "SUCCEEDED", timeout=60_000)
    expect(logs).to_contain_text("training done")
    assert_not_reloaded(page)


def test_cancel_a_running_job(page, console):
    sdist = trainers.package(
        console.storage / "browser-packages" / "default-project" / "forever", trainers.FOREVER_TASK
    )
    console.submit("forever_1", sdist)
    login(page)
    page.goto(f"{JOBS}forever_1/")
    mark_page(page)
    expect(page.locator("#log-lines")).to_contain_text("still training", timeout=180_000)
    expect(state(page)).to_have_attribute("data-state", "RUNNING")
    page.get_by_role("button", name="Cancel job").click()
    page.get_by_role("dialog").get_by_role("button", name="Yes, cancel the job").click()  # in-page, no confirm()
    expect(state(page)).to_have_attribute("data-state", "CANCELLED", timeout=30_000)
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    assert_not_reloaded(page)
    assert console.job("forever_1")["state"] == "CANCELLED"


def test_a_tuning_study_shows_its_charts_with_data(page, console):
    job = console.wait(console.background["tuning"], timeout=240)
    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    login(page)
    page.goto(f"{JOBS}study_1/")
    trials = page.locator("#trials table.trials tbody tr")
    expect(trials).to_have_count(4)
    page.get_by_role("tab", name="Charts").click()  # the charts are fetched and drawn once it opens
    charts = page.locator("#study-charts figure.chart")
    # history, parallel coordinates, one slice per parameter, contour, learning curves, objective
    # against duration and against ML units (whatever rates the short trials' units came to), and
    # the importance chart's note (it needs 10 trials with a result)
    expect(charts).to_have_count(9)
    expect(page.locator("#study-charts")).not_to_have_attribute("aria-busy", "true")
    for index in range(6):  # Plotly's SVG, or the parallel coordinates' own (static/parallel.js)
        expect(
            charts.nth(index).locator(".js-plotly-plot .main-svg, .parallel-plot[data-drawn] svg").first
        ).to_be_attached()
    expect(page.locator("#chart-contour")).to_contain_text("Contour: ")
    expect(page.locator("#chart-importance")).to_contain_text("appears once 10 trials have a result")
    # Plotly drew the points: four trials, four markers in the optimization history.
    expect(charts.first.locator(".scatterlayer .trace").first.locator(".point")).to_have_count(4)
    expect(charts.nth(1).locator(".parallel-lines path")).to_have_count(4)  # and a line per trial
    # The same data as a table, for screen readers and copy-paste, fetched when Data is opened.
    charts.first.locator("summary", has_text="Data").click()
    table = charts.first.locator("table")
    expect(table.locator("tbody tr")).to_have_count(4)
    expect(table.locator("thead")).to_contain_text("Best so far")
    # The trial table: best first, filtered in place by state, each trial linked to its logs.
    page.get_by_role("tab", name="Trials").click()
    state = page.locator("#trial-filters").get_by_role("combobox", name="State")
    state.select_option("FAILED")
    expect(trials).to_have_count(1)
    expect(trials.first).to_contain_text("No trial matches these filters")
    state.select_option("")
    expect(trials).to_have_count(4)
    best = trials.first.get_attribute("data-trial")
    trials.first.get_by_role("link", name="Logs").click()
    expect(page.locator("#log-trial")).to_have_value(best)


def test_an_admin_adds_a_member_who_then_sees_a_read_only_console(page, console):
    login(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Members").click()
    page.get_by_label("Username or email").fill("dana")
    page.get_by_label("Role", exact=True).select_option(label="AI Platform Viewer")
    page.get_by_role("button", name="Add member").click()
    expect(page.locator("tr[data-member=dana]")).to_contain_text("Viewer")
    page.get_by_role("button", name="Sign out").click()

    login(page, "dana")
    page.goto(JOBS)
    expect(page.get_by_role("heading", name="Training jobs")).to_be_visible()
    nav = page.get_by_role("navigation", name="Main")
    expect(nav.get_by_role("link", name="Jobs")).to_be_visible()
    expect(nav.get_by_role("link", name="Members")).to_have_count(0)
    expect(nav.get_by_role("link", name="Audit log")).to_have_count(0)
    expect(page.get_by_role("link", name="New training job")).to_have_count(0)
    page.get_by_role("link", name="custom_1").click()
    expect(page.get_by_role("tab", name="Logs")).to_be_visible()
    expect(page.get_by_role("button", name="Cancel job")).to_have_count(0)
    page.watch.expect_status(f"{JOBS}new/", 403)
    response = page.goto(f"{JOBS}new/")
    assert response.status == 403
    expect(page.get_by_role("heading", name="Permission denied")).to_be_visible()


def test_deploy_a_trained_model_and_send_a_prediction_from_the_panel(page, console):
    job = console.wait(console.background["model"], timeout=240)
    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    login(page)
    page.goto(f"{JOBS}train_model/")
    page.get_by_role("link", name="Deploy as model version").click()
    expect(page.get_by_role("radio")).to_have_count(1)  # the folder holding model.joblib
    page.get_by_label("New model's name").fill("census")
    page.get_by_label("Version name").fill("v1")
    page.get_by_role("button", name="Deploy").click()
    page.wait_for_url("**/models/census/**")
    expect(page.locator("tr[data-version=v1] [data-state]")).to_have_attribute("data-state", "READY", timeout=120_000)
    body = page.get_by_label("Request body (JSON)")
    expect(body).to_be_visible(timeout=15_000)  # the panel appears once a version is READY
    body.fill('{"instances": [[0.9, 0.8, 0.1, 0.2], [0.1, 0.2, 0.3, 0.4]]}')
    expect(page.locator("#try-check")).to_have_text("2 instances")
    page.get_by_role("button", name="Predict").click()
    result = page.locator("#prediction-result")
    expect(result).to_contain_text("HTTP 200")
    expect(result.locator("pre")).to_contain_text('"predictions"')
    assert re.search(r'"predictions":\s*\[\s*1,\s*0\s*\]', result.locator("pre").inner_text())


def test_filter_the_audit_log(page, console):
    login(page)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Audit log").click()
    rows = page.locator("table.audit tbody tr")
    expect(rows).not_to_have_count(0)
    page.get_by_label(re.compile(r"^Method")).fill("CancelJob")
    page.get_by_role("button", name="Filter").click()
    expect(page).to_have_url(re.compile(r"method=CancelJob"))
    expect(rows.first).to_contain_text("google.cloud.ml.v1.JobService.CancelJob")
    expect(rows.first.locator("[data-sentence]")).to_contain_text("cancelled job")
    methods = rows.locator("td:nth-child(5)").all_inner_texts()
    assert methods and all("CancelJob" in m for m in methods)
    page.get_by_label(re.compile(r"^Method")).fill("NoSuchMethod")
    page.get_by_role("button", name="Filter").click()
    expect(page.get_by_text("No audit entries match")).to_be_visible()


def test_train_a_built_in_algorithm_on_an_uploaded_csv_and_read_its_evaluation(page, console, tmp_path):
    """No trainer written: a CSV (target first, no header) and the boosted trees form."""
    rows = []
    for i in range(400):
        label = i % 2
        rows.append(f"{label},{label * 2 + (i % 7) * 0.1:.2f},{(i % 13) * 0.5:.1f},{'ab'[label] if i % 5 else 'c'}")
    csv = tmp_path / "churn.csv"
    csv.write_text("\n".join(rows) + "\n")
    login(page)
    page.goto(JOBS)
    page.get_by_role("link", name="Train a built-in algorithm").click()
    page.get_by_label("Job ID").fill("builtin_1")
    page.get_by_label("Upload a CSV").set_input_files(str(csv))
    page.get_by_label("Model type").select_option("classification")
    page.get_by_role("button", name="Submit job").click()

    page.wait_for_url(f"**{JOBS}builtin_1/", timeout=60_000)
    mark_page(page)
    expect(page.locator("#builtin-results")).to_contain_text("appears here once the algorithm has trained")
    expect(state(page)).to_have_attribute("data-state", "SUCCEEDED", timeout=240_000)
    # The evaluation section follows the job (fragments/builtin/) and ends as a fresh load draws it.
    expect(page.locator("#builtin-results")).to_have_attribute("data-evaluated", "true", timeout=15_000)
    from tests.helpers.browser import assert_matches_a_fresh_load

    live = assert_matches_a_fresh_load(page, page.context.browser, console)
    assert_not_reloaded(page)
    assert "appears here once" not in live["builtin"]
    page.get_by_role("tab", name="Results").click()  # it opened on its log, while it ran
    results = page.locator("section", has=page.locator("#builtin-heading"))
    expect(results).to_contain_text("Built-in algorithm")
    expect(results).to_contain_text("Classification metrics on each split")
    expect(results.get_by_role("row", name=re.compile(r"^accuracy"))).to_contain_text("1.0000")
    expect(results).to_contain_text("model.bst")


def test_the_data_analysis_page_draws_its_charts_with_their_tables(page, console):
    folder = console.storage / "analysis-flow" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [f"{i % 2},{i * 0.5 + (i % 7)},{'abc'[i % 3]}" for i in range(120)]
    (folder / "table.csv").write_text("\n".join(rows) + "\n")
    login(page)
    page.goto(f"/projects/default-project/data/analysis/?path={folder / 'table.csv'}&model_type=classification")
    charts = page.locator("figure.chart")
    expect(charts.first).to_be_attached()
    for index in range(charts.count()):
        expect(charts.nth(index).locator(".js-plotly-plot .main-svg").first).to_be_attached()
        expect(charts.nth(index).locator("details table tbody tr").first).to_be_attached()
