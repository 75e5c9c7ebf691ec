"""In Chromium: main pages fit a 390 px phone (only labelled tables and
logs scroll sideways), the jobs list's search, sort and filters live in the URL (shareable, the
back button works), and the keyboard reaches a new training job in one key press."""

from __future__ import annotations

import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import login

pytestmark = pytest.mark.browser
P = "/projects/default-project"
PHONE = {"width": 390, "height": 844}

# What sticks out past the viewport, outside a scroll container that says it scrolls (named by a
# label or by its heading).
OVERFLOW = """() => {
  const width = document.documentElement.clientWidth;
  const loose = [...document.querySelectorAll("body *")].filter((el) => {
    const box = el.getBoundingClientRect();
    if (box.right <= width + 1 || box.width === 0) return false;
    const scroller = el.closest(".table-scroll, .log-scroll");
    const named = scroller && (scroller.getAttribute("aria-label") || scroller.getAttribute("aria-labelledby"));
    return !(scroller && scroller !== el && named);
  }).map((el) => el.tagName.toLowerCase() + (el.id ? "#" + el.id : "") + (el.className ? "." + el.className : ""));
  return {document: document.documentElement.scrollWidth, viewport: width, loose: loose.slice(0, 8)};
}"""


def param(page, name: str) -> list[str]:
    return parse_qs(urlsplit(page.url).query).get(name, [])


def cancelled_job(console, job_id: str, **labels) -> None:
    """A job for the list that does not run: its package does not exist, and it is cancelled at once."""
    console.call(
        "POST",
        "/v1/projects/default-project/jobs",
        {
            "jobId": job_id,
            "labels": labels,
            "trainingInput": {
                "scaleTier": "BASIC",
                "packageUris": ["gs://no-such-bucket/trainer-0.1.tar.gz"],
                "pythonModule": "trainer.task",
                "region": "us-central1",
                "runtimeVersion": "2.11",
            },
        },
    )
    try:
        console.call("POST", f"/v1/projects/default-project/jobs/{job_id}:cancel", {})
    except RuntimeError:
        pass  # it failed already
    console.wait(job_id)


def test_main_pages_have_no_sideways_scroll_at_phone_width(page, console):
    console.wait(console.background["tuning"], timeout=240)
    console.wait(console.background["model"], timeout=240)
    login(page)
    page.set_viewport_size(PHONE)
    found = {}
    for path in (
        f"{P}/jobs/",
        f"{P}/jobs/train_model/",
        f"{P}/jobs/new/",
        f"{P}/jobs/study_1/",
        f"{P}/models/",
        f"{P}/audit/",
        f"{P}/members/",
        f"{P}/images/",
        f"{P}/jobs/train_model/outputs/",
        f"{P}/jobs/train_model/outputs/file/?path=model/model.joblib",
        f"{P}/jobs/new/builtin/",
        f"{P}/data/analysis/",
        f"{P}/compare/?jobs=train_model,study_1/1,study_1/2",
        "/profile/",
        "/runtimes/",
        "/workers/",
    ):
        page.goto(path)
        page.wait_for_load_state("load")
        for scheme in ("light", "dark"):
            page.emulate_media(color_scheme=scheme)
            width = page.evaluate(OVERFLOW)
            if width["document"] > width["viewport"] or width["loose"]:
                found[path] = width
    assert not found, found
    # The status line wraps instead of squeezing: the state and the Clone button stay one line each.
    page.goto(f"{P}/jobs/study_1/")
    for item in (page.locator("#job-status [data-state]").first, page.locator("#job-status [data-clone]")):
        box = item.bounding_box()
        assert box["width"] > box["height"] and box["height"] < 48, box
    # A sideways-scrolling table keeps each column heading on one line (the replicas table did not).
    lines = page.evaluate("""() => [...document.querySelectorAll('.table-scroll[role=region] th')].map((th) => {
      const range = document.createRange(); range.selectNodeContents(th);
      const tops = new Set([...range.getClientRects()].map((r) => Math.round(r.top)));
      return [th.textContent.trim(), tops.size];
    }).filter(([, count]) => count > 0)""")
    assert lines and all(count == 1 for _, count in lines), lines
    # The log's message column has the width: its metadata stacks above it.
    page.goto(f"{P}/jobs/train_model/#logs")
    message = page.locator("#log-lines td.msg").first
    expect(message).to_be_visible()
    assert message.bounding_box()["width"] > 300


