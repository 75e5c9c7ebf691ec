"""Fuzz the REST API against its own OpenAPI description (schemathesis).

Every generated request, valid or not, must get an answer the description allows: never a 5xx,
a documented status code, JSON of the documented shape. The requests go over HTTP to the ASGI
application ``aiconsole up`` serves (uvicorn, in a thread of this process), its front included:
online prediction's ``:predict`` data plane is fuzzed too, not only Django's views.

Schemathesis first sends each operation its boundary cases (its coverage phase, a request per
boundary and per wrong type of every field), then 25 random requests. The fast lane's Hypothesis
profile (``fast-lane``, tests/conftest.py) sends only 10 random ones; the full suite sends both.
"""

from __future__ import annotations

import threading

import hypothesis
import pytest
import schemathesis
import uvicorn
from hypothesis import HealthCheck, Phase, settings

from aiconsole.openapi import build_document
from bench.support.waiting import wait_for
from console.urls import API_DESCRIPTIONS
from jobs.executor.replicas import free_port

schema = schemathesis.openapi.from_dict(build_document(*API_DESCRIPTIONS))
# Random requests per operation: 25, or fewer where the loaded profile says so (the fast lane's 10).
RANDOM_REQUESTS = min(25, hypothesis.settings.default.max_examples)
if Phase.explicit not in hypothesis.settings.default.phases:
    # A profile without explicit examples (the fast lane's) would never send the boundary cases:
    # schemathesis need not build them, some 4,600 of them, as each worker collects the tests.
    schema.config.phases.coverage.enabled = False
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.specs.openapi.checks.status_code_conformance,
    schemathesis.specs.openapi.checks.content_type_conformance,
    schemathesis.specs.openapi.checks.response_schema_conformance,
]
FRAMING_HEADERS = {"transfer-encoding", "content-length", "connection", "host", "upgrade"}


@pytest.fixture
def token(admin):
    from aiconsole.tokens import create_token

    return create_token(admin)[1]


@pytest.fixture(scope="module")
def served():
    """The console's ASGI application (console.asgi) behind uvicorn, as ``aiconsole up`` runs it."""
    from console.asgi import application

    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(application, host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True, name="fuzzed-console")
    thread.start()
    wait_for(lambda: server.started, 60, message="uvicorn to listen")
    yield f"http://127.0.0.1:{port}"
    server.should_exit = True
    thread.join(30)


@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(max_examples=RANDOM_REQUESTS, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_answers_every_request_as_documented(case, token, project, served):
    if "projectsId" in (case.path_parameters or {}):
        case.path_parameters["projectsId"] = project.project_id
    # The HTTP server, not the API, interprets the message's framing: a generated Transfer-Encoding
    # of random words is refused by uvicorn before the application sees it, in plain text.
    headers = {k: v for k, v in (case.headers or {}).items() if k.lower() not in FRAMING_HEADERS}
    case.headers = {**headers, "Authorization": f"Bearer {token}"}
    response = case.call(base_url=served, headers={"Host": "127.0.0.1"})
    case.validate_response(response, checks=CHECKS)
