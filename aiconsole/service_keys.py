"""Default credentials: a Google-style service-account key file that ``google.auth.default()``
accepts unchanged, acting as one console user.

``aiconsole credentials create USER`` makes an RSA key pair, keeps the public half
(``ServiceAccountKey``) and writes the file (``type: service_account``, the private key, its
``private_key_id``, and a ``token_uri`` on this console). Then, with
``GOOGLE_APPLICATION_CREDENTIALS`` naming the file, Google's client libraries sign a JWT with the
key and either

- exchange it at ``token_uri`` (the OAuth 2 JWT-bearer grant, ``exchange``) for an access token of
  that user, valid for an hour; or
- send it as the bearer token itself (a "self-signed JWT", which the gRPC and REST clients of
  Google's newer libraries prefer, ``authenticate_jwt``).

Either way the request acts as the key's user, with that user's roles, through the same IAM and
audit as a console token. A revoked key, or a deactivated user, is refused at once; a JWT is
accepted only within its ``exp`` (at most an hour after its ``iat``) and signed by a known key.

Audit method names: ``aiconsole.TokenService.CreateServiceAccountKey``,
``aiconsole.TokenService.RevokeServiceAccountKey`` (Admin Activity, server-wide).
"""

from __future__ import annotations

import json
import secrets
import time
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from aiconsole import audit, iam
from aiconsole.models import ApiToken, ServiceAccountKey, hash_token

TOKEN_SERVICE = "aiconsole.TokenService"
GRANT_TYPE = "urn:ietf:params:oauth:grant-type:jwt-bearer"
ACCESS_SECONDS = 3600
MAX_JWT_SECONDS = 3600  # Google's own limit on an assertion's lifetime
CLOCK_SKEW_SECONDS = 60


class KeyRefused(Exception):
    """A JWT not signed by a known, unrevoked key of an active user, or outside its lifetime."""


def _key_name(key: ServiceAccountKey) -> str:
    return f"users/{key.user.get_username()}/serviceAccountKeys/{key.key_id}"


def client_email(user, project_id: str) -> str:
    """The account's name in the key file, in Google's shape (``USER@PROJECT.iam.gserviceaccount.com``)."""
    return f"{user.get_username()}@{project_id}.iam.gserviceaccount.com"


def create_key(user, *, project_id: str, token_uri: str, actor=iam.SYSTEM) -> dict:
    """A new key for ``user``: the key file's content (the only copy of the private key)."""
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    if not (actor is iam.SYSTEM or iam.is_platform_admin(actor) or getattr(actor, "pk", None) == user.pk):
        raise iam.PermissionDenied("aiconsole.serviceAccountKeys.create", f"users/{user.get_username()}")
    private = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    private_pem = private.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    ).decode()
    public_pem = (
        private.public_key()
        .public_bytes(serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo)
        .decode()
    )
    with transaction.atomic():
        key = ServiceAccountKey.objects.create(user=user, key_id=secrets.token_hex(20), public_key=public_pem)
        audit.record(
            actor=actor,
            project=None,
            method=f"{TOKEN_SERVICE}.CreateServiceAccountKey",
            resource_name=_key_name(key),
            permission="aiconsole.serviceAccountKeys.create",
            request={"parent": f"users/{user.get_username()}", "tokenUri": token_uri},
            response={"name": _key_name(key)},
        )
    return {
        "type": "service_account",
        "project_id": project_id,
        "private_key_id": key.key_id,
        "private_key": private_pem,
        "client_email": client_email(user, project_id),
        "client_id": str(user.pk),
        "auth_uri": token_uri,
        "token_uri": token_uri,
        "universe_domain": "googleapis.com",
    }


