"""Images as people already have them: public AI Platform container samples keep their code under
``/root`` (0700) and write their model to a folder named in their own flags (``--model-dir``)
beside the job dir. They run unchanged: root inside a user namespace whose root is the project's
account outside, the output folder made and mounted read-write, the inputs read-only, every mount
said in the job's log. CI runs as root and has podman, so these run there."""

from __future__ import annotations

import os

import pytest
from django.conf import settings

from aiconsole import storage, trainer_user
from bench.support.images import make_root_image
from bench.support.waiting import wait_for
from jobs import services
from jobs.models import TERMINAL_STATES, Job, LogLine
from tests.helpers.images import require_engine

pytestmark = [
    pytest.mark.executor,
    pytest.mark.django_db(transaction=True),
    pytest.mark.skipif(os.geteuid() != 0, reason="only a console running as root maps a project's account"),
]

SAMPLE = """
while [ $# -gt 0 ]; do
  case "$1" in
    --model-dir) model_dir="$2"; shift ;;
    --train-files) train="$2"; shift ;;
    --job-dir) job_dir="$2"; shift ;;
  esac
  shift
done
echo "running from $(pwd) as $(id -u):$(id -g)"
echo "read $(wc -l < "$train") training lines"
mkdir -p "$model_dir/export" && echo "weights" > "$model_dir/export/model.bin" && echo "model written"
echo "checkpoint" > "$job_dir/ckpt" && echo "checkpoint written"
if echo "overwrite" > "$train" 2>/dev/null; then echo "input: written"; else echo "input: read-only"; fi
"""


def test_a_sample_image_with_its_code_under_root_runs_and_writes_beside_its_job_dir(executor, project, admin):
    engine = require_engine()
    area = settings.STORAGE_DIR / "outputs" / "project-a" / "census"
    train = storage.save_upload(__import__("io").BytesIO(b"a,b\n1,2\n3,4\n"), "train.csv", project="project-a")
    body = {
        "jobId": "census_sample",
        "trainingInput": {
            "scaleTier": "BASIC",
            "region": "us-central1",
            "masterConfig": {"imageUri": make_root_image(engine, SAMPLE)},
            "args": ["--train-files", str(train), "--model-dir", str(area / "model")],
            "jobDir": str(area / "job"),
        },
    }
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 120, message="the sample to end")
    job.refresh_from_db()
    log = list(LogLine.objects.filter(job=job).order_by("pk").values_list("message", flat=True))

    assert job.state == "SUCCEEDED", (job.error_message, log)
    assert "running from /root as 0:0" in log
    assert "read 3 training lines" in log and "model written" in log and "checkpoint written" in log
    assert "input: read-only" in log
    account = trainer_user.for_project(project)
    for written in (area / "model" / "export" / "model.bin", area / "job" / "ckpt"):
        assert (written.stat().st_uid, written.stat().st_gid) == (account.uid, account.gid), written
    mounts = next(line for line in log if line.startswith("master-replica-0 sees "))
    assert f"{area / 'job'} (read-write)" in mounts and f"{area / 'model'} (read-write)" in mounts
    assert f"{train} (read-only)" in mounts


def test_a_container_refused_a_file_is_told_the_likely_cause(executor, project, admin):
    engine = require_engine()
    train = storage.save_upload(__import__("io").BytesIO(b"x\n"), "fixed.csv", project="project-a")
    body = {
        "jobId": "refused_sample",
        "trainingInput": {
            "scaleTier": "BASIC",
            "region": "us-central1",
            "masterConfig": {"imageUri": make_root_image(engine, 'echo changed > "$2"\n')},
            "args": ["--train-files", str(train)],
        },
    }
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 120, message="the sample to end")
    job.refresh_from_db()

    assert job.state == "FAILED"
    assert "runs as root mapped to the project's account" in job.error_message
    assert "stored inputs are read-only" in job.error_message
