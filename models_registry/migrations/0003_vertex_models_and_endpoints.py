"""Vertex AI's view of the registry: a model's number, display name and location, a version's
number, aliases and serving container, and endpoints with the versions deployed to them.
Existing models get a number each, and their versions numbers 1, 2, … in the order they were made."""

import django.db.models.deletion
import django.utils.timezone
from django.conf import settings
from django.db import migrations, models

import models_registry.models


def number_existing(apps, schema_editor):
    Model = apps.get_model("models_registry", "Model")
    Version = apps.get_model("models_registry", "Version")
    for model in Model.objects.filter(vertex_id=None):
        model.vertex_id = models_registry.models.new_vertex_id()
        model.display_name = model.display_name or model.name
        model.save(update_fields=["vertex_id", "display_name"])
        for number, version in enumerate(Version.objects.filter(model=model).order_by("pk"), start=1):
            version.vertex_version = number
            version.save(update_fields=["vertex_version"])


class Migration(migrations.Migration):
    dependencies = [
        ("aiconsole", "0005_service_account_keys"),
        ("models_registry", "0002_models_versions"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.AddField(model_name="model", name="vertex_id", field=models.CharField(max_length=20, null=True)),
        migrations.AddField(
            model_name="model", name="display_name", field=models.CharField(blank=True, max_length=128)
        ),
        migrations.AddField(model_name="model", name="location", field=models.CharField(blank=True, max_length=40)),
        migrations.AddField(
            model_name="version", name="vertex_version", field=models.PositiveIntegerField(blank=True, null=True)
        ),
        migrations.AddField(model_name="version", name="aliases", field=models.JSONField(blank=True, default=list)),
        migrations.AddField(model_name="version", name="container_spec", field=models.JSONField(blank=True, null=True)),
        migrations.AddField(
            model_name="version", name="training_pipeline", field=models.CharField(blank=True, max_length=300)
        ),
        migrations.RunPython(number_existing, migrations.RunPython.noop),
        migrations.AlterField(
            model_name="model",
            name="vertex_id",
            field=models.CharField(default=models_registry.models.new_vertex_id, max_length=20, unique=True),
        ),
        migrations.AddConstraint(
            model_name="version",
            constraint=models.UniqueConstraint(fields=("model", "vertex_version"), name="unique_vertex_version"),
        ),
        migrations.CreateModel(
            name="Endpoint",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                (
                    "vertex_id",
                    models.CharField(default=models_registry.models.new_vertex_id, max_length=20, unique=True),
                ),
                ("location", models.CharField(max_length=40)),
                ("display_name", models.CharField(max_length=128)),
                ("description", models.TextField(blank=True)),
                ("labels", models.JSONField(blank=True, default=dict)),
                ("traffic_split", models.JSONField(blank=True, default=dict)),
                ("etag", models.CharField(default=models_registry.models.new_etag, max_length=16)),
                ("create_time", models.DateTimeField(default=django.utils.timezone.now)),
                ("update_time", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "created_by",
                    models.ForeignKey(
                        blank=True,
                        null=True,
                        on_delete=django.db.models.deletion.SET_NULL,
                        related_name="+",
                        to=settings.AUTH_USER_MODEL,
                    ),
                ),
                (
                    "project",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE, related_name="endpoints", to="aiconsole.project"
                    ),
                ),
            ],
            options={"ordering": ["-pk"]},
        ),
        migrations.CreateModel(
            name="DeployedModel",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                ("deployed_id", models.CharField(max_length=20)),
                ("display_name", models.CharField(blank=True, max_length=128)),
                ("resources", models.JSONField(blank=True, default=dict)),
                ("create_time", models.DateTimeField(default=django.utils.timezone.now)),
                (
                    "endpoint",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="deployed_models",
                        to="models_registry.endpoint",
                    ),
                ),
                (
                    "version",
                    models.ForeignKey(
                        on_delete=django.db.models.deletion.PROTECT,
                        related_name="deployments",
                        to="models_registry.version",
                    ),
                ),
            ],
            options={
                "ordering": ["pk"],
                "constraints": [models.UniqueConstraint(fields=("endpoint", "deployed_id"), name="unique_deployed_id")],
            },
        ),
    ]
