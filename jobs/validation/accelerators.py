"""TrainingInput rules for accelerators: which GPUs or TPUs each replica may attach, and how many.

A machine type decides what it takes: a2 machines come with their A100s, cloud_tpu takes 8 TPU
cores, legacy types take none, and a Compute Engine type takes the GPU counts whose vCPU ceiling
it fits (`jobs.catalogue`).
"""

from __future__ import annotations

from aiconsole.errors import Violations
from aiconsole.protojson import snake
from jobs.catalogue import ACCELERATORS, CLOUD_TPU, LEGACY, MACHINE_TYPES, TPU
from jobs.validation import roles
from jobs.validation.schema import one_of


def check_accelerators(ti: dict, path: str, errors: Violations) -> None:
    tier = roles.tier(ti)
    machines = roles.role_machines(ti)
    for task, type_key, _, config_key, words in roles.ROLES:
        machine_name, count = machines[task]
        field = f"{path}.{snake(config_key)}.accelerator_config"
        accelerator = (ti.get(config_key) or {}).get("acceleratorConfig")
        machine = MACHINE_TYPES.get(machine_name or "")
        source = f"{type_key} {machine_name}" if tier == "CUSTOM" else f"{machine_name} (from scale tier {tier})"
        if accelerator is None:
            # A cloud_tpu parameter server or evaluator is already refused by the cluster rules.
            cloud_tpu_misplaced = machine_name == CLOUD_TPU and task not in ("master", "worker")
            if tier == "CUSTOM" and machine is not None and count > 0 and not cloud_tpu_misplaced:
                _check_required_accelerator(machine, field, errors)
            continue
        if machine_name is None and tier == "CUSTOM" and (task == "master" or count > 0):
            continue  # the missing machine type is reported by the cluster rules (training.py)
        if machine_name is None or count == 0:
            errors.add(field, f"{config_key}.acceleratorConfig is set but the job has no {words} replicas.")
        elif machine is not None:
            _check_accelerator(accelerator, machine, source, field, errors)


def _check_required_accelerator(machine, field: str, errors: Violations) -> None:
    if machine.a2_gpu_count:
        errors.add(
            field,
            f"{machine.name} needs an acceleratorConfig with type NVIDIA_TESLA_A100 and count {machine.a2_gpu_count}.",
        )
    elif machine.category == TPU:
        errors.add(field, "A cloud_tpu replica needs an acceleratorConfig with type TPU_V2 or TPU_V3 and count 8.")


def _check_accelerator(accelerator: dict, machine, source: str, field: str, errors: Violations) -> None:
    kind, count = accelerator.get("type"), int(accelerator.get("count") or 0)
    complete = True
    if kind is None:
        errors.add(f"{field}.type", "acceleratorConfig.type is required, e.g. NVIDIA_TESLA_T4.")
        complete = False
    elif kind == "ACCELERATOR_TYPE_UNSPECIFIED":
        errors.add(
            f"{field}.type",
            "acceleratorConfig.type must name an accelerator, e.g. "
            "NVIDIA_TESLA_T4; ACCELERATOR_TYPE_UNSPECIFIED is not one.",
        )
        complete = False
    if count < 1:
        errors.add(f"{field}.count", f"acceleratorConfig.count must be greater than 0; got {count}.")
        complete = False
    if machine.category == LEGACY:
        built_in = ", which has its accelerators built in" if machine.builtin_accelerator else ""
        errors.add(
            field,
            f"acceleratorConfig can only be used with a Compute Engine machine "
            f"type; {source} is a legacy machine type{built_in}.",
        )
        return
    if complete:
        problem = _accelerator_problem(kind, count, machine, source)
        if problem:
            errors.add(f"{field}.{problem[0]}", problem[1])


def _accelerator_problem(kind: str, count: int, machine, source: str) -> tuple[str, str] | None:
    """(sub-field, description) of what is wrong with `count` x `kind` on `machine`, if any."""
    accelerator = ACCELERATORS.get(kind)
    if accelerator is None:
        return "type", (
            f"{kind} is not supported for training jobs; request TPUs as TPU_V2 or TPU_V3 on a cloud_tpu replica."
        )
    if machine.category == TPU:
        if accelerator.kind != "tpu":
            return "type", f"A cloud_tpu replica takes TPU_V2 or TPU_V3, not {kind}."
        if count != 8:
            return "count", f"A cloud_tpu replica takes exactly 8 TPU cores; got {count}."
        return None
    if accelerator.kind == "tpu":
        return "type", f"{kind} can only be used with the cloud_tpu machine type, not {source}."
    if machine.a2_gpu_count:
        if kind != "NVIDIA_TESLA_A100":
            return "type", f"{machine.name} only takes NVIDIA_TESLA_A100, not {kind}."
        if count != machine.a2_gpu_count:
            return "count", (
                f"{machine.name} comes with exactly {machine.a2_gpu_count} "
                f"NVIDIA_TESLA_A100; count must be {machine.a2_gpu_count}."
            )
        return None
    if kind == "NVIDIA_TESLA_A100":
        return "type", (
            f"NVIDIA_TESLA_A100 can only be attached to a2 machine types "
            f"(a2-highgpu-1g ... a2-megagpu-16g), not {source}."
        )
    if count not in accelerator.allowed_counts:
        return "count", (f"{kind} can be attached in counts of {one_of(accelerator.allowed_counts)}, not {count}.")
    ceiling = accelerator.max_vcpus[count]
    if machine.vcpus <= ceiling:
        return None
    fits = [c for c in accelerator.allowed_counts if accelerator.max_vcpus[c] >= machine.vcpus]
    hint = (
        f" Use {one_of(fits)} GPUs or a machine type with fewer vCPUs."
        if fits
        else f" No number of {kind} fits it; use a machine type with fewer vCPUs."
    )
    return "count", (
        f"{machine.name} has {machine.vcpus} vCPUs, but a machine with {count} "
        f"{kind} may have at most {ceiling} vCPUs.{hint}"
    )
