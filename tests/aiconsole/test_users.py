"""Users and passwords: the services in ``aiconsole.accounts`` and the Users
page, the set-password link page and the profile's password change."""

from __future__ import annotations

import re
from datetime import timedelta
from unittest import mock

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from aiconsole import accounts, iam
from aiconsole.errors import FailedPrecondition, InvalidArgument, ResourceExhausted
from aiconsole.iam import PermissionDenied
from aiconsole.models import ApiToken, AuditEntry
from aiconsole.tokens import authenticate_bearer, create_token
from tests.helpers.identity import entries, make_user

GOOD = "correct-horse-battery-9"


@pytest.fixture
def root(db):
    return get_user_model().objects.create_superuser(username="root_admin", email="root@example.com", password="pw")


def _sessions_of(user) -> int:
    return sum(s.get_decoded().get("_auth_user_id") == str(user.pk) for s in Session.objects.all())


def _signs_in(client, username: str, password: str) -> bool:
    """A real sign-in through the login page (django-axes needs the request)."""
    response = client.post("/login/", {"username": username, "password": password})
    return response.status_code == 302


def _link_on_page(html: str) -> str:
    match = re.search(r'id="password-link-value"[^>]*value="([^"]+)"', html)
    assert match, "no set-password link on the page"
    return match.group(1).replace("http://testserver", "")


def _no_secret_in_audit(*secrets: str) -> None:
    text = " ".join(str(e.request) + str(e.response) + e.status_message for e in AuditEntry.objects.all())
    for secret in secrets:
        assert secret not in text


# --- services -----------------------------------------------------------------------------------


def test_only_platform_admins_create_users_and_a_refusal_is_audited(root, developer):
    with pytest.raises(PermissionDenied):
        accounts.create_user("newbie", actor=developer, password=GOOD)
    refused = entries(accounts.CREATE_USER, granted=False)
    assert [e.principal for e in refused] == ["dave_dev@example.com"]
    user, password = accounts.create_user("newbie", actor=root, email="n@example.com", name="New Bie", password=GOOD)
    assert user.check_password(GOOD) and password == GOOD and user.get_full_name() == "New Bie"
    assert entries(accounts.CREATE_USER, granted=True)[-1].request == {
        "user": {"username": "newbie", "email": "n@example.com", "name": "New Bie"}
    }
    _no_secret_in_audit(GOOD)


def test_a_weak_password_is_refused_naming_the_field_and_the_rule(root):
    with pytest.raises(InvalidArgument) as refused:
        accounts.create_user("newbie", actor=root, password="short")
    assert refused.value.violations[0].field == "user.password"
    assert "too short" in refused.value.violations[0].description
    assert not get_user_model().objects.filter(username="newbie").exists()


def test_a_password_link_is_single_use_and_replaced_by_a_newer_one(root):
    user, password = accounts.create_user("linked", actor=root, password_link=True)
    assert password is None and not user.has_usable_password()
    first, _ = accounts.create_password_link(user, actor=root)
    second, expires = accounts.create_password_link(user, actor=root)
    uid, token = first.split("/")[2:4]
    assert accounts.user_for_password_link(uid, token) is None  # the newer link replaced it
    uid, token = second.split("/")[2:4]
    assert accounts.user_for_password_link(uid, token) == user
    assert timedelta(hours=71) < expires - user.date_joined < timedelta(hours=73)
    accounts.use_password_link(uid, token, GOOD)
    user.refresh_from_db()
    assert user.check_password(GOOD)
    with pytest.raises(FailedPrecondition, match="not valid"):
        accounts.use_password_link(uid, token, GOOD + "x")
    assert [e.principal for e in entries(accounts.USE_PASSWORD_LINK)] == ["linked"]
    assert len(entries(accounts.CREATE_PASSWORD_LINK)) == 2
    _no_secret_in_audit(GOOD, token)


def test_a_password_link_expires_after_72_hours(root):
    user, _ = accounts.create_user("late", actor=root, password_link=True)
    path, _ = accounts.create_password_link(user, actor=root)
    uid, token = path.split("/")[2:4]
    now = accounts.password_link_tokens._now()
    with mock.patch.object(accounts.PasswordLinkTokens, "_now", return_value=now + timedelta(hours=71)):
        assert accounts.user_for_password_link(uid, token) == user
    with mock.patch.object(accounts.PasswordLinkTokens, "_now", return_value=now + timedelta(hours=73)):
        assert accounts.user_for_password_link(uid, token) is None


