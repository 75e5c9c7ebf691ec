"""Driving the console in Chromium: signing in, axe checks, waiting on the page, and page states."""

from __future__ import annotations

import re
import time

from playwright.sync_api import expect

from bench.support import harness

SNAPSHOT = """() => {
  const text = (sel) => {
    const el = document.querySelector(sel);
    return el ? el.textContent.replace(/\\s+/g, " ").trim() : null;
  };
  const rows = (sel) => [...document.querySelectorAll(sel)].map((tr) => tr.textContent.replace(/\\s+/g, " ").trim());
  const table = document.querySelector("#trial-table");
  return {
    state: document.querySelector("#job-status [data-state]").dataset.state,
    facts: text("#job-times"),
    replicas: rows("#job-replicas tbody tr"),
    trialSummary: text("#trial-summary"),
    trials: rows("#trial-table tbody tr"),
    counts: table ? [table.dataset.trials, table.dataset.completed, table.dataset.best] : null,
    charts: [...document.querySelectorAll("#study-charts figure.chart figcaption")].map((f) => f.textContent.trim()),
    metricCharts: document.querySelectorAll("#metrics figure.metric-chart").length,
    builtin: text("#builtin-results"),
    logTrials: [...document.querySelectorAll("#log-trial option")].map((o) => o.value),
  };
}"""

# Every refreshing panel has had its last refresh (its hx-get is gone), or waits for its tab to be
# shown (a tab's charts are fetched the first time it is).
SETTLED = """() => ["#job-status", "#job-replicas", "#trial-table", "#study-charts", "#metrics", "#builtin-results"]
  .every((sel) => {
    const el = document.querySelector(sel);
    const waits = el && (el.getAttribute("hx-trigger") || "").startsWith("tab:shown") && el.closest("[hidden]");
    return !el || !el.hasAttribute("hx-get") || waits;
  })"""


PASSWORDS = {"admin": harness.ADMIN_PASSWORD, "dana": "dana-password-1", "vic": "vic-password-1"}


AXE = harness.ROOT / "tests" / "browser" / "assets" / "axe.min.js"  # test-only: never served


def login(page, username: str = "admin") -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(PASSWORDS[username])
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/projects/|/$"))


def axe_violations(page, impacts=("serious", "critical")) -> list[str]:
    """Run the vendored axe-core on the page; the serious and critical violations, described."""
    if not page.evaluate("() => typeof window.axe !== 'undefined'"):
        page.add_script_tag(path=AXE)
    result = page.evaluate("""async () => {
        const r = await axe.run(document, {resultTypes: ["violations"]});
        return r.violations.map(v => ({id: v.id, impact: v.impact, help: v.help,
                                       nodes: v.nodes.slice(0, 3).map(n => n.target.join(" "))}));
    }""")
    return [f"{v['id']} ({v['impact']}): {v['help']} at {v['nodes']}" for v in result if v["impact"] in impacts]


def wait_until(predicate, timeout: float = 60, message: str = "condition"):
    deadline = time.monotonic() + timeout
    while not (result := predicate()):
        if time.monotonic() > deadline:
            raise AssertionError(f"Timed out after {timeout}s waiting for {message}")
        time.sleep(0.2)
    return result


JOBS = "/projects/default-project/jobs/"


def assert_not_reloaded(page) -> None:
    assert page.evaluate("() => window.__notReloaded === true"), "the page was reloaded"


def mark_page(page) -> None:
    """A value that lives as long as the document: if it is gone, the page was reloaded."""
    page.evaluate("() => { window.__notReloaded = true; }")


def state(page):
    return page.locator("#job-status [data-state]").first


def assert_matches_a_fresh_load(page, browser, console, tabs: tuple[str, ...] = ()):
    """The live page, once settled, shows what a fresh load of its address does; ``tabs`` are opened
    in the fresh page first (what they fetch when shown, the live page fetched when the test showed them)."""
    page.wait_for_function(SETTLED, timeout=30_000)
    live = page.evaluate(SNAPSHOT)
    fresh_context = browser.new_context(
        base_url=console.url, viewport={"width": 1280, "height": 900}, timezone_id="Europe/Berlin", locale="en-GB"
    )
    try:
        fresh = fresh_context.new_page()
        login(fresh)
        fresh.goto(page.url.split("#")[0])
        for name in tabs:
            fresh.get_by_role("tab", name=name).click()
        fresh.wait_for_function(SETTLED)
        if live["charts"]:
            expect(fresh.locator("#study-charts figure.chart")).to_have_count(len(live["charts"]))
        if live["metricCharts"]:
            expect(fresh.locator("#metrics figure.metric-chart")).to_have_count(live["metricCharts"])
        assert live == fresh.evaluate(SNAPSHOT)
    finally:
        fresh_context.close()
    return live
