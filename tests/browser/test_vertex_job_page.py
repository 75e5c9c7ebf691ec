"""A job created through the Vertex AI API, on its page in the browser: its Vertex name and the
note on what ran instead of Google's image, and its request as a gcloud command and a Vertex body
(copied with their buttons), accessible in light and dark mode."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import axe_violations, login
from tests.helpers.vertex import custom_job, package_pool

pytestmark = pytest.mark.browser


def test_a_vertex_jobs_page_shows_its_request_as_gcloud_and_a_vertex_body(page, console):
    created = console.call(
        "POST",
        "/v1/projects/default-project/locations/us-central1/customJobs",
        custom_job("browser-vertex", package_pool(env=[{"name": "MODE", "value": "fast"}]), base="gs://bucket/out"),
    )
    try:
        console.call("POST", f"/v1/{created['name']}:cancel", {})  # nothing to run: the page is what is tested
    except RuntimeError as refused:  # it failed first: its package is on a bucket nothing serves here
        assert "JOB_STATE_FAILED and cannot be cancelled" in str(refused), refused
    job_id = f"browser_vertex_{created['name'].rsplit('/', 1)[1]}"
    login(page)
    page.goto(f"/projects/default-project/jobs/{job_id}/#training-input")
    section = page.locator("[data-vertex-job]")
    expect(section.locator("[data-vertex-name]")).to_have_text(created["name"])
    expect(section.locator("[data-vertex-note]").first).to_contain_text("runtime version 2.11")
    section.locator("[data-vertex-equivalent] summary").click()
    expect(page.locator("#vertex-cli")).to_contain_text("gcloud ai custom-jobs create --region=us-central1")
    expect(page.locator("#vertex-config")).to_contain_text("MODE")
    expect(page.locator("#vertex-rest")).to_contain_text('"displayName": "browser-vertex"')
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    page.locator('[data-copy="vertex-cli"]').click()
    expect(section.locator("[data-copy-status]")).to_contain_text("Copied command")
    assert page.evaluate("() => navigator.clipboard.readText()") == page.locator("#vertex-cli").inner_text()
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        assert axe_violations(page) == [], scheme
