"""Browser tests: Debian's Chromium, driven by Playwright, against a real ``aiconsole up``.

One console and one browser serve the whole session. Each test gets a fresh browser context and
page that records console errors, uncaught exceptions and requests to any host but the console,
and fails on any of them. Every test leaves a screenshot in ``tests/browser/artifacts/``; a failed
one also leaves the page's HTML and what the browser console said.

Chromium is ``/usr/bin/chromium``; the setup installs Debian's package when it is missing
(``scripts/install-chromium``, as root or with sudo). Without it the tests skip, except in CI
(``CI=true``), where they fail.
"""

from __future__ import annotations

import os
import re
import shutil
import tempfile
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from bench.support import harness
from bench.support.trainers import start_background_jobs
from tests.helpers.browser import PASSWORDS

HERE = Path(__file__).resolve().parent
ARTIFACTS = HERE / "artifacts"


def pytest_collection_modifyitems(items):
    """Every test here drives Chromium, whether or not its file says so: keep them out of the fast lane."""
    for item in items:
        if Path(str(item.path)).resolve().is_relative_to(HERE):
            item.add_marker(pytest.mark.browser)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"report_{report.when}", report)


@pytest.fixture(scope="session")
def chromium() -> str:
    path = harness.ensure_chromium()
    if path is None:
        if harness.in_ci():
            pytest.fail("CI runs the browser tests: /usr/bin/chromium is missing and could not be installed")
        pytest.skip("no /usr/bin/chromium (scripts/install-chromium needs root or sudo)")
    return path


@pytest.fixture(scope="session")
def console(chromium):
    """The live console: an admin, ``dana`` with no role yet, ``vic`` a viewer; tuning and
    model-training jobs started in the background at once, so they run while other tests do."""
    scratch = Path(tempfile.mkdtemp(prefix="aiconsole-browser-"))
    scratch.chmod(0o711)  # as root, the console's trainer user must reach the data dir inside
    env_dir = Path(os.environ.get("AICONSOLE_ENV_DIR") or scratch / "envs")
    live = None
    try:
        live = harness.LiveConsole(scratch / "data", env_dir)
        live.add_user("dana", PASSWORDS["dana"])
        live.add_user("vic", PASSWORDS["vic"], role="roles/ml.viewer")
        live.background = start_background_jobs(live)
        yield live
    finally:
        if live is not None:
            live.stop()
            ARTIFACTS.mkdir(exist_ok=True)
            shutil.copyfile(live.log_path, ARTIFACTS / "console.log")  # what the server said
        harness.remove(scratch, [env_dir])


@pytest.fixture(scope="package")
def browser(chromium):
    """Package scope, not session: while Playwright's sync API runs, its event loop counts as
    running on this thread, and the suite's asyncio tests after the browser tests would fail."""
    from playwright.sync_api import sync_playwright

    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=chromium, headless=True, args=harness.CHROMIUM_ARGS)
        yield browser
        browser.close()


class Watch:
    """What a page did that it should not: console errors, uncaught exceptions, foreign requests."""

    def __init__(self, origin: str):
        self.origin = origin
        self.errors: list[str] = []
        self.foreign: list[str] = []
        self.console: list[str] = []
        self.expected: set[str] = set()

    def expect_status(self, path: str, status: int) -> None:
        """A page the test means to fail (the browser logs an error for any 4xx document)."""
        reason = {400: "Bad Request", 403: "Forbidden", 404: "Not Found"}[status]
        self.expected.add(f"status of {status} ({reason}) ({self.origin}{path})")

    def on_console(self, message) -> None:
        self.console.append(f"{message.type}: {message.text}")
        if message.type == "error" and not any(
            e in message.text + f" ({message.location.get('url', '')})" for e in self.expected
        ):
            self.errors.append(f"console error: {message.text} ({message.location.get('url', '')})")

    def on_page_error(self, error) -> None:
        self.errors.append(f"uncaught: {error}")

    def on_request(self, request) -> None:
        parts = urlsplit(request.url)
        if parts.scheme in {"data", "blob", "about"}:
            return
        if f"{parts.scheme}://{parts.netloc}".replace("ws://", "http://") != self.origin:
            self.foreign.append(request.url)


@pytest.fixture
def page(browser, console, request):
    context = browser.new_context(
        base_url=console.url, viewport={"width": 1280, "height": 900}, timezone_id="Europe/Berlin", locale="en-GB"
    )
    context.set_default_timeout(15_000)
    page = context.new_page()
    watch = Watch(console.url)
    page.on("console", watch.on_console)
    page.on("pageerror", watch.on_page_error)
    context.on("request", watch.on_request)
    page.watch = watch
    yield page
    name = re.sub(r"[^A-Za-z0-9_.-]+", "_", request.node.name)
    ARTIFACTS.mkdir(exist_ok=True)
    try:
        page.screenshot(path=str(ARTIFACTS / f"{name}.png"), full_page=True)
        failed = getattr(request.node, "report_call", None) is None or request.node.report_call.failed
        if failed or watch.errors or watch.foreign:
            (ARTIFACTS / f"{name}.html").write_text(page.content())
            (ARTIFACTS / f"{name}.console.txt").write_text(
                "\n".join(watch.console + watch.errors + [f"foreign request: {u}" for u in watch.foreign]) + "\n"
            )
    finally:
        context.close()
    assert not watch.errors, f"JavaScript errors on {page.url}: {watch.errors}"
    assert not watch.foreign, f"requests to other hosts: {watch.foreign}"
