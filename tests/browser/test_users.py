"""In Chromium: platform admins create users, set passwords or hand out one-time
set-password links, and deactivate users; everyone changes their own password on the profile
page; all of it shows in the audit log. Phone width without sideways scroll; axe light and dark.

Each test makes its own accounts, so nothing here changes the shared ``admin``, ``dana`` or
``vic``, and no test signs in with a wrong password for them (that would count towards their
lockout in every other browser test).
"""

from __future__ import annotations

import re
import urllib.error
import urllib.request

import pytest
from playwright.sync_api import expect

from tests.helpers.browser import axe_violations, login

pytestmark = pytest.mark.browser
PASSWORD = "a-long-and-new-password-7"


def sign_in(page, username: str, password: str) -> None:
    page.goto("/login/")
    page.get_by_label("Username").fill(username)
    page.get_by_label("Password").fill(password)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url(re.compile(r"/projects/|/$"))
    expect(page.locator(".topbar .user a")).to_have_text(username)


def create_user(page, username: str, *, password: str | None = None) -> None:
    """On the Users page as the signed-in admin: with a password, or (None) with a link."""
    page.goto("/users/")
    form = page.locator("#new-user")
    form.get_by_label("Username").fill(username)
    form.get_by_label("Email").fill(f"{username}@example.com")
    if password is None:
        form.get_by_role("radio", name=re.compile("one-time link")).check()
    else:
        form.get_by_role("radio", name=re.compile("Set a password now")).check()
        form.get_by_label("Password", exact=True).fill(password)
    form.get_by_role("button", name="Create user").click()
    expect(page.get_by_role("heading", level=1)).to_have_text(username)


def new_page(browser, console):
    context = browser.new_context(base_url=console.url, viewport={"width": 1280, "height": 900})
    context.set_default_timeout(15_000)
    return context, context.new_page()


def api_status(console, token: str) -> int:
    request = urllib.request.Request(
        f"{console.url}/v1/projects/default-project/jobs", headers={"Authorization": f"Bearer {token}"}
    )
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status
    except urllib.error.HTTPError as error:
        return error.code


def no_sideways_scroll(page) -> None:
    widths = page.evaluate("() => [document.documentElement.scrollWidth, document.documentElement.clientWidth]")
    assert widths[0] <= widths[1], f"{page.url} is {widths[0]} px wide at {widths[1]} px"


def test_an_admin_creates_a_user_who_then_signs_in(page, browser, console):
    login(page)
    create_user(page, "ursula", password=PASSWORD)
    expect(page.locator(".messages")).to_contain_text("Created ursula")
    context, theirs = new_page(browser, console)
    try:
        sign_in(theirs, "ursula", PASSWORD)
    finally:
        context.close()
    page.goto("/users/")
    expect(page.locator('tr[data-user="ursula"] [data-status]')).to_have_text("active")


def test_a_set_password_link_works_once_signed_out(page, browser, console):
    login(page)
    create_user(page, "linda")
    box = page.locator("#password-link")
    expect(box).to_contain_text("there is no mail server")
    link = page.get_by_label("Set-password link").input_value()
    assert re.fullmatch(rf"{re.escape(console.url)}/set-password/[\w-]+/[\w-]+/", link), link
    context, theirs = new_page(browser, console)
    try:
        theirs.goto(link)
        expect(theirs.get_by_role("heading", level=1)).to_have_text("Set your password")
        theirs.get_by_label("New password", exact=True).fill("short")
        theirs.get_by_label("Confirm new password").fill("short")
        theirs.get_by_role("button", name="Set password").click()
        expect(theirs.locator(".field.has-error .errors").first).to_contain_text(
            "New password: This password is too short"
        )
        theirs.get_by_label("New password", exact=True).fill(PASSWORD)
        theirs.get_by_label("Confirm new password").fill(PASSWORD)
        theirs.get_by_role("button", name="Set password").click()
        theirs.wait_for_url("**/login/")
        expect(theirs.locator(".messages")).to_contain_text("Your password is set")
        sign_in(theirs, "linda", PASSWORD)
        theirs.context.clear_cookies()  # signed out again
        theirs.goto(link)  # used up
        expect(theirs.get_by_role("heading", level=1)).to_have_text("This link does not work")
    finally:
        context.close()


def test_a_deactivated_users_session_and_token_stop_working(page, browser, console):
    console.add_user("desmond", PASSWORD, role="roles/ml.viewer")
    token = console.cli("token", "create", "desmond").strip()
    assert api_status(console, token) == 200
    context, theirs = new_page(browser, console)
    try:
        sign_in(theirs, "desmond", PASSWORD)
        login(page)
        page.goto("/users/desmond/")
        page.get_by_role("button", name="Deactivate desmond").click()
        dialog = page.get_by_role("dialog", name="Deactivate desmond?")
        expect(dialog.get_by_role("button", name="Keep the account")).to_be_focused()
        dialog.get_by_role("button", name="Yes, deactivate").click()
        expect(page.locator(".messages")).to_contain_text("desmond is deactivated")
        expect(page.locator("#user-facts [data-status]")).to_have_text("deactivated")

        theirs.goto("/profile/")
        theirs.wait_for_url(re.compile(r"/login/"))  # signed out
        assert api_status(console, token) == 401

        page.get_by_role("button", name="Reactivate desmond").click()
        expect(page.locator("#user-facts [data-status]")).to_have_text("active")
        sign_in(theirs, "desmond", PASSWORD)
        assert api_status(console, token) == 401  # revoked tokens stay revoked
    finally:
        context.close()


