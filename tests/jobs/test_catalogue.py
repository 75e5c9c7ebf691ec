"""Tests for jobs.catalogue: tiers, machines, accelerators, regions, runtimes, ML units."""

from __future__ import annotations

import pytest

from jobs import catalogue
from jobs.catalogue import ReplicaPlan, consumed_ml_units, ml_units_per_hour, replica_plan

HOUR = 3600.0


def labels(plan: list[ReplicaPlan]) -> list[str]:
    return [catalogue.replica_label(p.task_type, p.index) for p in plan]


def units_for_an_hour(training_input: dict) -> float:
    return consumed_ml_units((p, HOUR) for p in replica_plan(training_input))


# --- replica plans ---------------------------------------------------------------------------


def test_basic_is_one_standard_master():
    assert replica_plan({"scaleTier": "BASIC"}) == [ReplicaPlan("master", 0, "standard", None, 0)]


def test_missing_tier_means_basic():
    assert replica_plan({}) == replica_plan({"scaleTier": "BASIC"})


def test_standard_1_has_master_four_workers_three_ps():
    plan = replica_plan({"scaleTier": "STANDARD_1"})
    assert labels(plan) == [
        "master-replica-0",
        "worker-replica-0",
        "worker-replica-1",
        "worker-replica-2",
        "worker-replica-3",
        "ps-replica-0",
        "ps-replica-1",
        "ps-replica-2",
    ]
    assert {p.machine_type for p in plan if p.task_type in ("master", "worker")} == {"complex_model_s"}
    assert {p.machine_type for p in plan if p.task_type == "ps"} == {"standard"}


def test_premium_1_has_master_nineteen_workers_eleven_ps():
    plan = replica_plan({"scaleTier": "PREMIUM_1"})
    counts = {t: sum(p.task_type == t for p in plan) for t in ("master", "worker", "ps")}
    assert counts == {"master": 1, "worker": 19, "ps": 11}
    assert plan[0].machine_type == "complex_model_m"
    assert plan[-1] == ReplicaPlan("ps", 10, "large_model", None, 0)


def test_basic_gpu_reports_its_built_in_k80():
    assert replica_plan({"scaleTier": "BASIC_GPU"}) == [ReplicaPlan("master", 0, "standard_gpu", "NVIDIA_TESLA_K80", 1)]


def test_basic_tpu_has_a_cloud_tpu_worker():
    assert replica_plan({"scaleTier": "BASIC_TPU"}) == [
        ReplicaPlan("master", 0, "standard", None, 0),
        ReplicaPlan("worker", 0, "cloud_tpu", "TPU_V2", 8),
    ]


def test_custom_plan_orders_master_workers_ps_evaluators():
    plan = replica_plan(
        {
            "scaleTier": "CUSTOM",
            "masterType": "n1-highcpu-16",
            "evaluatorType": "n1-highcpu-16",
            "evaluatorCount": "1",
            "parameterServerType": "n1-highmem-8",
            "parameterServerCount": "3",
            "workerType": "n1-highcpu-16",
            "workerCount": "9",
        }
    )
    assert labels(plan) == (
        ["master-replica-0"]
        + [f"worker-replica-{i}" for i in range(9)]
        + [f"ps-replica-{i}" for i in range(3)]
        + ["evaluator-replica-0"]
    )
    assert plan[10].machine_type == "n1-highmem-8"


def test_custom_plan_carries_accelerators_per_role():
    plan = replica_plan(
        {
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-8",
            "masterConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_T4", "count": "1"}},
            "workerType": "n1-standard-16",
            "workerCount": 2,
            "workerConfig": {"acceleratorConfig": {"type": "NVIDIA_TESLA_V100", "count": 2}},
            "parameterServerType": "n1-highmem-8",
            "parameterServerCount": "1",
        }
    )
    assert plan == [
        ReplicaPlan("master", 0, "n1-standard-8", "NVIDIA_TESLA_T4", 1),
        ReplicaPlan("worker", 0, "n1-standard-16", "NVIDIA_TESLA_V100", 2),
        ReplicaPlan("worker", 1, "n1-standard-16", "NVIDIA_TESLA_V100", 2),
        ReplicaPlan("ps", 0, "n1-highmem-8", None, 0),
    ]


def test_custom_legacy_gpu_types_report_built_in_accelerators():
    plan = replica_plan(
        {"scaleTier": "CUSTOM", "masterType": "complex_model_m_gpu", "workerType": "standard_v100", "workerCount": "1"}
    )
    assert [(p.accelerator_type, p.accelerator_count) for p in plan] == [
        ("NVIDIA_TESLA_K80", 4),
        ("NVIDIA_TESLA_V100", 1),
    ]


def test_custom_tpu_worker():
    plan = replica_plan(
        {
            "scaleTier": "CUSTOM",
            "masterType": "n1-standard-16",
            "workerType": "cloud_tpu",
            "workerCount": "1",
            "workerConfig": {"acceleratorConfig": {"type": "TPU_V2", "count": "8"}},
        }
    )
    assert plan[1] == ReplicaPlan("worker", 0, "cloud_tpu", "TPU_V2", 8)


