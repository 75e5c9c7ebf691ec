"""Requests the API cannot take get the v1 error envelope: unknown paths, malformed JSON, oversized bodies."""

from __future__ import annotations

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
