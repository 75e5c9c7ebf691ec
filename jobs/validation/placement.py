"""TrainingInput rules for where and how a job runs: region, scheduling, identity and disks.

The region must be one we know and offer every accelerator the job asks for; the scheduling
limits, network, service account, encryption key and boot disks must be well formed.
``check_region_name`` is shared with batch prediction.
"""

from __future__ import annotations

import re

from aiconsole.errors import Violations
from aiconsole.protojson import snake
from jobs.catalogue import ACCELERATORS, MACHINE_TYPES, REGIONS, SCALE_TIERS
from jobs.validation import roles
from jobs.validation.schema import seconds


def _requested_accelerators(ti: dict, path: str) -> list[tuple[str, str]]:
    """(accelerator type, field to blame) for every accelerator the job would attach."""
    tier = roles.tier(ti)
    requested = []
    if tier != "CUSTOM":
        for role in SCALE_TIERS[tier].roles:
            builtin = MACHINE_TYPES[role.machine_type].builtin_accelerator
            kind = builtin[0] if builtin else role.accelerator_type
            if kind:
                requested.append((kind, f"{path}.scale_tier"))
    machines = roles.role_machines(ti)
    for task, type_key, _, config_key, _ in roles.ROLES:
        machine_name, count = machines[task]
        machine = MACHINE_TYPES.get(machine_name or "")
        if machine is None or count == 0:
            continue
        if tier == "CUSTOM" and machine.builtin_accelerator:
            requested.append((machine.builtin_accelerator[0], f"{path}.{snake(type_key)}"))
        kind = ((ti.get(config_key) or {}).get("acceleratorConfig") or {}).get("type")
        if kind in ACCELERATORS and not machine.builtin_accelerator:
            requested.append((kind, f"{path}.{snake(config_key)}.accelerator_config.type"))
    return list(dict.fromkeys(requested))


def check_region(ti: dict, path: str, errors: Violations) -> None:
    region = ti.get("region")
    if not check_region_name(region, f"{path}.region", errors):
        return
    available = REGIONS[region].accelerators
    for kind, field in _requested_accelerators(ti, path):
        if kind not in available:
            where = [name for name, r in REGIONS.items() if kind in r.accelerators]
            errors.add(field, f"{kind} is not available in region {region}. Regions with {kind}: {', '.join(where)}.")


def check_region_name(region: str | None, field: str, errors: Violations) -> bool:
    if not region:
        errors.add(field, "region is required, e.g. us-central1.")
        return False
    if region not in REGIONS:
        errors.add(field, f'Region "{region}" is not supported. Supported regions: {", ".join(REGIONS)}.')
        return False
    return True


def check_scheduling(scheduling: dict | None, path: str, errors: Violations) -> None:
    if not scheduling:
        return
    running, waiting = scheduling.get("maxRunningTime"), scheduling.get("maxWaitTime")
    if running is not None and seconds(running) <= 0:
        errors.add(f"{path}.max_running_time", "maxRunningTime must be longer than 0s.")
    # The service refuses waits shorter than 30 minutes.
    if waiting is not None and seconds(waiting) < 1800:
        errors.add(f"{path}.max_wait_time", f"maxWaitTime must be at least 1800s (30 minutes); got {waiting}.")
    priority = scheduling.get("priority")
    if priority is not None and not 0 <= priority <= 1000:
        errors.add(f"{path}.priority", f"priority must be between 0 and 1000; got {priority}.")


_NETWORK_RE = re.compile(r"^projects/\d+/global/networks/[^/]+$")
_EMAIL_RE = re.compile(r"^[^@\s]+@[^@\s]+\.[^@\s]+$")
_KMS_RE = re.compile(r"^projects/[^/]+/locations/[^/]+/keyRings/[^/]+/cryptoKeys/[^/]+$")
_DISK_TYPES = ("pd-ssd", "pd-standard")
_DISK_GB_RANGE = (10, 64000)


def check_identity(ti: dict, path: str, errors: Violations) -> None:
    network = ti.get("network")
    if network and not _NETWORK_RE.match(network):
        errors.add(
            f"{path}.network",
            "network must look like projects/{projectNumber}/global/"
            "networks/{network}, e.g. projects/12345/global/networks/myVPC.",
        )
    account = ti.get("serviceAccount")
    if account and not _EMAIL_RE.match(account):
        errors.add(f"{path}.service_account", f'serviceAccount "{account}" must be a service account email address.')
    if "encryptionConfig" in ti:
        key = ti["encryptionConfig"].get("kmsKeyName")
        if not key or not _KMS_RE.match(key):
            errors.add(
                f"{path}.encryption_config.kms_key_name",
                "kmsKeyName must look like "
                "projects/{project}/locations/{location}/keyRings/{keyRing}/cryptoKeys/"
                "{key}.",
            )
    for _, _, _, key, _ in roles.ROLES:
        disk = (ti.get(key) or {}).get("diskConfig") or {}
        field = f"{path}.{snake(key)}.disk_config"
        size, kind = disk.get("bootDiskSizeGb"), disk.get("bootDiskType")
        low, high = _DISK_GB_RANGE
        if size is not None and not low <= size <= high:
            errors.add(f"{field}.boot_disk_size_gb", f"bootDiskSizeGb must be between {low} and {high}; got {size}.")
        if kind is not None and kind not in _DISK_TYPES:
            errors.add(f"{field}.boot_disk_type", f'bootDiskType "{kind}" must be pd-ssd or pd-standard.')
