"""The jobs list's columns in Chromium: the job's name stays in view while the table scrolls
sideways, a chosen metric comes right after it (a study's cell: its best trial's objective), and the
list's own columns are hidden and reordered from the keyboard, kept in the link and for the user."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser.test_jobs_list_phone_keyboard import OVERFLOW, PHONE
from tests.helpers.browser import JOBS, axe_violations

pytestmark = pytest.mark.browser
USER, PASSWORD = "lena", "lena-password-1"
DEFAULT = ["Job ID", "State", "Creator", "Runtime", "Scale tier", "Created", "Ended", "Queued", "Running", "Type"]
DEFAULT += ["Labels", "Note"]


@pytest.fixture(scope="module")
def viewer(console):
    """A viewer of her own, so what she saves leaves everyone else's list as it was."""
    console.add_user(USER, PASSWORD, role="roles/ml.viewer")
    return USER


def sign_in(page, username: str = USER, password: str = PASSWORD) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/projects/"))


def headings(page) -> list[str]:
    return [text.strip() for text in page.locator("#job-rows thead th").all_inner_texts()]


def best_objective(console, job_id: str) -> float:
    trials = console.job(job_id)["trainingOutput"]["trials"]
    return max(
        t["finalMetric"]["objectiveValue"] for t in trials if t.get("state") == "SUCCEEDED" and t.get("finalMetric")
    )


def test_the_name_stays_in_view_and_a_chosen_metric_follows_it_with_a_studys_best_value(page, console, viewer):
    study = console.background["tuning"]
    assert console.wait(study, timeout=240)["state"] == "SUCCEEDED"
    sign_in(page)
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(JOBS)
    page.get_by_text("Columns", exact=True).click()
    page.get_by_role("checkbox", name="accuracy").check()  # the metric the study tunes
    page.get_by_role("button", name="Show these columns").click()
    page.wait_for_url(re.compile(r"col=metric%3Aaccuracy"))

    accuracy = page.get_by_role("columnheader", name="accuracy")
    box = accuracy.bounding_box()
    assert box["x"] < 400 and box["x"] + box["width"] <= 1440, box  # beside the name, not off-screen
    assert headings(page)[:3] == ["Job ID", "accuracy", "State"]
    row = page.locator(f"#job-rows tr[data-job='{study}']")
    expect(row.locator("td.chosen-col")).to_have_text(f"{best_objective(console, study):.6g}")
    expect(row.locator("td.chosen-col")).to_have_attribute("title", re.compile(r"^best trial: \d+$"))

    # Narrower, the table scrolls sideways inside its region; the name stays at its left edge.
    page.get_by_label("Search").fill(study)
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(rf"q={study}"))
    expect(page.locator("#job-rows tbody tr")).to_have_count(1)
    assert headings(page)[:2] == ["Job ID", "accuracy"]  # the filter keeps the chosen column
    page.set_viewport_size({"width": 900, "height": 900})
    region = page.get_by_role("region", name="Jobs (scrolls sideways)")
    scrolled = region.evaluate("(el) => { el.scrollLeft = el.scrollWidth; return el.scrollLeft; }")
    assert scrolled > 0
    name = row.locator("td.pinned")
    expect(name.get_by_role("link", name=study, exact=True)).to_be_in_viewport()
    assert abs(name.bounding_box()["x"] - region.bounding_box()["x"]) < 2
    assert row.locator("td[data-type]").bounding_box()["x"] > name.bounding_box()["x"]  # the rest moved under it
    assert row.locator("td.chosen-col").bounding_box()["x"] < name.bounding_box()["x"]
    for scheme in ("light", "dark"):  # the pinned cell hides what passes under it
        page.emulate_media(color_scheme=scheme)
        assert name.evaluate("(el) => getComputedStyle(el).backgroundColor") not in ("rgba(0, 0, 0, 0)", "transparent")
        assert axe_violations(page) == []

    page.set_viewport_size(PHONE)
    assert page.evaluate(OVERFLOW)["loose"] == []
    row.evaluate("(el) => el.scrollIntoView({block: 'center'})")
    region.evaluate("(el) => { el.scrollLeft = el.scrollWidth; }")
    link = name.get_by_role("link", name=study, exact=True)
    expect(link).to_be_in_viewport()
    assert link.evaluate("(a) => a.getClientRects().length") == 1  # the name on one line
    assert name.bounding_box()["width"] < PHONE["width"] / 2


def test_columns_hidden_and_reordered_from_the_keyboard_are_kept_in_the_link_and_for_the_user(
    page, console, viewer, browser
):
    sign_in(page)
    page.goto(JOBS)
    assert headings(page) == DEFAULT
    chooser = page.locator("details.column-chooser summary")
    chooser.focus()
    page.keyboard.press("Enter")
    creator = page.get_by_role("checkbox", name="Creator", exact=True)
    creator.focus()
    page.keyboard.press("Space")
    expect(creator).not_to_be_checked()
    move = page.get_by_role("button", name="Move Type up")
    move.focus()
    for _ in range(9):  # to the top; the ninth press finds it there and does nothing
        page.keyboard.press("Enter")
    expect(move).to_be_focused()
    expect(move).to_have_attribute("aria-disabled", "true")
    expect(page.locator("[data-column-status]")).to_have_text("Type: column 2 of 12.")
    assert axe_violations(page) == []
    page.get_by_role("button", name="Show these columns").focus()
    page.keyboard.press("Enter")

    page.wait_for_url(re.compile(r"columns=name%2Ctype%2Cstate%2Cruntime"))
    chosen = ["Job ID", "Type", "State", "Runtime", "Scale tier", "Created", "Ended", "Queued", "Running"]
    chosen += ["Labels", "Note"]
    assert headings(page) == chosen
    shared = page.url

    page.goto(JOBS)  # no columns in the address: hers, remembered, and then named in the address
    assert headings(page) == chosen
    page.wait_for_url(re.compile(r"columns=name%2Ctype%2C"))
    assert parse_qs(urlsplit(page.url).query)["columns"] == parse_qs(urlsplit(shared).query)["columns"]
    page.get_by_role("link", name="State", exact=True).click()  # a sort keeps them
    page.wait_for_url(re.compile(r"sort=state"))
    assert headings(page) == chosen

    other = browser.new_context(base_url=console.url)
    try:
        someone = other.new_page()
        sign_in(someone, "vic", "vic-password-1")
        someone.goto(shared)  # the copied link opens the same view for anyone
        assert headings(someone) == chosen
        someone.goto(JOBS)  # and changes no one else's list
        assert headings(someone) == DEFAULT
    finally:
        other.close()

    page.locator("details.column-chooser summary").click()
    page.get_by_role("button", name="Default columns").click()
    page.get_by_role("button", name="Show these columns").click()
    page.wait_for_url(re.compile(r"columns=name%2Cstate%2Ccreator"))
    assert headings(page) == DEFAULT
    page.goto(JOBS)
    assert headings(page) == DEFAULT
    assert "columns" not in page.url  # nothing saved any more: the default needs no naming


def test_a_choice_that_could_not_be_remembered_says_so_and_stays_on_the_page(page, console, viewer):
    sign_in(page)
    page.goto(JOBS)
    page.get_by_text("Columns", exact=True).click()
    page.get_by_role("checkbox", name="Note", exact=True).uncheck()
    before = page.url
    page.context.clear_cookies()  # signed out meanwhile (another tab, an expired session)

    page.watch.expect_status("/preferences/jobs-list-columns/", 403)
    page.get_by_role("button", name="Show these columns").click()

    expect(page.locator("[data-column-status]")).to_contain_text("Your columns were not remembered")
    assert page.url == before