def test_an_admin_cannot_deactivate_themselves(page, console):
    login(page)
    page.goto("/users/admin/")
    expect(page.locator("#access")).to_contain_text("This is you")
    expect(page.get_by_role("button", name=re.compile("^Deactivate"))).to_have_count(0)


def test_a_user_changes_their_own_password_on_the_profile_page(page, browser, console):
    console.add_user("petra", PASSWORD)
    sign_in(page, "petra", PASSWORD)
    context, elsewhere = new_page(browser, console)
    try:
        sign_in(elsewhere, "petra", PASSWORD)
        page.goto("/profile/")
        section = page.locator("#password")
        section.get_by_label("Current password").fill("not-my-password")
        section.get_by_label("New password", exact=True).fill(PASSWORD + "-2")
        section.get_by_label("Confirm new password").fill(PASSWORD + "-2")
        section.get_by_role("button", name="Change password").click()
        current = page.get_by_label("Current password")
        expect(page.locator(".field.has-error", has=current).locator(".errors")).to_have_text(
            "Current password: The current password is wrong."
        )
        expect(current).to_have_attribute("aria-invalid", "true")

        page.get_by_label("Current password").fill(PASSWORD)
        page.get_by_label("New password", exact=True).fill(PASSWORD + "-2")
        page.get_by_label("Confirm new password").fill(PASSWORD + "-2")
        page.get_by_role("button", name="Change password").click()
        expect(page.locator(".messages")).to_contain_text("Your password is changed")
        page.goto("/profile/")
        expect(page.get_by_role("heading", level=1)).to_have_text("petra")  # still signed in here
        elsewhere.goto("/profile/")
        elsewhere.wait_for_url(re.compile(r"/login/"))  # the other session ended
        sign_in(elsewhere, "petra", PASSWORD + "-2")
    finally:
        context.close()


def test_a_non_admin_cannot_reach_the_users_page(page, console):
    login(page, "vic")
    expect(page.get_by_role("navigation", name="Main").get_by_role("link", name="Users")).to_have_count(0)
    page.watch.expect_status("/users/", 403)
    response = page.goto("/users/")
    assert response.status == 403
    expect(page.get_by_role("heading", level=1)).to_have_text("Permission denied")


def test_the_audit_log_lists_user_and_password_changes(page, browser, console):
    login(page)
    create_user(page, "audrey")  # CreateUser and CreatePasswordLink
    page.goto("/users/audrey/")
    page.get_by_label("New password", exact=True).fill(PASSWORD)
    page.get_by_label("Confirm new password").fill(PASSWORD)
    page.get_by_role("button", name="Set password").click()
    expect(page.locator(".messages")).to_contain_text("audrey's password is set")
    page.get_by_role("button", name="Deactivate audrey").click()
    page.get_by_role("dialog").get_by_role("button", name="Yes, deactivate").click()
    expect(page.locator(".messages")).to_contain_text("audrey is deactivated")
    page.goto("/audit/?resource=users/audrey")
    rows = page.locator("table tbody")
    for method in ("CreateUser", "CreatePasswordLink", "SetPassword", "DeactivateUser"):
        expect(rows).to_contain_text(f"aiconsole.UserService.{method}")
    assert PASSWORD not in page.content()


def test_users_and_profile_pages_fit_a_phone_and_pass_axe_in_light_and_dark(page, browser, console):
    login(page)
    create_user(page, "phoebe_with_a_rather_long_username_to_wrap")
    link = page.get_by_label("Set-password link").input_value()
    pages = ["/users/", "/users/phoebe_with_a_rather_long_username_to_wrap/", "/profile/"]
    found = {}
    for scheme in ("light", "dark"):
        page.emulate_media(color_scheme=scheme)
        for width in (1280, 390):
            page.set_viewport_size({"width": width, "height": 900})
            for path in pages:
                page.goto(path)
                if width == 390:
                    no_sideways_scroll(page)
                elif violations := axe_violations(page):
                    found[f"{path} ({scheme})"] = violations
    context, theirs = new_page(browser, console)
    try:
        for scheme in ("light", "dark"):
            theirs.emulate_media(color_scheme=scheme)
            theirs.set_viewport_size({"width": 390, "height": 900})
            theirs.goto(link)
            no_sideways_scroll(theirs)
            if violations := axe_violations(theirs):
                found[f"set-password page ({scheme})"] = violations
    finally:
        context.close()
    assert not found, found
