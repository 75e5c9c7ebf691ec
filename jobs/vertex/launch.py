"""What a Vertex AI job's replicas get that a v1 job's do not, as the executor starts them.

The executor runs a Vertex job from its v1 ``trainingInput`` like any other; ``profile_for(job)``
gives it the rest (None for a v1 job):

- no ``--job-dir`` argument: Vertex passes none, and trainers with strict argument parsers refuse
  one. ``jobDir`` (the ``baseOutputDirectory``) is still where metrics and TensorBoard look.
- ``AIP_MODEL_DIR``, ``AIP_CHECKPOINT_DIR``, ``AIP_TENSORBOARD_LOG_DIR``: ``<base>/model/``,
  ``<base>/checkpoints/``, ``<base>/logs/``, with ``<base>/<trialId>/…`` for a tuning trial (the
  trial's job dir); created before the trainer starts when local, as a trainer expects locally.
- ``CLUSTER_SPEC`` with the pools ``workerpool0…3`` and ``TF_CONFIG`` with ``chief``, ``worker``
  and ``ps`` (evaluators get their task but are not in the cluster), both with the job's
  ``CustomJobSpec`` as ``job``; ``CLOUD_ML_JOB_ID`` is the Vertex job's number and
  ``CLOUD_ML_TRIAL_ID`` the trial's.
- each worker pool's own ``env`` (``pythonPackageSpec.env`` / ``containerSpec.env``).
- for a tuning job, the spec the tuner reads (conditional parameters, the measurement selection)
  and each trial's time limit (the trial job spec's ``scheduling.timeout``).

``cluster_environment`` and ``output_dirs`` are pure; ``prepare_output_dirs`` creates local folders.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field

from aiconsole import storage, trainer_user
from jobs.models import Job, VertexCollection, VertexJob

POOLS = {"master": 0, "worker": 1, "ps": 2, "evaluator": 3}
TF_TASK_TYPES = {"master": "chief", "worker": "worker", "ps": "ps", "evaluator": "evaluator"}


@dataclass(frozen=True)
class LaunchProfile:
    vertex_id: str
    job_spec: dict  # the CustomJobSpec as read: CLUSTER_SPEC's and TF_CONFIG's "job"
    pool_env: list[dict[str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    conditions: dict[str, dict] = field(default_factory=dict)
    measurement_selection: str = "LAST_MEASUREMENT"
    trial_timeout: float | None = None  # a study's trialJobSpec.scheduling.timeout: each trial's limit
    job_dir_arg: bool = False  # the trainer gets no --job-dir

    def environment(self, *, task_type: str, job_dir: str | None, cluster_spec: dict, trial_id: str = "") -> dict:
        """The variables a replica gets on top of (and in place of) a v1 replica's."""
        pool = POOLS[task_type]
        env = dict(self.pool_env[pool]) if pool < len(self.pool_env) else {}
        env.update(cluster_environment(cluster_spec, self.job_spec))
        env["CLOUD_ML_JOB_ID"] = self.vertex_id
        if trial_id:
            env["CLOUD_ML_TRIAL_ID"] = trial_id
        if job_dir:
            env.update(output_dirs(job_dir))
        return env

    def tuning_spec(self, hyperparameters: dict) -> dict:
        """The v1 HyperparameterSpec with what the tuner honours beyond it (``jobs.tuning.search``)."""
        params = [
            {**param, "condition": self.conditions[param["parameterName"]]}
            if param["parameterName"] in self.conditions
            else param
            for param in hyperparameters.get("params", [])
        ]
        return {**hyperparameters, "params": params, "measurementSelection": self.measurement_selection}


def profile_for(job: Job) -> LaunchProfile | None:
    """The job's launch profile when it was created through the Vertex API, else None."""
    vertex = VertexJob.objects.filter(job_id=job.pk).first()
    if vertex is None:
        return None
    key = "jobSpec" if vertex.runs_as == VertexCollection.CUSTOM_JOBS else "trialJobSpec"
    engine = vertex.engine or {}
    return LaunchProfile(
        vertex_id=vertex.vertex_id,
        job_spec=vertex.request.get(key) or {},
        pool_env=list(engine.get("pools") or []),
        notes=list(engine.get("notes") or []),
        conditions=dict(engine.get("conditions") or {}),
        measurement_selection=engine.get("measurementSelection") or "LAST_MEASUREMENT",
        trial_timeout=engine.get("trialTimeoutSeconds"),
    )


def cluster_environment(cluster_spec: dict, job_spec: dict) -> dict[str, str]:
    """``CLUSTER_SPEC`` and ``TF_CONFIG`` as Vertex writes them, from the engine's CLUSTER_SPEC
    (which names every replica by v1 task type: master, worker, ps, evaluator)."""
    cluster = cluster_spec.get("cluster") or {}
    task = cluster_spec.get("task") or {}
    pools = {f"workerpool{POOLS[kind]}": list(addresses) for kind, addresses in cluster.items() if kind in POOLS}
    tf_cluster = {
        TF_TASK_TYPES[kind]: list(addresses)
        for kind, addresses in cluster.items()
        if kind in POOLS and kind != "evaluator"
    }
    kind = task.get("type", "master")
    trial = {"trial": task["trial"]} if task.get("trial") else {}
    spec = {
        "cluster": dict(sorted(pools.items())),
        "environment": "cloud",
        "task": {"type": f"workerpool{POOLS.get(kind, 0)}", "index": task.get("index", 0), **trial},
        "job": job_spec,
    }
    tf_config = {
        "cluster": tf_cluster,
        "environment": "cloud",
        "task": {"type": TF_TASK_TYPES.get(kind, "chief"), "index": task.get("index", 0), **trial},
        "job": job_spec,
    }
    return {"CLUSTER_SPEC": json.dumps(spec), "TF_CONFIG": json.dumps(tf_config)}


def output_dirs(job_dir: str) -> dict[str, str]:
    """``AIP_*_DIR`` under a job's (or a trial's) base output directory, with their trailing slash."""
    base = job_dir.rstrip("/")
    return {
        "AIP_MODEL_DIR": f"{base}/model/",
        "AIP_CHECKPOINT_DIR": f"{base}/checkpoints/",
        "AIP_TENSORBOARD_LOG_DIR": f"{base}/logs/",
    }


def prepare_output_dirs(job_dir: str | None, project) -> None:
    """Create a local base output directory's ``model/``, ``checkpoints/`` and ``logs/`` for the
    project's trainers (Cloud Storage needs no folders)."""
    if not job_dir or storage.is_gcs_uri(job_dir):
        return
    for path in output_dirs(job_dir).values():
        trainer_user.give_job_dir(storage.prepare_job_dir(path, project=project), project)
