"""A Vertex AI job's request written the ways a Vertex user sends it: the REST body and the
``gcloud ai custom-jobs create`` (or ``gcloud ai hp-tuning-jobs create``) command.

The job page shows them beside the v1 forms (``jobs.web.equivalent``). Worker pools go in
``--worker-pool-spec`` flags when gcloud's flags can say them (machine, count, accelerator, image,
module; one package list and one argument list for every pool); anything else (environment
variables, disks, empty pools, the output directory, scheduling, a study) goes in the
``--config`` file, a CustomJobSpec (or HyperparameterTuningJob) in YAML, as gcloud reads it.
Packages the console stored from an upload are named by a placeholder, never by their path on
this server. ``build`` is a pure function over the request as it was read; ``for_job`` reads
it from the job's Vertex row for the job page.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass

import yaml

from aiconsole import audit
from jobs.models import Job, VertexCollection, VertexJob


@dataclass
class VertexEquivalent:
    rest_path: str
    rest_body: str
    command: str
    config_yaml: str | None


def upload_placeholder(name: str) -> str:
    return f"<the uri answered when {name} is uploaded>"


def build(
    *,
    project_id: str,
    location: str,
    collection: str,
    request: dict,
    uploaded: dict[str, str] | None = None,
) -> VertexEquivalent:
    """``request`` is the resource as read (``VertexJob.request``); ``uploaded`` maps each
    package URI the console stored from an upload to its file name."""
    request = _without_uploads(request, uploaded or {})
    command: str
    config: str | None
    if collection == VertexCollection.CUSTOM_JOBS:
        command, config = _custom_job_command(location, request)
    elif collection == VertexCollection.BATCH_PREDICTION_JOBS:
        command, config = "", None  # gcloud has no command that creates one: the REST body is the way
    else:
        command, config = _tuning_job_command(location, request)
    return VertexEquivalent(
        rest_path=f"/v1/projects/{project_id}/locations/{location}/{collection}",
        rest_body=json.dumps(request, indent=2),
        command=command,
        config_yaml=config,
    )


def _without_uploads(request: dict, uploaded: dict[str, str]) -> dict:
    def swap(spec: dict) -> dict:
        pools = []
        for pool in spec.get("workerPoolSpecs", []):
            package = pool.get("pythonPackageSpec")
            if package and package.get("packageUris"):
                uris = [upload_placeholder(uploaded[u]) if u in uploaded else u for u in package["packageUris"]]
                pool = {**pool, "pythonPackageSpec": {**package, "packageUris": uris}}
            pools.append(pool)
        return {**spec, "workerPoolSpecs": pools} if "workerPoolSpecs" in spec else spec

    return {key: swap(value) if key in ("jobSpec", "trialJobSpec") else value for key, value in request.items()}


def _common(location: str, request: dict) -> list[str]:
    words = [f"--region={location}", f"--display-name={request.get('displayName', '')}"]
    labels = request.get("labels") or {}
    if labels:
        words.append("--labels=" + ",".join(f"{k}={v}" for k, v in labels.items()))
    return words


def _custom_job_command(location: str, request: dict) -> tuple[str, str | None]:
    spec = dict(request.get("jobSpec") or {})
    words = ["gcloud", "ai", "custom-jobs", "create", *_common(location, request)]
    flags = _pool_flags(spec.get("workerPoolSpecs") or [])
    if flags is not None:
        words += flags
        spec.pop("workerPoolSpecs", None)
    for key, flag in (("serviceAccount", "--service-account"), ("network", "--network")):
        if spec.get(key):
            words.append(f"{flag}={spec.pop(key)}")
    if spec.pop("enableWebAccess", False):
        words.append("--enable-web-access")
    config = None
    if spec:
        config = yaml.safe_dump(spec, sort_keys=False, default_flow_style=False)
        words.append("--config=config.yaml")
    return shlex.join(words), config


def _pool_flags(pools: list[dict]) -> list[str] | None:
    """``--worker-pool-spec`` flags (and the shared ``--python-package-uris``, ``--args``,
    ``--command``) for the pools, or None when gcloud's flags cannot say them."""
    if not pools or any(not pool or "diskSpec" in pool for pool in pools):
        return None
    specs = [pool.get("pythonPackageSpec") or pool.get("containerSpec") or {} for pool in pools]
    if any(spec.get("env") for spec in specs):
        return None
    shared = {key: [spec.get(key) for spec in specs] for key in ("packageUris", "args", "command")}
    if any(len({json.dumps(v) for v in values}) > 1 for values in shared.values()):
        return None
    if any("," in item for values in shared.values() for item in (values[0] or [])):
        return None  # gcloud splits list flags on commas
    words = []
    for pool, spec in zip(pools, specs, strict=True):
        machine = pool.get("machineSpec") or {}
        parts = [f"machine-type={machine.get('machineType', '')}", f"replica-count={pool.get('replicaCount', '1')}"]
        if machine.get("acceleratorType"):
            parts += [
                f"accelerator-type={machine['acceleratorType']}",
                f"accelerator-count={machine.get('acceleratorCount', 1)}",
            ]
        if "pythonPackageSpec" in pool:
            parts += [
                f"executor-image-uri={spec.get('executorImageUri', '')}",
                f"python-module={spec.get('pythonModule', '')}",
            ]
        else:
            parts.append(f"container-image-uri={spec.get('imageUri', '')}")
        words.append("--worker-pool-spec=" + ",".join(parts))
    for key, flag in (("packageUris", "--python-package-uris"), ("args", "--args"), ("command", "--command")):
        items: list[str] = shared[key][0] or []
        if items:
            words.append(f"{flag}={','.join(items)}")
    return words


def _tuning_job_command(location: str, request: dict) -> tuple[str, str]:
    words = ["gcloud", "ai", "hp-tuning-jobs", "create", *_common(location, request)]
    for key, flag in (("maxTrialCount", "--max-trial-count"), ("parallelTrialCount", "--parallel-trial-count")):
        if request.get(key):
            words.append(f"{flag}={request[key]}")
    config = {key: request[key] for key in ("studySpec", "maxFailedTrialCount", "trialJobSpec") if key in request}
    words.append("--config=config.yaml")
    return shlex.join(words), yaml.safe_dump(config, sort_keys=False, default_flow_style=False)


_KINDS = {
    VertexCollection.CUSTOM_JOBS: "CustomJob",
    VertexCollection.HYPERPARAMETER_TUNING_JOBS: "HyperparameterTuningJob",
    VertexCollection.TRAINING_PIPELINES: "TrainingPipeline",
    VertexCollection.BATCH_PREDICTION_JOBS: "BatchPredictionJob",
}


def for_job(job: Job, uploaded: dict[str, str] | None = None) -> dict | None:
    """What the job page shows of a job created through the Vertex API; None for a v1 job."""
    vertex = VertexJob.objects.filter(job_id=job.pk).first()
    if vertex is None:
        return None
    return {
        "name": f"projects/{job.project.project_id}/locations/{vertex.location}/{vertex.collection}/{vertex.vertex_id}",
        "display_name": vertex.display_name,
        "kind": _KINDS[VertexCollection(vertex.collection)],
        "notes": list((vertex.engine or {}).get("notes") or []),
        "equivalent": build(
            project_id=job.project.project_id,
            location=vertex.location,
            collection=vertex.runs_as,
            # a secret-named variable's value (WANDB_API_KEY…) is not shown to whoever reads the page
            request=audit.redact(vertex.request),
            uploaded=uploaded,
        ),
    }
