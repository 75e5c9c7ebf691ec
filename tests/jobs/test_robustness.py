"""Walks, replica counts, crashes, field lengths, the audit
log's malformed rows and bucket names, each through the real console (REST, the CLI, the
executor)."""

from __future__ import annotations

import json
import logging
import os
import re
import threading
import time

import pytest
from django.conf import settings
from django.test import Client

from aiconsole import audit
from aiconsole.models import AuditEntry
from bench.support.waiting import wait_for
from console.cli import main
from jobs import services
from jobs.executor.runner import JobRunner
from jobs.models import ACTIVE_STATES, Job, JobState
from models_registry import files
from tests.helpers.identity import bearer, tamper
from tests.helpers.jobs import log_text, submit

JOBS = "/v1/projects/project-a/jobs"
MODELS = "/v1/projects/project-a/models"
PACKAGE = "gs://trainer-bucket/trainer-0.1.tar.gz"
BUCKET_RULE = (
    "invalid bucket name (3-63 characters of lowercase letters, digits, '-', '_' and "
    "'.', starting and ending with a letter or digit)"
)


def training(job_id: str, **training_input) -> dict:
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


def custom(job_id: str, **training_input) -> dict:
    return training(job_id, scaleTier="CUSTOM", masterType="n1-standard-4", **training_input)


def post(api: Client, path: str, body: dict, method: str = "post"):
    return getattr(api, method)(path, json.dumps(body), content_type="application/json")


def violations(response) -> dict[str, str]:
    error = response.json()["error"]
    (details,) = error["details"]
    return {v["field"]: v["description"] for v in details["fieldViolations"]}


@pytest.fixture
def api(admin) -> Client:
    return Client(**bearer(admin))


# --- 4. walks over user-named folders ----------------------------------------------------------


def _looped_inputs(name: str) -> str:
    """Three input files and two links back to their own folder: a loop a glob walks for ever."""
    folder = settings.STORAGE_DIR / "robust-in" / "project-a" / name
    folder.mkdir(parents=True)
    for part in ("a", "b", "c"):
        (folder / f"{part}.json").write_text("[1, 2, 3, 4]\n")
    os.symlink(folder, folder / "loop1")
    os.symlink(folder, folder / "loop2")
    return str(folder / "**" / "*.json")


def _fake_model() -> str:
    folder = settings.STORAGE_DIR / "robust-model" / "project-a"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "model.joblib").write_bytes(b"never loaded: the job ends while preparing")
    return str(folder)


def batch(job_id: str, inputs: str) -> dict:
    return {
        "jobId": job_id,
        "predictionInput": {
            "uri": _fake_model(),
            "dataFormat": "JSON",
            "region": "us-central1",
            "inputPaths": [inputs],
            "outputPath": str(settings.STORAGE_DIR / "robust-out" / "project-a" / job_id),
        },
    }


def test_a_recursive_input_never_follows_a_symlink_loop():
    pattern = _looped_inputs("unit")
    done: list = []
    walker = threading.Thread(target=lambda: done.append(files.expand_inputs([pattern])), daemon=True)
    walker.start()
    walker.join(20)

    assert done, "expanding the inputs did not finish: the walk follows the link loop"
    folder = pattern.split("/**")[0]
    assert done[0] == [f"{folder}/{name}.json" for name in "abc"]


def test_a_walk_past_its_entry_bound_fails_the_batch_job_naming_the_path_and_limit(executor, project, admin, settings):
    settings.WALK_MAX_ENTRIES = 4  # three files and two links: five entries
    pattern = _looped_inputs("bounded")
    job = services.submit_job(project, batch("looped_inputs", pattern), actor=admin)

    wait_for(lambda: Job.objects.get(pk=job.pk).is_terminal, 60, message="the job to end")
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    folder = pattern.split("/**")[0]
    assert job.error_message == (
        f"The input path {pattern} cannot be expanded: {folder} holds more than 4 files and "
        "folders, the most a walk looks at (AICONSOLE_WALK_MAX_ENTRIES); name a narrower path."
    )


