"""in Chromium, the loop an ML team runs all day: clone and resubmit that always works, a
form's errors at the top, a job page that opens on its log and filters it in place, a header that
follows the job's state, a batch prediction job's own page with its error file one click away, the
outputs browser, and the jobs list on a phone."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.browser.test_jobs_list_phone_keyboard import PHONE
from tests.helpers.browser import JOBS, assert_not_reloaded, axe_violations, login, mark_page, state, wait_until

pytestmark = pytest.mark.browser
PROJECT = "/v1/projects/default-project"


def python_choices(page) -> list[str]:
    return page.locator("#id_python_version option").evaluate_all("(options) => options.map((o) => o.value)")


def test_a_clone_of_a_current_job_without_a_python_version_submits_as_it_is(page, console):
    # The job's "package" is a folder: it fails at once when its package is fetched, so no runtime
    # stack is built here (current's is large). What is tested is that its clone submits as it is.
    folder = console.storage / "browser-packages" / "default-project" / "not-a-package"
    folder.mkdir(parents=True, exist_ok=True)
    training_input = {
        "scaleTier": "BASIC",
        "packageUris": [str(folder)],
        "pythonModule": "trainer.task",
        "region": "us-central1",
        "runtimeVersion": "current",
    }
    console.call("POST", f"{PROJECT}/jobs", {"jobId": "hello_current", "trainingInput": training_input})
    login(page)
    page.goto(f"{JOBS}hello_current/")
    page.get_by_role("link", name="Clone").click()
    page.wait_for_url(re.compile(r"/jobs/new/\?clone=hello_current$"))
    expect(page.get_by_label("Runtime version")).to_have_value("current")
    expect(page.get_by_label("Python version")).to_have_value("")  # the runtime's default, as the job had it
    assert python_choices(page) == ["", "3.11", "3.12", "3.13"]  # current's, as versions; never 2.7 or 3.7
    job_id = page.get_by_label("Job ID").input_value()
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(f"**{JOBS}{job_id}/")
    expect(page.locator("#job-times [data-cloned-from]")).to_have_text("hello_current")
    clone = console.job(job_id)
    assert clone["trainingInput"] == {**training_input, "scaleTier": "BASIC"}
    assert "pythonVersion" not in clone["trainingInput"]

    # A fresh form's Pythons follow the runtime chosen; one the new runtime lacks gives way to its default.
    page.goto(f"{JOBS}new/")
    page.get_by_label("Runtime version").select_option("1.15")
    assert python_choices(page) == ["", "3.7"]
    page.get_by_label("Python version").select_option("3.7")
    page.get_by_label("Runtime version").select_option("current")
    expect(page.get_by_label("Python version")).to_have_value("")
    assert python_choices(page) == ["", "3.11", "3.12", "3.13"]
    expect(page.locator("#form-cli")).not_to_contain_text("--python-version")


def test_a_refused_form_opens_on_its_errors_at_the_top_linked_to_each_field(page, console):
    login(page)
    page.goto(f"{JOBS}new/")
    page.get_by_label("Job ID").fill("9_starts_with_a_digit")
    page.get_by_label("Package URIs").fill("gs://bucket/trainer-0.1.tar.gz")
    page.get_by_role("button", name="Submit job").click()
    summary = page.locator("[data-error-summary]")
    expect(summary).to_be_focused()
    expect(summary).to_be_in_viewport()
    link = summary.get_by_role("link", name=re.compile(r"^Job ID: "))
    expect(link).to_be_visible()
    expect(page.get_by_label("Job ID")).to_have_value("9_starts_with_a_digit")  # nothing typed is lost
    page.get_by_label("Job ID").evaluate("(input) => window.scrollTo(0, document.body.scrollHeight)")
    link.click()
    expect(page.get_by_label("Job ID")).to_be_focused()
    expect(page.get_by_label("Job ID")).to_be_in_viewport()


def test_a_running_job_opens_on_its_log_and_the_header_follows_its_state(page, console):
    package = trainers.package(
        console.storage / "browser-packages" / "default-project" / "daily-stream", trainers.STREAMING_TASK
    )
    console.submit("daily_stream", package, args=[])
    login(page)
    page.goto(f"{JOBS}daily_stream/")
    expect(page.get_by_role("tab", name="Logs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#logs")).to_be_visible()
    expect(page.locator("#log-lines")).to_contain_text("chief step", timeout=120_000)
    # The log says the job ended; the header says it as soon, and its Cancel button is gone.
    expect(page.locator("#log-status")).to_have_text("Job SUCCEEDED.", timeout=60_000)
    expect(state(page)).to_have_attribute("data-state", "SUCCEEDED", timeout=1_000)
    expect(page.get_by_role("button", name="Cancel job")).to_be_hidden(timeout=1_000)


def test_a_log_filter_applies_in_place_and_the_columns_never_wrap(page, console):
    assert console.wait(console.background["model"], timeout=240)["state"] == "SUCCEEDED"
    login(page)
    page.goto(f"{JOBS}train_model/")
    mark_page(page)
    expect(page.get_by_role("tab", name="Logs")).to_have_attribute("aria-selected", "true")
    page.locator("#log-filters").scroll_into_view_if_needed()
    top = page.evaluate("() => window.scrollY")
    page.locator("#log-task").select_option("service")
    expect(page).to_have_url(re.compile(r"[?&]task=service"))
    expect(page.locator("#log-task")).to_have_value("service")
    replicas = page.locator("#log-lines tr td:nth-child(3)")
    expect(replicas.first).to_have_text("service")
    assert set(replicas.all_inner_texts()) == {"service"}
    assert_not_reloaded(page)  # applied in place: the page stays where it was, on the log
    expect(page.get_by_role("tab", name="Logs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#log-filters")).to_be_in_viewport()
    assert abs(page.evaluate("() => window.scrollY") - top) < 200
    # Time, severity and replica keep to one line each (a row used to take two).
    lines = page.locator("#log-lines tr").first.evaluate(
        """(tr) => [...tr.cells].slice(0, 3).map((td) => {
            const range = document.createRange(); range.selectNodeContents(td);
            return new Set([...range.getClientRects()].map((r) => Math.round(r.top))).size;
        })"""
    )
    assert lines == [1, 1, 1], lines
    page.reload()
    expect(page.locator("#log-task")).to_have_value("service")
    expect(page.get_by_role("tab", name="Logs")).to_have_attribute("aria-selected", "true")


def test_a_batch_job_page_shows_its_input_and_opens_its_error_file(page, console):
    job = console.wait(console.background["model"], timeout=240)
    assert job["state"] == "SUCCEEDED", job.get("errorMessage")
    console.call("POST", f"{PROJECT}/models", {"name": "daily_census"})
    model_dir = f"{job['trainingInput']['jobDir']}/model"
    console.call("POST", f"{PROJECT}/models/daily_census/versions", {"name": "v1", "deploymentUri": model_dir})
    wait_until(
        lambda: console.call("GET", f"{PROJECT}/models/daily_census/versions/v1").get("state") == "READY",
        timeout=180,
        message="version v1 to be READY",
    )
    inputs = console.storage / "batch-in" / "default-project" / "daily"
    inputs.mkdir(parents=True, exist_ok=True)
    good = [json.dumps([0.9, 0.8, 0.1, 0.2]), json.dumps([0.1, 0.2, 0.3, 0.4])]
    (inputs / "part-000.json").write_text("\n".join([*good, "{not json", *good]) + "\n")
    console.call(
        "POST",
        f"{PROJECT}/jobs",
        {
            "jobId": "daily_scores",
            "predictionInput": {
                "dataFormat": "JSON",
                "inputPaths": [str(inputs / "part-*.json")],
                "outputPath": str(console.storage / "predictions" / "default-project" / "daily_scores"),
                "region": "us-central1",
                "modelName": "projects/default-project/models/daily_census",
                "maxWorkerCount": "1",
            },
        },
    )
    assert console.wait("daily_scores", timeout=180)["state"] == "SUCCEEDED"
    login(page)
    page.goto(f"{JOBS}daily_scores/")
    tabs = page.get_by_role("tablist", name="Job sections").get_by_role("tab")
    expect(tabs).to_have_text(["Prediction", "Logs", "Replicas", "Outputs"])
    expect(page.get_by_role("tab", name="Prediction")).to_have_attribute("aria-selected", "true")
    section = page.locator("#prediction")
    expect(section.locator("[data-input-paths]")).to_have_text(str(inputs / "part-*.json"))
    expect(section.locator("[data-prediction-input]")).to_contain_text("daily_census")
    expect(section.locator("[data-prediction-output]")).to_contain_text("Errors1")
    expect(page.get_by_text("Training input")).to_have_count(0)
    options = page.locator("#log-task option").all_inner_texts()
    assert "master-replica-0" not in options and "prediction-replica-0" in options, options
    page.get_by_role("tab", name="Replicas").click()
    expect(page.locator("#job-replicas")).not_to_contain_text("None")
    page.get_by_role("tab", name="Prediction").click()
    section.locator("[data-error-file]").get_by_role("link", name=re.compile("^prediction.errors_stats")).click()
    expect(page.locator("[data-preview]")).to_contain_text("Failed to parse the input line as JSON")
    expect(page.get_by_role("link", name="Download")).to_be_visible()


def test_the_outputs_browser_previews_a_csv_and_refuses_a_link_out_of_the_job_dir(page, console):
    job = console.wait(console.background["model"], timeout=240)
    job_dir = console.storage / "out" / "default-project" / "train_model"
    assert job["trainingInput"]["jobDir"] == str(job_dir)
    (job_dir / "metrics.csv").write_text("epoch,loss,accuracy\n1,0.9,0.51\n2,0.4,0.77\n3,0.2,0.9\n")
    secret = console.storage / "out" / "default-project" / "not-this-jobs.txt"
    secret.write_text("another job's file")
    link = job_dir / "escape.txt"
    if not link.is_symlink():
        link.symlink_to(secret)
    login(page)
    page.goto(f"{JOBS}train_model/")
    mark_page(page)
    page.get_by_role("tab", name="Outputs").click()
    browser = page.locator("#outputs-browser")
    expect(browser.locator('tr[data-entry="model"]')).to_be_visible()
    escape = browser.locator('tr[data-entry="escape.txt"]')
    expect(escape).to_contain_text("link, not followed")
    expect(escape.get_by_role("link")).to_have_count(0)
    browser.get_by_role("link", name="metrics.csv", exact=True).click()
    table = page.locator('[data-preview="table"] table')
    expect(table.locator("thead th")).to_have_text(["epoch", "loss", "accuracy"])
    expect(table.locator("tbody tr")).to_have_count(3)
    assert_not_reloaded(page)  # previewed in the tab, in place
    page.get_by_role("link", name="Back to the folder").click()
    expect(browser.locator('tr[data-entry="metrics.csv"]')).to_be_visible()

    page.watch.expect_status(f"{JOBS}train_model/outputs/file/?path=escape.txt", 400)
    refused = page.goto(f"{JOBS}train_model/outputs/file/?path=escape.txt")
    assert refused.status == 400
    expect(page.locator("[data-outputs-problem]")).to_contain_text("never a link out of its folder")
    expect(page.locator("body")).not_to_contain_text("another job's file")


def test_on_a_phone_the_jobs_list_shows_jobs_first_and_badges_stay_whole(page, console):
    console.wait(console.background["model"], timeout=240)
    login(page)
    page.set_viewport_size(PHONE)
    page.goto(JOBS)
    first = page.locator("#job-rows tbody tr").first
    expect(first).to_be_in_viewport()
    assert first.bounding_box()["y"] < PHONE["height"], first.bounding_box()
    for badge in page.locator("#job-rows .state").all()[:10]:
        box = badge.bounding_box()
        assert box["height"] < 30 and box["width"] > box["height"], box
    page.get_by_text("Filters", exact=True).click()
    expect(page.locator("#state-filter")).to_be_visible()


def test_on_a_phone_the_outputs_browser_keeps_each_name_whole(page, console):
    # Names were cut anywhere ("metric / s.csv", "escap / e") to give the dates their one line.
    console.wait(console.background["model"], timeout=240)
    job_dir = console.storage / "out" / "default-project" / "train_model"
    (job_dir / "predictions.jsonl").write_text('{"a": 1}\n')
    login(page)
    page.set_viewport_size(PHONE)
    page.goto(f"{JOBS}train_model/outputs/")
    for name in ("model/", "predictions.jsonl"):
        link = page.locator("#outputs-browser table").get_by_role("link", name=name, exact=True)
        lines = link.evaluate("a => a.getClientRects().length")
        assert lines == 1, (name, lines)
    assert axe_violations(page) == []
