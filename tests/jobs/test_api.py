"""The ml v1 REST API for jobs, driven as the Google API client drives it: JSON and a Bearer token."""

from __future__ import annotations

import base64
import re

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from aiconsole.tokens import create_token, revoke_token
from jobs import services
from jobs.models import Job, JobState

PACKAGE = "gs://trainer-bucket/trainer-0.1.tar.gz"
RFC3339 = re.compile(r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$")
JOBS_URL = "/v1/projects/project-a/jobs"


def body(job_id: str, **training_input) -> dict:
    return {
        "jobId": job_id,
        "trainingInput": {
            "scaleTier": "BASIC",
            "packageUris": [PACKAGE],
            "pythonModule": "trainer.task",
            "region": "us-central1",
            "runtimeVersion": "2.11",
            "pythonVersion": "3.7",
            **training_input,
        },
    }


class Api:
    """A test client that sends a Bearer token and JSON, as googleapiclient does."""

    def __init__(self, client, raw_token: str | None):
        self.client = client
        self.headers = {"HTTP_AUTHORIZATION": f"Bearer {raw_token}"} if raw_token is not None else {}

    def get(self, path: str, **params):
        return self.client.get(path, params, **self.headers)

    def post(self, path: str, data=None):
        return self.client.post(path, data if data is not None else {}, content_type="application/json", **self.headers)


def api_for(client, user) -> Api:
    _, raw = create_token(user)
    return Api(client, raw)


@pytest.fixture
def api(client, admin):
    return api_for(client, admin)


def assert_error(response, code: int, status: str) -> dict:
    assert response.status_code == code, response.content
    error = response.json()["error"]
    assert (error["code"], error["status"]) == (code, status)
    assert error["message"]
    return error


def violation_fields(error: dict) -> list[str]:
    (detail,) = error["details"]
    assert detail["@type"] == "type.googleapis.com/google.rpc.BadRequest"
    return [v["field"] for v in detail["fieldViolations"]]


# --- create -------------------------------------------------------------------------------------


def test_create_returns_the_job_in_wire_shape(api, project):
    request = body(
        "train_1",
        scaleTier="CUSTOM",
        masterType="n1-standard-4",
        workerType="n1-standard-4",
        workerCount=2,
        args=["--epochs", "3"],
    )
    request["labels"] = {"team": "vision"}

    response = api.post(JOBS_URL, request)

    assert response.status_code == 200, response.content
    job = response.json()
    assert job["jobId"] == "train_1"
    assert "name" not in job
    assert job["state"] == "QUEUED"
    assert job["trainingInput"]["workerCount"] == "2"
    assert job["trainingInput"]["masterType"] == "n1-standard-4"
    assert job["trainingInput"]["args"] == ["--epochs", "3"]
    assert job["labels"] == {"team": "vision"}
    assert RFC3339.match(job["createTime"]), job["createTime"]
    assert "startTime" not in job and "endTime" not in job
    assert len(base64.b64decode(job["etag"], validate=True)) == 8
    assert job["jobPosition"] == "1"
    assert Job.objects.get(job_id="train_1").state == JobState.QUEUED


def test_second_queued_job_is_second_in_line(api, project):
    api.post(JOBS_URL, body("first"))

    assert api.post(JOBS_URL, body("second")).json()["jobPosition"] == "2"


def test_duplicate_job_id_is_already_exists_in_googles_envelope(api, project):
    assert api.post(JOBS_URL, body("dup")).status_code == 200

    response = api.post(JOBS_URL, body("dup"))

    assert response.status_code == 409
    assert response.json() == {
        "error": {
            "code": 409,
            "status": "ALREADY_EXISTS",
            "message": "Field: job.job_id Error: A job with this id already exists.",
            "details": [
                {
                    "@type": "type.googleapis.com/google.rpc.BadRequest",
                    "fieldViolations": [{"field": "job.job_id", "description": "A job with this id already exists."}],
                }
            ],
        }
    }
    assert Job.objects.filter(job_id="dup").count() == 1


def test_same_job_id_in_another_project_is_fine(client, project, other_project, admin, outsider):
    api_for(client, admin).post(JOBS_URL, body("shared_name"))

    response = api_for(client, outsider).post("/v1/projects/project-b/jobs", body("shared_name"))

    assert response.status_code == 200


@pytest.mark.parametrize(
    ("change", "field"),
    [
        (lambda b: b.update(jobId="1-bad id"), "job.job_id"),
        (
            lambda b: b["trainingInput"].update(scaleTier="CUSTOM", masterType="n1-bogus-8"),
            "job.training_input.master_type",
        ),
        (
            lambda b: b["trainingInput"].update(
                scaleTier="CUSTOM",
                masterType="complex_model_m",
                masterConfig={"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
            ),
            "job.training_input.master_config.accelerator_config",
        ),
        (
            lambda b: b["trainingInput"].update(scaleTier="CUSTOM", masterType="n1-standard-4", workerCount="2"),
            "job.training_input.worker_type",
        ),
        (lambda b: b["trainingInput"].update(bogusField=1), "job.training_input"),
    ],
    ids=[
        "bad-job-id",
        "unknown-machine-type",
        "accelerator-on-legacy-type",
        "worker-count-without-type",
        "unknown-field",
    ],
)
def test_invalid_body_is_invalid_argument_naming_the_field(api, project, change, field):
    request = body("valid_id")
    change(request)

    error = assert_error(api.post(JOBS_URL, request), 400, "INVALID_ARGUMENT")

    assert field in violation_fields(error)
    assert field in error["message"]
    assert not Job.objects.exists()


def test_rule_violation_message_has_the_originals_field_error_form(api, project):
    error = assert_error(api.post(JOBS_URL, body("1-bad id")), 400, "INVALID_ARGUMENT")

    assert error["message"].startswith("Field: job.job_id Error: ")


def test_unknown_field_message_names_the_field_as_the_json_front_end_does(api, project):
    error = assert_error(api.post(JOBS_URL, body("valid_id", bogusField=1)), 400, "INVALID_ARGUMENT")

    assert error["message"].startswith('Invalid JSON payload received. Unknown name "bogusField"')


def test_package_outside_the_storage_roots_is_refused(api, project):
    request = body("sneaky")
    request["trainingInput"]["packageUris"] = ["/etc/passwd"]

    error = assert_error(api.post(JOBS_URL, request), 400, "INVALID_ARGUMENT")

    assert violation_fields(error) == ["job.training_input.package_uris[0]"]
    assert not Job.objects.exists()


def test_package_path_escaping_storage_with_dotdot_is_refused(api, project, settings):
    request = body("sneaky")
    request["trainingInput"]["packageUris"] = [PACKAGE, f"{settings.STORAGE_DIR}/../../../etc/passwd"]

    error = assert_error(api.post(JOBS_URL, request), 400, "INVALID_ARGUMENT")

    assert violation_fields(error) == ["job.training_input.package_uris[1]"]


def test_job_dir_outside_the_storage_roots_is_refused(api, project):
    error = assert_error(api.post(JOBS_URL, body("sneaky", jobDir="/etc/cron.d")), 400, "INVALID_ARGUMENT")

    assert violation_fields(error) == ["job.training_input.job_dir"]


def test_body_that_is_not_a_job_object_is_invalid_argument(api, project):
    assert_error(api.post(JOBS_URL, ["not", "an", "object"]), 400, "INVALID_ARGUMENT")


def test_malformed_json_is_invalid_argument(client, project, admin):
    _, raw = create_token(admin)

    response = client.post(JOBS_URL, "{not json", content_type="application/json", HTTP_AUTHORIZATION=f"Bearer {raw}")

    assert_error(response, 400, "INVALID_ARGUMENT")


# --- get ----------------------------------------------------------------------------------------


def test_get_returns_the_job(api, project, admin):
    services.submit_job(project, body("fetched"), actor=admin)

    response = api.get(f"{JOBS_URL}/fetched")

    assert response.status_code == 200
    job = response.json()
    assert (job["jobId"], job["state"], job["jobPosition"]) == ("fetched", "QUEUED", "1")
    assert job["trainingInput"]["packageUris"] == [PACKAGE]


def test_get_of_a_missing_job_is_not_found(api, project):
    assert_error(api.get(f"{JOBS_URL}/missing"), 404, "NOT_FOUND")


# --- list ---------------------------------------------------------------------------------------


def test_list_of_an_empty_project_is_an_empty_object(api, project):
    response = api.get(JOBS_URL)

    assert response.status_code == 200
    assert response.json() == {}


def test_list_returns_jobs_newest_first(api, project, admin):
    for job_id in ("oldest", "middle", "newest"):
        services.submit_job(project, body(job_id), actor=admin)

    jobs = api.get(JOBS_URL).json()["jobs"]

    assert [j["jobId"] for j in jobs] == ["newest", "middle", "oldest"]
    assert "nextPageToken" not in api.get(JOBS_URL).json()


@pytest.fixture
def twenty_five_jobs(project, admin):
    ids = [f"job_{n:02d}" for n in range(25)]
    for job_id in ids:
        services.submit_job(project, body(job_id), actor=admin)
    return list(reversed(ids))  # newest first


def test_list_pages_twenty_by_default(api, twenty_five_jobs):
    first = api.get(JOBS_URL).json()

    assert [j["jobId"] for j in first["jobs"]] == twenty_five_jobs[:20]
    second = api.get(JOBS_URL, pageToken=first["nextPageToken"]).json()
    assert [j["jobId"] for j in second["jobs"]] == twenty_five_jobs[20:]
    assert "nextPageToken" not in second


def test_list_pages_by_page_size_without_gaps_or_repeats(api, twenty_five_jobs):
    seen, token, pages = [], None, 0
    while True:
        params = {"pageSize": 10, **({"pageToken": token} if token else {})}
        page = api.get(JOBS_URL, **params).json()
        seen += [j["jobId"] for j in page["jobs"]]
        pages += 1
        token = page.get("nextPageToken")
        if not token:
            break

    assert pages == 3
    assert seen == twenty_five_jobs


def test_new_jobs_do_not_shift_a_page_being_read(api, project, admin, twenty_five_jobs):
    first = api.get(JOBS_URL, pageSize=10).json()
    services.submit_job(project, body("arrived_later"), actor=admin)

    second = api.get(JOBS_URL, pageSize=10, pageToken=first["nextPageToken"]).json()

    assert [j["jobId"] for j in second["jobs"]] == twenty_five_jobs[10:20]


def test_page_size_is_capped_at_one_hundred(api, project):
    Job.objects.bulk_create(
        [
            Job(
                project=project,
                job_id=f"bulk_{n:03d}",
                training_input={"scaleTier": "BASIC"},
                state=JobState.SUCCEEDED,
                end_time=timezone.now(),
            )
            for n in range(105)
        ]
    )

    page = api.get(JOBS_URL, pageSize=1000).json()

    assert len(page["jobs"]) == 100
    assert "nextPageToken" in page


@pytest.mark.parametrize("size", ["abc", "-1", "1.5"])
def test_invalid_page_size_is_invalid_argument(api, project, size):
    assert_error(api.get(JOBS_URL, pageSize=size), 400, "INVALID_ARGUMENT")


def test_invalid_page_token_is_invalid_argument(api, project):
    assert_error(api.get(JOBS_URL, pageToken="not a token"), 400, "INVALID_ARGUMENT")


# --- cancel -------------------------------------------------------------------------------------


def test_cancel_of_a_queued_job_returns_empty_and_cancels_it(api, project, admin):
    services.submit_job(project, body("stop_me"), actor=admin)

    response = api.post(f"{JOBS_URL}/stop_me:cancel")

    assert response.status_code == 200
    assert response.json() == {}
    job = api.get(f"{JOBS_URL}/stop_me").json()
    assert job["state"] == "CANCELLED"
    assert job["errorMessage"] == "Job is cancelled by the user."
    assert RFC3339.match(job["endTime"])
    assert "jobPosition" not in job


def test_cancel_of_a_finished_job_is_failed_precondition(api, project, admin):
    job = services.submit_job(project, body("done"), actor=admin)
    Job.objects.filter(pk=job.pk).update(state=JobState.SUCCEEDED, end_time=timezone.now())

    assert_error(api.post(f"{JOBS_URL}/done:cancel"), 400, "FAILED_PRECONDITION")

    assert Job.objects.get(pk=job.pk).state == JobState.SUCCEEDED


def test_cancelling_twice_is_failed_precondition(api, project, admin):
    services.submit_job(project, body("twice"), actor=admin)
    assert api.post(f"{JOBS_URL}/twice:cancel").status_code == 200

    assert_error(api.post(f"{JOBS_URL}/twice:cancel"), 400, "FAILED_PRECONDITION")


def test_cancel_of_a_missing_job_is_not_found(api, project):
    assert_error(api.post(f"{JOBS_URL}/missing:cancel"), 404, "NOT_FOUND")


# --- authentication and authorization -----------------------------------------------------------


def test_no_token_is_unauthenticated_in_the_envelope(client, project):
    response = Api(client, None).get(JOBS_URL)

    assert_error(response, 401, "UNAUTHENTICATED")
    assert response["WWW-Authenticate"].startswith("Bearer")


def test_bogus_token_is_unauthenticated(client, project):
    assert_error(Api(client, "aic_not-a-real-token").get(JOBS_URL), 401, "UNAUTHENTICATED")


def test_empty_bearer_token_is_unauthenticated(client, project):
    assert_error(client.get(JOBS_URL, HTTP_AUTHORIZATION="Bearer "), 401, "UNAUTHENTICATED")


def test_revoked_token_is_unauthenticated(client, project, admin):
    token, raw = create_token(admin)
    assert Api(client, raw).get(JOBS_URL).status_code == 200

    revoke_token(token)

    assert_error(Api(client, raw).get(JOBS_URL), 401, "UNAUTHENTICATED")


def test_token_of_an_inactive_user_is_unauthenticated(client, project, admin):
    _, raw = create_token(admin)
    get_user_model().objects.filter(pk=admin.pk).update(is_active=False)

    assert_error(Api(client, raw).get(JOBS_URL), 401, "UNAUTHENTICATED")


def test_token_use_is_recorded(client, project, admin):
    token, raw = create_token(admin)
    assert token.last_used is None

    Api(client, raw).get(JOBS_URL)

    token.refresh_from_db()
    assert token.last_used is not None


def test_outsider_gets_not_found_for_another_projects_jobs(client, project, admin, outsider):
    services.submit_job(project, body("private"), actor=admin)
    api = api_for(client, outsider)

    for response in (
        api.get(JOBS_URL),
        api.get(f"{JOBS_URL}/private"),
        api.post(JOBS_URL, body("x")),
        api.post(f"{JOBS_URL}/private:cancel"),
    ):
        error = assert_error(response, 404, "NOT_FOUND")
        assert "private" not in error["message"]
    assert Job.objects.get(job_id="private").state == JobState.QUEUED


def test_viewer_cannot_create_a_job(client, project, viewer):
    assert_error(api_for(client, viewer).post(JOBS_URL, body("viewer_job")), 403, "PERMISSION_DENIED")
    assert not Job.objects.exists()


def test_viewer_cannot_cancel_a_job(client, project, admin, viewer):
    services.submit_job(project, body("keep"), actor=admin)

    assert_error(api_for(client, viewer).post(f"{JOBS_URL}/keep:cancel"), 403, "PERMISSION_DENIED")
    assert Job.objects.get(job_id="keep").state == JobState.QUEUED