@pytest.fixture
def slow_tree(monkeypatch, tmp_path):
    """800 folders that take 0.05 s each to list (a slow disk): a walk of 40 seconds."""
    root = settings.STORAGE_DIR / "robust-in" / "project-a" / tmp_path.name
    for index in range(800):
        (root / f"d{index:03d}").mkdir(parents=True)
        (root / f"d{index:03d}" / "part.json").write_text("[1, 2, 3, 4]\n")
    started = threading.Event()
    real_scandir = os.scandir

    def slow_scandir(path="."):
        if str(path).startswith(str(root)):
            started.set()
            time.sleep(0.05)
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", slow_scandir)
    return str(root / "**" / "*.json"), started


def test_cancelling_a_batch_job_stops_its_input_walk(executor, project, admin, slow_tree):
    pattern, walking = slow_tree
    job = services.submit_job(project, batch("slow_walk", pattern), actor=admin)
    assert walking.wait(60), "the walk did not start"

    services.cancel_job(Job.objects.get(pk=job.pk), actor=admin)
    asked = time.monotonic()

    wait_for(lambda: Job.objects.get(pk=job.pk).is_terminal, 60, message="the job to end")
    assert Job.objects.get(pk=job.pk).state == JobState.CANCELLED
    assert time.monotonic() - asked < 10, "the cancel waited for the whole 40-second walk"


def test_a_walk_past_its_time_bound_fails_the_batch_job_naming_the_path_and_limit(
    executor, project, admin, settings, slow_tree
):
    settings.WALK_MAX_SECONDS = 1
    pattern, _ = slow_tree
    job = services.submit_job(project, batch("slow_inputs", pattern), actor=admin)

    wait_for(lambda: Job.objects.get(pk=job.pk).is_terminal, 30, message="the job to end")
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    assert job.error_message == (
        f"The input path {pattern} cannot be expanded: Listing {pattern.split('/**')[0]} took "
        "longer than 1 seconds, the most a walk may take (AICONSOLE_WALK_MAX_SECONDS); name a "
        "narrower path."
    )


# --- 5. replica counts, and a crash from any state ---------------------------------------------


@pytest.mark.parametrize(
    "count_key, field",
    [
        ("workerCount", "worker_count"),
        ("parameterServerCount", "parameter_server_count"),
        ("evaluatorCount", "evaluator_count"),
    ],
)
def test_a_replica_count_over_the_limit_is_refused_with_its_field_path(api, project, count_key, field):
    role = {
        "workerCount": "workerType",
        "parameterServerCount": "parameterServerType",
        "evaluatorCount": "evaluatorType",
    }[count_key]
    response = post(api, JOBS, custom("too_many", **{role: "n1-standard-4", count_key: "10000"}))

    assert response.status_code == 400
    assert violations(response) == {
        f"job.training_input.{field}": (
            f"{count_key} must be at most 100 on this server (AICONSOLE_MAX_REPLICA_COUNT); got 10000."
        )
    }
    assert not Job.objects.exists()


def test_the_replica_count_limit_is_configurable(api, project, settings):
    settings.MAX_REPLICA_COUNT = 3

    refused = post(api, JOBS, custom("four", workerType="n1-standard-4", workerCount="4"))
    accepted = post(api, JOBS, custom("three", workerType="n1-standard-4", workerCount="3"))

    assert refused.status_code == 400
    assert "at most 3 on this server" in violations(refused)["job.training_input.worker_count"]
    assert accepted.status_code == 200, accepted.content
    assert accepted.json()["state"] == "QUEUED"


@pytest.mark.parametrize("state", sorted(ACTIVE_STATES))
def test_a_crash_ends_a_job_failed_from_any_state_that_has_not_ended(project, admin, state):
    job = submit(project, "crashed", admin)
    Job.objects.filter(pk=job.pk).update(state=state)
    job.refresh_from_db()

    assert job.mark_crashed("Internal error in the executor (id 0123abcd).")
    assert (job.state, job.end_time is not None, job.runner) == (JobState.FAILED, True, "")
    assert not job.mark_crashed("again"), "an ended job stays as it ended"


