"""The Vertex AI wire shape of a job the engine runs: a CustomJob, a HyperparameterTuningJob, or a
custom TrainingPipeline (which answers its task's state as a pipeline's, and names its job as its
``backingCustomJob``).

Built from the job's row (state, times, error, labels, trials) and the request it was created
with; enums by name here, as numbers on the wire when the caller asks (``schema.encode``).
The engine's states map onto Vertex's (PREPARING is ``JOB_STATE_PENDING``), a failure's replica
is named as Vertex names it (``workerpool0-0``, not ``master 0``), and a trial reports its
parameters typed by the study's spec and its measurements under the study's metric id.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

from jobs import kinds
from jobs.models import Job, JobState, Trial, VertexCollection, VertexJob, VertexOperation

STATES: dict[str, str] = {
    JobState.STATE_UNSPECIFIED: "JOB_STATE_UNSPECIFIED",
    JobState.QUEUED: "JOB_STATE_QUEUED",
    JobState.PREPARING: "JOB_STATE_PENDING",
    JobState.RUNNING: "JOB_STATE_RUNNING",
    JobState.SUCCEEDED: "JOB_STATE_SUCCEEDED",
    JobState.FAILED: "JOB_STATE_FAILED",
    JobState.CANCELLING: "JOB_STATE_CANCELLING",
    JobState.CANCELLED: "JOB_STATE_CANCELLED",
}
PIPELINE_STATES: dict[str, str] = {
    JobState.STATE_UNSPECIFIED: "PIPELINE_STATE_UNSPECIFIED",
    JobState.QUEUED: "PIPELINE_STATE_QUEUED",
    JobState.PREPARING: "PIPELINE_STATE_PENDING",
    JobState.RUNNING: "PIPELINE_STATE_RUNNING",
    JobState.SUCCEEDED: "PIPELINE_STATE_SUCCEEDED",
    JobState.FAILED: "PIPELINE_STATE_FAILED",
    JobState.CANCELLING: "PIPELINE_STATE_CANCELLING",
    JobState.CANCELLED: "PIPELINE_STATE_CANCELLED",
}
TRIAL_STATES: dict[str, str] = {
    JobState.QUEUED: "REQUESTED",
    JobState.PREPARING: "ACTIVE",
    JobState.RUNNING: "ACTIVE",
    JobState.CANCELLING: "STOPPING",
    JobState.SUCCEEDED: "SUCCEEDED",
    JobState.FAILED: "INFEASIBLE",
    JobState.CANCELLED: "INFEASIBLE",
}
# google.rpc.Code of a job's ``error``: Vertex reports a trainer's failure as INVALID_ARGUMENT.
CODE_CANCELLED, CODE_INVALID_ARGUMENT = 1, 3
_POOLS = {"master": 0, "worker": 1, "ps": 2, "evaluator": 3}
_REPLICA = re.compile(r"\breplica (master|worker|ps|evaluator) (\d+)\b")


def timestamp(value: datetime | None) -> str | None:
    """RFC 3339 with microseconds, as Vertex writes its times."""
    if value is None:
        return None
    return value.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def vertex_words(message: str) -> str:
    """An engine message with its replicas named as Vertex names them (``workerpool1-0``)."""
    return _REPLICA.sub(lambda m: f"replica workerpool{_POOLS[m.group(1)]}-{m.group(2)}", message)


def vertex_node(label: str) -> str:
    """A replica's name as Vertex AI's ``webAccessUris`` name it: ``worker-replica-1`` → ``workerpool1-1``."""
    task, _, index = label.rsplit("-", 2)
    return f"workerpool{_POOLS.get(task, 0)}-{index}"


def job_resource(job: Job, vertex: VertexJob, trials: list[Trial] | None = None, *, collection: str = "") -> dict:
    """The job as ``collection`` (default: its own) answers it: a CustomJob, a HyperparameterTuningJob
    with its ``trials`` (read from ``job.trials`` unless given), or a TrainingPipeline."""
    collection = collection or vertex.collection
    if collection == VertexCollection.TRAINING_PIPELINES:
        return pipeline_resource(job, vertex)
    if collection == VertexCollection.BATCH_PREDICTION_JOBS:
        return batch_resource(job, vertex)
    name = f"projects/{job.project.project_id}/locations/{vertex.location}/{collection}/{vertex.vertex_id}"
    resource: dict = {"name": name, "displayName": vertex.display_name}
    request = vertex.request
    if collection == VertexCollection.CUSTOM_JOBS:
        resource["jobSpec"] = request.get("jobSpec", {})
        output: dict = {}
        for add in kinds.output_additions():  # web access: the shells open into its replicas
            add(job, output)
        if output.get("webAccessUris"):
            resource["webAccessUris"] = {vertex_node(label): uri for label, uri in output["webAccessUris"].items()}
    else:
        for key in ("studySpec", "maxTrialCount", "parallelTrialCount", "maxFailedTrialCount", "trialJobSpec"):
            if key in request:
                resource[key] = request[key]
        rows = list(job.trials.all()) if trials is None else trials
        if rows:
            resource["trials"] = [trial_resource(trial, job, vertex) for trial in rows]
    resource["state"] = STATES.get(job.state, "JOB_STATE_UNSPECIFIED")
    return _with_times_error_labels(resource, job, vertex)


def batch_resource(job: Job, vertex: VertexJob) -> dict:
    """A BatchPredictionJob: its request as given, the folder its predictions go to once it runs,
    and how many instances were predicted and failed once it has ended."""
    request, engine = vertex.request, vertex.engine or {}
    resource: dict = {"name": vertex.resource_name, "displayName": vertex.display_name, "model": request["model"]}
    if engine.get("modelVersionId"):
        resource["modelVersionId"] = engine["modelVersionId"]
    for key in ("inputConfig", "outputConfig", "dedicatedResources", "manualBatchTuningParameters"):
        if key in request:
            resource[key] = request[key]
    if job.start_time is not None and engine.get("outputDirectory"):
        resource["outputInfo"] = {"gcsOutputDirectory": engine["outputDirectory"]}
    output = job.training_output or {}
    resource["state"] = STATES.get(job.state, "JOB_STATE_UNSPECIFIED")
    if "predictionCount" in output:
        resource["completionStats"] = {
            "successfulCount": output["predictionCount"],
            "failedCount": output.get("errorCount", "0"),
            "incompleteCount": "0",
        }
        resource["resourcesConsumed"] = {"replicaHours": output.get("nodeHours", 0)}
    return _with_times_error_labels(resource, job, vertex)


def pipeline_resource(job: Job, vertex: VertexJob) -> dict:
    """A custom TrainingPipeline: its own fields as given, its job's state and times as its own, and
    its job named as the task's backing CustomJob (or HyperparameterTuningJob) once it has started."""
    task = (vertex.engine or {}).get("pipeline") or {}
    resource: dict = {
        "name": vertex.resource_name,
        "displayName": vertex.display_name,
        "trainingTaskDefinition": task.get("trainingTaskDefinition", ""),
        "trainingTaskInputs": task.get("trainingTaskInputs", {}),
    }
    if job.start_time is not None:
        runs_as = vertex.runs_as
        key = "backingCustomJob" if runs_as == VertexCollection.CUSTOM_JOBS else "backingHyperparameterTuningJob"
        resource["trainingTaskMetadata"] = {
            key: f"projects/{job.project.project_id}/locations/{vertex.location}/{runs_as}/{vertex.vertex_id}"
        }
    resource["state"] = PIPELINE_STATES.get(job.state, "PIPELINE_STATE_UNSPECIFIED")
    resource = _with_times_error_labels(resource, job, vertex)
    if task.get("upload"):
        _with_uploaded_model(resource, job, task)
    return resource


