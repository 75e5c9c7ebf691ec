"""Models.list and versions.list take the jobs filter grammar over their own
fields; deep nesting there is a 400 INVALID_ARGUMENT naming the rule, never a 500."""

from __future__ import annotations

from urllib.parse import urlencode

import pytest

from jobs.filters import MAX_FILTER_DEPTH
from models_registry import services
from tests.helpers.identity import bearer

RULE = f"parentheses and NOT nest more than {MAX_FILTER_DEPTH} levels deep"
LISTS = {
    "models.list": ("/v1/projects/project-a/models", "name:census*"),
    "versions.list": ("/v1/projects/project-a/models/census/versions", "name:v*"),
}


@pytest.fixture
def model(project, admin):
    return services.create_model(project, {"name": "census"}, actor=admin)


@pytest.mark.parametrize(("path", "term"), LISTS.values(), ids=LISTS.keys())
@pytest.mark.parametrize("shape", ["parentheses", "NOT"])
def test_a_deep_filter_gets_the_invalid_argument_envelope(client, model, admin, path, term, shape):
    text = "(" * 300 + term + ")" * 300 if shape == "parentheses" else "NOT " * 400 + term
    answer = client.get(f"{path}?{urlencode({'filter': text})}", **bearer(admin))
    assert answer.status_code == 400, answer.content[:300]
    error = answer.json()["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert RULE in error["message"]
    assert error["details"][0]["fieldViolations"][0]["field"] == "filter"


@pytest.mark.parametrize(("path", "term"), LISTS.values(), ids=LISTS.keys())
def test_a_filter_nested_within_the_bound_still_answers(client, model, admin, path, term):
    depth = MAX_FILTER_DEPTH - 1  # the filter itself is the first level
    answer = client.get(f"{path}?{urlencode({'filter': '(' * depth + term + ')' * depth})}", **bearer(admin))
    assert answer.status_code == 200, answer.content[:300]