@pytest.mark.executor
def test_an_executor_crash_while_cancelling_fails_the_job_with_an_error_id_and_no_traceback(
    executor, job_body, package_factory, project, admin, monkeypatch, caplog
):
    package = package_factory('print("training", flush=True)\ntime.sleep(300)\n')
    job = services.submit_job(project, job_body("crash_cancel", package), actor=admin)
    wait_for(lambda: "training" in log_text(job), 240, message="the trainer to start")
    stop_all = JobRunner._stop_all

    def stop_then_crash(self):
        stop_all(self)
        raise RuntimeError("simulated crash in /console/code.py while cancelling")

    monkeypatch.setattr(JobRunner, "_stop_all", stop_then_crash)
    caplog.set_level(logging.ERROR)
    services.cancel_job(Job.objects.get(pk=job.pk), actor=admin)

    wait_for(
        lambda: Job.objects.get(pk=job.pk).is_terminal,
        60,
        message="the crashed job to end (it used to stay CANCELLING)",
    )
    job.refresh_from_db()
    assert job.state == JobState.FAILED
    found = re.fullmatch(
        r"Internal error in the executor \(id ([0-9a-f]{8})\); the console's log "
        r"has the details\.",
        job.error_message,
    )
    assert found, job.error_message
    logged = [r for r in caplog.records if found.group(1) in r.getMessage()]
    assert logged and "simulated crash" in str(logged[0].exc_info[1])


# --- 10. field lengths --------------------------------------------------------------------------

LONG = "x" * 1_000_000


@pytest.mark.parametrize(
    "changes, field, description",
    [
        ({"args": [LONG]}, "job.training_input.args[0]", "args is too long: at most 4096 characters; got 1000000."),
        ({"args": ["--flag"] * 257}, "job.training_input.args", "args can list at most 256 values; got 257."),
        (
            {"pythonModule": "t" * 300},
            "job.training_input.python_module",
            "pythonModule is too long: at most 256 characters; got 300.",
        ),
        (
            {"packageUris": [PACKAGE, "gs://bucket/" + LONG]},
            "job.training_input.package_uris[1]",
            "packageUris is too long: at most 2048 characters; got 1000012.",
        ),
        (
            {"jobDir": "gs://bucket/" + LONG},
            "job.training_input.job_dir",
            "jobDir is too long: at most 2048 characters; got 1000012.",
        ),
        ({"region": LONG}, "job.training_input.region", "region is too long: at most 1024 characters; got 1000000."),
    ],
)
def test_a_job_field_past_its_length_limit_is_refused_with_its_path(api, project, changes, field, description):
    response = post(api, JOBS, training("long", **changes))

    assert response.status_code == 400
    assert violations(response) == {field: description}
    assert len(response.content) < 2000, "the refusal repeats the huge value"


def test_a_long_label_value_is_refused_without_being_repeated(api, project):
    body = {**training("labelled"), "labels": {"team": LONG}}

    response = post(api, JOBS, body)

    assert response.status_code == 400
    assert "job.labels" in violations(response)
    assert len(response.content) < 2000


def test_a_model_description_past_its_limit_is_refused_on_create_and_patch(api, project):
    created = post(api, MODELS, {"name": "census", "description": LONG})
    assert created.status_code == 400
    assert violations(created) == {
        "model.description": "description is too long: at most 8192 characters; got 1000000."
    }
    assert post(api, MODELS, {"name": "census", "description": "d" * 8192}).status_code == 200

    patched = post(api, f"{MODELS}/census?updateMask=description", {"description": LONG}, "patch")
    assert patched.status_code == 400
    assert "model.description" in violations(patched)


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"description": LONG}, "version.description"),
        ({"deploymentUri": "gs://bucket/" + LONG}, "version.deployment_uri"),
        ({"machineType": "m" * 5000}, "version.machine_type"),
    ],
)
def test_a_version_field_past_its_limit_is_refused(api, project, changes, field):
    assert post(api, MODELS, {"name": "census"}).status_code == 200

    response = post(api, f"{MODELS}/census/versions", {"name": "v1", "deploymentUri": "gs://bucket/model", **changes})

    assert response.status_code == 400
    assert field in violations(response)
    assert len(response.content) < 2000


# --- 11. malformed audit rows -------------------------------------------------------------------


@pytest.fixture
def four_entries(project, admin) -> list[int]:
    for job_id in ("one", "two", "three", "four"):
        submit(project, job_id, admin)
    entries = AuditEntry.objects.filter(log_type="activity").order_by("seq")
    return list(entries.values_list("pk", flat=True))


