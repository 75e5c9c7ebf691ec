"""Models, their versions, long-running operations and sampled prediction logs.

A ``Model`` is the IAM resource (roles/ml.modelOwner and modelUser are bound on it); a
``Version`` has no policy of its own and answers IAM checks with its model (``iam_parent``).
Version states move CREATING → READY | FAILED, READY → UPDATING → READY, and READY | FAILED →
DELETING; transitions are compare-and-set updates, so the background deployer and a user's
delete cannot both win.
"""

from __future__ import annotations

import base64
import secrets

from django.conf import settings
from django.db import models
from django.utils import timezone

from aiconsole import iam
from aiconsole.models import Project


def new_etag() -> str:
    return base64.b64encode(secrets.token_bytes(8)).decode()


def new_vertex_id() -> str:
    """A resource number as Vertex AI gives them: 19 decimal digits, never starting with 0."""
    return str(10**18 + secrets.randbelow(9 * 10**18))


class Framework(models.TextChoices):
    FRAMEWORK_UNSPECIFIED = "FRAMEWORK_UNSPECIFIED"
    TENSORFLOW = "TENSORFLOW"
    SCIKIT_LEARN = "SCIKIT_LEARN"
    XGBOOST = "XGBOOST"


class VersionState(models.TextChoices):
    UNKNOWN = "UNKNOWN"
    READY = "READY"
    CREATING = "CREATING"
    FAILED = "FAILED"
    DELETING = "DELETING"
    UPDATING = "UPDATING"


BUSY_STATES = frozenset({VersionState.CREATING, VersionState.UPDATING, VersionState.DELETING})


class ModelQuerySet(models.QuerySet):
    def visible_to(self, user, permission: str = "ml.models.get"):
        return iam.scope(self, user, permission)


class Model(models.Model):
    """A v1 Model: a named container of versions, one of them the default."""

    iam_resource_type = "model"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="models")
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    regions = models.JSONField(default=list, blank=True)
    online_prediction_logging = models.BooleanField(default=False)
    online_prediction_console_logging = models.BooleanField(default=False)
    labels = models.JSONField(default=dict, blank=True)
    etag = models.CharField(max_length=16, default=new_etag)
    default_version = models.ForeignKey("Version", null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    create_time = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # How Vertex AI names the same model (projects/P/locations/L/models/<vertex_id>), and what it
    # shows: the display name given at upload (the v1 name for a model made through v1). A model
    # uploaded through Vertex AI lives in its location; one made through v1 answers in every one.
    vertex_id = models.CharField(max_length=20, unique=True, default=new_vertex_id)
    display_name = models.CharField(max_length=128, blank=True)
    location = models.CharField(max_length=40, blank=True)

    objects = ModelQuerySet.as_manager()

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "name"], name="unique_model_name")]
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/models/{self.name}"

    def touch(self, *fields: str) -> None:
        self.etag = new_etag()
        self.save(update_fields=[*fields, "etag"])


