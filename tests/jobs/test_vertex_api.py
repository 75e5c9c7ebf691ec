"""Vertex AI's REST API for CustomJobs and HyperparameterTuningJobs, without running trainers:
the wire shapes, the refusals, IAM and the audit entries."""

from __future__ import annotations

import pytest

from aiconsole.models import AuditEntry
from aiconsole.tokens import create_token
from jobs.models import Job, JobState, Trial, VertexJob
from tests.helpers.vertex import ENUMS, custom_job, package_pool, tuning_job

BASE = "/v1/projects/project-a/locations/us-central1"


@pytest.fixture
def as_user(client):
    """``call(user, method, path, body)`` with the user's bearer token."""

    def call(user, method: str, path: str, body=None):
        _, raw = create_token(user)
        kwargs = {"HTTP_AUTHORIZATION": f"Bearer {raw}"}
        if body is not None:
            kwargs.update(data=body, content_type="application/json")
        response = getattr(client, method.lower())(path, **kwargs)
        return response.status_code, (response.json() if response.content else None)

    return call


def test_create_answers_a_server_assigned_name_and_integer_enums(api, project):
    status, created = api("POST", f"{BASE}/customJobs{ENUMS}", custom_job("census"))
    assert status == 200, created
    assert created["name"].startswith(f"{BASE[4:]}/customJobs/") and created["displayName"] == "census"
    assert created["state"] == 1  # JOB_STATE_QUEUED, as a number: the SDK asked for enum-encoding=int
    assert created["jobSpec"]["workerPoolSpecs"][0]["replicaCount"] == "1"  # int64 travels as a string
    assert created["createTime"].endswith("Z")

    _, by_name = api("GET", "/v1/" + created["name"])  # no enum-encoding asked: names
    assert by_name["state"] == "JOB_STATE_QUEUED"


def test_a_vertex_job_is_an_engine_job_with_its_v1_training_input(api, project):
    body = custom_job(
        "census-dist",
        package_pool(args=["--epochs=2"], env=[{"name": "MODE", "value": "fast"}]),
        {**package_pool(args=["--epochs=2"], replicas=2), "machineSpec": {"machineType": "n1-standard-8"}},
        base="gs://bucket/out",
        job_spec={"scheduling": {"timeout": "3600s"}},
        labels={"team": "ml"},
    )
    _, created = api("POST", f"{BASE}/customJobs{ENUMS}", body)
    vertex = VertexJob.objects.get(vertex_id=created["name"].rsplit("/", 1)[1])
    ti = vertex.job.training_input
    assert vertex.job.job_id.startswith("census_dist_") and vertex.job.labels == {"team": "ml"}
    assert (ti["scaleTier"], ti["masterType"], ti["workerType"], ti["workerCount"]) == (
        "CUSTOM",
        "n1-standard-4",
        "n1-standard-8",
        "2",
    )
    assert (ti["runtimeVersion"], ti["pythonVersion"], ti["args"]) == ("2.11", "3.7", ["--epochs=2"])
    assert ti["jobDir"] == "gs://bucket/out" and ti["scheduling"] == {"maxRunningTime": "3600s"}
    assert ti["region"] == "us-central1"
    assert vertex.engine["pools"][0] == {"MODE": "fast"}
    assert "runtime version 2.11" in vertex.engine["notes"][0] and "not run" in vertex.engine["notes"][0]


def test_the_audit_entry_has_vertex_method_and_service_names(api, project):
    api("POST", f"{BASE}/customJobs{ENUMS}", custom_job())
    entry = AuditEntry.objects.get(method_name="google.cloud.aiplatform.v1.JobService.CreateCustomJob")
    assert entry.service_name == "aiplatform.googleapis.com"
    assert entry.resource_name == "projects/project-a/locations/us-central1"
    assert entry.permission == "ml.jobs.create" and entry.granted
    assert entry.request["customJob"]["displayName"] == "census"


def test_a_refused_executor_image_names_the_field_and_the_images_it_can_run(api, project):
    body = custom_job("torch", package_pool(image="us-docker.pkg.dev/vertex-ai/training/pytorch-gpu.1-13.py310:latest"))
    status, error = api("POST", f"{BASE}/customJobs{ENUMS}", body)
    assert status == 400 and error["error"]["status"] == "INVALID_ARGUMENT"
    violation = error["error"]["details"][0]["fieldViolations"][0]
    assert violation["field"] == "custom_job.job_spec.worker_pool_specs[0].python_package_spec.executor_image_uri"
    assert "pytorch-gpu" in violation["description"] and "tf-cpu.1-15, 2-1" in violation["description"]
    assert not Job.objects.exists()


