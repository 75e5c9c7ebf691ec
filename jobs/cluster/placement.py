"""Gang placement of a job's replicas on scaled-mode workers: plain functions over plain data.

A replica costs its machine type's vCPUs and memory and its accelerators. A worker offers CPUs,
memory, accelerators (each a device index handed out through ``CUDA_VISIBLE_DEVICES``) and a
range of ports. A job is placed only when every replica fits at once (all start or none), and a
job that no worker could ever serve, even idle, is told so instead of waiting in silence.

A worker started without ``--capacity`` treats machine types as labels, as embedded mode does: it
has ``slots`` (``AICONSOLE_MAX_REPLICAS``), a replica of any machine type takes one, and a job with
more replicas than that runs there alone, when nothing else does. Its accelerators are still
counted exactly: devices are real.
"""

from __future__ import annotations

import random
from collections.abc import Iterable
from dataclasses import dataclass, field

from jobs import catalogue

# A TPU host (``cloud_tpu``) declares no vCPUs or memory: it costs a token amount of the worker.
_MIN_CPUS = 1.0
_MIN_MEMORY_GB = 1.0


@dataclass(frozen=True)
class Cost:
    cpus: float
    memory_gb: float
    accelerator: str | None = None
    accelerators: int = 0


def replica_cost(plan: catalogue.ReplicaPlan) -> Cost:
    machine = catalogue.MACHINE_TYPES[plan.machine_type]
    return Cost(
        float(machine.vcpus or _MIN_CPUS),
        float(machine.memory_gb or _MIN_MEMORY_GB),
        plan.accelerator_type,
        plan.accelerator_count if plan.accelerator_type else 0,
    )


def device_indices(accelerators: dict[str, int]) -> dict[str, list[int]]:
    """A worker's devices by type, numbered across types in the order they were declared."""
    devices, next_index = {}, 0
    for name, count in accelerators.items():
        devices[name] = list(range(next_index, next_index + int(count)))
        next_index += int(count)
    return devices


@dataclass
class Offer:
    """What one live worker has free now (and has in all, for "could it ever")."""

    name: str
    region: str
    machine_types: frozenset[str]
    cpus: float
    memory_gb: float
    accelerators: dict[str, int]
    free_cpus: float
    free_memory_gb: float
    free_devices: dict[str, list[int]]
    ports: tuple[int, int]
    used_ports: set[int] = field(default_factory=set)
    slots: int = 0  # 0: strict accounting of CPUs and memory; N: machine types are labels, N replicas
    free_slots: int = 0
    alone: bool = False  # a labels worker that was idle when this placement began takes a job of any size
    containers: bool = False  # has a container engine (custom-container jobs go only there)

    @property
    def labels(self) -> bool:
        return self.slots > 0

    def serves(self, plan: catalogue.ReplicaPlan) -> bool:
        return not self.machine_types or plan.machine_type in self.machine_types

    def could_ever_fit(self, plan: catalogue.ReplicaPlan, cost: Cost) -> bool:
        if not self.serves(plan):
            return False
        if not self.labels and (cost.cpus > self.cpus or cost.memory_gb > self.memory_gb):
            return False
        return not cost.accelerator or self.accelerators.get(cost.accelerator, 0) >= cost.accelerators

    def fits(self, cost: Cost) -> bool:
        if len(self.used_ports) > self.ports[1] - self.ports[0]:
            return False  # every port of its range is taken
        if self.labels:
            if self.free_slots < 1 and not self.alone:
                return False
        elif cost.cpus > self.free_cpus + 1e-9 or cost.memory_gb > self.free_memory_gb + 1e-9:
            return False
        return not cost.accelerator or len(self.free_devices.get(cost.accelerator, [])) >= cost.accelerators

    def room_after(self, cost: Cost) -> tuple[float, float]:
        """What it has left once ``cost`` is taken: best fit picks the worker with the least."""
        if self.labels:
            return (self.free_slots - 1, 0.0)
        return (self.free_cpus - cost.cpus, self.free_memory_gb - cost.memory_gb)

    def charge(self, cost: Cost) -> None:
        """Count a replica placed here: one slot on a labels worker, its CPUs and memory on a strict one."""
        if self.labels:
            self.free_slots -= 1
        else:
            self.free_cpus -= cost.cpus
            self.free_memory_gb -= cost.memory_gb

    def take(self, cost: Cost, rng: random.Random) -> tuple[list[int], int]:
        self.charge(cost)
        devices: list[int] = []
        if cost.accelerator:
            devices = self.free_devices[cost.accelerator][: cost.accelerators]
            self.free_devices[cost.accelerator] = self.free_devices[cost.accelerator][cost.accelerators :]
        return devices, self.take_port(rng)

    def take_port(self, rng: random.Random) -> int:
        first, last = self.ports
        while True:
            port = rng.randint(first, last)
            if port not in self.used_ports:
                self.used_ports.add(port)
                return port


