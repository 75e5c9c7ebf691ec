"""Gang placement over worker offers: pure functions, no database."""

from __future__ import annotations

import random

import pytest

from jobs.catalogue import ReplicaPlan, replica_plan
from jobs.cluster import placement


def offer(name, cpus=8.0, memory=32.0, region="us-central1", accelerators=None, machine_types=(), ports=(20000, 20009)):
    accelerators = accelerators or {}
    return placement.Offer(
        name,
        region,
        frozenset(machine_types),
        cpus,
        memory,
        accelerators,
        cpus,
        memory,
        placement.device_indices(accelerators),
        ports,
    )


def plans(count, machine="n1-standard-4", accelerator=None, accelerators=0):
    return [
        ReplicaPlan("master" if i == 0 else "worker", max(i - 1, 0) if i else 0, machine, accelerator, accelerators)
        for i in range(count)
    ]


def test_gang_spans_workers_when_none_holds_it_alone():
    chosen = placement.place(plans(3), [offer("a"), offer("b")], "us-central1", random.Random(1))
    assert chosen is not None
    assert sorted(a.worker for a in chosen) == ["a", "a", "b"]
    assert len({(a.worker, a.port) for a in chosen}) == 3


def test_gang_is_all_or_nothing():
    assert placement.place(plans(5), [offer("a"), offer("b")], "us-central1") is None


def test_best_fit_keeps_the_big_hole_free():
    chosen = placement.place(
        plans(1), [offer("big", cpus=16, memory=64), offer("small", cpus=4, memory=16)], "us-central1"
    )
    assert [a.worker for a in chosen] == ["small"]


def test_other_regions_do_not_count():
    assert placement.place(plans(1), [offer("eu", region="europe-west4")], "us-central1") is None


def test_machine_type_allow_list():
    only_large = offer("x", machine_types=["n1-highmem-8"])
    assert placement.place(plans(1), [only_large], "us-central1") is None
    assert (
        placement.place(
            plans(1, "n1-highmem-8"), [offer("y", cpus=8, memory=64, machine_types=["n1-highmem-8"])], "us-central1"
        )
        is not None
    )


def test_each_replica_gets_its_own_devices():
    gpus = offer("gpu", cpus=16, memory=64, accelerators={"NVIDIA_TESLA_T4": 2, "NVIDIA_TESLA_V100": 1})
    chosen = placement.place(plans(2, accelerator="NVIDIA_TESLA_T4", accelerators=1), [gpus], "us-central1")
    assert sorted(a.devices for a in chosen) == [(0,), (1,)]
    v100 = placement.place(plans(1, accelerator="NVIDIA_TESLA_V100", accelerators=1), [gpus], "us-central1")
    assert v100[0].devices == (2,)  # numbered across types in declared order
    assert placement.place(plans(3, accelerator="NVIDIA_TESLA_T4", accelerators=1), [gpus], "us-central1") is None


def test_never_fits_names_the_replica_and_the_offers():
    tpu = [ReplicaPlan("master", 0, "standard", None, 0), ReplicaPlan("worker", 0, "cloud_tpu", "TPU_V3", 8)]
    reason = placement.never_fits(tpu, [offer("a")], "us-central1")
    assert reason.startswith("No worker in us-central1 can ever run worker-replica-0 (cloud_tpu")
    assert "8 x TPU_V3" in reason and "a: 8 CPUs, 32 GB" in reason


def test_never_fits_when_the_whole_gang_exceeds_the_region():
    reason = placement.never_fits(plans(5), [offer("a"), offer("b")], "us-central1")
    assert "do not fit on the workers in us-central1 together" in reason
    assert placement.never_fits(plans(4), [offer("a"), offer("b")], "us-central1") is None
    assert placement.never_fits(plans(1), [], "us-central1") == "No worker serves the region us-central1."


def test_busy_workers_are_not_never():
    busy = offer("a")
    busy.free_cpus = 0
    assert placement.place(plans(1), [busy], "us-central1") is None
    assert placement.never_fits(plans(1), [busy], "us-central1") is None


def test_ports_are_unique_per_worker_and_a_worker_without_one_is_full():
    tight = offer("a", cpus=100, memory=1000, ports=(20000, 20001))
    chosen = placement.place(plans(2), [tight], "us-central1")
    assert sorted(a.port for a in chosen) == [20000, 20001]
    assert placement.place(plans(3), [tight], "us-central1") is None


def labels_offer(name, slots=4, cpus=2.0, memory=4.0, accelerators=None, ports=(20000, 29999)):
    """A worker started without --capacity on a small host: machine types are labels."""
    accelerators = accelerators or {}
    return placement.Offer(
        name,
        "us-central1",
        frozenset(),
        cpus,
        memory,
        accelerators,
        cpus,
        memory,
        placement.device_indices(accelerators),
        ports,
        slots=slots,
        free_slots=slots,
    )