def test_engine_refusals_name_the_vertex_field_the_value_came_from(api, project):
    pool = package_pool()
    pool["machineSpec"] = {"machineType": "n1-standard-7"}
    status, error = api("POST", f"{BASE}/customJobs{ENUMS}", custom_job("bad", pool))
    assert status == 400
    violation = error["error"]["details"][0]["fieldViolations"][0]
    assert violation["field"] == "custom_job.job_spec.worker_pool_specs[0].machine_spec.machine_type"
    assert "masterType" not in violation["description"] and "n1-standard-7" in violation["description"]


def test_a_vertex_tensorboard_instance_is_refused_as_the_missing_resource_it_is(api, project):
    tensorboard = "projects/project-a/locations/us-central1/tensorboards/123"
    status, error = api("POST", f"{BASE}/customJobs", custom_job("tb", job_spec={"tensorboard": tensorboard}))
    assert status == 400
    [violation] = error["error"]["details"][0]["fieldViolations"]
    assert violation["field"] == "custom_job.job_spec.tensorboard"
    assert f"Tensorboard {tensorboard} does not exist" in violation["description"]
    assert "AIP_TENSORBOARD_LOG_DIR" in violation["description"]
    assert not Job.objects.exists()


def test_unknown_fields_and_bad_enum_numbers_are_refused_as_googles_front_end_does(api, project):
    status, error = api("POST", f"{BASE}/customJobs", {**custom_job(), "colour": "blue"})
    assert status == 400 and 'Unknown name "colour"' in error["error"]["message"]
    pool = package_pool()
    pool["machineSpec"]["acceleratorType"] = 99
    status, error = api("POST", f"{BASE}/customJobs", custom_job("x", pool))
    assert status == 400 and "accelerator_type" in error["error"]["message"]


def test_a_location_that_is_not_a_region_is_refused(api, project):
    status, error = api("POST", "/v1/projects/project-a/locations/global/customJobs", custom_job())
    assert status == 400 and "Location global is not served here" in error["error"]["message"]


def test_list_filters_by_display_name_and_state_and_pages(api, project):
    names = []
    for index in range(5):
        _, created = api("POST", f"{BASE}/customJobs{ENUMS}", custom_job(f"run-{index}"))
        names.append(created["name"])
    api("POST", f"{BASE}/hyperparameterTuningJobs{ENUMS}", tuning_job())  # another collection
    api("POST", f"/v1/{names[0]}:cancel{ENUMS}", {})

    _, listed = api("GET", f"{BASE}/customJobs?filter=display_name%3D%22run-3%22")
    assert [j["displayName"] for j in listed["customJobs"]] == ["run-3"]
    _, cancelled = api("GET", f"{BASE}/customJobs{ENUMS}&filter=state%3DJOB_STATE_CANCELLED")
    assert [j["name"] for j in cancelled["customJobs"]] == [names[0]] and cancelled["customJobs"][0]["state"] == 7
    _, by_number = api("GET", f"{BASE}/customJobs?filter=state%3D7")
    assert [j["name"] for j in by_number["customJobs"]] == [names[0]]

    _, first = api("GET", f"{BASE}/customJobs?pageSize=2")
    _, second = api("GET", f"{BASE}/customJobs?pageSize=2&pageToken={first['nextPageToken']}")
    _, third = api("GET", f"{BASE}/customJobs?pageSize=2&pageToken={second['nextPageToken']}")
    seen = [j["name"] for page in (first, second, third) for j in page["customJobs"]]
    assert seen == names[::-1] and "nextPageToken" not in third

    status, error = api("GET", f"{BASE}/customJobs?filter=colour%3Dblue")
    assert status == 400 and "unknown field 'colour'" in error["error"]["message"]
    assert api("GET", "/v1/projects/project-a/locations/europe-west4/customJobs") == (200, {})


def test_cancel_then_delete_answers_a_done_operation(api, project):
    _, created = api("POST", f"{BASE}/customJobs{ENUMS}", custom_job())
    status, error = api("DELETE", f"/v1/{created['name']}")
    assert status == 400 and error["error"]["status"] == "FAILED_PRECONDITION"
    assert "JOB_STATE_QUEUED" in error["error"]["message"] and "cancel it first" in error["error"]["message"]

    assert api("POST", f"/v1/{created['name']}:cancel", {}) == (200, {})
    _, cancelled = api("GET", f"/v1/{created['name']}{ENUMS}")
    assert cancelled["state"] == 7 and cancelled["error"] == {"code": 1, "message": "Job is cancelled by the user."}
    status, again = api("POST", f"/v1/{created['name']}:cancel", {})
    assert status == 400 and "JOB_STATE_CANCELLED" in again["error"]["message"]

    status, operation = api("DELETE", f"/v1/{created['name']}{ENUMS}")
    assert status == 200 and operation["done"] is True
    assert operation["response"]["@type"] == "type.googleapis.com/google.protobuf.Empty"
    assert operation["name"].startswith("projects/project-a/locations/us-central1/operations/")
    assert api("GET", f"/v1/{created['name']}")[0] == 404
    assert not Job.objects.exists()
    assert api("GET", f"/v1/{operation['name']}") == (200, operation)


