"""Web access in Chromium: the job page opens a terminal into a running replica, a command typed
there runs in the replica and its output is in the page; the terminal fills the window and follows
its size, a keyboard user can leave it, a shell that ended offers another while the replica runs,
and the job page lists the sessions; a viewer is refused the terminal."""

from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from bench.support import trainers
from tests.helpers.browser import JOBS, axe_violations, login

pytestmark = pytest.mark.browser

# Runs until its shell touches ``release`` in its working folder, two minutes at most.
WAITING_TASK = (
    trainers.TASK_HEADER
    + """
deadline = time.time() + 120
while not os.path.exists("release") and time.time() < deadline:
    time.sleep(0.1)
sys.exit(0 if os.path.exists("release") else 3)
"""
)

SCREEN_ROWS = "() => document.querySelectorAll('#terminal .xterm-rows > div').length"
LAST_LINE_WHOLE = """() => {
  const box = document.getElementById("terminal");
  const inside = box.getBoundingClientRect().top + box.clientTop + box.clientHeight;  // what it does not clip
  return document.querySelector("#terminal .xterm-rows > div:last-child").getBoundingClientRect().bottom <= inside;
}"""


def test_a_shell_in_the_browser_runs_a_command_in_the_replica_and_a_viewer_is_refused(page, console):
    package = trainers.package(console.storage / "browser-packages" / "default-project" / "web-shell", WAITING_TASK)
    console.submit("web_shell", package, enableWebAccess=True)
    console.wait("web_shell", states={"RUNNING"})
    login(page)
    page.goto(f"{JOBS}web_shell/#replicas")
    page.get_by_role("tab", name="Replicas").click()
    # The link sits beside the replica's name, where a phone shows it without scrolling sideways.
    expect(page.locator("#job-replicas thead th").nth(1)).to_have_text("Shell")
    page.get_by_role("link", name="Open a shell into master-replica-0").click()
    expect(page).to_have_url(re.compile(r"/jobs/web_shell/shell/master-replica-0/$"))
    status = page.locator("#shell-status")
    expect(status).to_have_text("Connected to master-replica-0.", timeout=30_000)
    rows = page.locator("#terminal .xterm-rows")  # the DOM renderer: the screen's text is in the page
    expect(rows).to_contain_text("@master-replica-0:", timeout=15_000)
    keys = page.locator("#terminal textarea")  # where xterm takes the keys
    expect(keys).to_be_focused()
    # The terminal takes the window's height below its bar: the page itself does not scroll, and
    # the terminal's last line is whole.
    assert page.evaluate("() => document.documentElement.scrollHeight <= window.innerHeight")
    assert page.evaluate(LAST_LINE_WHOLE)
    page.keyboard.type("echo shell-$((6*7)) in $(basename $PWD)\n")
    expect(rows).to_contain_text("shell-42 in master-replica-0")
    assert axe_violations(page) == []

    # A smaller window: the terminal shows fewer lines, and the shell is told its new size.
    tall = page.evaluate(SCREEN_ROWS)
    page.set_viewport_size({"width": 900, "height": 600})
    page.wait_for_function(f"() => ({SCREEN_ROWS})() < {tall}")
    lines = page.evaluate(SCREEN_ROWS)
    page.keyboard.type("clear; echo size-$(tput lines)-lines\n")
    expect(rows).to_contain_text(f"size-{lines}-lines")
    assert page.evaluate(LAST_LINE_WHOLE)

    # Tab completes in the shell; Escape then Tab leaves the terminal, as its hint says, and
    # Shift+Tab comes back without the Escape eating the first key typed.
    hint = page.locator("#shell-hint")
    expect(hint).to_contain_text("to leave it, press Esc then Tab")
    page.keyboard.type("ech")
    page.keyboard.press("Tab")
    expect(keys).to_be_focused()
    page.keyboard.type("$((2+3))-by-tab\n")
    expect(rows).to_contain_text(re.compile(r"^5-by-tab", re.M), use_inner_text=True)
    page.keyboard.press("Escape")
    expect(hint).to_contain_text("Tab or Shift+Tab now leaves the terminal")
    page.keyboard.press("Tab")
    expect(keys).not_to_be_focused()
    expect(hint).to_contain_text("to leave it, press Esc then Tab")
    page.keyboard.press("Shift+Tab")
    expect(keys).to_be_focused()
    page.keyboard.type("echo back-$((1+1))\n")
    expect(rows).to_contain_text("back-2")

    # The shell ends while its replica runs: the page says why and offers another, the focus on it.
    page.keyboard.type("exit\n")
    expect(status).to_have_text("The shell exited with status 0.")
    again = page.get_by_role("button", name="Open a new shell")
    expect(again).to_be_focused()
    page.keyboard.press("Enter")
    expect(status).to_have_text("Connected to master-replica-0.", timeout=30_000)
    expect(keys).to_be_focused()
    expect(rows).to_contain_text("@master-replica-0:", timeout=15_000)
    page.emulate_media(color_scheme="dark")
    assert axe_violations(page) == []
    page.keyboard.type("touch release\n")  # the trainer ends; its shell ends with it, and says so
    expect(status).to_contain_text("master-replica-0 has ended", timeout=60_000)
    expect(again).to_be_hidden(timeout=30_000)  # once the Replicas tab no longer offers one
    expect(page.get_by_role("link", name="Back to web_shell")).to_be_focused()

    console.wait("web_shell")
    page.goto(f"{JOBS}web_shell/#replicas")
    page.get_by_role("tab", name="Replicas").click()
    sessions = page.locator("#shell-sessions")
    expect(sessions.locator("tbody tr")).to_have_count(2)
    first, second = sessions.locator("tbody tr").nth(1), sessions.locator("tbody tr").nth(0)  # newest first
    expect(first).to_contain_text("The shell exited with status 0.")
    expect(second).to_contain_text("master-replica-0 has ended")
    # How long each lasted, and what went each way in human units.
    expect(first.locator("[data-lasted]")).to_have_text(re.compile(r"^\d+(\.\d)? s$|^\d+ min \d\d s$"))
    expect(first).to_contain_text(re.compile(r"\d+\sbytes / [\d.]+\s(bytes|KB)"))
    expect(sessions.get_by_role("link", name=re.compile("Download"))).to_have_count(2)
    assert axe_violations(page) == []

    page.context.clear_cookies()
    login(page, "vic")
    page.watch.expect_status(f"{JOBS}web_shell/shell/master-replica-0/", 403)
    page.goto(f"{JOBS}web_shell/shell/master-replica-0/")
    expect(page.locator("#permission-denied")).to_be_visible()
