"""What a container trainer writes to its job dir is read as a package trainer's is: TensorFlow
summaries become the job's metrics, and a model it saves deploys as a version that predicts.

The busybox image cannot train, so the model (trained by the runtime's Python, as the serving
tests' are) and an event file are inputs its arguments name: the container copies them into its
job dir as a real trainer writes its own, and owns what it writes.
"""

from __future__ import annotations

import json
import os

import pytest
from django.conf import settings

from bench.support.images import make_image
from bench.support.waiting import wait_for
from jobs import services
from jobs.models import TERMINAL_STATES, Job, MetricPoint
from models_registry import services as models
from tests.helpers.images import require_engine
from tests.helpers.metrics import write_event_file
from tests.helpers.models import deploy

pytestmark = [pytest.mark.executor, pytest.mark.django_db(transaction=True)]

COPIER = """
while [ $# -gt 0 ]; do
  case "$1" in
    --model-from) model="$2"; shift ;;
    --events-from) events="$2"; shift ;;
    --job-dir) job_dir="$2"; shift ;;
  esac
  shift
done
mkdir -p "$job_dir/model" "$job_dir/logs/train"
cp "$model/model.joblib" "$job_dir/model/model.joblib"
cp "$events" "$job_dir/logs/train/events.out.tfevents.1700000000.trainer"
echo "saved the model and 5 summaries"
"""


def test_a_containers_summaries_are_its_metrics_and_its_saved_model_deploys_and_predicts(
    executor, serving, project, admin, trained
):
    engine = require_engine()
    events = settings.STORAGE_DIR / "test-inputs" / "project-a" / "container-events.tfevents"
    write_event_file(events, 5, tag="epoch_loss")
    job_dir = settings.STORAGE_DIR / "job-dirs" / "project-a" / "container-model"
    body = {
        "jobId": "container_model",
        "trainingInput": {
            "scaleTier": "BASIC",
            "region": "us-central1",
            "masterConfig": {"imageUri": make_image(engine, COPIER)},
            "args": ["--model-from", trained["sklearn"], "--events-from", str(events)],
            "jobDir": str(job_dir),
        },
    }
    job = services.submit_job(project, body, actor=admin)
    wait_for(lambda: Job.objects.get(pk=job.pk).state in TERMINAL_STATES, 120, message="the container job to end")
    job.refresh_from_db()
    assert job.state == "SUCCEEDED", job.error_message

    assert os.stat(job_dir / "model" / "model.joblib").st_uid != 0  # the project's account wrote it
    steps = list(MetricPoint.objects.filter(job=job, tag="epoch_loss").order_by("step").values_list("step", flat=True))
    assert steps == [0, 1, 2, 3, 4]

    model = models.create_model(project, {"name": "from_a_container"}, actor=admin)
    version, operation = deploy(model, "v1", str(job_dir / "model"), admin)
    assert version.state == "READY", operation.error
    answer = models.predict(model, None, json.dumps({"instances": trained["probe"]}).encode(), actor=admin)
    assert json.loads(answer.body) == {"predictions": trained["expected"]["sklearn"]}