def test_a_tuning_job_takes_the_study_spec_and_answers_it_back(api, project):
    status, created = api("POST", f"{BASE}/hyperparameterTuningJobs{ENUMS}", tuning_job())
    assert status == 200, created
    assert created["studySpec"]["metrics"] == [{"metricId": "accuracy", "goal": 1}]
    assert created["studySpec"]["parameters"][0]["scaleType"] == 2 and created["maxTrialCount"] == 4
    assert "trials" not in created
    spec = Job.objects.get().training_input["hyperparameters"]
    assert spec["hyperparameterMetricTag"] == "accuracy" and spec["goal"] == "MAXIMIZE"
    assert spec["maxTrials"] == 4 and spec["maxParallelTrials"] == 2
    assert [p["parameterName"] for p in spec["params"]] == ["lr", "layers"]
    # the other collection does not know it
    assert api("GET", f"{BASE}/customJobs/{created['name'].rsplit('/', 1)[1]}")[0] == 404


def test_viewer_reads_but_cannot_create_and_outsider_sees_nothing(as_user, api, project, viewer, outsider):
    _, created = api("POST", f"{BASE}/customJobs{ENUMS}", custom_job())
    assert as_user(viewer, "GET", f"/v1/{created['name']}")[0] == 200
    assert as_user(viewer, "GET", f"{BASE}/customJobs")[1]["customJobs"][0]["name"] == created["name"]
    status, error = as_user(viewer, "POST", f"{BASE}/customJobs", custom_job())
    assert status == 403 and "ml.jobs.create" in error["error"]["message"]
    assert as_user(viewer, "POST", f"/v1/{created['name']}:cancel", {})[0] == 403
    assert as_user(outsider, "GET", f"/v1/{created['name']}")[0] == 404
    assert as_user(outsider, "GET", f"{BASE}/customJobs")[0] == 404
    refused = AuditEntry.objects.get(method_name__endswith="CreateCustomJob", granted=False)
    assert refused.service_name == "aiplatform.googleapis.com"


def test_developer_deletes_own_finished_job_but_not_another(as_user, api, project, developer):
    _, theirs = as_user(developer, "POST", f"{BASE}/customJobs", custom_job("mine"))
    _, admins = api("POST", f"{BASE}/customJobs", custom_job("admins"))
    for created in (theirs, admins):
        api("POST", f"/v1/{created['name']}:cancel", {})
    assert as_user(developer, "DELETE", f"/v1/{admins['name']}")[0] == 403
    assert as_user(developer, "DELETE", f"/v1/{theirs['name']}")[0] == 200
    assert AuditEntry.objects.filter(method_name__endswith="DeleteCustomJob", granted=True).count() == 1


def test_v1_api_shows_a_vertex_job_too(api, project):
    _, created = api("POST", f"{BASE}/customJobs{ENUMS}", custom_job())
    job = Job.objects.get()
    status, v1 = api("GET", f"/v1/projects/project-a/jobs/{job.job_id}")
    assert status == 200 and v1["state"] == JobState.QUEUED and v1["trainingInput"]["masterType"] == "n1-standard-4"
    assert created["name"].endswith(job.vertex.vertex_id)


def test_paths_outside_the_projects_storage_are_refused_on_the_vertex_field(api, project):
    status, error = api("POST", f"{BASE}/customJobs", custom_job("x", package_pool(package="/etc/passwd"), base="/etc"))
    assert status == 400
    fields = {v["field"] for v in error["error"]["details"][0]["fieldViolations"]}
    assert fields == {
        "custom_job.job_spec.worker_pool_specs[0].python_package_spec.package_uris[0]",
        "custom_job.job_spec.base_output_directory.output_uri_prefix",
    }
    assert "/etc is not inside a storage root this server serves" in error["error"]["message"]


def test_listing_studies_answers_each_with_its_trials(api, project, django_assert_max_num_queries):
    for index in range(3):
        api("POST", f"{BASE}/hyperparameterTuningJobs", tuning_job(f"study-{index}"))
    for job in Job.objects.all():
        Trial.objects.create(job=job, trial_id="1", number=1, hyperparameters={"lr": "0.01", "layers": "2"})
    with django_assert_max_num_queries(12):
        _, listed = api("GET", f"{BASE}/hyperparameterTuningJobs")
    assert [len(study["trials"]) for study in listed["hyperparameterTuningJobs"]] == [1, 1, 1]