def test_a_password_link_ends_the_old_password_and_sessions(client, root):
    user = make_user("forgetful")
    client.force_login(user)
    accounts.create_password_link(user, actor=root)
    user.refresh_from_db()
    assert not user.check_password("pw")
    assert _sessions_of(user) == 0
    assert client.get("/profile/").status_code == 302  # signed out


def test_deactivation_ends_sessions_and_revokes_tokens_and_reactivation_allows_sign_in(client, root):
    user = make_user("leaver")
    token, raw = create_token(user)
    client.force_login(user)
    accounts.deactivate_user(user, actor=root)
    assert _sessions_of(user) == 0 and authenticate_bearer(raw) is None
    assert not ApiToken.objects.active().filter(user=user).exists()
    assert client.get("/profile/").status_code == 302
    entry = entries(accounts.DEACTIVATE_USER)[-1]
    assert entry.response == {"revoked": [f"users/leaver/tokens/{token.pk}"], "endedSessions": 1}
    accounts.reactivate_user(user, actor=root)
    assert _signs_in(client, "leaver", "pw")
    assert entries(accounts.REACTIVATE_USER)[-1].resource_name == "users/leaver"


def test_an_admin_cannot_deactivate_themselves_and_the_last_platform_admin_stays(root):
    for change in (
        lambda: accounts.set_password(root, GOOD, actor=root),
        lambda: accounts.create_password_link(root, actor=root),
    ):
        with pytest.raises(FailedPrecondition, match="your profile page"):
            change()
    with pytest.raises(FailedPrecondition, match="your own account"):
        accounts.deactivate_user(root, actor=root)
    with pytest.raises(FailedPrecondition, match="last active platform admin"):
        accounts.set_platform_admin(root, False, actor=iam.SYSTEM)
    with pytest.raises(FailedPrecondition, match="last active platform admin"):
        accounts.deactivate_user(root, actor=iam.SYSTEM)
    root.refresh_from_db()
    assert root.is_superuser and root.is_active
    refused = AuditEntry.objects.filter(status_code=accounts.CODE_FAILED_PRECONDITION)
    assert {e.method_name for e in refused} == {accounts.DEACTIVATE_USER, accounts.SET_PLATFORM_ADMIN}

    other = make_user("second_admin")
    accounts.set_platform_admin(other, True, actor=root)
    accounts.set_platform_admin(root, False, actor=other)  # now there is another
    root.refresh_from_db()
    assert not root.is_superuser
    assert [e.request["platformAdmin"] for e in entries(accounts.SET_PLATFORM_ADMIN, status_code=0)] == [True, False]


def test_changing_your_password_needs_the_current_one_and_keeps_only_this_session(client, developer):
    client.force_login(developer)
    other = type(client)()
    other.force_login(developer)
    with pytest.raises(InvalidArgument) as refused:
        accounts.change_password(developer, "wrong", GOOD)
    assert refused.value.violations[0].field == "current_password"
    assert entries(accounts.CHANGE_PASSWORD, granted=False)[-1].status_code == accounts.CODE_INVALID_ARGUMENT

    response = client.post(
        "/profile/password/", {"current_password": "pw-dave_dev", "new_password": GOOD, "confirm_password": GOOD}
    )
    assert response.status_code == 302
    assert client.get("/profile/").status_code == 200  # still signed in here
    assert other.get("/profile/").status_code == 302  # the other session ended
    developer.refresh_from_db()
    assert developer.check_password(GOOD)
    assert entries(accounts.CHANGE_PASSWORD, granted=True)[-1].response == {"endedSessions": 1}
    _no_secret_in_audit(GOOD, "pw-dave_dev")


def test_wrong_current_passwords_lock_the_change_for_the_cooloff_until_an_admin_sets_one(settings, developer, root):
    settings.AXES_FAILURE_LIMIT = 3
    for _ in range(2):
        with pytest.raises(InvalidArgument):
            accounts.change_password(developer, "guess", GOOD)
    with pytest.raises(ResourceExhausted) as locked:
        accounts.change_password(developer, "guess", GOOD)  # the third wrong one locks
    assert "Too many wrong current passwords. Try again in 15 minutes" in locked.value.message
    assert entries(accounts.CHANGE_PASSWORD, status_code=accounts.CODE_RESOURCE_EXHAUSTED)[-1].status_message == (
        "Locked for 15 minutes after 3 wrong current passwords."
    )
    recorded = AuditEntry.objects.count()
    with pytest.raises(ResourceExhausted):  # even the right one is not checked now
        accounts.change_password(developer, "pw-dave_dev", GOOD)
    developer.refresh_from_db()
    assert developer.check_password("pw-dave_dev")
    assert AuditEntry.objects.count() == recorded  # refused unchecked, not recorded again

    # A platform admin's new password lifts the lock; so does the cool-off running out.
    accounts.set_password(developer, "set-by-the-admin-7", actor=root)
    accounts.change_password(developer, "set-by-the-admin-7", GOOD)
    for _ in range(3):
        with pytest.raises((InvalidArgument, ResourceExhausted)):
            accounts.change_password(developer, "guess", "another-horse-battery-8")
    later = timezone.now() + timedelta(minutes=16)
    with mock.patch("django.utils.timezone.now", return_value=later):
        accounts.change_password(developer, GOOD, "another-horse-battery-8")


