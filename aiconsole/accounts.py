"""Projects and user accounts: created and managed by platform admins (the console's Users page,
the CLI on the server as ``system``); everyone changes their own password on their profile page.

Audit method names: ``google.cloudresourcemanager.v1.Projects.CreateProject`` (in the new
project's Admin Activity log) and, server-wide (shown to platform admins),
``aiconsole.UserService.`` ``CreateUser``, ``SetPassword`` (an admin sets one),
``CreatePasswordLink`` (an admin issues a one-time set-password link), ``UsePasswordLink`` (its
user sets a password with it), ``DeactivateUser``, ``ReactivateUser``, ``SetPlatformAdmin`` and
``ChangePassword`` (a user changes their own). Passwords and link tokens are never recorded.

A set-password link is good once and for ``PASSWORD_LINK_HOURS`` (72): it is signed over the
user's password hash and last sign-in, so setting a password (by any means) or issuing a newer link
ends it. Issuing a link also ends the user's current password: the link is the way back in.
There is no mail server: the admin sees the link once and hands it over.
"""

from __future__ import annotations

import secrets
from datetime import datetime, timedelta
from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY, get_user, get_user_model, password_validation
from django.contrib.auth.tokens import PasswordResetTokenGenerator
from django.core.exceptions import ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.encoding import force_bytes
from django.utils.http import base36_to_int, urlsafe_base64_decode, urlsafe_base64_encode

from aiconsole import audit, iam
from aiconsole.errors import (
    AlreadyExists,
    FailedPrecondition,
    FieldViolation,
    InvalidArgument,
    ResourceExhausted,
)
from aiconsole.models import PROJECT_ID_VALIDATOR, ApiToken, AuditEntry, Project
from aiconsole.signin import CODE_RESOURCE_EXHAUSTED, cooloff_minutes

CREATE_PROJECT = "google.cloudresourcemanager.v1.Projects.CreateProject"
USER_SERVICE = "aiconsole.UserService"
CREATE_USER = f"{USER_SERVICE}.CreateUser"
SET_PASSWORD = f"{USER_SERVICE}.SetPassword"
CREATE_PASSWORD_LINK = f"{USER_SERVICE}.CreatePasswordLink"
USE_PASSWORD_LINK = f"{USER_SERVICE}.UsePasswordLink"
DEACTIVATE_USER = f"{USER_SERVICE}.DeactivateUser"
REACTIVATE_USER = f"{USER_SERVICE}.ReactivateUser"
SET_PLATFORM_ADMIN = f"{USER_SERVICE}.SetPlatformAdmin"
CHANGE_PASSWORD = f"{USER_SERVICE}.ChangePassword"
LIST_USERS = f"{USER_SERVICE}.ListUsers"

PASSWORD_LINK_HOURS = 72
CODE_INVALID_ARGUMENT = 3
CODE_FAILED_PRECONDITION = 9


def _require_platform_admin(
    actor, permission: str, resource_name: str, method: str, *, data_access: bool = False
) -> None:
    if iam.is_platform_admin(actor):
        return
    audit.record(
        actor=actor,
        project=None,
        method=method,
        resource_name=resource_name,
        permission=permission,
        granted=False,
        status_code=audit.CODE_PERMISSION_DENIED,
        data_access=data_access,
        status_message="Only platform admins may do this.",
    )
    raise iam.PermissionDenied(permission, resource_name)


def find_project(project_id: str, *, actor) -> Project:
    """The project, or NOT_FOUND for someone with no role in it: the same answer as for a missing
    one, so project ids are not revealed (IAM decides 404 versus 403 this way everywhere)."""
    project = Project.objects.filter(project_id=project_id).first()
    if project is None or not iam.can_see_project(actor, project):
        raise iam.NotFound(f"projects/{project_id}")
    return project


