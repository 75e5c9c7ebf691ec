"""The machine, tier, accelerator, region and runtime catalogue of AI Platform Training, as data.

Everything here is plain data plus small pure functions over it; nothing touches Django. The
numbers follow the fact sheet (`api-facts.md` §3, §9, §11). Where the sheet marks a value as
inferred or remembered, the comment beside it says so, so it is easy to find and change.

Prices are turned into *training units* with the Americas rate of $0.49 per unit, the rate the
published unit figures were computed with.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from jobs import runtimes

USD_PER_TRAINING_UNIT = 0.49

COMPUTE_ENGINE = "compute_engine"
LEGACY = "legacy"
TPU = "tpu"

CLOUD_TPU = "cloud_tpu"


# ---------------------------------------------------------------------------------------------
# Accelerators
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Accelerator:
    """One AcceleratorConfig.type value that training jobs can use.

    `max_vcpus` maps an allowed count to the most vCPUs a machine may have with that many GPUs
    attached (the Compute Engine limit); it is empty where the rule does not apply (A100, TPU).
    `usd_per_hour` is the price of one unit of `count`: one GPU, or one TPU core.
    """

    name: str
    kind: str  # "gpu" or "tpu"
    allowed_counts: tuple[int, ...]
    max_vcpus: dict[int, int]
    usd_per_hour: float
    label: str

    @property
    def units_per_hour(self) -> float:
        """Training units per hour for one unit of `count`."""
        return self.usd_per_hour / USD_PER_TRAINING_UNIT


# Every value of the AcceleratorType enum, in discovery-document order.
ACCELERATOR_TYPE_VALUES = (
    "ACCELERATOR_TYPE_UNSPECIFIED",
    "NVIDIA_TESLA_K80",
    "NVIDIA_TESLA_P100",
    "NVIDIA_TESLA_V100",
    "NVIDIA_TESLA_P4",
    "NVIDIA_TESLA_T4",
    "NVIDIA_TESLA_A100",
    "TPU_V2",
    "TPU_V3",
    "TPU_V2_POD",
    "TPU_V3_POD",
    "TPU_V4_POD",
)

# The *_POD values are in the enum but their use by jobs is undocumented, so they are left out
# of the usable set: the spec rejects them with a clear message instead of guessing.
ACCELERATORS: dict[str, Accelerator] = {
    a.name: a
    for a in (
        Accelerator("NVIDIA_TESLA_K80", "gpu", (1, 2, 4, 8), {1: 8, 2: 16, 4: 32, 8: 64}, 0.45, "NVIDIA Tesla K80"),
        # P100 reaches 96 vCPUs with 4 GPUs only in some zones; we keep the common 64.
        Accelerator("NVIDIA_TESLA_P100", "gpu", (1, 2, 4), {1: 16, 2: 32, 4: 64}, 1.46, "NVIDIA Tesla P100"),
        Accelerator("NVIDIA_TESLA_V100", "gpu", (1, 2, 4, 8), {1: 12, 2: 24, 4: 48, 8: 96}, 2.48, "NVIDIA Tesla V100"),
        Accelerator("NVIDIA_TESLA_P4", "gpu", (1, 2, 4), {1: 24, 2: 48, 4: 96}, 0.60, "NVIDIA Tesla P4"),
        Accelerator("NVIDIA_TESLA_T4", "gpu", (1, 2, 4), {1: 24, 2: 48, 4: 96}, 0.35, "NVIDIA Tesla T4"),
        # The A100 price is not in the fact sheet; $2.934/h per GPU is the remembered
        # Americas list price (an assumption, easy to change).
        Accelerator("NVIDIA_TESLA_A100", "gpu", (1, 2, 4, 8, 16), {}, 2.934, "NVIDIA A100"),
        # TPUs are priced per 8-core device ($4.50 v2, $8.00 v3); count is in cores.
        Accelerator("TPU_V2", "tpu", (8,), {}, 4.50 / 8, "Cloud TPU v2"),
        Accelerator("TPU_V3", "tpu", (8,), {}, 8.00 / 8, "Cloud TPU v3"),
    )
}

TPU_CORES_PER_DEVICE = 8


# ---------------------------------------------------------------------------------------------
# Machine types
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class MachineType:
    """A machine type a training replica can run on.

    `builtin_accelerator` is set for legacy GPU types, whose GPUs come with the machine and are
    already in `units_per_hour`. `a2_gpu_count` is set for a2 shapes, which only take
    NVIDIA_TESLA_A100 and exactly that many; their GPUs are charged on top, like any
    acceleratorConfig.
    """

    name: str
    category: str
    vcpus: int | None
    memory_gb: float | None
    units_per_hour: float
    builtin_accelerator: tuple[str, int] | None = None
    a2_gpu_count: int = 0
    description: str = ""


# Per-vCPU unit rates from the published n1 prices (§3.5).
_N1_RATES = {"standard": 0.09694, "highmem": 0.1208, "highcpu": 0.0723}
_N1_GB_PER_VCPU = {"standard": 3.75, "highmem": 6.5, "highcpu": 0.9}
_N1_SIZES = {
    "standard": (4, 8, 16, 32, 64, 96),
    "highmem": (2, 4, 8, 16, 32, 64, 96),
    "highcpu": (16, 32, 64, 96),
}


def _n1_types() -> list[MachineType]:
    """The Compute Engine n1 allow-list of the older API docs (§3.3)."""
    return [
        MachineType(
            name=f"n1-{family}-{n}",
            category=COMPUTE_ENGINE,
            vcpus=n,
            memory_gb=round(n * _N1_GB_PER_VCPU[family], 1),
            units_per_hour=round(n * _N1_RATES[family], 4),
        )
        for family, sizes in _N1_SIZES.items()
        for n in sizes
    ]


def _a2_types() -> list[MachineType]:
    """The A100-only a2 shapes (§3.3, remembered).

    The price of the VM part is not documented for AI Platform. With about 7 GB per vCPU, an a2
    VM is closest to n1-highmem (6.5 GB per vCPU), so we charge it at the n1-highmem vCPU rate;
    the A100s are added on top from ACCELERATORS.
    """
    shapes = (
        ("a2-highgpu-1g", 12, 85, 1),
        ("a2-highgpu-2g", 24, 170, 2),
        ("a2-highgpu-4g", 48, 340, 4),
        ("a2-highgpu-8g", 96, 680, 8),
        ("a2-megagpu-16g", 96, 1360, 16),
    )
    return [
        MachineType(
            name,
            COMPUTE_ENGINE,
            vcpus,
            float(memory),
            round(vcpus * _N1_RATES["highmem"], 4),
            a2_gpu_count=gpus,
            description=f"A100-only shape with {gpus} NVIDIA A100",
        )
        for name, vcpus, memory, gpus in shapes
    ]


def _legacy_gpu(name: str, base: str, gpu: str, count: int, description: str) -> MachineType:
    """A legacy GPU type: its Compute Engine equivalent plus its built-in GPUs (§3.2)."""
    equivalent = _N1_BY_NAME[base]
    units = equivalent.units_per_hour + count * ACCELERATORS[gpu].units_per_hour
    return MachineType(
        name,
        LEGACY,
        equivalent.vcpus,
        equivalent.memory_gb,
        round(units, 4),
        builtin_accelerator=(gpu, count),
        description=description,
    )


_N1_BY_NAME = {m.name: m for m in _n1_types()}

# Legacy CPU types use the unit values published for them (§3.5), which differ slightly from
# their Compute Engine equivalents.
_LEGACY_CPU = [
    MachineType("standard", LEGACY, 4, 15.0, 0.3878, description="basic machine"),
    MachineType("large_model", LEGACY, 8, 52.0, 0.9665, description="lots of memory, for big parameter servers"),
    MachineType("complex_model_s", LEGACY, 8, 7.2, 0.5788, description="more compute than standard"),
    MachineType("complex_model_m", LEGACY, 16, 14.4, 1.1576, description="about twice complex_model_s"),
    MachineType("complex_model_l", LEGACY, 32, 28.8, 2.3151, description="about twice complex_model_m"),
]

_LEGACY_GPU = [
    _legacy_gpu("standard_gpu", "n1-standard-8", "NVIDIA_TESLA_K80", 1, "standard + 1 K80"),
    _legacy_gpu("complex_model_m_gpu", "n1-standard-16", "NVIDIA_TESLA_K80", 4, "complex_model_m + 4 K80"),
    _legacy_gpu("complex_model_l_gpu", "n1-standard-32", "NVIDIA_TESLA_K80", 8, "complex_model_l + 8 K80"),
    _legacy_gpu("standard_p100", "n1-standard-8", "NVIDIA_TESLA_P100", 1, "standard + 1 P100"),
    _legacy_gpu("complex_model_m_p100", "n1-standard-16", "NVIDIA_TESLA_P100", 4, "complex_model_m + 4 P100"),
    _legacy_gpu("standard_v100", "n1-standard-8", "NVIDIA_TESLA_V100", 1, "standard + 1 V100"),
    _legacy_gpu("large_model_v100", "n1-highmem-8", "NVIDIA_TESLA_V100", 1, "large_model + 1 V100"),
    _legacy_gpu("complex_model_m_v100", "n1-standard-16", "NVIDIA_TESLA_V100", 4, "complex_model_m + 4 V100"),
    _legacy_gpu("complex_model_l_v100", "n1-standard-32", "NVIDIA_TESLA_V100", 8, "complex_model_l + 8 V100"),
]

# The TPU host itself costs nothing extra: the TPU cores are charged through the
# acceleratorConfig that a cloud_tpu replica must carry.
_CLOUD_TPU = MachineType(CLOUD_TPU, TPU, None, None, 0.0, description="a TPU VM with one Cloud TPU")

MACHINE_TYPES: dict[str, MachineType] = {
    m.name: m for m in [*_N1_BY_NAME.values(), *_a2_types(), *_LEGACY_CPU, *_LEGACY_GPU, _CLOUD_TPU]
}


def machine_summary(machine_type: str) -> str:
    """A short human description, e.g. "standard: 4 vCPUs, 15 GB"."""
    machine = MACHINE_TYPES[machine_type]
    if machine.vcpus is None:
        return f"{machine.name}: {machine.description}"
    text = f"{machine.name}: {machine.vcpus} vCPUs, {machine.memory_gb:g} GB"
    if machine.builtin_accelerator:
        gpu, count = machine.builtin_accelerator
        text += f", {count} {ACCELERATORS[gpu].label}"
    return text


# ---------------------------------------------------------------------------------------------
# Scale tiers
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class TierRole:
    """One replica group of a predefined scale tier."""

    task_type: str
    count: int
    machine_type: str
    accelerator_type: str | None = None
    accelerator_count: int = 0


@dataclass(frozen=True)
class ScaleTier:
    """A scale tier: its fixed cluster (empty for CUSTOM) and a one-line description."""

    name: str
    roles: tuple[TierRole, ...]
    description: str


# Compositions are inferred from the published tier prices (§3.1, fact-sheet open point 7).
SCALE_TIERS: dict[str, ScaleTier] = {
    t.name: t
    for t in (
        ScaleTier("BASIC", (TierRole("master", 1, "standard"),), "1 master (standard: 4 vCPUs, 15 GB)"),
        ScaleTier(
            "STANDARD_1",
            (
                TierRole("master", 1, "complex_model_s"),
                TierRole("worker", 4, "complex_model_s"),
                TierRole("ps", 3, "standard"),
            ),
            "1 master and 4 workers (complex_model_s: 8 vCPUs, 7.2 GB), 3 parameter servers (standard: 4 vCPUs, 15 GB)",
        ),
        ScaleTier(
            "PREMIUM_1",
            (
                TierRole("master", 1, "complex_model_m"),
                TierRole("worker", 19, "complex_model_m"),
                TierRole("ps", 11, "large_model"),
            ),
            "1 master and 19 workers (complex_model_m: 16 vCPUs, 14.4 GB), "
            "11 parameter servers (large_model: 8 vCPUs, 52 GB)",
        ),
        ScaleTier(
            "BASIC_GPU",
            (TierRole("master", 1, "standard_gpu"),),
            "1 master (standard_gpu: 8 vCPUs, 30 GB, 1 NVIDIA Tesla K80)",
        ),
        ScaleTier(
            "BASIC_TPU",
            (TierRole("master", 1, "standard"), TierRole("worker", 1, CLOUD_TPU, "TPU_V2", TPU_CORES_PER_DEVICE)),
            "1 master (standard: 4 vCPUs, 15 GB) and 1 Cloud TPU v2 worker (8 cores)",
        ),
        ScaleTier("CUSTOM", (), "Your own machine types and replica counts"),
    )
}


def tier_description(tier: str) -> str:
    """The one-line description of a scale tier, for the console's tier picker."""
    return SCALE_TIERS[tier].description