def _malform(four_entries) -> None:
    """A timestamp that is no date (the row cannot even be loaded) and a request that is not an
    object; the console never writes either."""
    first, second, third, _ = four_entries
    tamper("UPDATE aiconsole_auditentry SET timestamp = '2026-13-45 25:61:00' WHERE id = %s", [second])
    tamper("UPDATE aiconsole_auditentry SET request = '\"just text\"' WHERE id = %s", [third])


def test_audit_verify_names_each_malformed_entry_and_keeps_going(four_entries, capsys):
    _, second, third, fourth = four_entries
    _malform(four_entries)
    tamper("UPDATE aiconsole_auditentry SET principal = 'mallory@example.com' WHERE id = %s", [fourth])

    status = main(["audit", "verify"])

    err = capsys.readouterr().err
    assert status == 1
    assert err.splitlines() == [
        f"MALFORMED: Admin Activity log: entry #{second} (position 2) is malformed: its timestamp "
        "cannot be read (month must be in 1..12); its content cannot be verified.",
        f"MALFORMED: Admin Activity log: entry #{third} (position 3) is malformed: its request is "
        "not a JSON object; its content cannot be verified.",
        f"TAMPERED: Admin Activity log: entry #{fourth} (position 4) was altered: its content no "
        "longer matches its hash.",
    ]
    assert audit.verify_chain()[-1].kind == "altered"


def test_audit_export_writes_every_row_with_a_marker_for_malformed_ones(client, four_entries, admin):
    _, second, third, _ = four_entries
    _malform(four_entries)
    client.force_login(admin)

    response = client.get("/projects/project-a/audit/export/")

    text = b"".join(response.streaming_content).decode()
    lines = [json.loads(line) for line in text.splitlines()]
    assert len(lines) == 4
    assert [line["protoPayload"]["methodName"] for line in (lines[0], lines[3])] == [
        "google.cloud.ml.v1.JobService.CreateJob"
    ] * 2
    assert lines[1]["malformedEntry"]["id"] == second
    assert lines[1]["malformedEntry"]["problem"].startswith("its timestamp cannot be read")
    assert lines[2] == {"malformedEntry": {"id": third, "problem": "its request is not a JSON object"}}


# --- 13. bucket names -----------------------------------------------------------------------------


def test_deployment_uri_bucket_rule_for_reference(api, project):
    """The rule and wording the job fields below must share."""
    assert post(api, MODELS, {"name": "census"}).status_code == 200

    response = post(api, f"{MODELS}/census/versions", {"name": "v1", "deploymentUri": "gs://Bad_Bucket/m"})

    assert violations(response) == {"version.deployment_uri": f"gs://Bad_Bucket/m: {BUCKET_RULE}"}


@pytest.mark.parametrize(
    "changes, field, uri",
    [
        (
            {"packageUris": ["gs://Bad_Bucket/trainer-0.1.tar.gz"]},
            "job.training_input.package_uris[0]",
            "gs://Bad_Bucket/trainer-0.1.tar.gz",
        ),
        (
            {"packageUris": [PACKAGE, "gs://ab/trainer.whl"]},
            "job.training_input.package_uris[1]",
            "gs://ab/trainer.whl",
        ),
        ({"jobDir": "gs://-bucket/out"}, "job.training_input.job_dir", "gs://-bucket/out"),
    ],
)
def test_an_invalid_bucket_in_a_training_job_is_refused_at_submit(api, project, changes, field, uri):
    response = post(api, JOBS, training("bad_bucket", **changes))

    assert response.status_code == 400
    assert violations(response) == {field: f"{uri}: {BUCKET_RULE}"}
    assert not Job.objects.exists()


@pytest.mark.parametrize(
    "changes, field",
    [
        ({"inputPaths": ["gs://Bad_Bucket/in/*.json"]}, "job.prediction_input.input_paths[0]"),
        ({"outputPath": "gs://x/out"}, "job.prediction_input.output_path"),
    ],
)
def test_an_invalid_bucket_in_a_batch_job_is_refused_at_submit(api, project, changes, field):
    body = {
        "jobId": "bad_batch",
        "predictionInput": {
            "uri": "gs://models-bucket/m",
            "dataFormat": "JSON",
            "region": "us-central1",
            "inputPaths": ["gs://in-bucket/*.json"],
            "outputPath": "gs://out-bucket/o",
            **changes,
        },
    }

    response = post(api, JOBS, body)

    assert response.status_code == 400
    assert BUCKET_RULE in violations(response)[field]
