"""jobs.patch (labels, etags, update masks, who may) and jobs.list's filter and page tokens."""

from __future__ import annotations

import pytest

from aiconsole.tokens import create_token
from jobs.models import Job
from tests.helpers.jobs import submit


def test_patch_changes_labels_and_the_etag(api, project, admin):
    job = submit(project, "labelled", admin)
    status, body = api("PATCH", "/v1/projects/project-a/jobs/labelled?updateMask=labels", {"labels": {"team": "ml"}})
    assert status == 200 and body["labels"] == {"team": "ml"}
    assert body["etag"] != job.etag
    assert Job.objects.get(pk=job.pk).labels == {"team": "ml"}


def test_patch_with_a_stale_etag_is_aborted(api, project, admin):
    job = submit(project, "stale", admin)
    api("PATCH", "/v1/projects/project-a/jobs/stale?updateMask=labels", {"labels": {"a": "1"}})
    status, body = api(
        "PATCH", "/v1/projects/project-a/jobs/stale?updateMask=labels,etag", {"labels": {"a": "2"}, "etag": job.etag}
    )
    assert status == 409 and body["error"]["status"] == "ABORTED"
    assert Job.objects.get(pk=job.pk).labels == {"a": "1"}


@pytest.mark.parametrize(
    "mask, labels, field",
    [
        ("", {"a": "1"}, "update_mask"),
        ("trainingInput", {"a": "1"}, "update_mask"),
        ("labels", {"Bad Key": "1"}, "job.labels"),
    ],
)
def test_patch_rejects_what_cannot_change(api, project, admin, mask, labels, field):
    submit(project, "fixed", admin)
    status, body = api("PATCH", f"/v1/projects/project-a/jobs/fixed?updateMask={mask}", {"labels": labels})
    assert status == 400 and body["error"]["status"] == "INVALID_ARGUMENT"
    assert body["error"]["details"][0]["fieldViolations"][0]["field"].startswith(field)


def test_viewer_cannot_patch(client, project, admin, viewer):
    submit(project, "mine", admin)
    _, raw = create_token(viewer)
    response = client.patch(
        "/v1/projects/project-a/jobs/mine?updateMask=labels",
        data='{"labels": {}}',
        content_type="application/json",
        HTTP_AUTHORIZATION=f"Bearer {raw}",
    )
    assert response.status_code == 403


def test_list_filter_is_applied_and_a_bad_filter_is_an_invalid_argument(api, project, admin):
    for job_id in ("census_1", "census_2", "rnn_1"):
        submit(project, job_id, admin)
    status, body = api("GET", "/v1/projects/project-a/jobs?filter=jobId:census*")
    assert status == 200 and [j["jobId"] for j in body["jobs"]] == ["census_2", "census_1"]
    status, body = api("GET", "/v1/projects/project-a/jobs?filter=owner:me")
    assert status == 400 and "unknown field 'owner'" in body["error"]["message"]


def test_a_tampered_page_token_is_rejected(api, project, admin):
    status, body = api("GET", "/v1/projects/project-a/jobs?pageToken=am9iOjE")
    assert status == 400 and body["error"]["message"] == "The page token is not valid."
