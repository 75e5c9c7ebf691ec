"""What Django's middleware does around a view, done for an ASGI front that answers before Django.

``models_registry/asgi.py`` answers bearer-token predictions before Django's per-request
machinery, with the same code the view calls. What Django's middleware does around a view is done
for it here, once: the Host check and the security headers (``front_headers``, Django's own
middleware deciding), and the request's scope (``front_call``: request context, IAM cache, a
thread of the front's own pool, connections tidied as after a request).
"""

import threading
from concurrent.futures import ThreadPoolExecutor

from aiconsole.middleware import RequestContext, request_scope

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