# --- pages --------------------------------------------------------------------------------------


@pytest.mark.parametrize("path", ["/users/", "/users/dave_dev/"])
def test_a_non_admin_gets_the_403_page_for_the_users_pages(client, developer, admin, path):
    client.force_login(admin)  # an admin of a project, not a platform admin
    response = client.get(path)
    assert response.status_code == 403
    assert "Permission denied" in response.content.decode()
    assert client.post("/users/", {"username": "x", "how": "link"}).status_code == 403
    assert client.post("/users/dave_dev/deactivate/").status_code == 403
    assert get_user_model().objects.get(username="dave_dev").is_active


def test_users_page_creates_a_user_with_a_link_shown_once(client, root):
    client.force_login(root)
    response = client.post("/users/", {"username": "carol", "name": "Carol", "email": "c@example.com", "how": "link"})
    assert response.status_code == 201 and response["Cache-Control"] == "no-store"
    link = _link_on_page(response.content.decode())
    assert "password-link-value" not in client.get("/users/carol/").content.decode()
    client.logout()
    page = client.get(link)
    assert page.status_code == 200 and "carol" in page.content.decode()
    done = client.post(link, {"new_password": GOOD, "confirm_password": GOOD})
    assert done.status_code == 302 and done["Location"] == "/login/"
    assert _signs_in(client, "carol", GOOD)
    client.logout()
    assert client.get(link).status_code == 404  # used up


def test_form_errors_name_the_field_and_the_rule(client, root):
    client.force_login(root)
    html = client.post("/users/", {"username": "bad name!", "how": "password", "password": ""}).content.decode()
    assert "Username: Enter a valid username." in html
    assert "Password is required when you set a password now." in html
    html = client.post("/users/", {"username": "okname", "how": "password", "password": "123"}).content.decode()
    assert "Password: This password is too short" in html and 'aria-invalid="true"' in html
    make_user("taken")
    html = client.post("/users/", {"username": "another", "email": "TAKEN@example.com", "how": "link"}).content.decode()
    assert "Email: Another user has this email" in html
    html = client.post(
        "/profile/password/", {"current_password": "nope", "new_password": GOOD, "confirm_password": GOOD}
    ).content.decode()
    assert "Current password: The current password is wrong." in html
    html = client.post(
        "/profile/password/", {"current_password": "pw", "new_password": GOOD, "confirm_password": GOOD + "x"}
    ).content.decode()
    assert "Confirm new password: it does not match the new password." in html


def test_admin_sets_a_password_and_the_users_sessions_end(client, root):
    user = make_user("reset_me")
    theirs = type(client)()
    theirs.force_login(user)
    client.force_login(root)
    response = client.post("/users/reset_me/password/", {"new_password": GOOD, "confirm_password": GOOD})
    assert response.status_code == 302
    assert theirs.get("/profile/").status_code == 302
    assert _signs_in(client, "reset_me", GOOD)
    assert entries(accounts.SET_PASSWORD)[-1].principal == "root@example.com"


def test_the_users_link_shows_for_platform_admins_only(client, root, developer):
    client.force_login(root)
    assert 'href="/users/"' in client.get("/profile/").content.decode()
    client.force_login(developer)
    assert 'href="/users/"' not in client.get("/profile/").content.decode()


def test_every_form_posts_with_csrf(root):
    from django.test import Client

    strict = Client(enforce_csrf_checks=True)
    strict.force_login(root)
    make_user("target")
    for path, data in [
        ("/users/", {"username": "x1", "how": "link"}),
        ("/users/target/link/", {}),
        ("/users/target/deactivate/", {}),
        ("/profile/password/", {}),
    ]:
        assert strict.post(path, data).status_code == 403, path