def _with_uploaded_model(resource: dict, job: Job, task: dict) -> None:
    """A pipeline that uploads its model: ``modelToUpload`` as given, named once uploaded. Its job's
    success is the pipeline's only once the model serves (RUNNING until then, FAILED if it cannot)."""
    upload = task["upload"]
    model = dict(upload["model"])
    for key in ("modelId", "parentModel"):
        if key in upload:
            resource[key] = upload[key]
    if job.state == JobState.SUCCEEDED:
        operation = None
        if task.get("uploadOperation"):
            operation = VertexOperation.objects.filter(operation_id=task["uploadOperation"]).first()
        body = operation.body if operation is not None else {}
        failure = task.get("uploadError") or (body.get("error") or {}).get("message")
        if failure:
            resource["state"] = "PIPELINE_STATE_FAILED"
            resource["error"] = {"code": CODE_INVALID_ARGUMENT, "message": failure}
        elif body.get("done"):
            model["name"] = body["response"]["model"]
            model["versionId"] = body["response"]["modelVersionId"]
            resource["modelId"] = model["name"].rsplit("/", 1)[1]
        else:
            resource["state"] = "PIPELINE_STATE_RUNNING"
            resource.pop("endTime", None)
    resource["modelToUpload"] = model


def _with_times_error_labels(resource: dict, job: Job, vertex: VertexJob) -> dict:
    """What every Vertex resource of a job says alike: its times, its error, its labels, its key."""
    times = [t for t in (job.create_time, job.start_time, job.end_time) if t is not None]
    for key, value in (
        ("createTime", job.create_time),
        ("startTime", job.start_time),
        ("endTime", job.end_time),
        ("updateTime", max(times) if times else None),
    ):
        if value is not None:
            resource[key] = timestamp(value)
    error = job_error(job)
    if error:
        resource["error"] = error
    if job.labels:
        resource["labels"] = dict(job.labels)
    if "encryptionSpec" in vertex.request:
        resource["encryptionSpec"] = vertex.request["encryptionSpec"]
    return resource


