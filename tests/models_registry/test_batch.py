"""Batch prediction as a Job: submitted through jobs.create, run by the executor with serving
processes, results and error stats written as the original wrote them."""

from __future__ import annotations

import json

import pytest
from django.conf import settings

from aiconsole import iam
from aiconsole.errors import InvalidArgument
from bench.support.waiting import wait_for
from jobs import services as job_services
from jobs.models import Job, JobState
from jobs.wire import job_resource
from models_registry import batch, services
from tests.helpers.identity import make_user
from tests.helpers.jobs import log_text
from tests.helpers.models import deploy


def inputs(name: str, lines: list[str]) -> str:
    folder = settings.STORAGE_DIR / "batch-in" / "project-a" / name
    folder.mkdir(parents=True, exist_ok=True)
    for index in range(0, len(lines), 4):
        (folder / f"part-{index // 4:03d}.json").write_text("\n".join(lines[index : index + 4]) + "\n")
    (folder / "ignored.txt").write_text("not an input\n")
    return str(folder / "part-*.json")


def body(job_id: str, **prediction_input) -> dict:
    return {
        "jobId": job_id,
        "predictionInput": {
            "dataFormat": "JSON",
            "region": "us-central1",
            "outputPath": str(settings.STORAGE_DIR / "batch-out" / "project-a" / job_id),
            **prediction_input,
        },
    }


def run(project, admin, job_body) -> Job:
    job = job_services.submit_job(project, job_body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).is_terminal, 120, message=f"job {job.job_id} to finish")
    job.refresh_from_db()
    return job


def test_batch_prediction_writes_results_and_error_stats(serving, executor, project, admin, trained):
    model = services.create_model(project, {"name": "census"}, actor=admin)
    deploy(model, "v1", trained["linear"], admin)
    lines = [json.dumps(row) for row in trained["probe"]] * 3 + ["[1.0, 2.0]", "{not json", "[0.5, 0.5, 0.5, 0.5]"]
    job = run(
        project,
        admin,
        body(
            "scoring_1",
            modelName="projects/project-a/models/census",
            inputPaths=[inputs("scoring_1", lines)],
            batchSize="4",
            maxWorkerCount="2",
        ),
    )
    assert job.state == JobState.SUCCEEDED, job.error_message
    output = job_resource(job)["predictionOutput"]
    assert output["predictionCount"] == "10" and output["errorCount"] == "2"
    assert output["nodeHours"] > 0 and output["outputPath"].endswith("scoring_1")
    out = settings.STORAGE_DIR / "batch-out" / "project-a" / "scoring_1"
    shards = sorted(out.glob("prediction.results-*"))
    assert [s.name for s in shards] == ["prediction.results-00000-of-00002", "prediction.results-00001-of-00002"]
    results = [json.loads(line) for shard in shards for line in shard.read_text().splitlines()]
    assert len(results) == 10
    by_instance = {json.dumps(r["instance"]): r["prediction"] for r in results}
    for instance, expected in zip(trained["probe"], trained["expected"]["linear"], strict=True):
        assert by_instance[json.dumps(instance)] == pytest.approx(expected)
    stats = (out / "prediction.errors_stats-00000-of-00001").read_text().splitlines()
    assert len(stats) == 2
    assert any("4 features" in line and line.endswith(", 1)") for line in stats)
    assert any("Failed to parse the input line as JSON" in line for line in stats)
    log = log_text(job)
    assert "prediction-replica-0" in set(job.replicas.values_list("label", flat=True))
    assert "Reading 3 input files." in log and "10 predictions, 2 errors." in log


def test_batch_prediction_from_a_model_folder_with_csv_output(serving, executor, project, admin, trained):
    job = run(
        project,
        admin,
        body(
            "from_uri",
            uri=trained["sklearn"],
            dataFormat="TEXT",
            outputDataFormat="CSV",
            inputPaths=[inputs("from_uri", ["0.9,0.8,0.1,0.2", "[0.1,0.2,0.3,0.4]"])],
        ),
    )
    assert job.state == JobState.SUCCEEDED, job.error_message
    shard = settings.STORAGE_DIR / "batch-out" / "project-a" / "from_uri" / "prediction.results-00000-of-00002"
    rows = (
        shard.read_text().splitlines()
        + (settings.STORAGE_DIR / "batch-out" / "project-a" / "from_uri" / "prediction.results-00001-of-00002")
        .read_text()
        .splitlines()
    )
    assert sorted(rows) == ["0", "1"]


def test_a_batch_job_fails_with_the_reason_when_the_model_is_not_ready(serving, executor, project, admin, trained):
    model = services.create_model(project, {"name": "census"}, actor=admin)
    deploy(model, "v1", trained["broken"], admin)
    job = run(
        project,
        admin,
        body(
            "not_ready",
            versionName="projects/project-a/models/census/versions/v1",
            inputPaths=[inputs("not_ready", ["[1, 2, 3, 4]"])],
        ),
    )
    assert job.state == JobState.FAILED and "is FAILED, not READY" in job.error_message


