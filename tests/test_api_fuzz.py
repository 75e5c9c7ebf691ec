"""Fuzz the REST API against its own OpenAPI description (schemathesis).

Every generated request, valid or not, must get an answer the description allows: never a 5xx,
a documented status code, JSON of the documented shape.
"""

from __future__ import annotations

import pytest
import schemathesis
from django.core.wsgi import get_wsgi_application
from hypothesis import HealthCheck, settings

from aiconsole.openapi import build_document

schema = schemathesis.openapi.from_dict(build_document())
CHECKS = [
    schemathesis.checks.not_a_server_error,
    schemathesis.specs.openapi.checks.status_code_conformance,
    schemathesis.specs.openapi.checks.content_type_conformance,
    schemathesis.specs.openapi.checks.response_schema_conformance,
]


@pytest.fixture
def token(admin):
    from aiconsole.tokens import create_token

    return create_token(admin)[1]


@pytest.mark.django_db(transaction=True)
@schema.parametrize()
@settings(max_examples=25, deadline=None, suppress_health_check=list(HealthCheck))
def test_api_answers_every_request_as_documented(case, token, project):
    if "projectsId" in (case.path_parameters or {}):
        case.path_parameters["projectsId"] = project.project_id
    case.headers = {**(case.headers or {}), "Authorization": f"Bearer {token}"}
    response = case.call(app=get_wsgi_application())
    case.validate_response(response, checks=CHECKS)
