"""An ASGI front for the most frequent read: ``GET /v1/projects/P/jobs`` with a bearer token.

Scripts and dashboards poll jobs.list; through Django's request machinery (a thread hop per
middleware, a database connection and four ORM queries compiled per request) one page costs
several milliseconds of the console's CPU. This front answers the plain case itself, earlier but
with the same code: ``tokens.authenticate_bearer``, ``iam.can``, the reads of ``jobs.readpath``
(on ``aiconsole.reads``' connections) and the same ``job_resource`` and page tokens as the view;
Django's Host check and security headers come from ``aiconsole.middleware.front_headers``:

- a bearer token of an active user, a project where the caller's *project-level* roles grant
  ``ml.jobs.list`` and ``ml.jobs.get`` (or a platform admin),
- no ``filter``, only ``pageSize`` / ``pageToken`` (and the client library's ``alt=json`` and
  ``prettyPrint``), both well formed,
- the project not writing Data Access audit logs.

Anything else (a missing or bad token, a job-level owner who sees only some jobs, a filter, a
bad page token, an unknown project, Data Access logging, a Host outside ALLOWED_HOSTS, plain
HTTP that SECURE_SSL_REDIRECT would redirect) is handed to Django untouched: a GET has no body,
so nothing is consumed, and every refusal keeps its one wording and audit path.
"""

from __future__ import annotations

import json
import re
from urllib.parse import parse_qsl

from aiconsole import iam, paging
from aiconsole.errors import InvalidArgument
from aiconsole.middleware import FrontPool, front_call, front_headers, scope_context, scope_header
from aiconsole.tokens import authenticate_bearer
from jobs import readpath
from jobs.resources import job_resource

LIST_PATH = re.compile(r"^/v1/projects/([^/:]+)/jobs$")
ALLOWED_PARAMS = {"pageSize", "pageToken", "alt", "prettyPrint", "filter"}
LIST_PERMISSIONS = ("ml.jobs.list", "ml.jobs.get")
POOL = FrontPool("jobs-list", threads=4)
_view_headers: list = []


def view_headers() -> list[tuple[bytes, bytes]]:
    """What the view itself puts on its answer beside the middleware's headers (``front_headers``):
    its content type and DRF's ``Allow``, read off the view the URL resolves to (never copied: the
    order of ``Allow`` even changes from process to process)."""
    if not _view_headers:
        from django.urls import resolve

        view = resolve("/v1/projects/p/jobs").func
        allowed = view.cls(**view.initkwargs).allowed_methods
        _view_headers.extend([(b"content-type", b"application/json"), (b"allow", ", ".join(allowed).encode())])
    return _view_headers


class JobsListFront:
    def __init__(self, app):
        self.app = app

    async def __call__(self, scope, receive, send):
        if scope["type"] == "http" and scope["method"] == "GET":
            match = LIST_PATH.match(scope["path"])
            authorization = scope_header(scope, b"authorization") if match else ""
            bearer = match and authorization[:7].lower() == "bearer "
            plain = bearer and not scope_header(scope, b"cookie")
            django_headers = front_headers(scope) if plain else None  # None: Django answers
            if django_headers is not None:
                params = parse_qsl(scope.get("query_string", b"").decode("latin-1"), keep_blank_values=True)
                context = scope_context(scope)
                body = await front_call(POOL, context, _list, authorization[7:], match.group(1), params)
                if body is not None:
                    length = (b"content-length", str(len(body)).encode())
                    headers = [*view_headers(), *django_headers, length,
                               (b"x-request-id", context.request_id.encode())]
                    await send({"type": "http.response.start", "status": 200, "headers": headers})
                    await send({"type": "http.response.body", "body": body})
                    return
        return await self.app(scope, receive, send)


def _list(token: str, project_id: str, params: list[tuple[str, str]]) -> bytes | None:
    """The page as the view would answer it, or None: "let Django answer this one"."""

    values = dict(params)
    if len(values) != len(params) or not set(values) <= ALLOWED_PARAMS or values.get("filter"):
        return None
    if values.get("alt", "json") != "json":
        return None
    try:
        size = paging.page_size(values.get("pageSize"))
        after = paging.decode_token("jobs", values.get("pageToken"))
    except InvalidArgument:
        return None
    if after is not None and not after.isdigit():
        return None
    return _page(token, project_id, size, int(after) if after is not None else None)


def _page(token: str, project_id: str, size: int, after: int | None) -> bytes | None:
    user = authenticate_bearer(token)
    if user is None:
        return None
    project = readpath.project(project_id)
    if project is None or project.data_access_logs:
        return None
    # Project-level grants of both: the view's ``list_jobs`` then scopes nothing away.
    if not all(iam.can(user, permission, project) for permission in LIST_PERMISSIONS):
        return None
    page = readpath.jobs_page(project, size + 1, after)
    next_token = paging.encode_token("jobs", page[size - 1].pk) if len(page) > size else None
    body: dict = {}
    if page:
        body["jobs"] = [job_resource(job) for job in page[:size]]
    if next_token:
        body["nextPageToken"] = next_token
    # As DRF's JSONRenderer writes it: compact, UTF-8, line and paragraph separators escaped.
    text = json.dumps(body, ensure_ascii=False, separators=(",", ":"))
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()
