"""Request context for the audit log: a request id, the caller's IP and user agent; the refusal of a
NUL character in a request's address; and what Django's middleware does to a request, for the ASGI
front of online prediction, which answers before Django."""

import contextvars
import threading
import uuid
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass

from django.http import HttpResponseBadRequest, JsonResponse


@dataclass(frozen=True)
class RequestContext:
    request_id: str = ""
    caller_ip: str = ""
    user_agent: str = ""


current_request: contextvars.ContextVar[RequestContext] = contextvars.ContextVar(
    "aiconsole_request",
    default=RequestContext(),  # noqa: B039 (a frozen dataclass)
)


def request_context(request) -> RequestContext:
    return RequestContext(
        request_id=request.headers.get("X-Request-Id", "")[:40] or uuid.uuid4().hex,
        caller_ip=request.META.get("REMOTE_ADDR", "") or "",
        user_agent=request.headers.get("User-Agent", "")[:500],
    )


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


# --- the ASGI front of online prediction ---------------------------------------------------------
#
# ``models_registry/asgi.py`` answers bearer-token predictions before Django's per-request
# machinery, with the same code the view calls. What Django's middleware does around a view is
# done for it here, once: the Host check and the security headers (``front_headers``,
# Django's own middleware deciding), and the request's scope (``front_call``: request context,
# IAM cache, a thread of the front's own pool, connections tidied as after a request).

_front_state: dict = {}


class FrontPool:
    """A front's threads, made on its first request and sized for its work: a prediction mostly
    waits on its serving process, so several of them overlap."""

    def __init__(self, name: str, threads: int):
        self.name, self.threads = name, threads
        self._executor: ThreadPoolExecutor | None = None
        self._lock = threading.Lock()

    def executor(self) -> ThreadPoolExecutor:
        if self._executor is None:
            with self._lock:
                if self._executor is None:
                    self._executor = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix=self.name)
        return self._executor


def _in_request(context: RequestContext, work, args):
    from django.db import close_old_connections

    try:
        with request_scope(context):
            return work(*args)
    finally:
        close_old_connections()  # a write (audit, last_used) used Django's connection: as after a request


async def front_call(pool: FrontPool, context: RequestContext, work, *args):
    """``work(*args)`` in a thread of the front's pool, inside the request's scope."""
    import asyncio

    loop = asyncio.get_running_loop()
    return await loop.run_in_executor(pool.executor(), _in_request, context, work, args)


def front_headers(scope) -> list[tuple[bytes, bytes]] | None:
    """Django's request and response middleware for a request an ASGI front answers itself
    (``models_registry/asgi.py``), so that both paths answer alike.

    None means Django would answer the request itself: a Host outside ALLOWED_HOSTS (400), plain
    HTTP under SECURE_SSL_REDIRECT (a redirect); the front then hands it on untouched. Otherwise
    the headers SecurityMiddleware and XFrameOptionsMiddleware add to every answer. Django's own
    code decides, on the request Django would build; the headers depend only on the settings and
    on whether the request came over HTTPS, so they are worked out once for each.
    """
    import io

    from django.core.exceptions import DisallowedHost
    from django.core.handlers.asgi import ASGIRequest

    request = ASGIRequest(scope, io.BytesIO())
    try:
        request.get_host()
    except DisallowedHost:
        return None
    if not _front_state:
        _front_prepare()
    if _front_state["security"].process_request(request) is not None:
        return None
    secure = request.is_secure()
    if secure not in _front_state:
        _front_state[secure] = _added_headers(request)
    return _front_state[secure]


def _front_prepare() -> None:
    from django.core.signals import setting_changed
    from django.middleware.security import SecurityMiddleware

    _front_state["security"] = SecurityMiddleware(lambda request: None)
    setting_changed.connect(_front_reset, dispatch_uid="aiconsole-front-headers")


def _front_reset(**kwargs) -> None:
    _front_state.clear()


def _added_headers(request) -> list[tuple[bytes, bytes]]:
    from django.http import HttpResponse
    from django.middleware.clickjacking import XFrameOptionsMiddleware

    response, before = HttpResponse(), set(HttpResponse().headers)
    _front_state["security"].process_response(request, response)
    XFrameOptionsMiddleware(lambda request: None).process_response(request, response)
    return [
        (name.lower().encode("latin-1"), value.encode("latin-1"))
        for name, value in response.headers.items()
        if name not in before
    ]