def test_search_sort_and_filters_round_trip_through_the_url(page, console):
    cancelled_job(console, "roundtrip_alpha", team="vision")
    cancelled_job(console, "roundtrip_beta", team="speech")
    login(page)
    page.goto(f"{P}/jobs/")
    rows = page.locator("#job-rows tbody tr")

    page.get_by_label("Search").fill("roundtrip")
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"q=roundtrip"))
    expect(rows).to_have_count(2)
    expect(rows.first).to_contain_text("roundtrip_beta")  # newest first

    page.get_by_role("link", name="Job ID").click()  # sort by id, ascending
    page.wait_for_url(re.compile(r"sort=id"))
    assert param(page, "q") == ["roundtrip"]
    expect(rows.first).to_contain_text("roundtrip_alpha")
    expect(page.locator("th[aria-sort=ascending]")).to_contain_text("Job ID")

    page.get_by_label("Label", exact=True).fill("team=speech")
    page.get_by_role("combobox", name="Creator").select_option("admin")  # the filter, not the column's box
    page.get_by_role("button", name="Apply").click()
    page.wait_for_url(re.compile(r"label=team"))
    assert param(page, "sort") == ["id"] and param(page, "creator") == ["admin"]
    expect(rows).to_have_count(1)
    expect(rows.first).to_contain_text("roundtrip_beta")
    shared = page.url

    page.go_back()  # the back button returns to the list before the filter
    expect(rows).to_have_count(2)
    expect(page.get_by_label("Label", exact=True)).to_have_value("")
    expect(page.get_by_role("combobox", name="Creator")).to_have_value("")
    expect(page.get_by_label("Search")).to_have_value("roundtrip")

    page.goto(shared)  # a shared link opens the same list, its form filled in
    expect(rows).to_have_count(1)
    expect(page.get_by_label("Label", exact=True)).to_have_value("team=speech")
    expect(page.get_by_role("combobox", name="Creator")).to_have_value("admin")
    expect(page.get_by_role("combobox", name="State")).to_have_value("")


def test_n_opens_the_new_job_form_with_its_suggested_id_focused(page, console):
    login(page)
    page.goto(f"{P}/jobs/")
    page.get_by_role("heading", name="Training jobs").click()  # focus on the page, not in a field

    page.keyboard.press("?")
    help_box = page.locator("#keyboard-help")
    expect(help_box).to_have_attribute("open", "")
    expect(help_box).to_contain_text("New training job")

    page.keyboard.press("/")
    expect(page.get_by_label("Search")).to_be_focused()
    page.keyboard.type("n")  # typed into the field, not a shortcut
    expect(page).to_have_url(re.compile(r"/jobs/$"))

    page.get_by_role("heading", name="Training jobs").click()
    page.keyboard.press("n")
    page.wait_for_url(re.compile(r"/jobs/new/$"))
    job_id = page.get_by_label("Job ID")
    expect(job_id).to_be_focused()
    expect(job_id).to_have_value(re.compile(r"^trainer_\d{8}_\d{6}$"))
    stamp = job_id.input_value().removeprefix("trainer_")

    page.get_by_label("Python module").fill("census.task")  # the suggestion follows the module
    expect(job_id).to_have_value(f"census_{stamp}")
    job_id.fill("my_own_id")
    page.get_by_label("Python module").fill("other.task")  # until the user writes an id
    expect(job_id).to_have_value("my_own_id")


def test_on_a_phone_each_role_on_the_members_page_stays_one_line(page, console):
    # "AI Platform Developer" wrapped inside its chip into a tall oval of three lines.
    login(page)
    page.set_viewport_size(PHONE)
    page.goto(f"{P}/members/")
    chips = page.locator("table.members .role-chip")
    expect(chips.first).to_be_visible()
    for chip in chips.all():
        assert chip.evaluate("el => el.getClientRects().length") == 1
        box = chip.bounding_box()
        assert box["width"] > 2 * box["height"], (chip.text_content(), box)
