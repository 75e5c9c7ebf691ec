"""Google's error envelope for the REST API: {"error": {"code", "message", "status", "details"}}."""

from __future__ import annotations

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions
from rest_framework.response import Response

from aiconsole import iam
from aiconsole.errors import ServiceError

_DRF_STATUS = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    405: "UNIMPLEMENTED",
    409: "ABORTED",
    415: "INVALID_ARGUMENT",
    429: "RESOURCE_EXHAUSTED",
}


def error_response(code: int, status: str, message: str, details: list | None = None) -> Response:
    return Response(
        {"error": {"code": code, "message": message, "status": status, "details": details or []}}, status=code
    )


def exception_handler(exc, context):
    if isinstance(exc, ServiceError):
        return error_response(exc.http_status, exc.status, exc.message, exc.details())
    if isinstance(exc, iam.NotFound):
        return error_response(404, "NOT_FOUND", str(exc))
    if isinstance(exc, iam.PermissionDenied):
        return error_response(403, "PERMISSION_DENIED", str(exc))
    if isinstance(exc, exceptions.NotAuthenticated | exceptions.AuthenticationFailed):
        message = (
            str(exc.detail)
            if isinstance(exc, exceptions.AuthenticationFailed)
            else (
                "Request is missing required authentication credential. Expected OAuth 2 access token, login "
                "cookie or other valid authentication credential."
            )
        )
        response = error_response(401, "UNAUTHENTICATED", message)
        response["WWW-Authenticate"] = 'Bearer realm="aiconsole"'
        return response
    if isinstance(exc, RequestDataTooBig):
        return error_response(413, "INVALID_ARGUMENT", "Request payload size exceeds the limit.")
    if isinstance(exc, exceptions.ParseError):
        return error_response(400, "INVALID_ARGUMENT", f"Invalid JSON payload received. {exc.detail}")
    if isinstance(exc, exceptions.APIException):
        code = exc.status_code
        return error_response(code, _DRF_STATUS.get(code, "UNKNOWN"), str(exc.detail))
    return None