@dataclass(frozen=True)
class Assignment:
    plan: catalogue.ReplicaPlan
    worker: str
    devices: tuple[int, ...]
    port: int


def place(
    plans: list[catalogue.ReplicaPlan], offers: Iterable[Offer], region: str, rng: random.Random | None = None
) -> list[Assignment] | None:
    """Every replica on some worker of the region, or None when they do not all fit now.

    Largest replicas first, each on the worker it leaves least room on (best fit), so large
    holes stay free for large jobs. ``offers`` are not changed.
    """
    rng = rng or random.Random()
    candidates = [_copy(offer) for offer in offers if offer.region == region]
    order = sorted(range(len(plans)), key=lambda i: _size(replica_cost(plans[i])), reverse=True)
    chosen: dict[int, Assignment] = {}
    for index in order:
        plan, cost = plans[index], replica_cost(plans[index])
        fitting = [offer for offer in candidates if offer.serves(plan) and offer.fits(cost)]
        if not fitting:
            return None
        best = min(fitting, key=lambda offer: (*offer.room_after(cost), offer.name))
        devices, port = best.take(cost, rng)
        chosen[index] = Assignment(plan, best.name, tuple(devices), port)
    return [chosen[index] for index in range(len(plans))]


def never_fits(plans: list[catalogue.ReplicaPlan], offers: Iterable[Offer], region: str) -> str | None:
    """Why no worker could ever run this job, even with nothing else running; None if some could."""
    in_region = [offer for offer in offers if offer.region == region]
    if not in_region:
        return f"No worker serves the region {region}."
    for plan in plans:
        cost = replica_cost(plan)
        if not any(offer.could_ever_fit(plan, cost) for offer in in_region):
            return (
                f"No worker in {region} can ever run {catalogue.replica_label(plan.task_type, plan.index)} "
                f"({describe(plan)}): the workers there offer {offer_summary(in_region)}."
            )
    idle = [_idle(offer) for offer in in_region]
    if place(plans, idle, region) is None:
        return (
            f"The job's {len(plans)} replicas ({describe_all(plans)}) do not fit on the workers in {region} "
            f"together, even with nothing else running: they offer {offer_summary(in_region)}."
        )
    return None


def waiting_reason(plans: list[catalogue.ReplicaPlan], offers: Iterable[Offer], region: str) -> str:
    """Why a job that could run is still queued; labels workers count replicas, not CPUs."""
    need = describe_all(plans)
    if any(offer.labels for offer in offers if offer.region == region):
        need = f"{len(plans)} replica{'s' if len(plans) != 1 else ''} ({need})"
    return f"Waiting for capacity: the job needs {need} in {region}, and the workers there are busy."


def describe(plan: catalogue.ReplicaPlan) -> str:
    cost = replica_cost(plan)
    text = f"{plan.machine_type}: {cost.cpus:g} CPUs, {cost.memory_gb:g} GB"
    if cost.accelerator:
        text += f", {cost.accelerators} x {cost.accelerator}"
    return text


def describe_all(plans: list[catalogue.ReplicaPlan]) -> str:
    total = [replica_cost(plan) for plan in plans]
    text = f"{sum(c.cpus for c in total):g} CPUs, {sum(c.memory_gb for c in total):g} GB in all"
    accelerators: dict[str, int] = {}
    for cost in total:
        if cost.accelerator:
            accelerators[cost.accelerator] = accelerators.get(cost.accelerator, 0) + cost.accelerators
    return text + "".join(f", {count} x {name}" for name, count in accelerators.items())


def offer_summary(offers: list[Offer]) -> str:
    parts = []
    for offer in offers:
        text = f"{offer.name}: {capacity_text(offer.cpus, offer.memory_gb, offer.slots)}"
        text += "".join(f", {count} x {name}" for name, count in offer.accelerators.items())
        if offer.machine_types:
            text += f", only {', '.join(sorted(offer.machine_types))}"
        parts.append(text)
    return "; ".join(parts)


