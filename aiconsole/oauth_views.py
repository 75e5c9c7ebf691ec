"""The ``token_uri`` of the service-account key files ``aiconsole credentials create`` writes: the
OAuth 2 JWT-bearer grant (RFC 7523), as Google's token endpoint answers it, so that
``google.auth.default()`` gets an access token for the key's user (``aiconsole.service_keys``)."""

from __future__ import annotations

from django.http import JsonResponse
from django.views.decorators.csrf import csrf_exempt
from django.views.decorators.http import require_POST

from aiconsole import service_keys


def _refused(error: str, description: str, status: int = 400) -> JsonResponse:
    return JsonResponse({"error": error, "error_description": description}, status=status)


@csrf_exempt  # a client library's form post, authenticated by the signed assertion itself
@require_POST
def token(request):
    grant_type = request.POST.get("grant_type", "")
    assertion = request.POST.get("assertion", "")
    if grant_type != service_keys.GRANT_TYPE:
        return _refused(
            "unsupported_grant_type",
            f"grant_type must be {service_keys.GRANT_TYPE} (a service-account key's signed JWT); got {grant_type!r}.",
        )
    if not assertion or len(assertion) > 16384:
        return _refused("invalid_request", "assertion is required: the JWT the key file's private key signed.")
    try:
        raw, seconds = service_keys.exchange(assertion, token_uri=request.build_absolute_uri())
    except service_keys.KeyRefused as error:
        return _refused("invalid_grant", str(error))
    return JsonResponse({"access_token": raw, "expires_in": seconds, "token_type": "Bearer"})
