"""Each trial's highest and lowest objective report, so the trial table reads two numbers per trial
instead of every report; filled in from the reports stored before."""

from django.db import migrations, models

BATCH = 1000


def backfill(apps, schema_editor):
    Trial = apps.get_model("jobs", "Trial")
    changed = []
    for trial in Trial.objects.exclude(all_metrics=[]).only("pk", "all_metrics").iterator(chunk_size=BATCH):
        values = [m["objectiveValue"] for m in trial.all_metrics or [] if m.get("objectiveValue") is not None]
        if values:
            trial.report_max, trial.report_min = max(values), min(values)
            changed.append(trial)
        if len(changed) >= BATCH:
            Trial.objects.bulk_update(changed, ["report_max", "report_min"])
            changed = []
    Trial.objects.bulk_update(changed, ["report_max", "report_min"])


class Migration(migrations.Migration):
    dependencies = [("jobs", "0010_backfill_final_metrics")]

    operations = [
        migrations.AddField(model_name="trial", name="report_max", field=models.FloatField(blank=True, null=True)),
        migrations.AddField(model_name="trial", name="report_min", field=models.FloatField(blank=True, null=True)),
        migrations.RunPython(backfill, migrations.RunPython.noop),
    ]