def revoke_key(key: ServiceAccountKey, *, actor=iam.SYSTEM) -> None:
    """Revoke the key: JWTs it signs, and the access tokens it was exchanged for, stop at once."""
    if not (actor is iam.SYSTEM or iam.is_platform_admin(actor) or getattr(actor, "pk", None) == key.user_id):
        raise iam.PermissionDenied("aiconsole.serviceAccountKeys.delete", _key_name(key))
    now = timezone.now()
    with transaction.atomic():
        # The access tokens it was exchanged for stop with it.
        ApiToken.objects.filter(user=key.user_id, name=access_token_name(key), revoked=None).update(revoked=now)
        if ServiceAccountKey.objects.filter(pk=key.pk, revoked=None).update(revoked=now):
            audit.record(
                actor=actor,
                project=None,
                method=f"{TOKEN_SERVICE}.RevokeServiceAccountKey",
                resource_name=_key_name(key),
                permission="aiconsole.serviceAccountKeys.delete",
                request={"name": _key_name(key)},
            )


def verify(assertion: str, *, audience: list[str] | None = None) -> ServiceAccountKey:
    """The key that signed ``assertion`` (a JWT), once its signature, lifetime and (when given)
    audience hold; KeyRefused with the reason otherwise."""
    from google.auth import jwt

    try:
        header = jwt.decode_header(assertion)
    except (ValueError, TypeError) as error:
        raise KeyRefused(f"The assertion is not a JWT: {error}") from None
    key_id = header.get("kid")
    if header.get("alg") != "RS256" or not isinstance(key_id, str):
        raise KeyRefused("The assertion must be signed with RS256 and name its key (kid).")
    key = (
        ServiceAccountKey.objects.select_related("user").filter(key_id=key_id, revoked=None).first()
        if len(key_id) <= 40
        else None
    )
    if key is None or not key.user.is_active:
        raise KeyRefused("The assertion's key is unknown here, revoked, or its user is deactivated.")
    try:
        claims = jwt.decode(
            assertion,
            certs={key_id: key.public_key},
            audience=audience,
            clock_skew_in_seconds=CLOCK_SKEW_SECONDS,
        )
    except (ValueError, TypeError) as error:
        raise KeyRefused(f"The assertion does not verify: {error}") from None
    issued, expires = claims.get("iat"), claims.get("exp")
    if not isinstance(issued, int | float) or not isinstance(expires, int | float):
        raise KeyRefused("The assertion must carry iat and exp.")
    if expires - issued > MAX_JWT_SECONDS + CLOCK_SKEW_SECONDS or expires < time.time() - CLOCK_SKEW_SECONDS:
        raise KeyRefused("The assertion's lifetime is over, or longer than an hour.")
    now = timezone.now()
    if key.last_used is None or (now - key.last_used).total_seconds() >= 60:
        ServiceAccountKey.objects.filter(pk=key.pk).update(last_used=now)
    return key


# google-auth addresses every grant assertion to Google's token endpoint, whatever the file's
# token_uri says: both name this console's endpoint when posted here.
GOOGLE_TOKEN_URI = "https://oauth2.googleapis.com/token"


def exchange(assertion: str, *, token_uri: str) -> tuple[str, int]:
    """The JWT-bearer grant: an access token of the key's user (an hour), and its lifetime."""
    key = verify(assertion, audience=[token_uri, GOOGLE_TOKEN_URI])
    raw = ApiToken.new_raw_key()
    ApiToken.objects.create(
        user=key.user,
        name=access_token_name(key),
        key_hash=hash_token(raw),
        hint=raw[:12],
        expires=timezone.now() + timedelta(seconds=ACCESS_SECONDS),
    )
    ApiToken.objects.filter(user=key.user, expires__lt=timezone.now() - timedelta(days=1)).delete()
    return raw, ACCESS_SECONDS


def access_token_name(key: ServiceAccountKey) -> str:
    return f"access token of service-account key {key.key_id}"


def authenticate_jwt(raw: str):
    """A self-signed JWT sent as the bearer token: its key's user, or None."""
    try:
        return verify(raw).user
    except KeyRefused:
        return None


def looks_like_jwt(raw: str) -> bool:
    return raw.count(".") == 2 and raw.startswith("eyJ")


def key_file_text(content: dict) -> str:
    return json.dumps(content, indent=2) + "\n"