def test_custom_zero_counts_add_no_replicas():
    plan = replica_plan(
        {"scaleTier": "CUSTOM", "masterType": "n1-standard-4", "workerType": "n1-standard-4", "workerCount": "0"}
    )
    assert labels(plan) == ["master-replica-0"]


@pytest.mark.parametrize(
    ("task_type", "index", "label"),
    [
        ("master", 0, "master-replica-0"),
        ("worker", 1, "worker-replica-1"),
        ("ps", 0, "ps-replica-0"),
        ("evaluator", 0, "evaluator-replica-0"),
    ],
)
def test_replica_label(task_type, index, label):
    assert catalogue.replica_label(task_type, index) == label


# --- ML units ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("tier", "units"),
    [
        ("BASIC", 0.39),
        ("STANDARD_1", 4.06),
        ("PREMIUM_1", 33.78),
        ("BASIC_GPU", 1.69),
        ("BASIC_TPU", 9.57),
    ],
)
def test_an_hour_of_each_tier_matches_the_published_price(tier, units):
    assert units_for_an_hour({"scaleTier": tier}) == units


@pytest.mark.parametrize(
    ("machine", "units"),
    [
        ("n1-standard-4", 0.3878),
        ("n1-standard-8", 0.7755),
        ("n1-standard-16", 1.5510),
        ("n1-standard-96", 9.3061),
        ("n1-highmem-2", 0.2416),
        ("standard", 0.3878),
        ("large_model", 0.9665),
        ("complex_model_s", 0.5788),
        ("complex_model_m", 1.1576),
        ("complex_model_l", 2.3151),
        ("standard_gpu", 1.6939),
    ],
)
def test_machine_units_follow_the_price_list(machine, units):
    plan = ReplicaPlan("master", 0, machine, None, 0)
    assert ml_units_per_hour(plan) == pytest.approx(units, abs=2e-4)


def test_legacy_gpu_price_includes_its_gpus():
    # complex_model_m_gpu was $2.56/h: n1-standard-16 plus four K80s.
    assert catalogue.MACHINE_TYPES["complex_model_m_gpu"].units_per_hour == pytest.approx(2.56 / 0.49, abs=1e-3)


def test_built_in_accelerators_are_not_charged_twice():
    plan = ReplicaPlan("master", 0, "standard_gpu", "NVIDIA_TESLA_K80", 1)
    assert ml_units_per_hour(plan) == catalogue.MACHINE_TYPES["standard_gpu"].units_per_hour


def test_attached_gpus_are_charged_on_top():
    # n1-standard-8 ($0.38) + one T4 ($0.35) = $0.73/h.
    plan = ReplicaPlan("master", 0, "n1-standard-8", "NVIDIA_TESLA_T4", 1)
    assert ml_units_per_hour(plan) == pytest.approx(0.73 / 0.49, abs=1e-3)


def test_units_scale_with_time_and_small_values_keep_two_significant_digits():
    basic = replica_plan({"scaleTier": "BASIC"})[0]
    assert consumed_ml_units([(basic, 600)]) == 0.065
    assert consumed_ml_units([(basic, HOUR), (basic, HOUR)]) == 0.78
    assert consumed_ml_units([(basic, 1)]) == 0.00011  # a short job is not 0.0
    assert consumed_ml_units([]) == 0


def test_accelerator_units_are_price_over_rate():
    assert catalogue.ACCELERATORS["NVIDIA_TESLA_K80"].units_per_hour == pytest.approx(0.45 / 0.49)
    # A TPU v2 device (8 cores) costs $4.50/h.
    assert catalogue.ACCELERATORS["TPU_V2"].units_per_hour * 8 == pytest.approx(4.50 / 0.49)


# --- catalogue consistency ---------------------------------------------------------------------


def test_every_tier_machine_exists():
    for tier in catalogue.SCALE_TIERS.values():
        for role in tier.roles:
            assert role.machine_type in catalogue.MACHINE_TYPES, (tier.name, role.machine_type)
            assert role.task_type in ("master", "worker", "ps", "evaluator")


def test_tiers_are_the_six_of_the_api():
    assert list(catalogue.SCALE_TIERS) == ["BASIC", "STANDARD_1", "PREMIUM_1", "BASIC_GPU", "BASIC_TPU", "CUSTOM"]


@pytest.mark.parametrize("tier", list(catalogue.SCALE_TIERS))
def test_every_tier_has_a_description(tier):
    assert catalogue.tier_description(tier)


@pytest.mark.parametrize(
    ("machine", "summary"),
    [
        ("standard", "standard: 4 vCPUs, 15 GB"),
        ("standard_gpu", "standard_gpu: 8 vCPUs, 30 GB, 1 NVIDIA Tesla K80"),
        ("n1-highcpu-16", "n1-highcpu-16: 16 vCPUs, 14.4 GB"),
        ("cloud_tpu", "cloud_tpu: a TPU VM with one Cloud TPU"),
    ],
)
def test_machine_summary(machine, summary):
    assert catalogue.machine_summary(machine) == summary


