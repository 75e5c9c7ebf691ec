"""The v1 wire shape of a Job: camelCase, int64 as strings, RFC 3339 times without fractions."""

from __future__ import annotations

from datetime import UTC, datetime

from jobs import kinds
from jobs.models import Job, JobState
from jobs.quotas import admission as quotas


def rfc3339(value: datetime | None) -> str | None:
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def job_resource(job: Job) -> dict:
    """The Job as the original API returned it; unset fields are left out."""
    resource: dict = {"jobId": job.job_id}
    if job.training_input is not None:
        resource["trainingInput"] = job.training_input
    if job.prediction_input is not None:
        resource["predictionInput"] = job.prediction_input
    resource["createTime"] = rfc3339(job.create_time)
    if job.start_time:
        resource["startTime"] = rfc3339(job.start_time)
    if job.end_time:
        resource["endTime"] = rfc3339(job.end_time)
    resource["state"] = job.state
    if job.error_message:
        resource["errorMessage"] = job.error_message
    if job.training_input is not None:
        resource["trainingOutput"] = output = kinds.of_job(job).training_output(job)
        for add in kinds.output_additions():
            add(job, output)
    elif job.prediction_input is not None:
        # Batch prediction jobs keep their PredictionOutput in the same output column.
        resource["predictionOutput"] = job.training_output or {}
    if job.labels:
        resource["labels"] = job.labels
    resource["etag"] = job.etag
    if job.state == JobState.QUEUED:
        resource["jobPosition"] = str(quotas.position(job))  # in the fair queue's line
    return resource


def trial_resource(trial) -> dict:
    """A Trial as the API's HyperparameterOutput; unset fields are left out."""
    output: dict = {"trialId": trial.trial_id, "hyperparameters": dict(trial.hyperparameters)}
    if trial.final_metric:
        output["finalMetric"] = trial.final_metric
    if trial.all_metrics:
        output["allMetrics"] = trial.all_metrics
    if trial.start_time:
        output["startTime"] = rfc3339(trial.start_time)
    if trial.end_time:
        output["endTime"] = rfc3339(trial.end_time)
    output["state"] = trial.state
    if trial.is_stopped_early:
        output["isTrialStoppedEarly"] = True
    return output
