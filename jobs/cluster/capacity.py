"""What live workers offer now: their declared capacity minus the replicas and jobs placed on them."""

from __future__ import annotations

from datetime import timedelta

from django.conf import settings
from django.utils import timezone

from jobs import catalogue, kinds
from jobs.cluster import placement
from jobs.models import ACTIVE_STATES, LIVE_REPLICA_STATES, CoordinatorLease, Job, Replica, Worker


def live_workers():
    cutoff = timezone.now() - timedelta(seconds=settings.WORKER_LEASE_SECONDS)
    return Worker.objects.filter(stopped=False, heartbeat__gte=cutoff)


def whole_job_plans(job: Job) -> list[catalogue.ReplicaPlan]:
    """What a job run whole by one worker (tuning, batch prediction) holds while it runs."""
    return kinds.of_job(job).plans(job)


def runs_whole(job: Job) -> bool:
    """Tuning and batch prediction jobs run whole on one worker, with embedded mode's runners."""
    return job.prediction_input is not None or job.is_hyperparameter_job


def offers() -> dict[str, placement.Offer]:
    workers = {worker.pk: worker for worker in live_workers()}
    result = {
        worker.name: placement.Offer(
            name=worker.name,
            region=worker.region,
            machine_types=frozenset(worker.machine_types or ()),
            cpus=worker.cpus,
            memory_gb=worker.memory_gb,
            accelerators=dict(worker.accelerators or {}),
            free_cpus=worker.cpus,
            free_memory_gb=worker.memory_gb,
            free_devices=placement.device_indices(worker.accelerators or {}),
            ports=(worker.port_first, worker.port_last),
            slots=worker.slots,
            free_slots=worker.slots,
            containers=worker.containers,
        )
        for worker in workers.values()
    }
    names = {pk: worker.name for pk, worker in workers.items()}
    placed = Replica.objects.filter(worker_id__in=names, state__in=LIVE_REPLICA_STATES, job__worker=None)
    for replica in placed.values(
        "worker_id", "machine_type", "accelerator_type", "accelerator_count", "devices", "port"
    ):
        offer = result[names[replica["worker_id"]]]
        plan = catalogue.ReplicaPlan(
            "", 0, replica["machine_type"], replica["accelerator_type"] or None, replica["accelerator_count"]
        )
        _subtract(offer, placement.replica_cost(plan), replica["devices"])
        if replica["port"]:
            offer.used_ports.add(replica["port"])
    for job in Job.objects.filter(worker_id__in=names, state__in=ACTIVE_STATES):
        offer = result[names[job.worker_id]]
        for plan in whole_job_plans(job):
            cost = placement.replica_cost(plan)
            devices = offer.free_devices.get(cost.accelerator or "", [])[: cost.accelerators]
            _subtract(offer, cost, ",".join(map(str, devices)))
    return result


def _subtract(offer: placement.Offer, cost: placement.Cost, devices: str) -> None:
    offer.charge(cost)
    taken = {int(d) for d in devices.split(",") if d.strip().isdigit()}
    for name, free in offer.free_devices.items():
        offer.free_devices[name] = [d for d in free if d not in taken]


def coordinator() -> dict | None:
    """Which process coordinates now (``jobs.cluster.coordinator``): its name in words, its epoch,
    and whether its lease still holds; None before any process led."""
    lease = CoordinatorLease.objects.filter(pk=1).first()
    if lease is None or not lease.holder:
        return None
    _, host, pid, _ = (lease.holder.split(":") + ["", "", "", ""])[:4]
    worker = Worker.objects.filter(hostname=host, pid=int(pid) if pid.isdigit() else None, stopped=False).first()
    return {
        "name": f"worker {worker.name}" if worker else f"the web process on {host} (pid {pid})",
        "epoch": lease.epoch,
        "holds": bool(lease.expires and lease.expires > timezone.now()),
        "expires": lease.expires,
    }


def hidden_workers() -> int:
    """Workers that stopped or were lost: listed only when asked for (``--all``, the page's link)."""
    return Worker.objects.exclude(pk__in=live_workers().values("pk")).count()


def summaries(*, include_gone: bool = False) -> list[dict]:
    """What the workers page and ``aiconsole workers`` show: each worker, whether it is live,
    stopped or lost, what is free on it now, and the replicas and whole jobs it runs."""
    live = set(live_workers().values_list("pk", flat=True))
    free = offers() if live else {}
    shown = Worker.objects.all() if include_gone else Worker.objects.filter(pk__in=live)
    rows = []
    for worker in shown.prefetch_related("replicas__job__project", "jobs__project"):
        offer = free.get(worker.name)
        rows.append(
            {
                "worker": worker,
                "state": "live" if worker.pk in live else ("stopped" if worker.stopped else "lost"),
                "capacity": placement.capacity_text(worker.cpus, worker.memory_gb, worker.slots),
                "holds_nothing": placement.holds_nothing(
                    worker.cpus, worker.memory_gb, worker.machine_types or (), worker.slots
                ),
                "free_cpus": offer.free_cpus if offer else None,
                "free_memory_gb": offer.free_memory_gb if offer else None,
                "free_devices": sum(len(d) for d in offer.free_devices.values()) if offer else None,
                "free_slots": max(offer.free_slots, 0) if offer else None,
                "replicas": [r for r in worker.replicas.all() if r.state in LIVE_REPLICA_STATES],
                "jobs": [j for j in worker.jobs.all() if j.state in ACTIVE_STATES],
            }
        )
    return rows