def create_project(project_id: str, *, actor, display_name: str = "") -> Project:
    """A new, empty project. A platform admin who is a real user becomes its first admin."""
    name = f"projects/{project_id}"
    _require_platform_admin(actor, "resourcemanager.projects.create", name, CREATE_PROJECT)
    try:
        PROJECT_ID_VALIDATOR(project_id)
    except ValidationError as error:
        raise InvalidArgument.from_violations([FieldViolation("project.project_id", error.messages[0])]) from None
    try:
        with transaction.atomic():
            project = Project.objects.create(project_id=project_id, display_name=display_name[:100] or project_id)
            if actor is not iam.SYSTEM:
                iam.grant(actor, iam.ADMIN_ROLE, project)
            audit.record(
                actor=actor,
                project=project,
                method=CREATE_PROJECT,
                resource_name=name,
                permission="resourcemanager.projects.create",
                service_name="cloudresourcemanager.googleapis.com",
                request={"project": {"projectId": project_id, "name": project.display_name}},
                response={
                    "projectId": project_id,
                    "projectNumber": str(project.project_number),
                    "name": project.display_name,
                },
            )
    except IntegrityError:
        raise AlreadyExists(
            f"Project {project_id} already exists.",
            [FieldViolation("project.project_id", "A project with this id already exists.")],
        ) from None
    return project


def user_name(user) -> str:
    return f"users/{user.get_username()}"


def _password_violations(password: str, user, field: str) -> list[FieldViolation]:
    """Django's password validators (AUTH_PASSWORD_VALIDATORS), each message naming the rule."""
    try:
        password_validation.validate_password(password, user)
    except ValidationError as error:
        return [FieldViolation(field, " ".join(error.messages))]
    return []


def create_user(
    username: str, *, actor, email: str = "", name: str = "", password: str | None = None, password_link: bool = False
):
    """A new account; returns (user, password) where password is generated when none was given.

    With ``password_link`` the account starts with no usable password and (user, None) is returned:
    the caller then issues a set-password link (``create_password_link``).
    """
    _require_platform_admin(actor, "aiconsole.users.create", f"users/{username}", CREATE_USER)
    User = get_user_model()
    candidate = User(username=username, email=email, first_name=name)
    violations = []
    try:
        candidate.full_clean(exclude=["password"], validate_unique=False)
    except ValidationError as error:
        field_names = {"first_name": "name"}
        violations += [
            FieldViolation(f"user.{field_names.get(field, field)}", " ".join(messages))
            for field, messages in error.message_dict.items()
        ]
    if email and User.objects.filter(email__iexact=email).exists():
        violations.append(FieldViolation("user.email", "Another user has this email: members are added by email too."))
    generated = password is None and not password_link
    password = secrets.token_urlsafe(12) if generated else password
    if not password_link:
        violations += _password_violations(password, candidate, "user.password")
    if violations:
        raise InvalidArgument.from_violations(violations)
    try:
        with transaction.atomic():
            user = User.objects.create_user(
                username=username, email=email, password=None if password_link else password, first_name=name
            )
            request = {"user": {"username": username, "email": email, "name": name}}
            if password_link:
                request["passwordLink"] = True
            audit.record(
                actor=actor,
                project=None,
                method=CREATE_USER,
                resource_name=f"users/{username}",
                permission="aiconsole.users.create",
                request=request,
                response={"name": f"users/{username}"},
            )
    except IntegrityError:
        raise AlreadyExists(
            f"User {username} already exists.",
            [FieldViolation("user.username", "A user with this name already exists.")],
        ) from None
    return user, None if password_link else password


def list_users(*, actor):
    """Every account, for the Users page (platform admins only)."""
    _require_platform_admin(actor, "aiconsole.users.list", "users", LIST_USERS, data_access=True)
    return get_user_model().objects.order_by("username")


# --- sessions, tokens and sign-in lockouts that a change ends -------------------------------------


def end_sessions(user, *, keep: str | None = None) -> int:
    """Delete the user's sessions (all but ``keep``, a session key). With a session engine that
    keeps no table (signed cookies, cache) nothing is deleted: Django still refuses a session
    whose user is inactive or whose password changed since it signed in."""
    from django.contrib.sessions.models import Session

    if settings.SESSION_ENGINE not in {
        "django.contrib.sessions.backends.db",
        "django.contrib.sessions.backends.cached_db",
    }:
        return 0
    store = import_module(settings.SESSION_ENGINE).SessionStore
    ended = 0
    for session in Session.objects.filter(expire_date__gt=timezone.now()).iterator():
        if session.session_key != keep and session.get_decoded().get(SESSION_KEY) == str(user.pk):
            store(session.session_key).delete()
            ended += 1
    return ended


