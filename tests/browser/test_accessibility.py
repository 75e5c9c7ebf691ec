"""Accessibility in the browser: axe-core on every main page (light and dark), keyboard-only use,
visible focus, and times shown in the user's own timezone."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import axe_violations, login

pytestmark = pytest.mark.browser
P = "/projects/default-project"
MAIN_PAGES = [
    f"{P}/jobs/",
    f"{P}/jobs/new/",
    f"{P}/jobs/study_1/",
    f"{P}/jobs/train_model/",
    f"{P}/members/",
    f"{P}/audit/",
    f"{P}/models/",
    f"{P}/images/",
    f"{P}/notifications/",
    f"{P}/quotas/",
    f"{P}/usage/",
    "/usage/",
    f"{P}/jobs/train_model/outputs/",
    f"{P}/jobs/train_model/outputs/file/?path=model/model.joblib",
    "/profile/",
    f"{P}/jobs/new/builtin/",
    f"{P}/data/analysis/",
    "/workers/",
    "/runtimes/",
    "/users/",
    "/users/admin/",
]


def analysis_page(console) -> str:
    """The data analysis page with a report: a small CSV with a class target, a number, a category."""
    folder = console.storage / "accessibility" / "default-project"
    folder.mkdir(parents=True, exist_ok=True)
    rows = [f"{i % 2},{i * 0.5 + (i % 7)},{'abc'[i % 3]},{'' if i % 11 == 0 else i % 5}" for i in range(200)]
    (folder / "table.csv").write_text("\n".join(rows) + "\n")
    return f"{P}/data/analysis/?path={folder / 'table.csv'}&model_type=classification"


def test_main_pages_have_no_serious_accessibility_violations_in_light_and_dark(page, console):
    console.wait(console.background["tuning"], timeout=240)  # so its page has charts
    pages = [*MAIN_PAGES, analysis_page(console)]
    found = {}
    page.goto("/login/")
    found["/login/"] = axe_violations(page)
    login(page)
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for path in pages:
            page.goto(path)
            page.wait_for_load_state("load")
            if path.endswith("/jobs/study_1/"):  # its charts come when their tab is shown
                page.get_by_role("tab", name="Charts").click()
                # plotly (3.5 MB of script) parses and draws them: seconds on a 2-core machine under load
                expect(page.locator("#study-charts figure.chart .main-svg").first).to_be_visible(timeout=30_000)
            if violations := axe_violations(page):
                found[f"{path} ({scheme})"] = violations
    assert not {k: v for k, v in found.items() if v}, found


def test_dark_mode_follows_the_system_setting(page, console):
    login(page)
    background = "() => getComputedStyle(document.body).backgroundColor"
    page.emulate_media(color_scheme="light")
    light = page.evaluate(background)
    page.emulate_media(color_scheme="dark")
    dark = page.evaluate(background)
    assert light == "rgb(246, 247, 249)" and dark == "rgb(17, 20, 24)", (light, dark)


def focused_outline(page) -> str:
    return page.evaluate("() => getComputedStyle(document.activeElement).outlineStyle")


def tab_to(page, target, most: int = 60) -> None:
    for _ in range(most):
        if target.evaluate("(el) => el === document.activeElement"):
            return
        page.keyboard.press("Tab")
    expect(target).to_be_focused()


def test_keyboard_only_sign_in_and_open_a_job(page, console):
    page.goto("/login/")
    page.locator("body").click(position={"x": 5, "y": 300})  # give the page focus, as a user's first click does
    page.keyboard.press("Tab")
    skip = page.get_by_role("link", name="Skip to content")
    expect(skip).to_be_focused()
    assert focused_outline(page) == "solid"  # the focus ring is visible
    assert skip.bounding_box()["x"] >= 0  # and the skip link moves into view
    tab_to(page, page.get_by_label("Username"))  # past the "AI Console" home link
    page.keyboard.type("admin")
    page.keyboard.press("Tab")
    page.keyboard.type(console.env["AICONSOLE_ADMIN_PASSWORD"])
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"/jobs/$"))

    # Tab from the top of the page to the first job's link, then open it with Enter.
    target = page.locator("#job-rows tbody a").first
    name = target.inner_text()
    tab_to(page, target)
    assert focused_outline(page) == "solid"
    page.keyboard.press("Enter")
    expect(page.get_by_role("heading", level=1)).to_have_text(name)


def test_keyboard_only_submit_form_shows_errors_next_to_the_field(page, console):
    login(page)
    page.goto(f"{P}/jobs/new/")
    page.get_by_label("Job ID").focus()
    page.keyboard.type("1-not-valid")
    page.get_by_role("button", name="Submit job").focus()
    page.keyboard.press("Enter")
    field = page.locator(".field.has-error", has=page.get_by_label("Job ID"))
    expect(field.locator(".errors")).to_be_visible()
    expect(page.get_by_label("Job ID")).to_have_attribute("aria-invalid", "true")


def test_times_are_shown_in_the_users_timezone_with_a_relative_hint(page, console):
    login(page)  # the browser context is in Europe/Berlin
    page.goto(f"{P}/jobs/")
    created = page.locator("#job-rows tbody tr time").first
    expect(created).to_have_attribute("data-localized", "true")
    utc = created.get_attribute("datetime")
    shown = created.inner_text()
    # In a table a time is short (month, day, hour and minute in the user's zone); its title has
    # the whole time with the zone named, the relative hint and the UTC time.
    short, whole = page.evaluate(
        """(iso) => [
            new Intl.DateTimeFormat(undefined, {month: 'short', day: 'numeric', hour: 'numeric', minute: '2-digit'}),
            new Intl.DateTimeFormat(undefined, {dateStyle: 'medium', timeStyle: 'long'}),
        ].map((format) => format.format(new Date(iso)))""",
        utc,
    )
    assert shown == short, (shown, short)
    title = created.get_attribute("title")
    assert title.startswith(whole) and re.search(r"CES?T|GMT\+\d", title), title  # the time zone is named
    assert re.search(r"\((now|\d+ (second|minute|hour)s? ago|in \d+ seconds?)\) · ", title), title
    assert title.endswith("(UTC)"), title
    assert page.evaluate("() => Intl.DateTimeFormat().resolvedOptions().timeZone") == "Europe/Berlin"


def test_a_jobs_times_tell_their_relative_hints_in_one_unit(page, console):
    """Created 70 s ago and started 40 s ago read "1 minute ago" both, never "1 minute ago" above
    "now": the times of a job's header share the unit its oldest is told in, against one instant."""
    login(page)
    page.goto(f"{P}/jobs/")
    hints = page.evaluate(
        """() => {
            const now = Date.now();
            const group = document.createElement("dl");
            group.dataset.timeGroup = "";
            group.innerHTML = [70, 40].map((ago) =>
                `<dd><time datetime="${new Date(now - ago * 1000).toISOString()}"></time></dd>`).join("");
            document.querySelector("main").append(group);
            localizeTimes(group);
            return [...group.querySelectorAll("time")].map((t) => t.textContent.match(/\\((.*)\\)$/)[1]);
        }"""
    )
    expected = page.evaluate("() => new Intl.RelativeTimeFormat(undefined, {numeric: 'auto'}).format(-1, 'minute')")
    assert hints == [expected, expected], hints