def job_error(job: Job) -> dict | None:
    """``error`` (a google.rpc.Status) of a failed or cancelled job, as Vertex fills it."""
    if job.state == JobState.FAILED:
        return {"code": CODE_INVALID_ARGUMENT, "message": vertex_words(job.error_message or "The job failed.")}
    if job.state in (JobState.CANCELLED, JobState.CANCELLING):
        return {"code": CODE_CANCELLED, "message": vertex_words(job.error_message or "CANCELED")}
    return None


def trial_resource(trial: Trial, job: Job, vertex: VertexJob) -> dict:
    """A Trial of the study: its parameters typed by the spec, its measurements under the metric id."""
    spec = (job.training_input or {}).get("hyperparameters") or {}
    metric = spec.get("hyperparameterMetricTag", "")
    kinds = {param["parameterName"]: param["type"] for param in spec.get("params", [])}
    output: dict = {
        "id": trial.trial_id,
        "state": TRIAL_STATES.get(trial.state, "STATE_UNSPECIFIED"),
        "parameters": [
            {"parameterId": name, "value": parameter_value(kinds.get(name, "CATEGORICAL"), text)}
            for name, text in trial.hyperparameters.items()
        ],
    }
    if trial.final_metric:
        output["finalMeasurement"] = measurement(trial.final_metric, metric)
    if trial.all_metrics:
        output["measurements"] = [measurement(report, metric) for report in trial.all_metrics]
    if trial.start_time:
        output["startTime"] = timestamp(trial.start_time)
    if trial.end_time:
        output["endTime"] = timestamp(trial.end_time)
    if trial.state in (JobState.FAILED, JobState.CANCELLED):
        output["infeasibleReason"] = vertex_words(trial.error_message or f"The trial was {trial.state.lower()}.")
    return output


def parameter_value(kind: str, text: str) -> float | int | str:
    """A trial's value as the study's ``google.protobuf.Value``: numbers for numeric parameters."""
    try:
        if kind == "INTEGER":
            return int(float(text))
        if kind in ("DOUBLE", "DISCRETE"):
            return float(text)
    except ValueError:
        pass
    return text


def measurement(report: dict, metric: str) -> dict:
    """A v1 report ``{trainingStep, objectiveValue}`` as a Vertex Measurement."""
    return {
        "stepCount": str(report.get("trainingStep", "0")),
        "metrics": [{"metricId": metric, "value": report.get("objectiveValue")}],
    }


def operation(name: str, *, method_metadata: str, created: datetime, done: bool = True) -> dict:
    """A finished long-running operation of a deletion (``google.protobuf.Empty`` response)."""
    return {
        "name": name,
        "metadata": {
            "@type": f"type.googleapis.com/google.cloud.aiplatform.v1.{method_metadata}",
            "genericMetadata": {"createTime": timestamp(created), "updateTime": timestamp(created)},
        },
        "done": done,
        "response": {"@type": "type.googleapis.com/google.protobuf.Empty"},
    }
