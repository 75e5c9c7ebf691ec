"""ASGI entry point: HTTP through Django, WebSockets through Channels (with auth and origin checks)."""

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

import django  # noqa: E402
from asgiref.sync import sync_to_async  # noqa: E402
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.core.handlers.asgi import ASGIHandler  # noqa: E402


class ConsoleASGIHandler(ASGIHandler):
    """Django's ASGI handler, its middleware chain and view entered in one step from the event loop.

    Every middleware in the stack runs synchronously, and nearly every view does. Django's own
    handler builds the chain for async use: it leaves the event loop for the outer middleware, comes
    back to it for the innermost handler, and leaves again for the view, three hand-overs between
    threads per request. Built synchronously, the chain is one call on the request's own thread;
    an async view (TensorBoard's proxy, the logs long-poll) is run on the loop from there, as it
    was from inside the sync middleware before. Measured on jobs.list in BENCHMARKS.md.
    """

    def load_middleware(self, is_async=False):
        super().load_middleware(is_async=False)  # the chain built for synchronous calls

    async def get_response_async(self, request):
        """The whole synchronous request path (middleware, view, error logging) in one hand-over
        to the request's thread: Django's ``get_response``, as a WSGI server would call it."""
        return await sync_to_async(self.get_response, thread_sensitive=True)(request)


django.setup(set_prefix=False)
django_application = ConsoleASGIHandler()

from aiconsole.proxies import TrustedProxyMiddleware  # noqa: E402
from console.routing import websocket_urlpatterns  # noqa: E402
from models_registry.asgi import PredictFront  # noqa: E402

# Behind a trusted reverse proxy, everything below sees the client's address (aiconsole/proxies.py).
application = TrustedProxyMiddleware(
    ProtocolTypeRouter(
        {
            # Online prediction's data plane: bearer-token :predict calls are answered before Django's
            # per-request machinery, with the same services and checks (models_registry/asgi.py);
            # everything else, the whole control plane, goes to Django.
            "http": PredictFront(django_application),
            "websocket": AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns))),
        }
    )
)

# Once, when the application is built (``aiconsole up`` imports this module before it serves):
# everything loaded so far (Django, the apps, the libraries) lives as long as the process, and
# leaving it out of the collector's full passes keeps those passes from pausing requests for tens
# of milliseconds at a time (the predict benchmark's p99). Objects made later are collected as
# usual. Here rather than in a lifespan handler because ``aiconsole up`` runs uvicorn with
# ``lifespan="off"``; a test building a front no longer freezes its process.
gc.freeze()
