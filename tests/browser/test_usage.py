"""In Chromium: a project's Usage page from its menu, its dates, its CSV download and, for a
platform admin, its retention form; axe in light and dark."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import axe_violations, login

pytestmark = pytest.mark.browser
P = "/projects/default-project"


def test_usage_page_from_the_menu_downloads_csv_and_sets_retention(page, console):
    login(page)
    page.goto(f"{P}/jobs/")
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Usage", exact=True).click()
    expect(page).to_have_url(re.compile(r"/projects/default-project/usage/$"))
    expect(page.get_by_role("heading", name="Usage", exact=True)).to_be_visible()
    expect(page.get_by_role("heading", name="Disk space")).to_be_visible()

    page.get_by_label("From", exact=True).fill("2026-01-01")
    page.get_by_label("To", exact=True).fill("2026-01-31")
    page.get_by_role("button", name="Show").click()
    expect(page).to_have_url(re.compile(r"from=2026-01-01&to=2026-01-31"))
    expect(page.locator("#usage-table")).to_contain_text("No job ran in these days.")

    with page.expect_download() as download:
        page.get_by_role("link", name="Download CSV").click()
    assert download.value.suggested_filename == "usage-default-project-2026-01-01-2026-01-31.csv"
    assert open(download.value.path()).read().startswith("date,project,user,ml_units,cpu_hours")

    page.get_by_label("Keep a job's logs, metric points and job dir (days after it ends)").fill("400")
    page.get_by_label("Also keep jobs carrying the label").fill("paper")
    page.get_by_role("button", name="Save the retention").click()
    expect(page.get_by_text("Saved the retention.")).to_be_visible()
    expect(page.get_by_text("deleted 400 days after it ends")).to_be_visible()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert axe_violations(page) == [], scheme
