"""The official google-api-python-client, unchanged, against a live server.

``discovery.build("ml", "v1")`` uses the discovery document shipped inside the client; the only
change a user makes is ``client_options={"api_endpoint": ...}`` and a token credential.
"""

from __future__ import annotations

import pytest
from google.auth.exceptions import RefreshError
from google.oauth2.credentials import Credentials
from googleapiclient import discovery
from googleapiclient.errors import HttpError

from aiconsole.tokens import create_token
from jobs.models import Job, JobState
from tests.helpers.jobs import PACKAGE, submit


@pytest.fixture
def ml(live_server, admin):
    _, raw = create_token(admin)
    return discovery.build(
        "ml",
        "v1",
        credentials=Credentials(token=raw),
        cache_discovery=False,
        client_options={"api_endpoint": live_server.url},
    )


def job_body(job_id: str) -> dict:
    return {
        "jobId": job_id,
        "labels": {"team": "ml"},
        "trainingInput": {
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-8",
            "workerType": "n1-standard-8",
            "workerCount": 2,
            "packageUris": [PACKAGE],
            "pythonModule": "trainer.task",
            "region": "us-central1",
            "runtimeVersion": "2.11",
            "pythonVersion": "3.7",
        },
    }


def test_create_get_and_cancel_a_job(ml, project):
    created = ml.projects().jobs().create(parent="projects/project-a", body=job_body("census_1")).execute()
    assert created["jobId"] == "census_1" and created["state"] == "QUEUED"
    assert created["trainingInput"]["workerCount"] == "2"  # int64 travels as a string

    fetched = ml.projects().jobs().get(name="projects/project-a/jobs/census_1").execute()
    assert fetched["etag"] == created["etag"] and fetched["labels"] == {"team": "ml"}

    assert ml.projects().jobs().cancel(name="projects/project-a/jobs/census_1", body={}).execute() == {}
    assert Job.objects.get(job_id="census_1").state == JobState.CANCELLED


def test_list_pages_with_list_next_and_filters(ml, project, admin):
    for index in range(25):
        submit(project, f"job_{index:02d}", admin)
    request = ml.projects().jobs().list(parent="projects/project-a", pageSize=10)
    seen = []
    while request is not None:
        response = request.execute()
        seen += [job["jobId"] for job in response.get("jobs", [])]
        request = ml.projects().jobs().list_next(request, response)
    assert len(seen) == 25 and seen[0] == "job_24"

    filtered = ml.projects().jobs().list(parent="projects/project-a", filter="jobId:job_1*").execute()
    assert sorted(j["jobId"] for j in filtered["jobs"]) == [f"job_1{i}" for i in range(10)]


def test_empty_list_is_an_empty_object(ml, project):
    assert ml.projects().jobs().list(parent="projects/project-a").execute() == {}


def test_patch_labels(ml, project, admin):
    submit(project, "labelled", admin)
    patched = (
        ml.projects()
        .jobs()
        .patch(name="projects/project-a/jobs/labelled", updateMask="labels", body={"labels": {"stage": "prod"}})
        .execute()
    )
    assert patched["labels"] == {"stage": "prod"}


def test_errors_arrive_as_http_errors_with_the_google_status(ml, project, admin):
    submit(project, "taken", admin)
    with pytest.raises(HttpError) as duplicate:
        ml.projects().jobs().create(parent="projects/project-a", body=job_body("taken")).execute()
    assert duplicate.value.resp.status == 409
    assert duplicate.value.error_details[0]["fieldViolations"][0]["field"] == "job.job_id"
    assert "A job with this id already exists." in duplicate.value.reason

    with pytest.raises(HttpError) as invalid:
        body = job_body("bad")
        body["trainingInput"]["masterType"] = "n1-standard-7"
        ml.projects().jobs().create(parent="projects/project-a", body=body).execute()
    assert invalid.value.resp.status == 400 and "master_type" in invalid.value.reason

    with pytest.raises(HttpError) as missing:
        ml.projects().jobs().get(name="projects/project-a/jobs/nope").execute()
    assert missing.value.resp.status == 404


def test_a_bad_token_is_unauthenticated(live_server, project):
    # The client's auth layer reacts to a 401 (and only to a 401) by refreshing the token, which a
    # bare token credential cannot do: that is what a user of a revoked token sees.
    client = discovery.build(
        "ml",
        "v1",
        credentials=Credentials(token="aic_not-a-real-token"),
        cache_discovery=False,
        client_options={"api_endpoint": live_server.url},
    )
    with pytest.raises(RefreshError):
        client.projects().jobs().list(parent="projects/project-a").execute()


def test_project_config_locations_and_operations(ml, project):
    config = ml.projects().getConfig(name="projects/project-a").execute()
    assert config["serviceAccountProject"] == str(project.project_number)

    locations = ml.projects().locations().list(parent="projects/project-a").execute()["locations"]
    assert len(locations) == 13
    region = ml.projects().locations().get(name="projects/project-a/locations/europe-west4").execute()
    assert any(c["type"] == "TRAINING" for c in region["capabilities"])

    assert ml.projects().operations().list(name="projects/project-a").execute() == {}