class Version(models.Model):
    """A v1 Version: model files in the data dir, served by processes of its runtime."""

    model = models.ForeignKey(Model, on_delete=models.CASCADE, related_name="versions")
    name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    deployment_uri = models.CharField(max_length=2048)
    runtime_version = models.CharField(max_length=10)
    python_version = models.CharField(max_length=10)
    framework = models.CharField(max_length=24, choices=Framework.choices, default=Framework.FRAMEWORK_UNSPECIFIED)
    machine_type = models.CharField(max_length=40)
    auto_scaling = models.JSONField(null=True, blank=True)
    manual_scaling = models.JSONField(null=True, blank=True)
    request_logging_config = models.JSONField(null=True, blank=True)
    labels = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=10, choices=VersionState.choices, default=VersionState.CREATING)
    error_message = models.TextField(blank=True)
    etag = models.CharField(max_length=16, default=new_etag)
    create_time = models.DateTimeField(default=timezone.now)
    last_use_time = models.DateTimeField(null=True, blank=True)
    # Where the deployer copied the model files (under the data dir); empty until then.
    local_dir = models.CharField(max_length=1024, blank=True)
    # The model file the serving process loads, relative to local_dir (model.joblib, ...).
    model_file = models.CharField(max_length=255, blank=True)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Vertex AI's view of the version: its number within the model (1, 2, …), its aliases
    # ("default" on the model's default version is implied, never stored), and the serving
    # container it was uploaded with (the pre-built image whose framework it is served by).
    vertex_version = models.PositiveIntegerField(null=True, blank=True)
    aliases = models.JSONField(default=list, blank=True)
    container_spec = models.JSONField(null=True, blank=True)
    training_pipeline = models.CharField(max_length=300, blank=True)  # the pipeline that uploaded it

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["model", "name"], name="unique_version_name"),
            models.UniqueConstraint(fields=["model", "vertex_version"], name="unique_vertex_version"),
        ]
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def iam_parent(self) -> Model:
        return self.model

    @property
    def project(self) -> Project:
        return self.model.project

    @property
    def resource_name(self) -> str:
        return f"{self.model.resource_name}/versions/{self.name}"

    @property
    def is_default(self) -> bool:
        return self.model.default_version_id == self.pk

    @property
    def is_busy(self) -> bool:
        return self.state in BUSY_STATES

    @property
    def scaling(self) -> tuple[int, int | None, bool]:
        """(minimum nodes, maximum nodes or None, fixed): manualScaling fixes the count."""
        if self.manual_scaling:
            nodes = int(self.manual_scaling.get("nodes") or 1)
            return nodes, nodes, True
        auto = self.auto_scaling or {}
        maximum = auto.get("maxNodes")
        return int(auto.get("minNodes") or 0), int(maximum) if maximum else None, False

    def _transition(self, allowed: set[str], **changes) -> bool:
        changes.setdefault("etag", new_etag())
        updated = Version.objects.filter(pk=self.pk, state__in=allowed).update(**changes)
        self.refresh_from_db()
        return bool(updated)

    def mark_ready(self) -> bool:
        return self._transition(
            {VersionState.CREATING, VersionState.UPDATING}, state=VersionState.READY, error_message=""
        )

    def mark_failed(self, message: str) -> bool:
        return self._transition(
            {VersionState.CREATING, VersionState.UPDATING}, state=VersionState.FAILED, error_message=message
        )

    def mark_deleting(self) -> bool:
        return self._transition(
            {VersionState.READY, VersionState.FAILED, VersionState.UNKNOWN}, state=VersionState.DELETING
        )


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
    # The version a CREATE_VERSION operation builds: how a restarted console finds unfinished work.
    target_version = models.ForeignKey(
        Version, null=True, blank=True, on_delete=models.SET_NULL, related_name="operations"
    )

    class Meta:
        constraints = [models.UniqueConstraint(fields=["project", "operation_id"], name="unique_operation_id")]
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/operations/{self.operation_id}"

    def finish(self, *, response: dict | None = None, error: dict | None = None) -> bool:
        """Complete the operation once; False when it was already done."""
        updated = Operation.objects.filter(pk=self.pk, done=False).update(
            done=True, end_time=timezone.now(), response=response, error=error
        )
        self.refresh_from_db()
        return bool(updated)


class PredictionLog(models.Model):
    """One sampled online prediction: when the model turns on onlinePredictionLogging.

    Request and response bodies are kept (cut to a few KiB) when the version's
    requestLoggingConfig.samplingPercentage picks the request; otherwise only the access fields.
    """

    version = models.ForeignKey(Version, on_delete=models.CASCADE, related_name="prediction_logs")
    time = models.DateTimeField(db_index=True)
    principal = models.CharField(max_length=254, blank=True)
    status_code = models.IntegerField()
    latency_ms = models.FloatField()
    instance_count = models.IntegerField(default=0)
    request = models.TextField(blank=True)
    response = models.TextField(blank=True)

    class Meta:
        ordering = ["-pk"]
        indexes = [models.Index(fields=["version", "-id"])]

    def __str__(self) -> str:
        return f"{self.version} {self.time:%H:%M:%S} {self.status_code}"


class Endpoint(models.Model):
    """A Vertex AI Endpoint: models' versions deployed to it answer its predictions, chosen per
    request by ``traffic_split`` (deployed model id → percent, summing to 100 when any is deployed).

    It has no IAM policy of its own: the project's roles govern it (``ml.models.*``), and a
    prediction is checked against the model that answers it, as a v1 prediction is.
    """

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="endpoints")
    vertex_id = models.CharField(max_length=20, unique=True, default=new_vertex_id)
    location = models.CharField(max_length=40)
    display_name = models.CharField(max_length=128)
    description = models.TextField(blank=True)
    labels = models.JSONField(default=dict, blank=True)
    traffic_split = models.JSONField(default=dict, blank=True)
    etag = models.CharField(max_length=16, default=new_etag)
    create_time = models.DateTimeField(default=timezone.now)
    update_time = models.DateTimeField(default=timezone.now)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )

    class Meta:
        ordering = ["-pk"]

    def __str__(self) -> str:
        return self.resource_name

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project.project_id}/locations/{self.location}/endpoints/{self.vertex_id}"


class DeployedModel(models.Model):
    """One version deployed to an endpoint; the version's own serving processes answer for it."""

    endpoint = models.ForeignKey(Endpoint, on_delete=models.CASCADE, related_name="deployed_models")
    deployed_id = models.CharField(max_length=20)
    # PROTECT: a deployed version is undeployed before it (or its model) can be deleted.
    version = models.ForeignKey(Version, on_delete=models.PROTECT, related_name="deployments")
    display_name = models.CharField(max_length=128, blank=True)
    resources = models.JSONField(default=dict, blank=True)  # {"dedicatedResources": …} or automaticResources
    create_time = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["endpoint", "deployed_id"], name="unique_deployed_id")]

    def __str__(self) -> str:
        return f"{self.endpoint} {self.deployed_id}"
