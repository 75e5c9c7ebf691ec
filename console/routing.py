"""WebSocket routes, each behind a same-origin check.

``AllowedHostsOriginValidator`` (asgi.py) only asks whether the Origin's host is one of
ALLOWED_HOSTS, ignoring the port: with ``localhost`` allowed, any page served from any port of
the same machine could open a socket with the user's cookies. Here the Origin must be the very
host and port the socket was opened on (the ``Host`` header), or one of CSRF_TRUSTED_ORIGINS for
deployments behind a proxy that rewrites ``Host``: the same rule Django's CSRF check applies.
"""

from __future__ import annotations

from urllib.parse import urlsplit

from channels.security.websocket import WebsocketDenier
from django.conf import settings
from django.urls import re_path

from jobs.logs.consumers import JobLogConsumer
from jobs.webaccess.consumer import ShellConsumer


def _header(scope, name: bytes) -> str:
    for key, value in scope.get("headers", []):
        if key == name:
            return value.decode("latin-1")
    return ""


_DEFAULT_PORTS = {"http": 80, "https": 443}


def _address(scheme: str, netloc: str) -> tuple[str, int] | None:
    try:
        parts = urlsplit(f"{scheme}://{netloc}")
        return (parts.hostname or "", parts.port or _DEFAULT_PORTS[scheme]) if parts.hostname else None
    except ValueError:
        return None


def same_origin(scope) -> bool:
    origin = _header(scope, b"origin").rstrip("/")
    if not origin:
        return False
    if origin in {o.rstrip("/") for o in settings.CSRF_TRUSTED_ORIGINS}:
        return True
    scheme, _, netloc = origin.partition("://")
    if scheme not in _DEFAULT_PORTS:
        return False
    mine = _address(scheme, _header(scope, b"host"))
    return mine is not None and _address(scheme, netloc) == mine


class SameOriginOnly:
    """Refuse (HTTP 403 on the handshake) a socket opened from another site's page."""

    def __init__(self, application):
        self.application = application

    async def __call__(self, scope, receive, send):
        if same_origin(scope):
            return await self.application(scope, receive, send)
        return await WebsocketDenier()(scope, receive, send)


websocket_urlpatterns: list = [
    re_path(
        r"^ws/projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/]+)/logs/$", SameOriginOnly(JobLogConsumer.as_asgi())
    ),
    re_path(
        r"^ws/projects/(?P<project_id>[^/]+)/jobs/(?P<job_id>[^/]+)/shell/(?P<label>[a-z]+-replica-[0-9]+)/$",
        SameOriginOnly(ShellConsumer.as_asgi()),
    ),
]
