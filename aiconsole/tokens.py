"""API tokens: creation, revocation and the DRF bearer authentication."""

from django.db import transaction
from django.utils import timezone
from rest_framework import authentication, exceptions

from aiconsole.models import ApiToken, hash_token


def create_token(user, *, name: str = "") -> tuple[ApiToken, str]:
    """Create a token and return it with the raw key, which is never stored or shown again."""
    raw = ApiToken.new_raw_key()
    with transaction.atomic():
        token = ApiToken.objects.create(user=user, name=name[:100], key_hash=hash_token(raw), hint=raw[:12])
    return token, raw


def revoke_token(token: ApiToken) -> None:
    if token.revoked is None:
        token.revoked = timezone.now()
        token.save(update_fields=["revoked"])


def user_for_token(raw: str):
    token = ApiToken.objects.active().select_related("user").filter(key_hash=hash_token(raw)).first()
    if token is None or not token.user.is_active:
        return None
    now = timezone.now()
    # Touch last_used at most once a minute: a busy script must not turn reads into writes.
    if token.last_used is None or (now - token.last_used).total_seconds() > 60:
        ApiToken.objects.filter(pk=token.pk).update(last_used=now)
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
        user = user_for_token(raw)
        if user is None:
            raise exceptions.AuthenticationFailed(
                "Request had invalid authentication credentials. Expected OAuth 2 access token, "
                "login cookie or other valid authentication credential."
            )
        return user, raw

    def authenticate_header(self, request):
        return 'Bearer realm="aiconsole"'
