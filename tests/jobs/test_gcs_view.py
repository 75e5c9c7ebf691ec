"""``/gcs/<bucket>/…`` in every replica, as Vertex AI gives it: a container and a package trainer
read an object and write one through it, with the trainers' own credentials (here the session's
Cloud Storage emulator), as the project's account; the view goes with the job."""

from __future__ import annotations

import ctypes
import io
import os

import pytest
from django.conf import settings

from aiconsole import storage
from bench.support.images import make_image
from bench.support.packages import build_package
from bench.support.waiting import wait_for
from jobs import services
from jobs.executor import gcs
from jobs.models import TERMINAL_STATES, Job, LogLine
from tests.helpers.images import require_engine

pytestmark = [
    pytest.mark.executor,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="mounting a job's view needs root; CI runs as root"),
]

READER = """
cat "$1/data/input.txt"
mkdir -p "$1/container-out"
echo "written by a container" > "$1/container-out/model.txt"
ls "$1/container-out"
"""

TASK = """
import os, sys
bucket = sys.argv[1]
print(open(os.path.join(bucket, "data", "input.txt")).read().strip())
os.makedirs(os.path.join(bucket, "package-out"), exist_ok=True)
with open(os.path.join(bucket, "package-out", "model.txt"), "w") as out:
    out.write("written by a package")
print("sees", sorted(os.listdir(os.path.join(bucket, "package-out"))), "as", os.getuid())
"""


@pytest.fixture
def bucket(gcs_emulator):
    try:
        ctypes.CDLL("libfuse.so.2")
    except OSError:
        if os.environ.get("CI", "").lower() in {"1", "true", "yes"}:
            pytest.fail("CI gives replicas /gcs/: libfuse2 is missing (scripts/install-container-engine)")
        pytest.skip("libfuse2 is not installed")
    gcs_emulator.make_bucket("view-bucket")
    gcs_emulator.client.bucket("view-bucket").blob("data/input.txt").upload_from_string(b"hello from gs://\n")
    return gcs_emulator


def _run(project, admin, body) -> tuple[Job, list[str]]:
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 180, message=f"{body['jobId']} to end")
    job.refresh_from_db()
    return job, list(LogLine.objects.filter(job=job).order_by("pk").values_list("message", flat=True))


def _object(emulator, name: str) -> str:
    return emulator.client.bucket("view-bucket").blob(name).download_as_text()


def test_a_container_reads_and_writes_cloud_storage_at_gcs(bucket, executor, project, admin):
    image = make_image(require_engine(), READER)
    job, log = _run(
        project,
        admin,
        {
            "jobId": "gcs_container",
            "trainingInput": {
                "scaleTier": "BASIC",
                "region": "us-central1",
                "masterConfig": {"imageUri": image},
                "args": ["/gcs/view-bucket"],
            },
        },
    )
    assert job.state == "SUCCEEDED", (job.error_message, log)
    assert "Replicas see Cloud Storage at /gcs/<bucket>/ (with the trainers' credentials)." in log
    assert "hello from gs://" in log and "model.txt" in log
    assert _object(bucket, "container-out/model.txt") == "written by a container\n"
    view = settings.DATA_DIR / gcs.FOLDER / f"job-{job.pk}"
    wait_for(lambda: not os.path.ismount(view), 30, message="the view to go with the job")


def test_a_package_trainer_reads_and_writes_cloud_storage_at_gcs_as_its_projects_account(
    bucket, executor, project, admin
):
    from aiconsole import trainer_user

    package = build_package(settings.STORAGE_DIR / "tmp-gcs", {"trainer/task.py": TASK}, kind="wheel")
    stored = storage.save_upload(io.BytesIO(package.read_bytes()), package.name, project="project-a")
    job, log = _run(
        project,
        admin,
        {
            "jobId": "gcs_package",
            "trainingInput": {
                "scaleTier": "BASIC",
                "region": "us-central1",
                "packageUris": [str(stored)],
                "pythonModule": "trainer.task",
                "runtimeVersion": "current",
                "args": ["/gcs/view-bucket"],
            },
        },
    )
    assert job.state == "SUCCEEDED", (job.error_message, log)
    account = trainer_user.for_project(project)
    assert "hello from gs://" in log
    assert f"sees ['model.txt'] as {account.uid}" in log
    assert _object(bucket, "package-out/model.txt") == "written by a package"
    assert not os.path.exists("/gcs/view-bucket"), "the view is the trainer's alone, not the host's"


def test_a_job_that_names_no_cloud_storage_gets_no_view(bucket, executor, project, admin):
    image = make_image(require_engine(), 'ls /gcs 2>&1 || echo "no /gcs here"\n')
    job, log = _run(
        project,
        admin,
        {
            "jobId": "gcs_none",
            "trainingInput": {"scaleTier": "BASIC", "region": "us-central1", "masterConfig": {"imageUri": image}},
        },
    )
    assert job.state == "SUCCEEDED", (job.error_message, log)
    assert "no /gcs here" in log
    assert not any("/gcs/" in line for line in log if line.startswith("Replicas"))