# ---------------------------------------------------------------------------------------------
# Regions
# ---------------------------------------------------------------------------------------------

CAPABILITY_TYPES = ("TRAINING", "BATCH_PREDICTION", "ONLINE_PREDICTION")


@dataclass(frozen=True)
class Region:
    """A region and the accelerators its zones offer for training."""

    name: str
    accelerators: tuple[str, ...]
    capabilities: tuple[str, ...] = CAPABILITY_TYPES


_K80, _P100, _V100 = "NVIDIA_TESLA_K80", "NVIDIA_TESLA_P100", "NVIDIA_TESLA_V100"
_P4, _T4, _A100 = "NVIDIA_TESLA_P4", "NVIDIA_TESLA_T4", "NVIDIA_TESLA_A100"

# The 13 regional endpoints of gcloud (§11). Per-region accelerators are a plausible reading of
# the Compute Engine GPU map of the time, not a confirmed AI Platform table; TPUs only in
# us-central1 and europe-west4, as the docs said.
REGIONS: dict[str, Region] = {
    r.name: r
    for r in (
        Region("us-central1", (_K80, _P100, _V100, _P4, _T4, _A100, "TPU_V2", "TPU_V3")),
        Region("us-east1", (_K80, _P100, _V100, _T4)),
        Region("us-east4", (_P4, _T4)),
        Region("us-west1", (_K80, _P100, _V100, _T4)),
        Region("northamerica-northeast1", (_P4, _T4)),
        Region("europe-west1", (_K80, _P100, _T4)),
        Region("europe-west2", (_T4,)),
        Region("europe-west3", (_T4,)),
        Region("europe-west4", (_P100, _V100, _P4, _T4, _A100, "TPU_V2", "TPU_V3")),
        Region("asia-east1", (_K80, _P100, _V100, _T4)),
        Region("asia-northeast1", (_T4, _A100)),
        Region("asia-southeast1", (_P4, _T4, _A100)),
        Region("australia-southeast1", (_P4, _T4)),
    )
}