def test_a_batch_job_with_no_matching_inputs_fails(serving, executor, project, admin, trained):
    job = run(
        project,
        admin,
        body(
            "no_inputs",
            uri=trained["sklearn"],
            inputPaths=[str(settings.STORAGE_DIR / "nowhere" / "project-a" / "*.json")],
        ),
    )
    assert job.state == JobState.FAILED and "No input files match" in job.error_message


def test_tfrecord_input_is_refused_with_a_reason(serving, executor, project, admin, trained):
    job = run(
        project,
        admin,
        body("records", uri=trained["sklearn"], dataFormat="TF_RECORD", inputPaths=[inputs("records", ["x"])]),
    )
    assert job.state == JobState.FAILED and "TFRecord input needs TensorFlow" in job.error_message


def test_submitting_needs_the_predict_permission_on_the_model(project, admin, trained):
    model = services.create_model(project, {"name": "census"}, actor=admin)
    viewer_with_jobs = make_user("jo_jobs", "roles/ml.jobOwner", project)
    with pytest.raises(iam.PermissionDenied) as refused:
        job_services.submit_job(
            project,
            body("denied", modelName=model.resource_name, inputPaths=[inputs("denied", ["[1]"])]),
            actor=viewer_with_jobs,
        )
    assert refused.value.permission == "ml.models.predict"
    with pytest.raises(iam.NotFound):
        job_services.submit_job(
            project,
            body("missing", modelName="projects/project-a/models/nope", inputPaths=[inputs("missing", ["[1]"])]),
            actor=admin,
        )


def test_local_paths_must_lie_in_the_storage_roots(project, admin, trained):
    with pytest.raises(InvalidArgument) as refused:
        job_services.submit_job(
            project, body("outside", uri=trained["sklearn"], inputPaths=["/etc/*.conf"]), actor=admin
        )
    assert refused.value.violations[0].field == "job.prediction_input.input_paths[0]"


def test_text_lines_are_json_numbers_lists_or_strings():
    assert batch.parse_line("[1, 2]", "TEXT") == [1, 2]
    assert batch.parse_line("1.5,2,3", "TEXT") == [1.5, 2.0, 3.0]
    assert batch.parse_line("hello world", "TEXT") == "hello world"
    with pytest.raises(ValueError):
        batch.parse_line("hello", "JSON")


def test_cancelling_a_batch_job(serving, executor, project, admin, trained):
    lines = [json.dumps(trained["probe"][0])] * 4000
    job = job_services.submit_job(
        project,
        body(
            "cancel_me",
            uri=trained["linear"],
            batchSize="1",
            maxWorkerCount="1",
            inputPaths=[inputs("cancel_me", lines)],
        ),
        actor=admin,
    )
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.RUNNING, 60, message="the job to run")
    job_services.cancel_job(Job.objects.get(pk=job.pk), actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state == JobState.CANCELLED, 60, message="the cancel")
    job.refresh_from_db()
    assert int(job.training_output["predictionCount"]) < 4000


def test_batch_prediction_reads_and_writes_cloud_storage(serving, executor, project, admin, trained, gcs_emulator):
    lines = "\n".join(json.dumps(row) for row in trained["probe"]).encode()
    gcs_emulator.upload("batch-bucket", "in/day-1/part-0.json", lines)
    gcs_emulator.upload("batch-bucket", "in/day-2/part-0.json", lines)
    gcs_emulator.upload("batch-bucket", "in/day-2/skip.txt", b"x")
    job = run(
        project,
        admin,
        body(
            "gcs_batch",
            uri=trained["linear"],
            maxWorkerCount="1",
            inputPaths=["gs://batch-bucket/in/**/*.json"],
            outputPath="gs://batch-bucket/out/gcs_batch",
        ),
    )
    assert job.state == JobState.SUCCEEDED, job.error_message
    assert job.training_output["predictionCount"] == "6"
    bucket = gcs_emulator.client.bucket("batch-bucket")
    names = sorted(b.name for b in gcs_emulator.client.list_blobs("batch-bucket", prefix="out/gcs_batch/"))
    assert names == [
        "out/gcs_batch/prediction.errors_stats-00000-of-00001",
        "out/gcs_batch/prediction.results-00000-of-00001",
    ]
    results = bucket.blob("out/gcs_batch/prediction.results-00000-of-00001").download_as_text().splitlines()
    assert len(results) == 6


def test_the_job_page_says_how_many_serving_processes_run_not_only_what_was_asked(project, admin, trained, client):
    # maxWorkerCount asks for up to 10; this console runs at most AICONSOLE_BATCH_MAX_WORKERS a job.
    job = job_services.submit_job(
        project,
        body("capped", uri=trained["sklearn"], inputPaths=[inputs("capped", ["[1]"])], maxWorkerCount="10"),
        actor=admin,
    )
    client.force_login(admin)
    page = client.get(f"/projects/{project.project_id}/jobs/{job.job_id}/?tab=prediction").content.decode()
    workers = page.split("<dt>Workers</dt>", 1)[1].split("</dd>", 1)[0]
    assert f"{settings.BATCH_MAX_WORKERS} serving processes" in workers
    assert "at most 10" in workers and "AICONSOLE_BATCH_MAX_WORKERS" in workers
