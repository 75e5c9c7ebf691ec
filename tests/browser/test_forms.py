"""In Chromium: the kept upload, the in-page cancel dialog, the built-in form's sections,
checkbox labels, warning labels, header buttons and the "Permission denied" page."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.helpers.browser import login

pytestmark = pytest.mark.browser
PROJECT = "/projects/default-project"
JOBS = f"{PROJECT}/jobs/"


def test_a_kept_upload_shows_its_name_and_size_and_is_installed_once(page, console, tmp_path):
    sdist = trainers.package(tmp_path, trainers.STREAMING_TASK, name="keptpkg")
    login(page)
    page.goto(f"{JOBS}new/")
    page.get_by_label("Job ID").fill("bad id")
    page.get_by_label("Upload a trainer package").set_input_files(str(sdist))
    page.get_by_label("Runtime version").select_option("2.11")  # the stack the session builds (current's is large)
    page.get_by_role("button", name="Submit job").click()
    kept = page.locator("[data-kept-upload]")
    expect(kept).to_contain_text(sdist.name)
    expect(kept.locator("[data-kept-size]")).not_to_be_empty()
    expect(page.get_by_role("checkbox", name=re.compile("^Remove"))).to_be_visible()
    expect(page.get_by_label("Package URIs")).to_have_value("")  # no server path in the form
    assert str(console.storage / "packages") not in page.content()  # (the job dir suggested is a path)
    page.get_by_label("Job ID").fill("kept_1")
    page.get_by_role("button", name="Submit job").click()
    page.wait_for_url(f"**{JOBS}kept_1/", timeout=60_000)
    expect(page.locator("[data-packages]")).to_have_text(re.compile(rf"^\s*{re.escape(sdist.name)} \(uploaded\)\s*$"))
    assert str(console.storage / "packages") not in page.content()  # its package by name, never by path
    assert len(console.job("kept_1")["trainingInput"]["packageUris"]) == 1


def test_remove_drops_the_kept_upload(page, console, tmp_path):
    sdist = trainers.package(tmp_path, trainers.STREAMING_TASK, name="droppkg")
    login(page)
    page.goto(f"{JOBS}new/")
    page.get_by_label("Job ID").fill("bad id")
    page.get_by_label("Upload a trainer package").set_input_files(str(sdist))
    page.get_by_role("button", name="Submit job").click()
    page.get_by_role("checkbox", name=re.compile("^Remove")).check()
    expect(page.locator("[data-kept-upload]")).to_be_hidden()
    expect(page.get_by_label("Upload a trainer package")).to_be_focused()


def test_cancel_asks_in_an_accessible_dialog_and_keeps_focus(page, console):
    sdist = trainers.package(
        console.storage / "browser-packages" / "default-project" / "forever17", trainers.FOREVER_TASK
    )
    console.submit("forever_17", sdist)
    login(page)
    page.goto(f"{JOBS}forever_17/")
    page.on("dialog", lambda d: pytest.fail(f"native dialog: {d.message}"))
    page.get_by_role("button", name="Cancel job").click()
    dialog = page.get_by_role("dialog", name="Cancel job forever_17?")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Keep it running")).to_be_focused()
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(page.get_by_role("button", name="Cancel job")).to_be_focused()
    page.get_by_role("button", name="Cancel job").click()
    dialog.get_by_role("button", name="Yes, cancel the job").click()
    expect(page.locator("#job-status [data-state]").first).to_have_attribute(
        "data-state", re.compile("CANCELLING|CANCELLED"), timeout=30_000
    )


def test_the_builtin_form_shows_only_the_chosen_algorithms_arguments(page, console):
    login(page)
    page.goto(f"{JOBS}new/builtin/")
    xgb = page.locator('[data-algorithm-section="boosted_trees"]')
    linear = page.locator('[data-algorithm-section="linear_learner"]')
    expect(xgb).to_be_visible()
    expect(linear).to_be_hidden()
    page.get_by_role("radio", name=re.compile("[Ll]inear")).check()
    expect(linear).to_be_visible()
    expect(xgb).to_be_hidden()
    # The checkbox sits beside its label, not across the page.
    box = page.get_by_label(re.compile("header row")).bounding_box()
    label = page.locator(".field-check label span", has_text="header row").bounding_box()
    assert abs(label["x"] - (box["x"] + box["width"])) < 24, (box, label)


def test_header_buttons_are_even(page, console):
    login(page)
    page.goto(JOBS)
    boxes = [b.bounding_box() for b in page.locator(".page-head .button").all()]
    assert len(boxes) >= 2
    assert len({round(b["height"]) for b in boxes}) == 1, boxes
    assert len({round(b["y"]) for b in boxes}) == 1, boxes


def test_permission_denied_says_which_role_and_whom_to_ask(page, console):
    login(page, "vic")
    page.watch.expect_status(f"{JOBS}new/", 403)
    page.goto(f"{JOBS}new/")
    denied = page.locator("#permission-denied")
    expect(denied).to_contain_text("AI Platform Developer")
    expect(denied.locator("[data-ask]")).to_contain_text("Ask")
