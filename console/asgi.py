"""ASGI entry point: HTTP through Django, WebSockets through Channels (with auth and origin checks)."""

import gc
import os

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")

from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402
from django.core.asgi import get_asgi_application  # noqa: E402

django_application = get_asgi_application()

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
