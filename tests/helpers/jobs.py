"""Job bodies, submitted jobs and their logs (real trainer packages: bench/support/packages.py)."""

from __future__ import annotations

PACKAGE = "gs://trainer-bucket/trainer-0.1.tar.gz"


def body(job_id: str, **training_input) -> dict:
    """A valid BASIC job body; nothing fetches its package unless an executor runs."""
    return {
        "jobId": job_id,
        "trainingInput": {
            "scaleTier": "BASIC",
            "packageUris": [PACKAGE],
            "pythonModule": "trainer.task",
            "region": "us-central1",
            "runtimeVersion": "2.11",
            "pythonVersion": "3.7",
            **training_input,
        },
    }


def submit(project, job_id: str, actor):
    from jobs import services

    return services.submit_job(project, body(job_id), actor=actor)


def log_text(job) -> str:
    return "\n".join(job.log_lines.order_by("pk").values_list("message", flat=True))
