"""Cross-cutting rows: projects and their trainer accounts, IAM role bindings, API tokens and the audit log."""

import hashlib
import json
import secrets

from django.conf import settings
from django.core.validators import RegexValidator
from django.db import models
from django.utils.crypto import salted_hmac

from aiconsole import audit_words

PROJECT_ID_VALIDATOR = RegexValidator(
    r"^[a-z][a-z0-9-]{4,28}[a-z0-9]$",
    "Project id must be 6 to 30 characters: lowercase letters, digits and hyphens, "
    "starting with a letter and not ending with a hyphen.",
)


def _project_number() -> int:
    return secrets.randbelow(9 * 10**11) + 10**11


class Project(models.Model):
    """A project, the namespace for jobs and models and the unit of IAM and audit config."""

    project_id = models.CharField(max_length=30, unique=True, validators=[PROJECT_ID_VALIDATOR])
    display_name = models.CharField(max_length=100, blank=True)
    project_number = models.BigIntegerField(unique=True, default=_project_number)
    # Data Access (ADMIN_READ) audit logs are off by default, as in the original.
    data_access_logs = models.BooleanField(default=False)
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["project_id"]

    def __str__(self) -> str:
        return self.project_id

    @property
    def resource_name(self) -> str:
        return f"projects/{self.project_id}"


class TrainerAccount(models.Model):
    """The host account (user and group, one number) a project's code runs as when the console
    runs as root: its trainers, TensorBoards and serving processes (aiconsole.trainer_user). The
    number is kept here so every worker host gives a project the same one."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="trainer_account")
    uid = models.PositiveIntegerField(unique=True)
    created = models.DateTimeField(auto_now_add=True)

    def __str__(self) -> str:
        return f"{self.project_id}: {self.uid}"


class RoleBinding(models.Model):
    """One member holding one predefined role on a project, or on a single job or model."""

    class ResourceType(models.TextChoices):
        PROJECT = "project"
        JOB = "job"
        MODEL = "model"

    project = models.ForeignKey(Project, on_delete=models.CASCADE, related_name="bindings")
    resource_type = models.CharField(max_length=10, choices=ResourceType.choices)
    # The job's or model's primary key; null for project-level bindings.
    resource_id = models.BigIntegerField(null=True, blank=True)
    role = models.CharField(max_length=40)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    created = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["project", "resource_type", "resource_id", "role", "user"],
                name="unique_role_binding",
                nulls_distinct=False,
            )
        ]
        indexes = [models.Index(fields=["user", "project"])]

    def __str__(self) -> str:
        return f"{self.user} {self.role} on {self.resource_type}:{self.resource_id or self.project}"


def hash_token(raw: str) -> str:
    return hashlib.sha256(raw.encode()).hexdigest()


class ApiTokenQuerySet(models.QuerySet):
    def active(self):
        return self.filter(revoked=None)


class ApiToken(models.Model):
    """A bearer token for the REST API. Only a hash is stored; the raw token is shown once."""

    PREFIX = "aic_"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, blank=True)
    key_hash = models.CharField(max_length=64, unique=True)
    # The first characters of the raw token, so a user can tell tokens apart.
    hint = models.CharField(max_length=12)
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)
    # An access token a service-account key was exchanged for (aiconsole.service_keys) ends here.
    expires = models.DateTimeField(null=True, blank=True)

    objects = ApiTokenQuerySet.as_manager()

    def __str__(self) -> str:
        return f"{self.hint}… ({self.user})"

    @classmethod
    def new_raw_key(cls) -> str:
        return cls.PREFIX + secrets.token_urlsafe(32)


class ServiceAccountKey(models.Model):
    """A key of a user's Google-style service-account key file (``aiconsole credentials create``):
    the public half only. ``google.auth.default()`` signs with the private half, which only the file
    holds; a JWT signed with it is exchanged for an access token, or accepted as one."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="service_keys")
    key_id = models.CharField(max_length=40, unique=True)  # the file's private_key_id, a JWT's kid
    public_key = models.TextField()  # PEM
    created = models.DateTimeField(auto_now_add=True)
    last_used = models.DateTimeField(null=True, blank=True)
    revoked = models.DateTimeField(null=True, blank=True)

    def __str__(self) -> str:
        return f"{self.key_id[:12]}… ({self.user})"


class AuditEntryQuerySet(models.QuerySet):
    """Bulk updates and deletes would bypass the model's own refusal: refuse them here too.

    The one exception is the retention purge (``aiconsole.audit.purge``), which deletes with SQL.
    """

    def update(self, **kwargs):
        raise ValueError("Audit entries are append-only.")

    def delete(self):
        raise ValueError("Audit entries are append-only.")


class AuditLogType(models.TextChoices):
    ADMIN_ACTIVITY = "activity", "Admin Activity"
    DATA_ACCESS = "data_access", "Data Access"


def _audit_hmac(label: str, message: str) -> str:
    # Keyed: without the secret key, a database writer cannot forge a consistent chain.
    return salted_hmac(label, message, algorithm="sha256").hexdigest()


