"""Each job's final metrics (JobMetric) from the points stored before the summary existed: per job and
metric name, the last point by step, the later one at the same step (as ``jobs.metrics.points.insert``
keeps it from now on). One pass over the job-level points in id order; trial points stay out."""

from django.db import migrations

BATCH = 5000


def metric_name(tag: str, run: str) -> str:
    # As jobs.metrics.compare.metric_name; copied so this migration keeps its meaning if that changes.
    return f"{tag} ({run})" if run else tag


def backfill(apps, schema_editor):
    MetricPoint = apps.get_model("jobs", "MetricPoint")
    JobMetric = apps.get_model("jobs", "JobMetric")
    final: dict[tuple[int, str], tuple[int, float]] = {}
    points = MetricPoint.objects.filter(trial_id="").order_by("pk")
    for job_id, tag, run, step, value in points.values_list("job_id", "tag", "run", "step", "value").iterator(
        chunk_size=BATCH
    ):
        key = (job_id, metric_name(tag, run))
        kept = final.get(key)
        if kept is None or step >= kept[0]:
            final[key] = (step, value)
    JobMetric.objects.all().delete()
    JobMetric.objects.bulk_create(
        (
            JobMetric(job_id=job_id, name=name, step=step, value=value)
            for (job_id, name), (step, value) in final.items()
        ),
        batch_size=BATCH,
    )


class Migration(migrations.Migration):
    dependencies = [("jobs", "0009_runs_table")]

    operations = [migrations.RunPython(backfill, migrations.RunPython.noop)]