class _SessionOnly:
    """What ``django.contrib.auth.get_user`` reads of a request: its session."""

    def __init__(self, session):
        self.session = session


def session_user(session_key: str | None):
    """The user a session still signs in, decided as for every HTTP request (Django's
    ``auth.get_user``: the session exists and has not expired, the user is active, the password
    has not changed since); None otherwise. For connections that outlive the request that opened
    them (the live log WebSocket), which ask again while they stay open."""
    if not session_key:
        return None
    user = get_user(_SessionOnly(import_module(settings.SESSION_ENGINE).SessionStore(session_key)))
    return user if user.is_authenticated else None


def _unlock_sign_in(user) -> None:
    """A new password or link also lifts a sign-in lockout for the user's name (django-axes)."""
    from axes.utils import reset

    reset(username=user.get_username())


# --- passwords ----------------------------------------------------------------------------------


def _not_yourself(actor, user) -> None:
    if getattr(actor, "pk", None) == user.pk:
        raise FailedPrecondition("Change your own password on your profile page: it needs your current one.")


class PasswordLinkTokens(PasswordResetTokenGenerator):
    """Django's password-reset tokens under our own salt, good for PASSWORD_LINK_HOURS."""

    key_salt = "aiconsole.accounts.PasswordLinkTokens"

    def check_token(self, user, token) -> bool:
        if not super().check_token(user, token):
            return False
        made = base36_to_int(token.split("-")[0])
        return self._num_seconds(self._now()) - made <= PASSWORD_LINK_HOURS * 3600


password_link_tokens = PasswordLinkTokens()


def set_password(user, password: str, *, actor) -> None:
    """A platform admin sets a user's password: their sessions end and any lockout is lifted."""
    _require_platform_admin(actor, "aiconsole.users.setPassword", user_name(user), SET_PASSWORD)
    _not_yourself(actor, user)
    if violations := _password_violations(password, user, "password"):
        raise InvalidArgument.from_violations(violations)
    with transaction.atomic():
        user.set_password(password)
        user.save(update_fields=["password"])
        ended = end_sessions(user)
        audit.record(
            actor=actor,
            project=None,
            method=SET_PASSWORD,
            resource_name=user_name(user),
            permission="aiconsole.users.setPassword",
            request={"name": user_name(user)},
            response={"endedSessions": ended},
        )
    _unlock_sign_in(user)


def create_password_link(user, *, actor) -> tuple[str, datetime]:
    """A one-time set-password link's path and when it expires. The user's current password and
    sessions end now, and so does any earlier link (the password hash they were signed over)."""
    _require_platform_admin(actor, "aiconsole.users.setPassword", user_name(user), CREATE_PASSWORD_LINK)
    _not_yourself(actor, user)
    if not user.is_active:
        raise FailedPrecondition(f"User {user.get_username()} is deactivated: reactivate the account first.")
    with transaction.atomic():
        user.set_unusable_password()
        user.save(update_fields=["password"])
        ended = end_sessions(user)
        token = password_link_tokens.make_token(user)
        expires = timezone.now() + timedelta(hours=PASSWORD_LINK_HOURS)
        audit.record(
            actor=actor,
            project=None,
            method=CREATE_PASSWORD_LINK,
            resource_name=user_name(user),
            permission="aiconsole.users.setPassword",
            request={"name": user_name(user)},
            response={"expireTime": expires.isoformat(), "endedSessions": ended},
        )
    _unlock_sign_in(user)
    uid = urlsafe_base64_encode(force_bytes(user.pk))
    return f"/set-password/{uid}/{token}/", expires


def user_for_password_link(uid: str, token: str):
    """The active user a set-password link is for, or None when it is wrong, used or expired."""
    try:
        pk = int(urlsafe_base64_decode(uid).decode())
    except (ValueError, TypeError, UnicodeDecodeError):
        return None
    user = get_user_model().objects.filter(pk=pk, is_active=True).first()
    return user if user is not None and password_link_tokens.check_token(user, token) else None


