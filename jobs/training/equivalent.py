"""A job's input written the other two ways a user can submit it: the CLI line and the REST body.

``aiconsole jobs submit training`` takes the common fields as flags (a custom container's images
and ``useChiefInTfConfig`` too); everything else (CUSTOM machines, a container's command and args,
tuning, scheduling…) goes in a ``--config`` file, as gcloud users wrote it. Packages the
console stored from an upload are named by their file name, never by their path on this server:
the CLI uploads the file again, the REST body says where the upload's uri goes.
Pure functions over plain data, so the form and the job page show the same thing.
"""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field

import yaml

from jobs import catalogue

# trainingInput fields the command line sets with a flag (packageUris is handled apart).
_FLAGS = (
    ("region", "--region"),
    ("pythonModule", "--module-name"),
    ("runtimeVersion", "--runtime-version"),
    ("pythonVersion", "--python-version"),
    ("jobDir", "--job-dir"),
)
# Replica configs whose imageUri has a flag (gcloud has none for the evaluator's).
_IMAGE_FLAGS = (
    ("masterConfig", "--master-image-uri"),
    ("workerConfig", "--worker-image-uri"),
    ("parameterServerConfig", "--parameter-server-image-uri"),
)


@dataclass
class Equivalent:
    """The command line, its config.yaml (None when no file is needed), and the REST call."""

    command: str
    config_yaml: str | None
    rest_path: str
    rest_body: str
    uploads: list[str] = field(default_factory=list)  # file names to upload before the REST call


def upload_placeholder(name: str) -> str:
    return f"<the uri answered when {name} is uploaded>"


def build(
    project_id: str,
    job_id: str,
    training_input: dict,
    labels: dict | None = None,
    uploaded: dict[str, str] | None = None,
) -> Equivalent:
    """``uploaded`` maps each packageUri the console stored from an upload to its file name."""
    uploaded = uploaded or {}
    packages = list(training_input.get("packageUris") or [])
    rest_input = {**training_input}
    if packages:
        rest_input["packageUris"] = [upload_placeholder(uploaded[u]) if u in uploaded else u for u in packages]
    body = {"jobId": job_id, **({"labels": labels} if labels else {}), "trainingInput": rest_input}
    command, config = _command(job_id, training_input, labels or {}, uploaded)
    return Equivalent(
        command=command,
        config_yaml=config,
        rest_path=f"/v1/projects/{project_id}/jobs",
        rest_body=json.dumps(body, indent=2),
        uploads=[uploaded[u] for u in packages if u in uploaded],
    )


def _command(job_id: str, training_input: dict, labels: dict, uploaded: dict[str, str]) -> tuple[str, str | None]:
    rest = dict(training_input)
    words = ["aiconsole", "jobs", "submit", "training", job_id]
    for key, flag in _FLAGS:
        value = rest.pop(key, None)
        if value not in (None, ""):
            words += [flag, str(value)]
    for key, flag in _IMAGE_FLAGS:
        config = rest.get(key)
        if isinstance(config, dict) and config.get("imageUri"):
            words += [flag, config["imageUri"]]
            others = {name: value for name, value in config.items() if name != "imageUri"}
            if others:  # the rest of the replica config (a container command, an accelerator) goes in the file
                rest[key] = others
            else:
                rest.pop(key)
    if rest.get("useChiefInTfConfig") is True:
        rest.pop("useChiefInTfConfig")
        words += ["--use-chief-in-tf-config", "true"]
    tier = rest.get("scaleTier")
    if tier and tier != "CUSTOM":  # no scaleTier stays none (BASIC by default, as the API has it)
        rest.pop("scaleTier")
        words += ["--scale-tier", tier.lower().replace("_", "-")]
    packages = rest.pop("packageUris", None) or []
    # --packages takes gs:// URIs and local files (uploaded again); any other path (a file in this
    # server's storage) can only be given as packageUris in the config file.
    if all(uri.startswith("gs://") or uri in uploaded for uri in packages):
        if packages:
            words += ["--packages", ",".join(uploaded.get(uri, uri) for uri in packages)]
    else:
        rest["packageUris"] = packages
    if labels:
        words += ["--labels", ",".join(f"{k}={v}" for k, v in labels.items())]
    args = rest.pop("args", None) or []
    config = None
    if rest:
        config = yaml.safe_dump({"trainingInput": rest}, sort_keys=False, default_flow_style=False)
        words += ["--config", "config.yaml"]
    line = shlex.join(words)
    if args:
        line += " -- " + shlex.join(args)
    return line, config


# A CUSTOM cluster's roles beyond the master: (count field, type field, as the form names them).
COUNTED_ROLES = (
    ("workerCount", "workerType", "Workers"),
    ("parameterServerCount", "parameterServerType", "Parameter servers"),
    ("evaluatorCount", "evaluatorType", "Evaluators"),
)


def estimate_problem(training_input: dict) -> str | None:
    """Why the cluster has no estimate yet, in the form's words (None: it has one). A count without
    a machine type is said, never left out of the sum as if the replicas cost nothing."""
    if (training_input.get("scaleTier") or "BASIC") != "CUSTOM":
        return None
    if not training_input.get("masterType"):
        return "choose a master machine type"
    for count_key, type_key, title in COUNTED_ROLES:
        count = str(training_input.get(count_key) or "0")
        if count.isdigit() and int(count) > 0 and not training_input.get(type_key):
            return f"{title}: choose a machine type for the {count}, or set the count to 0"
    return None


def units_per_hour(training_input: dict) -> float | None:
    """ML units per hour of the cluster ``training_input`` describes (None if it names unknown
    machines, or a count of replicas without their machine type): the rates ``consumedMLUnits`` is
    computed from, per trial for a tuning job."""
    if estimate_problem(training_input):
        return None
    try:
        plans = catalogue.replica_plan(training_input)
        return round(sum(catalogue.ml_units_per_hour(plan) for plan in plans), 4)
    except (KeyError, ValueError, TypeError):
        return None


def accelerators_allowed(machine: catalogue.MachineType) -> str:
    """Which accelerators a machine type takes, in words, from the catalogue's rules."""
    if machine.builtin_accelerator:
        gpu, count = machine.builtin_accelerator
        return f"{count} {catalogue.ACCELERATORS[gpu].label} built in; no others"
    if machine.category == catalogue.TPU:
        return "TPU_V2 or TPU_V3, 8 cores"
    if machine.a2_gpu_count:
        return f"NVIDIA_TESLA_A100 × {machine.a2_gpu_count} only"
    if machine.category == catalogue.LEGACY:
        return "none"
    fits = []
    for accelerator in catalogue.ACCELERATORS.values():
        counts = [c for c in accelerator.allowed_counts if accelerator.max_vcpus.get(c, 0) >= (machine.vcpus or 0)]
        if counts:
            fits.append(f"{accelerator.name} × {'/'.join(str(c) for c in counts)}")
    return ", ".join(fits) if fits else "none"


def machine_descriptions() -> dict[str, dict]:
    """Every machine type's vCPUs, memory, accelerators allowed and ML units per hour."""
    return {
        name: {
            "summary": catalogue.machine_summary(name),
            "accelerators": accelerators_allowed(machine),
            "units": machine.units_per_hour,
        }
        for name, machine in catalogue.MACHINE_TYPES.items()
    }
