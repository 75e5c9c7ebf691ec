"""Trainers that report metrics, and stored metric points."""

from __future__ import annotations

from django.conf import settings

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
        MetricPoint(job=job, trial_id=trial_id, source="tfevents", run=run, tag=tag, step=step,
                    value=1.0 / (step + 1), wall_time=1_700_000_000.0 + step) for step in range(count))
