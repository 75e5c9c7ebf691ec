"""Request context for the audit log: a request id, the caller's IP and user agent; the refusal of a
NUL character in a request's address; IAM's errors as 403 and 404. What this middleware does for an
ASGI front that answers before Django is in ``aiconsole.front``."""

import contextvars
import uuid
from contextlib import contextmanager
from dataclasses import dataclass

from django.core.exceptions import DisallowedHost
from django.http import HttpResponseBadRequest, JsonResponse


@dataclass(frozen=True)
class RequestContext:
    request_id: str = ""
    caller_ip: str = ""
    user_agent: str = ""
    origin: str = ""  # scheme://host[:port] the request came to: for links in answers (webAccessUris)


current_request: contextvars.ContextVar[RequestContext] = contextvars.ContextVar(
    "aiconsole_request",
    default=RequestContext(),  # noqa: B039 (a frozen dataclass)
)


def request_context(request) -> RequestContext:
    return RequestContext(
        request_id=request.headers.get("X-Request-Id", "")[:40] or uuid.uuid4().hex,
        caller_ip=request.META.get("REMOTE_ADDR", "") or "",
        user_agent=request.headers.get("User-Agent", "")[:500],
        origin=_origin(request),
    )


def _origin(request) -> str:
    try:
        return f"{request.scheme}://{request.get_host()}"
    except DisallowedHost:  # answered 400 elsewhere; no link from it
        return ""


def scope_header(scope, name: bytes) -> str:
    """One header of an ASGI scope (lower-case name), or ""."""
    for key, value in scope.get("headers", ()):
        if key == name:
            return value.decode("latin-1")
    return ""


def scope_context(scope) -> RequestContext:
    """``request_context`` for the ASGI front of online prediction, which answers before Django builds a request."""
    return RequestContext(
        request_id=scope_header(scope, b"x-request-id")[:40] or uuid.uuid4().hex,
        caller_ip=(scope.get("client") or ("", 0))[0] or "",
        user_agent=scope_header(scope, b"user-agent")[:500],
    )


@contextmanager
def request_scope(context: RequestContext):
    """What lives exactly as long as one request, on every path (Django's middleware below,
    the prediction front's ``front_call``): the audit log's request context and IAM's cached decisions."""
    # deferred: the CLI imports this module for RequestContext before Django is set up, and IAM loads the models
    from aiconsole import iam

    token = current_request.set(context)
    try:
        with iam.request_cache():
            yield
    finally:
        current_request.reset(token)


class RequestIdMiddleware:
    """Sets the request context that audit entries read, and echoes the id in a header."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        context = request_context(request)
        with request_scope(context):
            response = self.get_response(request)
        response["X-Request-Id"] = context.request_id
        return response


NUL_IN_ADDRESS = (
    "The request's address holds a NUL character (%00), which no project, name, id, filter or search may hold."
)


def holds_nul(path: str, query_string: str) -> bool:
    """A NUL in a request's (decoded) path or its (raw) query: refused by HTTP and WebSocket alike."""
    return "\x00" in path or "%00" in query_string


class NulRefusalMiddleware:
    """A NUL character in a request's path or query is refused (400) before any view reads it:
    PostgreSQL stores and compares no NUL in text, so one that reached a query was a 500 there. The
    REST API answers in Google's error envelope, pages in plain text."""

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        if not holds_nul(request.path_info, request.META.get("QUERY_STRING", "")):
            return self.get_response(request)
        if request.path_info.startswith(("/v1/", "/upload/v1/")):
            error = {"code": 400, "message": NUL_IN_ADDRESS, "status": "INVALID_ARGUMENT", "details": []}
            return JsonResponse({"error": error}, status=400)
        return HttpResponseBadRequest(NUL_IN_ADDRESS, content_type="text/plain; charset=utf-8")


class IamErrorMiddleware:
    """Console pages: NotFound becomes a 404 page and PermissionDenied a 403 page.

    The REST API renders the same refusals in Google's error envelope instead (see api_errors).
    """

    def __init__(self, get_response):
        self.get_response = get_response

    def __call__(self, request):
        return self.get_response(request)

    def process_exception(self, request, exception):
        from django.views import defaults

        # deferred: as in request_scope
        from aiconsole import iam

        if request.path.startswith("/v1/"):
            return None
        if isinstance(exception, iam.NotFound):
            return defaults.page_not_found(request, exception)
        if isinstance(exception, iam.PermissionDenied):
            # Which role would grant it and whom to ask, not only the raw permission name.
            from django.shortcuts import render

            help_ = iam.denial_help(exception.permission, exception.resource_name)
            return render(request, "403.html", {"exception": exception, **help_}, status=403)
        return None