# Online prediction never offered TPUs or A100s.
_ONLINE_PREDICTION_ACCELERATORS = (_K80, _P100, _V100, _P4, _T4)


def location_capabilities(region: str) -> list[dict]:
    """The `capabilities` list of a Location resource, in wire format."""
    available = REGIONS[region].accelerators
    online = [a for a in available if a in _ONLINE_PREDICTION_ACCELERATORS]
    by_type = {"TRAINING": list(available), "BATCH_PREDICTION": [], "ONLINE_PREDICTION": online}
    capabilities = []
    for kind in REGIONS[region].capabilities:
        entry: dict = {"type": kind}
        if by_type[kind]:
            entry["availableAccelerators"] = by_type[kind]
        capabilities.append(entry)
    return capabilities


# ---------------------------------------------------------------------------------------------
# Runtime versions
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class RuntimeVersion:
    """A runtime version: its TensorFlow release, Python versions, and TF_CONFIG key."""

    name: str
    tensorflow: str
    python_versions: tuple[str, ...]
    tf_config_chief: bool


# From the runtime version list (jobs/runtimes/runtimes.toml): the Pythons the original accepted
# for each, and `chief` in TF_CONFIG from 2.x on (the extension runtime `current` is TF 2.x too).
RUNTIME_VERSIONS: dict[str, RuntimeVersion] = {
    name: RuntimeVersion(
        name,
        runtime.tensorflow,
        runtime.accepted_pythons,
        tf_config_chief=runtime.is_extension or not name.startswith("1."),
    )
    for name, runtime in runtimes.RUNTIMES.items()
}

