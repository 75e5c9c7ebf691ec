"""Trainers that report metrics, and stored metric points."""

from __future__ import annotations

import struct
from pathlib import Path

from django.conf import settings
from tensorboard.compat.proto import event_pb2, summary_pb2

from jobs.metrics.tfevents import masked_crc32c
from jobs.models import MetricPoint

HYPERTUNE_TASK = """
    import hypertune

    job_dir = sys.argv[sys.argv.index("--job-dir") + 1]
    reporter = hypertune.HyperTune()
    reporter.report_hyperparameter_tuning_metric("accuracy", 0.5, global_step=1)
    reporter.report_hyperparameter_tuning_metric("loss", 2.0, global_step=1)
    deadline = time.time() + 60
    while not os.path.exists(os.path.join(job_dir, "go")) and time.time() < deadline:
        time.sleep(0.05)
    for step in (2, 3):
        reporter.report_hyperparameter_tuning_metric("accuracy", 0.5 + step / 10, global_step=step)
"""


def job_dir_for(name: str) -> str:
    return str(settings.STORAGE_DIR / "job-dirs" / "project-a" / name)


def store_points(job, count: int, *, tag: str = "loss", run: str = "train", trial_id: str = "") -> None:
    MetricPoint.objects.bulk_create(
        MetricPoint(
            job=job,
            trial_id=trial_id,
            source="tfevents",
            run=run,
            tag=tag,
            step=step,
            value=1.0 / (step + 1),
            wall_time=1_700_000_000.0 + step,
        )
        for step in range(count)
    )


def write_event_file(path: Path, count: int, tag: str = "epoch_loss") -> None:
    """One event file of ``count`` scalars, framed as TensorFlow frames them (fast enough for a
    million: one event is filled in again for each step rather than built anew)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    event = event_pb2.Event(summary=summary_pb2.Summary(value=[summary_pb2.Summary.Value(tag=tag)]))
    value = event.summary.value[0]
    length, crc = struct.Struct("<Q").pack, struct.Struct("<I").pack
    with path.open("wb") as handle:
        for start in range(0, count, 50_000):
            records = []
            for step in range(start, min(count, start + 50_000)):
                event.step, event.wall_time, value.simple_value = step, 1_700_000_000.0 + step, 1 / (step + 1)
                data = event.SerializeToString()
                head = length(len(data))
                records.append(head + crc(masked_crc32c(head)) + data + crc(masked_crc32c(data)))
            handle.write(b"".join(records))
