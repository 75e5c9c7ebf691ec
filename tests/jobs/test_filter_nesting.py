"""Deeply nested list filters are a 400 INVALID_ARGUMENT naming the rule, never
a stack overflow (an HTML 500); the console's own filter boxes take such text as plain text."""

from __future__ import annotations

from html import unescape
from urllib.parse import urlencode

import pytest

from jobs.filters import MAX_FILTER_DEPTH, FilterError, parse_filter
from jobs.models import Job
from tests.helpers.jobs import submit

NESTED = {
    "300 parentheses": "(" * 300 + "state=FAILED" + ")" * 300,
    "450 NOTs": "NOT " * 450 + "state=FAILED",
    "300 minus signs and parentheses": "-(" * 300 + "jobId:a" + ")" * 300,
    "parentheses unclosed": "(" * 1500,
}
RULE = f"parentheses and NOT nest more than {MAX_FILTER_DEPTH} levels deep"


@pytest.mark.parametrize("text", NESTED.values(), ids=NESTED.keys())
def test_deep_nesting_is_a_filter_error_naming_the_rule(text):
    with pytest.raises(FilterError, match=RULE):
        parse_filter(text)


def test_nesting_within_the_bound_still_filters(project, admin):
    submit(project, "census_1", admin)
    submit(project, "rnn_1", admin)
    depth = MAX_FILTER_DEPTH - 1  # the filter itself is the first level
    text = "(" * depth + "jobId:census*" + ")" * depth
    assert list(Job.objects.filter(parse_filter(text)).values_list("job_id", flat=True)) == ["census_1"]
    assert list(Job.objects.filter(parse_filter("NOT " * 3 + "jobId:census*")).values_list("job_id", flat=True)) == [
        "rnn_1"
    ]


@pytest.mark.parametrize("text", NESTED.values(), ids=NESTED.keys())
def test_jobs_list_answers_a_deep_filter_with_the_invalid_argument_envelope(api, project, admin, text):
    status, body = api("GET", "/v1/projects/project-a/jobs?" + urlencode({"filter": text}))
    assert status == 400, body
    error = body["error"]
    assert (error["code"], error["status"]) == (400, "INVALID_ARGUMENT")
    assert RULE in error["message"]
    assert error["details"][0]["fieldViolations"][0]["field"] == "filter"


HTML_FILTER_BOXES = {
    "jobs list search": ("/projects/project-a/jobs/", "q"),
    "jobs list label": ("/projects/project-a/jobs/", "label"),
    "job log text": ("/projects/project-a/jobs/boxed/", "text"),
    "audit log principal": ("/projects/project-a/audit/", "principal"),
}


@pytest.mark.parametrize(("path", "name"), HTML_FILTER_BOXES.values(), ids=HTML_FILTER_BOXES.keys())
def test_the_pages_filter_boxes_take_nested_parentheses_as_plain_text(client, project, admin, path, name):
    """No page parses the list-filter grammar: what is typed is matched as text, and shown back."""
    submit(project, "boxed", admin)
    client.force_login(admin)
    typed = "(" * 90 + "state=FAILED" + ")" * 90  # within the boxes' 200 characters
    answer = client.get(path, {name: typed})
    assert answer.status_code == 200
    assert typed in unescape(answer.content.decode())