class AuditEntry(models.Model):
    """An append-only, hash-chained record of one call: who did what to which resource.

    Principal and resource are kept as names so an entry stays readable after deletions. Each log
    type (Admin Activity, Data Access) is its own chain, so the two can be kept for different
    times: ``seq`` is the entry's position in its chain and ``entry_hash`` a keyed hash of its
    content and the previous entry's hash (see ``aiconsole.audit.verify_chain``).
    """

    LogType = AuditLogType

    timestamp = models.DateTimeField(db_index=True)
    log_type = models.CharField(max_length=12, choices=LogType.choices)
    seq = models.BigIntegerField(default=0)
    project_id = models.CharField(max_length=30, db_index=True, blank=True)  # blank: server-wide
    principal = models.CharField(max_length=254)
    service_name = models.CharField(max_length=80, default="ml.googleapis.com")
    method_name = models.CharField(max_length=120)
    resource_name = models.CharField(max_length=300)
    permission = models.CharField(max_length=80, blank=True)
    granted = models.BooleanField()
    status_code = models.IntegerField(default=0)  # google.rpc.Code; 0 is OK
    status_message = models.TextField(blank=True)
    caller_ip = models.CharField(max_length=45, blank=True)
    user_agent = models.CharField(max_length=500, blank=True)
    request_id = models.CharField(max_length=40, blank=True)
    request = models.JSONField(default=dict, blank=True)
    response = models.JSONField(default=dict, blank=True)
    # AuditLog.serviceData, e.g. an IAM policy delta.
    service_data = models.JSONField(default=dict, blank=True)
    prev_hash = models.CharField(max_length=64)
    entry_hash = models.CharField(max_length=64, unique=True)

    objects = AuditEntryQuerySet.as_manager()

    class Meta:
        ordering = ["-id"]
        verbose_name_plural = "audit entries"
        constraints = [models.UniqueConstraint(fields=["log_type", "seq"], name="unique_audit_chain_position")]
        indexes = [models.Index(fields=["project_id", "id"], name="audit_project_keyset")]

    def __str__(self) -> str:
        return f"{self.timestamp:%Y-%m-%d %H:%M:%S} {self.principal} {self.method_name}"

    def save(self, *args, **kwargs):
        if self.pk is not None:
            raise ValueError("Audit entries are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise ValueError("Audit entries are append-only.")

    @property
    def created_resource(self) -> str:
        """What a Create… call made, from its response: the original's entry names the parent in
        resourceName (projects/P for CreateJob), which alone does not say which job it was."""
        if ".Create" not in self.method_name or not isinstance(self.response, dict):
            return ""
        name = self.response.get("name") or ""
        if not name and self.response.get("jobId"):
            name = f"{self.resource_name}/jobs/{self.response['jobId']}"
        return name if isinstance(name, str) and name.startswith(f"{self.resource_name}/") else ""

    @property
    def sentence(self) -> str:
        """What happened, in words ("cancelled job to_cancel_1"), for the audit pages."""
        return audit_words.sentence(
            self.method_name, self.resource_name, granted=self.granted, created=self.created_resource
        )

    @property
    def method_parts(self) -> list[str]:
        """The method name cut after each dot, so a narrow column breaks it there, never mid-word."""
        parts = self.method_name.split(".")
        return [part + "." for part in parts[:-1]] + parts[-1:]

    @property
    def is_data_access(self) -> bool:
        return self.log_type == AuditLogType.DATA_ACCESS

    def canonical(self) -> str:
        fields = {
            "timestamp": self.timestamp.isoformat(),
            "log_type": self.log_type,
            "seq": self.seq,
            "project_id": self.project_id,
            "principal": self.principal,
            "service_name": self.service_name,
            "method_name": self.method_name,
            "resource_name": self.resource_name,
            "permission": self.permission,
            "granted": self.granted,
            "status_code": self.status_code,
            "status_message": self.status_message,
            "caller_ip": self.caller_ip,
            "user_agent": self.user_agent,
            "request_id": self.request_id,
            "request": self.request,
            "response": self.response,
            "service_data": self.service_data,
        }
        return json.dumps(fields, sort_keys=True, separators=(",", ":"), default=str)

    def compute_hash(self) -> str:
        return _audit_hmac("aiconsole.audit-chain", self.prev_hash + self.canonical())


class AuditChain(models.Model):
    """Where one log type's chain starts (after purges) and ends, sealed with a keyed hash.

    The anchor is the hash of the last purged entry, so verification starts there; the head lets
    ``verify_chain`` notice entries removed from the end, which a chain alone cannot show.
    """

    log_type = models.CharField(max_length=12, choices=AuditLogType.choices, unique=True)
    anchor_seq = models.BigIntegerField(default=0)
    anchor_hash = models.CharField(max_length=64)
    head_seq = models.BigIntegerField(default=0)
    head_hash = models.CharField(max_length=64)
    purged_through = models.DateTimeField(null=True, blank=True)
    seal = models.CharField(max_length=64)

    def __str__(self) -> str:
        return f"{self.log_type} chain {self.anchor_seq}..{self.head_seq}"

    def compute_seal(self) -> str:
        message = f"{self.log_type}|{self.anchor_seq}|{self.anchor_hash}|{self.head_seq}|{self.head_hash}"
        return _audit_hmac("aiconsole.audit-chain-state", message)


class UserPreference(models.Model):
    """One choice a user made about how the console shows things to them (``jobs.list.columns``: the
    jobs list's columns and their order), kept so a page opens as they left it. Read and written only
    for the signed-in user, through ``aiconsole.preferences``; each feature checks its own values."""

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="preferences")
    name = models.CharField(max_length=100)
    value = models.JSONField()
    updated = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["user", "name"], name="unique_preference_per_user")]

    def __str__(self) -> str:
        return f"{self.user}: {self.name}"


class ProjectRetention(models.Model):
    """How long a project's job records and files are kept, set by a platform admin: past ``days``
    (0: kept for ever) after a job ended, its log lines, metric points and the job dir the console
    made for it are deleted by the daily clean-up (``jobs.executor.cleanup``), unless the job carries
    ``keep=true`` or the label ``protect_label`` names."""

    project = models.OneToOneField(Project, on_delete=models.CASCADE, related_name="retention")
    days = models.PositiveIntegerField(default=0)
    protect_label = models.CharField(max_length=63, blank=True, default="")
    updated = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.project}: {self.days} days"