def test_basic_description_names_the_machine():
    assert catalogue.tier_description("BASIC") == "1 master (standard: 4 vCPUs, 15 GB)"


@pytest.mark.parametrize(
    ("machine", "category"),
    [
        ("n1-standard-4", "compute_engine"),
        ("n1-highcpu-96", "compute_engine"),
        ("a2-megagpu-16g", "compute_engine"),
        ("complex_model_l_v100", "legacy"),
        ("cloud_tpu", "tpu"),
    ],
)
def test_each_machine_type_has_its_category(machine, category):
    assert catalogue.MACHINE_TYPES[machine].category == category


def test_a_machine_type_the_original_did_not_have_is_not_in_the_catalogue():
    assert "n1-standard-1" not in catalogue.MACHINE_TYPES


def test_compute_engine_allow_list_is_exact():
    compute_engine = {
        n for n, m in catalogue.MACHINE_TYPES.items() if m.category == "compute_engine" and not n.startswith("a2-")
    }
    assert len(compute_engine) == 17
    assert not {"n1-standard-1", "n1-standard-2", "n1-highcpu-2", "n1-highcpu-4", "n1-highcpu-8"} & compute_engine


def test_a2_shapes_fix_their_a100_count():
    counts = {n: m.a2_gpu_count for n, m in catalogue.MACHINE_TYPES.items() if n.startswith("a2-")}
    assert counts == {
        "a2-highgpu-1g": 1,
        "a2-highgpu-2g": 2,
        "a2-highgpu-4g": 4,
        "a2-highgpu-8g": 8,
        "a2-megagpu-16g": 16,
    }


def test_accelerator_enum_and_ceilings():
    assert catalogue.ACCELERATOR_TYPE_VALUES[0] == "ACCELERATOR_TYPE_UNSPECIFIED"
    assert set(catalogue.ACCELERATORS) < set(catalogue.ACCELERATOR_TYPE_VALUES)
    k80 = catalogue.ACCELERATORS["NVIDIA_TESLA_K80"]
    assert k80.max_vcpus[1] < catalogue.MACHINE_TYPES["n1-standard-16"].vcpus <= k80.max_vcpus[2]
    for accelerator in catalogue.ACCELERATORS.values():
        assert accelerator.kind in ("gpu", "tpu")
        if accelerator.max_vcpus:
            assert set(accelerator.max_vcpus) == set(accelerator.allowed_counts)


def test_regions():
    assert len(catalogue.REGIONS) == 13
    tpu_regions = {n for n, r in catalogue.REGIONS.items() if "TPU_V2" in r.accelerators}
    assert tpu_regions == {"us-central1", "europe-west4"}
    for region in catalogue.REGIONS.values():
        assert set(region.accelerators) <= set(catalogue.ACCELERATORS)
        assert region.capabilities == ("TRAINING", "BATCH_PREDICTION", "ONLINE_PREDICTION")


def test_location_capabilities_wire_format():
    capabilities = catalogue.location_capabilities("europe-west2")
    assert capabilities == [
        {"type": "TRAINING", "availableAccelerators": ["NVIDIA_TESLA_T4"]},
        {"type": "BATCH_PREDICTION"},
        {"type": "ONLINE_PREDICTION", "availableAccelerators": ["NVIDIA_TESLA_T4"]},
    ]


# --- runtimes and TF_CONFIG ----------------------------------------------------------------------


def test_runtime_versions():
    assert list(catalogue.RUNTIME_VERSIONS) == ["1.15"] + [f"2.{m}" for m in range(1, 12)] + ["current"]
    assert catalogue.RUNTIME_VERSIONS["1.15"].python_versions == ("2.7", "3.7")
    assert all(
        r.python_versions == ("3.7",) for n, r in catalogue.RUNTIME_VERSIONS.items() if n not in ("1.15", "current")
    )
    assert catalogue.RUNTIME_VERSIONS["current"].python_versions == ("3.11", "3.12", "3.13")
    assert catalogue.RUNTIME_VERSIONS["2.11"].tensorflow.startswith("2.11")
    assert catalogue.DEFAULT_RUNTIME_VERSION in catalogue.RUNTIME_VERSIONS
    assert catalogue.DEFAULT_PYTHON_VERSION == "3.7"


@pytest.mark.parametrize(
    ("runtime", "kwargs", "chief"),
    [
        ("2.11", {}, True),
        ("2.1", {}, True),
        ("1.15", {}, False),
        (None, {}, True),
        ("1.14", {}, False),
        ("3.0", {}, True),
        ("1.15", {"use_chief_in_tf_config": True}, False),
        (None, {"custom_container": True}, False),
        (None, {"custom_container": True, "use_chief_in_tf_config": True}, True),
        ("2.11", {"custom_container": True}, False),
    ],
)
def test_uses_chief(runtime, kwargs, chief):
    assert catalogue.uses_chief(runtime, **kwargs) is chief
