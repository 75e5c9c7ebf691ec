"""An ASGI front for online prediction: bearer-token ``POST …:predict`` calls are answered before
Django's request machinery; every other request goes to the wrapped application untouched.

Why: under ASGI, Django spends more on each request's machinery (a thread per request, the
middleware chain, a database connection) than a prediction of a small model costs, and a client
sending hundreds of one-instance requests a second pays that every time. This front calls, earlier,
the same code the ``predict`` view calls for a bearer-token call: ``tokens.authenticate_bearer``,
then ``api.prediction_answer`` (the services: ``iam`` permission check, Data Access audit entry,
request logging; the same answers and error envelopes), with the same body limit. The request's
scope (audit context, IAM cache) and Django's Host check and security headers come from
``aiconsole.front`` (``front_call``, ``front_headers``). A Host outside ALLOWED_HOSTS and
anything unusual go to Django. It is online prediction's data plane, the one path beside Django.

Mounted in ``console/asgi.py``: ``"http": PredictFront(django_application)``.
"""

from __future__ import annotations

import re

from aiconsole.front import FrontPool, front_call, front_headers
from aiconsole.middleware import scope_context, scope_header
from aiconsole.tokens import authenticate_bearer
from models_registry import api, conf
from models_registry.vertex import api as vertex_api

# No NUL in a name: such a path goes on to Django, which refuses it (aiconsole.middleware).
PREDICT_PATH = re.compile(r"^/v1/projects/([^/:\x00]+)/models/([^/:\x00]+)(?:/versions/([^/:\x00]+))?:predict$")
# Vertex AI's endpoints (models_registry.vertex): project, location, endpoint, predict or rawPredict.
ENDPOINT_PATH = re.compile(
    r"^/v1/projects/([^/:\x00]+)/locations/([^/:\x00]+)/endpoints/([0-9]+):(predict|rawPredict)$"
)
POOL = FrontPool("predict", threads=8)  # mostly waiting on a serving process


class PredictFront:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "POST":
            match = PREDICT_PATH.match(scope["path"]) or ENDPOINT_PATH.match(scope["path"])
            authorization = scope_header(scope, b"authorization") if match else ""
            bearer = match and authorization[:7].lower() == "bearer "
            django_headers = front_headers(scope) if bearer else None  # None: Django answers
            if django_headers is not None:
                return await self._predict(scope, receive, send, match.groups(), authorization[7:], django_headers)
        return await self.app(scope, receive, send)

    async def _predict(self, scope, receive, send, names, token: str, django_headers: list) -> None:
        limit = conf.max_request_bytes()
        declared = scope_header(scope, b"content-length")
        body, size = [], 0
        fits = not (declared.isdigit() and int(declared) > limit)
        while fits:
            message = await receive()
            if message["type"] == "http.disconnect":
                return
            chunk = message.get("body", b"")
            size += len(chunk)
            fits = size <= limit
            body.append(chunk)
            if not message.get("more_body"):
                break
        context = scope_context(scope)
        if fits:
            answer = await front_call(POOL, context, _answer, token, b"".join(body), names)
        else:
            answer = api.too_large()
        headers = [
            (b"content-type", b"application/json"),
            (b"content-length", str(len(answer.body)).encode()),
            (b"x-request-id", context.request_id.encode()),
            *django_headers,
        ]
        headers += [(name.lower().encode(), value.encode()) for name, value in answer.headers.items()]
        await send({"type": "http.response.start", "status": answer.status, "headers": headers})
        await send({"type": "http.response.body", "body": answer.body})


def _answer(token: str, body: bytes, names: tuple):
    """The view's work for one call, in a thread of this front's pool (sync: database, sockets)."""

    try:
        user = authenticate_bearer(token)
        if user is None:
            return api.error_answer(401, "UNAUTHENTICATED", api.BAD_TOKEN)
        if len(names) == 4:  # a Vertex AI endpoint
            project_id, location, endpoint_id, verb = names
            return vertex_api.endpoint_answer(user, body, project_id, location, endpoint_id, raw=verb == "rawPredict")
        project_id, model, version = names
        return api.prediction_answer(user, body, project_id, model, version)
    except Exception:
        import logging

        logging.getLogger("aiconsole.models").exception("Online prediction failed")
        return api.error_answer(500, "INTERNAL", "Internal error while predicting.")
