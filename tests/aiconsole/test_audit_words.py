"""An audit entry in plain words beside its method name, and the method name broken only at dots."""

from __future__ import annotations

import pytest
from django.test import Client

from aiconsole.audit_words import sentence
from aiconsole.models import AuditEntry
from tests.helpers.jobs import submit


@pytest.mark.parametrize(
    ("method", "resource", "granted", "created", "expected"),
    [
        (
            "google.cloud.ml.v1.JobService.CancelJob",
            "projects/p/jobs/to_cancel_1",
            True,
            "",
            "cancelled job to_cancel_1",
        ),
        ("google.cloud.ml.v1.JobService.CancelJob", "projects/p/jobs/j", False, "", "tried to cancel job j (refused)"),
        ("google.cloud.ml.v1.JobService.CreateJob", "projects/p", True, "projects/p/jobs/j1", "submitted job j1"),
        (
            "google.cloud.ml.v1.JobService.CreateJob",
            "projects/p",
            False,
            "",
            "tried to submit a job to project p (refused)",
        ),
        ("google.cloud.ml.v1.JobService.GetJob", "projects/p/jobs/j", True, "", "read job j"),
        (
            "aiconsole.WebAccessService.OpenShell",
            "projects/p/jobs/j/webAccess/master-replica-0",
            True,
            "",
            "opened a shell into master-replica-0 of job j",
        ),
        (
            "aiconsole.WebAccessService.OpenShell",
            "projects/p/jobs/j",
            False,
            "",
            "tried to open a shell into a replica of job j (refused)",
        ),
        (
            "aiconsole.WebAccessService.CloseShell",
            "projects/p/jobs/j/webAccess/trial-3/worker-replica-1",
            True,
            "",
            "closed a shell into trial-3/worker-replica-1 of job j",
        ),
        ("google.cloud.ml.v1.JobService.ListJobs", "projects/p", True, "", "listed the jobs of project p"),
        (
            "google.logging.v2.LoggingServiceV2.ListLogEntries",
            "projects/p/jobs/j/logs",
            True,
            "",
            "read the log of job j",
        ),
        (
            "aiconsole.OutputService.GetOutput",
            "projects/p/jobs/j/outputs/model/a.csv",
            True,
            "",
            "previewed model/a.csv of job j",
        ),
        ("aiconsole.OutputService.ListOutputs", "projects/p/jobs/j/outputs/", True, "", "listed the folder of job j"),
        (
            "google.cloud.ml.v1.ModelService.CreateVersion",
            "projects/p/models/m",
            True,
            "projects/p/models/m/versions/v1",
            "created version v1",
        ),
        ("google.iam.v1.IAMPolicy.SetIamPolicy", "projects/p/models/m", True, "", "changed who has roles on model m"),
        ("aiconsole.UserService.DeactivateUser", "users/bob", True, "", "deactivated user bob"),
        (
            "google.cloud.ml.v1.OnlinePredictionService.Predict",
            "projects/p/models/m",
            True,
            "",
            "sent predictions to model m",
        ),
        # Vertex AI's names carry a location: the sentence names the job, not its project.
        (
            "google.cloud.aiplatform.v1.JobService.CreateCustomJob",
            "projects/p/locations/us-central1",
            True,
            "projects/p/locations/us-central1/customJobs/123",
            "created custom job 123",
        ),
        (
            "google.cloud.aiplatform.v1.JobService.CancelHyperparameterTuningJob",
            "projects/p/locations/us-central1/hyperparameterTuningJobs/45",
            False,
            "",
            "tried to cancel hyperparameter tuning job 45 (refused)",
        ),
        (
            "google.cloud.aiplatform.v1.JobService.ListCustomJobs",
            "projects/p/locations/us-central1",
            True,
            "",
            "listed the custom jobs of project p",
        ),
        (
            "google.longrunning.Operations.GetOperation",
            "projects/p/locations/us-central1/operations/678",
            True,
            "",
            "read operation 678",
        ),
    ],
)
def test_an_entry_reads_as_a_sentence(method, resource, granted, created, expected):
    assert sentence(method, resource, granted=granted, created=created) == expected


def test_the_audit_log_shows_the_sentence_beside_the_method_cut_at_its_dots(project, admin):
    job = submit(project, "to_cancel_1", admin)
    from jobs import services

    services.cancel_job(job, actor=admin)
    client = Client()
    client.force_login(admin)
    html = client.get("/projects/project-a/audit/").content.decode()
    assert "<td data-sentence>cancelled job to_cancel_1</td>" in html
    assert "google.<wbr>cloud.<wbr>ml.<wbr>v1.<wbr>JobService.<wbr>CancelJob" in html
    entry = AuditEntry.objects.filter(method_name__endswith="CancelJob").get()
    page = client.get(f"/projects/project-a/audit/{entry.pk}/").content.decode()
    assert f"<h1>{admin.email} cancelled job to_cancel_1</h1>" in page