@pytest.mark.parametrize("tier, replicas", [("BASIC", 1), ("STANDARD_1", 8), ("PREMIUM_1", 31)])
def test_every_tier_fits_an_idle_labels_worker_on_a_two_core_host(tier, replicas):
    tier_plans = replica_plan({"scaleTier": tier})
    idle = labels_offer("small")
    chosen = placement.place(tier_plans, [idle], "us-central1")
    assert chosen is not None and len(chosen) == replicas and {a.worker for a in chosen} == {"small"}
    assert placement.never_fits(tier_plans, [idle], "us-central1") is None
    strict = offer("small", cpus=2, memory=4)
    assert placement.place(tier_plans, [strict], "us-central1") is None
    assert "can ever run master-replica-0" in placement.never_fits(tier_plans, [strict], "us-central1")


def test_a_labels_worker_runs_at_most_its_slots_and_a_larger_job_only_alone():
    small = labels_offer("small", slots=4)
    small.free_slots = 1  # a 3-replica job runs there
    assert placement.place(plans(1, "complex_model_m"), [small], "us-central1") is not None
    assert placement.place(plans(2), [small], "us-central1") is None  # waits for the first job
    assert placement.never_fits(plans(2), [small], "us-central1") is None
    small.free_slots = -2  # a 6-replica job runs there alone
    assert placement.place(plans(1), [small], "us-central1") is None
    assert placement.place(plans(6), [labels_offer("idle", slots=4)], "us-central1") is not None


def test_waiting_reason_counts_replicas_on_labels_workers():
    assert placement.waiting_reason(plans(2), [offer("a")], "us-central1") == (
        "Waiting for capacity: the job needs 8 CPUs, 30 GB in all in us-central1, and the workers there are busy."
    )
    assert placement.waiting_reason(plans(2), [labels_offer("a")], "us-central1") == (
        "Waiting for capacity: the job needs 2 replicas (8 CPUs, 30 GB in all) in us-central1, and the workers "
        "there are busy."
    )


def test_a_labels_worker_counts_its_devices_exactly():
    gpus = labels_offer("gpu", accelerators={"NVIDIA_TESLA_T4": 1})
    one = plans(1, accelerator="NVIDIA_TESLA_T4", accelerators=1)
    assert placement.place(one, [gpus], "us-central1")[0].devices == (0,)
    assert placement.place(plans(2, accelerator="NVIDIA_TESLA_T4", accelerators=1), [gpus], "us-central1") is None
    reason = placement.never_fits(plans(1, accelerator="NVIDIA_TESLA_V100", accelerators=1), [gpus], "us-central1")
    assert reason.endswith("the workers there offer gpu: labels, 4 slots, 1 x NVIDIA_TESLA_T4.")


def test_a_gang_spans_a_busy_labels_worker_and_an_idle_one():
    busy = labels_offer("busy", slots=4)
    busy.free_slots = 1
    chosen = placement.place(plans(3), [busy, labels_offer("idle", slots=4)], "us-central1")
    assert sorted(a.worker for a in chosen) == ["busy", "idle", "idle"]


@pytest.mark.parametrize(
    "text, expected",
    [
        ("nvidia-tesla-t4=2", {"NVIDIA_TESLA_T4": 2}),
        ("nvidia-tesla-t4=2, tpu-v3=8", {"NVIDIA_TESLA_T4": 2, "TPU_V3": 8}),
        ("", {}),
    ],
)
def test_parse_accelerators(text, expected):
    assert placement.parse_accelerators(text) == expected


@pytest.mark.parametrize(
    "text, message",
    [
        ("nvidia-tesla-z9=1", "--accelerators: unknown accelerator 'nvidia-tesla-z9'"),
        ("nvidia-tesla-t4=two", "--accelerators: the count of nvidia-tesla-t4 must be a whole number, got 'two'"),
        ("nvidia-tesla-t4=0", "--accelerators: the count of nvidia-tesla-t4 must be at least 1"),
    ],
)
def test_parse_accelerators_refuses(text, message):
    with pytest.raises(ValueError, match=message):
        placement.parse_accelerators(text)


def test_parse_capacity():
    assert placement.parse_capacity("cpus=16", default_cpus=2, default_memory_gb=8) == (16.0, 8.0)
    with pytest.raises(ValueError, match="--capacity: unknown resource 'gpus'"):
        placement.parse_capacity("gpus=2", default_cpus=2, default_memory_gb=8)
    with pytest.raises(ValueError, match="--capacity: memory must be greater than 0"):
        placement.parse_capacity("memory=0", default_cpus=2, default_memory_gb=8)


def test_a_capacity_that_holds_no_machine_type_is_named():
    said = placement.holds_nothing(1, 2)
    assert said is not None and "the smallest, n1-highmem-2, needs 2 CPUs and 13 GB" in said
    assert placement.holds_nothing(2, 13) is None
    assert "n1-standard-8" in (placement.holds_nothing(4, 64, ["n1-standard-8"]) or "")
    assert placement.holds_nothing(1, 1, slots=4) is None  # machine types as labels: every one fits