DEFAULT_RUNTIME_VERSION = runtimes.DEFAULT_RUNTIME_VERSION
DEFAULT_PYTHON_VERSION = "3.7"


def uses_chief(
    runtime_version: str | None,
    *,
    use_chief_in_tf_config: bool = False,
    custom_container: bool = False,
) -> bool:
    """Whether TF_CONFIG names the primary replica `chief` (True) or `master` (False).

    Custom containers keep `master` unless the job sets useChiefInTfConfig; the flag has no
    effect otherwise. Package jobs follow the runtime: 2.x uses `chief`, 1.x `master` (§4.4).
    """
    if custom_container:
        return use_chief_in_tf_config
    version = runtime_version or DEFAULT_RUNTIME_VERSION
    known = RUNTIME_VERSIONS.get(version)
    if known is not None:
        return known.tf_config_chief
    # A version outside the catalogue (only possible for data stored before a catalogue
    # change): decide from the major number.
    major = version.split(".", 1)[0]
    return not major.isdigit() or int(major) >= 2


# ---------------------------------------------------------------------------------------------
# Replica plans and ML units
# ---------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class ReplicaPlan:
    """One replica (VM) of a training job, as the executor will run it."""

    task_type: str
    index: int
    machine_type: str
    accelerator_type: str | None
    accelerator_count: int