def use_password_link(uid: str, token: str, password: str):
    """The link's user sets their password; the link is used up. Returns the user."""
    user = user_for_password_link(uid, token)
    if user is None:
        raise FailedPrecondition(
            "This set-password link is not valid: it was used, replaced by a newer "
            "one, or has expired. Ask a platform admin for a new link."
        )
    if violations := _password_violations(password, user, "new_password"):
        raise InvalidArgument.from_violations(violations)
    with transaction.atomic():
        user.set_password(password)
        user.save(update_fields=["password"])
        audit.record(
            actor=user,
            project=None,
            method=USE_PASSWORD_LINK,
            resource_name=user_name(user),
            permission="",
            request={"name": user_name(user)},
        )
    _unlock_sign_in(user)
    return user


def _wrong_current_passwords(user) -> int:
    """Wrong current passwords given on the profile page within the sign-in cool-off, since the
    password last changed: counted from the audit log, so every web process sees the same count."""
    name = user_name(user)
    since = timezone.now() - settings.AXES_COOLOFF_TIME
    changed = (
        AuditEntry.objects.filter(
            method_name__in=[CHANGE_PASSWORD, SET_PASSWORD, USE_PASSWORD_LINK],
            resource_name=name,
            status_code=0,
            timestamp__gte=since,
        )
        .order_by("-timestamp")
        .values_list("timestamp", flat=True)
        .first()
    )
    return AuditEntry.objects.filter(
        method_name=CHANGE_PASSWORD,
        resource_name=name,
        granted=False,
        status_code=CODE_INVALID_ARGUMENT,
        timestamp__gte=changed or since,
    ).count()


def change_password(user, current: str, new: str, *, keep_session: str | None = None) -> None:
    """A signed-in user changes their own password; their other sessions end (``keep_session``,
    the current one, stays: the view refreshes its hash). A wrong current password is audited,
    and after as many as a sign-in may get wrong (``AXES_FAILURE_LIMIT``) the current password is
    not checked again for the cool-off: a borrowed session cannot be used to guess it."""
    locked = (
        f"Too many wrong current passwords. Try again in {cooloff_minutes()} minutes, or ask a "
        f"platform admin to set a new password."
    )
    if _wrong_current_passwords(user) >= settings.AXES_FAILURE_LIMIT:
        raise ResourceExhausted(locked)  # refused unchecked, and not recorded again (as at sign-in)
    if not user.check_password(current):
        audit.record(
            actor=user,
            project=None,
            method=CHANGE_PASSWORD,
            resource_name=user_name(user),
            permission="",
            granted=False,
            status_code=CODE_INVALID_ARGUMENT,
            status_message="The current password was wrong.",
        )
        if _wrong_current_passwords(user) >= settings.AXES_FAILURE_LIMIT:
            audit.record(
                actor=user,
                project=None,
                method=CHANGE_PASSWORD,
                resource_name=user_name(user),
                permission="",
                granted=False,
                status_code=CODE_RESOURCE_EXHAUSTED,
                status_message=f"Locked for {cooloff_minutes()} minutes after "
                f"{settings.AXES_FAILURE_LIMIT} wrong current passwords.",
            )
            raise ResourceExhausted(locked)
        raise InvalidArgument.from_violations([FieldViolation("current_password", "The current password is wrong.")])
    violations = _password_violations(new, user, "new_password")
    if not violations and new == current:
        violations = [FieldViolation("new_password", "The new password must differ from the current one.")]
    if violations:
        raise InvalidArgument.from_violations(violations)
    with transaction.atomic():
        user.set_password(new)
        user.save(update_fields=["password"])
        ended = end_sessions(user, keep=keep_session)
        audit.record(
            actor=user,
            project=None,
            method=CHANGE_PASSWORD,
            resource_name=user_name(user),
            permission="",
            request={"name": user_name(user)},
            response={"endedSessions": ended},
        )


# --- deactivation and the platform admin flag ---------------------------------------------------