def holds_nothing(cpus: float, memory_gb: float, machine_types: Iterable[str] = (), slots: int = 0) -> str | None:
    """Why a worker with this ``--capacity`` can never run a replica (no machine type it takes
    fits in it), or None. A worker with slots takes every machine type as a label."""
    if slots:
        return None
    allowed = set(machine_types) or set(catalogue.MACHINE_TYPES)
    sized = [
        (m.vcpus, m.memory_gb, m.name)
        for m in catalogue.MACHINE_TYPES.values()
        if m.name in allowed and m.vcpus and m.memory_gb
    ]
    if not sized or any(need_cpus <= cpus and need_memory <= memory_gb for need_cpus, need_memory, _ in sized):
        return None
    need_cpus, need_memory, name = min(sized)
    return (
        f"--capacity cpus={cpus:g},memory={memory_gb:g} holds no machine type it takes: the smallest, "
        f"{name}, needs {need_cpus} CPUs and {need_memory:g} GB. It will never run a replica; "
        "give it more, or leave --capacity out to take machine types as labels."
    )


def capacity_text(cpus: float, memory_gb: float, slots: int) -> str:
    """A worker's capacity in words: ``8 CPUs, 32 GB``, or ``labels, 4 slots``."""
    return f"labels, {slots} slots" if slots else f"{cpus:g} CPUs, {memory_gb:g} GB"


def _size(cost: Cost) -> tuple:
    return (cost.accelerators, cost.cpus, cost.memory_gb)


def _copy(offer: Offer) -> Offer:
    return Offer(
        offer.name,
        offer.region,
        offer.machine_types,
        offer.cpus,
        offer.memory_gb,
        offer.accelerators,
        offer.free_cpus,
        offer.free_memory_gb,
        {k: list(v) for k, v in offer.free_devices.items()},
        offer.ports,
        set(offer.used_ports),
        offer.slots,
        offer.free_slots,
        alone=offer.labels and offer.free_slots >= offer.slots,
        containers=offer.containers,
    )


def _idle(offer: Offer) -> Offer:
    return Offer(
        offer.name,
        offer.region,
        offer.machine_types,
        offer.cpus,
        offer.memory_gb,
        offer.accelerators,
        offer.cpus,
        offer.memory_gb,
        device_indices(offer.accelerators),
        offer.ports,
        slots=offer.slots,
        free_slots=offer.slots,
        containers=offer.containers,
    )


def parse_accelerators(text: str) -> dict[str, int]:
    """``nvidia-tesla-t4=2,tpu-v3=8`` (gcloud's spelling) → ``{"NVIDIA_TESLA_T4": 2, "TPU_V3": 8}``."""
    result: dict[str, int] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, count = part.partition("=")
        key = name.strip().upper().replace("-", "_")
        if key not in catalogue.ACCELERATORS:
            known = ", ".join(sorted(n.lower().replace("_", "-") for n in catalogue.ACCELERATORS))
            raise ValueError(f"--accelerators: unknown accelerator {name.strip()!r}; known: {known}.")
        try:
            number = int(count or "1")
        except ValueError:
            raise ValueError(
                f"--accelerators: the count of {name.strip()} must be a whole number, got {count!r}."
            ) from None
        if number < 1:
            raise ValueError(f"--accelerators: the count of {name.strip()} must be at least 1.")
        result[key] = number
    return result


def parse_capacity(text: str, *, default_cpus: float, default_memory_gb: float) -> tuple[float, float]:
    """``cpus=16,memory=64`` (memory in GB) → (16.0, 64.0); what is left out takes the defaults."""
    values = {"cpus": default_cpus, "memory": default_memory_gb}
    for part in filter(None, (p.strip() for p in text.split(","))):
        name, _, value = part.partition("=")
        if name.strip() not in values:
            raise ValueError(f"--capacity: unknown resource {name.strip()!r}; use cpus=N,memory=GB.")
        try:
            number = float(value)
        except ValueError:
            raise ValueError(f"--capacity: {name.strip()} must be a number, got {value!r}.") from None
        if number <= 0:
            raise ValueError(f"--capacity: {name.strip()} must be greater than 0.")
        values[name.strip()] = number
    return values["cpus"], values["memory"]


def parse_machine_types(text: str) -> list[str]:
    names = [p.strip() for p in text.split(",") if p.strip()]
    unknown = [name for name in names if name not in catalogue.MACHINE_TYPES]
    if unknown:
        raise ValueError(f"--machine-types: unknown machine type {unknown[0]!r}.")
    return names