_CUSTOM_ROLES = (
    # task type, type field, count field, config field
    ("worker", "workerType", "workerCount", "workerConfig"),
    ("ps", "parameterServerType", "parameterServerCount", "parameterServerConfig"),
    ("evaluator", "evaluatorType", "evaluatorCount", "evaluatorConfig"),
)


def _accelerator_of(machine_type: str, config: dict | None) -> tuple[str | None, int]:
    """The (type, count) a replica carries: built-in for legacy GPU types, else its config."""
    machine = MACHINE_TYPES.get(machine_type)
    if machine is not None and machine.builtin_accelerator:
        return machine.builtin_accelerator
    accelerator = (config or {}).get("acceleratorConfig") or {}
    if not accelerator.get("type"):
        return None, 0
    return accelerator["type"], int(accelerator.get("count") or 0)


def _group(task_type: str, count: int, machine_type: str, config: dict | None) -> list[ReplicaPlan]:
    accelerator_type, accelerator_count = _accelerator_of(machine_type, config)
    return [ReplicaPlan(task_type, index, machine_type, accelerator_type, accelerator_count) for index in range(count)]


def replica_plan(training_input: dict) -> list[ReplicaPlan]:
    """Expand a validated wire-format TrainingInput into its replicas.

    The order is masters, workers, parameter servers, evaluators. A missing scaleTier means
    BASIC, the proto default. Counts may be int64 strings.
    """
    tier = SCALE_TIERS[training_input.get("scaleTier") or "BASIC"]
    if tier.name != "CUSTOM":
        plan: list[ReplicaPlan] = []
        for role in tier.roles:
            machine = MACHINE_TYPES[role.machine_type]
            accelerator = machine.builtin_accelerator or (role.accelerator_type, role.accelerator_count)
            plan += [ReplicaPlan(role.task_type, i, role.machine_type, *accelerator) for i in range(role.count)]
        return plan
    plan = _group("master", 1, training_input["masterType"], training_input.get("masterConfig"))
    for task_type, type_key, count_key, config_key in _CUSTOM_ROLES:
        count = int(training_input.get(count_key) or 0)
        if count > 0 and training_input.get(type_key):
            plan += _group(task_type, count, training_input[type_key], training_input.get(config_key))
    return plan


def replica_label(task_type: str, index: int) -> str:
    """The node name used in logs and webAccessUris, e.g. `worker-replica-1`."""
    return f"{task_type}-replica-{index}"


def ml_units_per_hour(plan: ReplicaPlan) -> float:
    """Training units one replica consumes per hour: its machine plus any attached accelerators.

    Legacy GPU types already include their GPUs in the machine figure, so they are not added
    twice.
    """
    machine = MACHINE_TYPES[plan.machine_type]
    units = machine.units_per_hour
    if machine.builtin_accelerator is None and plan.accelerator_type:
        units += ACCELERATORS[plan.accelerator_type].units_per_hour * plan.accelerator_count
    return units


def consumed_ml_units(runs: Iterable[tuple[ReplicaPlan, float]]) -> float:
    """Total ML units for (replica, seconds run) pairs, rounded as ``round_ml_units``."""
    return round_ml_units(sum(ml_units_per_hour(plan) * seconds / 3600.0 for plan, seconds in runs))


def round_ml_units(units: float) -> float:
    """2 decimals like the API, but 2 significant digits below 0.1: a short job is 0.0042, not 0.0."""
    return round(units, 2) if abs(units) >= 0.1 else float(f"{units:.2g}")