def _lock(user):
    """The user's row, locked, and whether another active platform admin remains. The admins'
    rows are locked first, in one order, so two admins changing each other cannot both pass."""
    User = get_user_model()
    admins = list(
        User.objects.select_for_update()
        .filter(is_active=True, is_superuser=True)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    return User.objects.select_for_update().get(pk=user.pk), any(pk != user.pk for pk in admins)


def _refuse(actor, user, method: str, permission: str, message: str):
    """A refused change, audited (FAILED_PRECONDITION) before it is raised."""
    audit.record(
        actor=actor,
        project=None,
        method=method,
        resource_name=user_name(user),
        permission=permission,
        granted=True,
        status_code=CODE_FAILED_PRECONDITION,
        status_message=message,
        request={"name": user_name(user)},
    )
    return FailedPrecondition(message)


def deactivate_user(user, *, actor) -> None:
    """The user can no longer sign in: their sessions end and their API tokens are revoked.
    Nobody deactivates themselves, and the last active platform admin stays."""
    permission = "aiconsole.users.update"
    _require_platform_admin(actor, permission, user_name(user), DEACTIVATE_USER)
    if getattr(actor, "pk", None) == user.pk:
        raise _refuse(
            actor,
            user,
            DEACTIVATE_USER,
            permission,
            "You cannot deactivate your own account: ask another platform admin.",
        )
    given = user
    with transaction.atomic():
        user, others = _lock(user)
        if user.is_superuser and user.is_active and not others:
            refusal = (
                f"{user.get_username()} is the last active platform admin: make another user a platform admin first."
            )
        else:
            refusal = None
            was_active = user.is_active
            user.is_active = False
            user.save(update_fields=["is_active"])
            tokens = ApiToken.objects.active().filter(user=user)
            revoked = [f"{user_name(user)}/tokens/{pk}" for pk in tokens.values_list("pk", flat=True)]
            tokens.update(revoked=timezone.now())
            ended = end_sessions(user)
            if was_active:
                audit.record(
                    actor=actor,
                    project=None,
                    method=DEACTIVATE_USER,
                    resource_name=user_name(user),
                    permission=permission,
                    request={"name": user_name(user)},
                    response={"revoked": revoked, "endedSessions": ended},
                )
    if refusal:
        raise _refuse(actor, user, DEACTIVATE_USER, permission, refusal)
    given.refresh_from_db(fields=["is_active"])


def reactivate_user(user, *, actor) -> None:
    """The user may sign in again (with the password they had; their old API tokens stay revoked)."""
    permission = "aiconsole.users.update"
    _require_platform_admin(actor, permission, user_name(user), REACTIVATE_USER)
    with transaction.atomic():
        if get_user_model().objects.filter(pk=user.pk, is_active=False).update(is_active=True):
            audit.record(
                actor=actor,
                project=None,
                method=REACTIVATE_USER,
                resource_name=user_name(user),
                permission=permission,
                request={"name": user_name(user)},
            )
    user.refresh_from_db(fields=["is_active"])


def set_platform_admin(user, admin: bool, *, actor) -> None:
    """Make a user a platform admin (superuser: roles/ml.admin everywhere) or take it away; the
    last active platform admin keeps it."""
    permission = "aiconsole.users.update"
    _require_platform_admin(actor, permission, user_name(user), SET_PLATFORM_ADMIN)
    refusal, given = None, user
    with transaction.atomic():
        user, others = _lock(user)
        if user.is_superuser == admin:
            return
        if not admin and user.is_active and not others:
            refusal = (
                f"{user.get_username()} is the last active platform admin: make another user a platform admin first."
            )
        else:
            user.is_superuser = user.is_staff = admin
            user.save(update_fields=["is_superuser", "is_staff"])
            audit.record(
                actor=actor,
                project=None,
                method=SET_PLATFORM_ADMIN,
                resource_name=user_name(user),
                permission=permission,
                request={"name": user_name(user), "platformAdmin": admin},
            )
    if refusal:
        raise _refuse(actor, user, SET_PLATFORM_ADMIN, permission, refusal)
    given.refresh_from_db(fields=["is_superuser", "is_staff"])
