"""Requests the API cannot take get the v1 error envelope: unknown paths, malformed JSON, oversized bodies."""

from __future__ import annotations

import json

from aiconsole.tokens import create_token
from jobs.models import Job


def test_unknown_api_paths_answer_in_the_error_envelope(api):
    status, body = api("GET", "/v1/projects/project-a/widgets")
    assert status == 404 and body["error"]["status"] == "NOT_FOUND"


def test_malformed_json_is_an_invalid_argument(api, project):
    status, body = api("POST", "/v1/projects/project-a/jobs", b"{not json", content_type="application/json")
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["message"].startswith("Invalid JSON payload received.")


def test_an_oversized_body_is_refused_and_creates_nothing(api, project, settings):
    padding = "x" * (settings.DATA_UPLOAD_MAX_MEMORY_SIZE + 1)
    status, body = api("POST", "/v1/projects/project-a/jobs", {"jobId": "huge", "labels": {"a": padding}})
    assert status == 413 and body["error"]["message"] == "Request payload size exceeds the limit."
    assert not Job.objects.exists()


def test_a_post_to_an_unknown_api_path_gets_the_json_404_not_a_csrf_page(client, project, admin):
    _, raw = create_token(admin)
    response = client.post(
        "/v1/projects/project-a/jobs/a%3Ab:setIamPolicy",
        data="{}",
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 404 and response.json()["error"]["status"] == "NOT_FOUND"


def _many_unknown_names(count: int) -> dict:
    return {f"unknownName{n}": 0 for n in range(count)}


def test_a_body_with_thousands_of_problems_answers_the_first_hundred_and_counts_the_rest(api, project):
    # A 9 MB body of unknown names was answered with 180 MB of violations, built in the web process.
    body = {"jobId": "many", "trainingInput": {"region": "us-central1", **_many_unknown_names(20_000)}}
    status, answer = api("POST", "/v1/projects/project-a/jobs", body)
    assert status == 400 and len(json.dumps(answer)) < 100_000
    error = answer["error"]
    violations = error["details"][0]["fieldViolations"]
    assert len(violations) == 100
    assert 'Unknown name "unknownName0"' in violations[0]["description"]
    assert violations[-1] == {"field": "", "description": "… and 19901 more problems, not listed: the first 99 are."}
    assert error["message"].endswith("\n… and 19901 more problems, not listed: the first 99 are.")
    assert not Job.objects.exists()


def test_a_vertex_body_with_thousands_of_problems_answers_the_first_hundred(api, project):
    body = {"displayName": "many", "jobSpec": {"workerPoolSpecs": [{}]}, **_many_unknown_names(20_000)}
    status, answer = api("POST", "/v1/projects/project-a/locations/us-central1/customJobs", body)
    violations = answer["error"]["details"][0]["fieldViolations"]
    assert status == 400 and len(violations) == 100
    assert violations[0]["field"] == "custom_job" and violations[-1]["description"].startswith("… and 19901 more")


def test_an_unknown_name_of_a_megabyte_is_not_repeated_whole(api, project):
    name = "n" * 1_000_000
    for path, body in [
        ("/v1/projects/project-a/jobs", {"jobId": "long", name: 1}),
        ("/v1/projects/project-a/locations/us-central1/customJobs", {"displayName": "long", name: 1}),
        ("/v1/projects/project-a/models", {"name": "long", name: 1}),
    ]:
        status, answer = api("POST", path, body)
        assert status == 400 and len(json.dumps(answer)) < 10_000, path
        assert f'Unknown name "{"n" * 200}…"' in answer["error"]["message"], path
