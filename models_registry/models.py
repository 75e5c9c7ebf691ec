"""Long-running operations (versions are created, models deleted, through them).

Models and versions themselves are built by the model-registry feature.
"""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from aiconsole.models import Project


class OperationType(models.TextChoices):
    OPERATION_TYPE_UNSPECIFIED = "OPERATION_TYPE_UNSPECIFIED"
    CREATE_VERSION = "CREATE_VERSION"
    DELETE_VERSION = "DELETE_VERSION"
    DELETE_MODEL = "DELETE_MODEL"
    UPDATE_MODEL = "UPDATE_MODEL"
    UPDATE_VERSION = "UPDATE_VERSION"
    UPDATE_CONFIG = "UPDATE_CONFIG"


class Operation(models.Model):
    """A google.longrunning.Operation: ``done`` with an ``error`` or a ``response``."""

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="operations")
    # The id after projects/P/operations/, e.g. create_census_v1-1607934875576.
    operation_id = models.CharField(max_length=300)
    operation_type = models.CharField(max_length=30, choices=OperationType.choices)
    model_name = models.CharField(max_length=300, blank=True)
    version = models.JSONField(null=True, blank=True)  # OperationMetadata.version, when it has one
    labels = models.JSONField(default=dict, blank=True)
    create_time = models.DateTimeField(default=timezone.now)
    start_time = models.DateTimeField(null=True, blank=True)
    end_time = models.DateTimeField(null=True, blank=True)
    done = models.BooleanField(default=False)
    cancellation_requested = models.BooleanField(default=False)
    error = models.JSONField(null=True, blank=True)  # google.rpc.Status
    response = models.JSONField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "operation_id"], name="unique_operation_id")]
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/operations/{self.operation_id}"
