"""API tokens: creation, revocation (audited services) and the DRF bearer authentication.

Audit method names: ``aiconsole.TokenService.CreateToken`` and ``aiconsole.TokenService.RevokeToken``
(Admin Activity, server-wide: shown to platform admins). The resource is
``users/USERNAME/tokens/ID``; the raw key is never recorded, only its first characters.
"""

from datetime import timedelta

from django.db import transaction
from django.db.models import Q
from django.utils import timezone
from rest_framework import authentication, exceptions

from aiconsole import audit, iam, service_keys
from aiconsole.models import ApiToken, hash_token

TOKEN_SERVICE = "aiconsole.TokenService"


def _may_manage(actor, user) -> bool:
    return actor is iam.SYSTEM or iam.is_platform_admin(actor) or getattr(actor, "pk", None) == user.pk


def _token_name(token: ApiToken) -> str:
    return f"users/{token.user.get_username()}/tokens/{token.pk}"


def create_token(user, *, name: str = "", actor=iam.SYSTEM) -> tuple[ApiToken, str]:
    """Create a token and return it with the raw key, which is never stored or shown again.

    ``actor`` is the user themself, a platform admin, or the system principal (server-side
    ``aiconsole token create``, the default).
    """
    method = f"{TOKEN_SERVICE}.CreateToken"
    if not _may_manage(actor, user):
        audit.record(
            actor=actor,
            project=None,
            method=method,
            resource_name=f"users/{user.get_username()}",
            permission="aiconsole.tokens.create",
            granted=False,
            status_code=audit.CODE_PERMISSION_DENIED,
            status_message="Only the user or a platform admin may create the user's tokens.",
        )
        raise iam.PermissionDenied("aiconsole.tokens.create", f"users/{user.get_username()}")
    raw = ApiToken.new_raw_key()
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, name=name[:100], key_hash=hash_token(raw), hint=raw[:12])
        audit.record(
            actor=actor,
            project=None,
            method=method,
            resource_name=_token_name(token),
            permission="aiconsole.tokens.create",
            request={"parent": f"users/{user.get_username()}", "displayName": token.name},
            response={"name": _token_name(token), "hint": token.hint},
        )
    return token, raw


def revoke_token(token: ApiToken, *, actor=iam.SYSTEM) -> None:
    """Revoke a token (once; revoking it again changes and records nothing)."""
    method = f"{TOKEN_SERVICE}.RevokeToken"
    if not _may_manage(actor, token.user):
        audit.record(
            actor=actor,
            project=None,
            method=method,
            resource_name=_token_name(token),
            permission="aiconsole.tokens.revoke",
            granted=False,
            status_code=audit.CODE_PERMISSION_DENIED,
            status_message="Only the user or a platform admin may revoke the user's tokens.",
        )
        raise iam.PermissionDenied("aiconsole.tokens.revoke", _token_name(token))
    with transaction.atomic():
        updated = ApiToken.objects.filter(pk=token.pk, revoked=None).update(revoked=timezone.now())
        if updated:
            audit.record(
                actor=actor,
                project=None,
                method=method,
                resource_name=_token_name(token),
                permission="aiconsole.tokens.revoke",
                request={"name": _token_name(token)},
            )
    token.refresh_from_db(fields=["revoked"])


TOUCH_SECONDS = 60


def authenticate_bearer(raw: str):
    """The active user an unrevoked API token belongs to, or None: the one bearer authentication
    (DRF's ``BearerTokenAuthentication``, the prediction view and its ASGI front call it).

    One query (the token with its user). ``last_used`` is touched at most once a minute per
    token, decided on the stored value, so a busy script does not turn its reads into writes,
    whichever process or thread answers it.
    """
    raw = raw.strip()
    if not raw:
        return None
    if service_keys.looks_like_jwt(raw):  # signed with a service-account key file's key
        return service_keys.authenticate_jwt(raw)
    token = (
        ApiToken.objects.select_related("user")
        .only("id", "last_used", "user")
        .filter(key_hash=hash_token(raw), revoked=None)
        .filter(Q(expires=None) | Q(expires__gt=timezone.now()))
        .first()
    )
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    if token.last_used is None or (now - token.last_used).total_seconds() >= TOUCH_SECONDS:
        stale = Q(last_used=None) | Q(last_used__lt=now - timedelta(seconds=TOUCH_SECONDS))
        ApiToken.objects.filter(stale, pk=token.pk).update(last_used=now)
    return token.user


class BearerTokenAuthentication(authentication.BaseAuthentication):
    """``Authorization: Bearer <token>``, as the Google API client sends it."""

    def authenticate(self, request):
        header = authentication.get_authorization_header(request).decode("latin-1")
        scheme, _, raw = header.partition(" ")
        if scheme.lower() != "bearer":
            return None
        raw = raw.strip()
        if not raw:
            raise exceptions.AuthenticationFailed("Request had invalid authentication credentials.")
        user = authenticate_bearer(raw)
        if user is None:
            raise exceptions.AuthenticationFailed(
                "Request had invalid authentication credentials. Expected OAuth 2 access token, "
                "login cookie or other valid authentication credential."
            )
        return user, raw

    def authenticate_header(self, request):
        return 'Bearer realm="aiconsole"'
