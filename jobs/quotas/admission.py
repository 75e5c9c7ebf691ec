"""Quotas per project and region, and the fair order of the waiting line.

**Quotas**, as the original's: concurrent CPUs (a replica counts its machine type's vCPUs),
concurrent accelerators per type (``NVIDIA_TESLA_T4`` …), concurrent replicas (``REPLICAS``), each
for a region or for all (``region`` empty). A job that can never fit its project's quota is refused
at submit (RESOURCE_EXHAUSTED, naming the quota); one that fits later waits, and its "why it waits"
names the quota, its limit and what holds it. Set by platform admins (``PATCH …/quotas``), read by
anyone who may see the project.

**The fair queue.** When several projects wait, the next slot goes to the project using the least of
what it is owed: its dominant share (the largest, over replicas, CPUs and each accelerator type, of
what its running jobs hold divided by what the console has), divided by its weight (1 unless an admin
set another); then the higher ``scheduling.priority``; then first come. A project's own jobs keep
their order (priority, then first come). A project alone still gets the whole machine.

Pure functions over jobs' rows and the quota rows; the executor (embedded) and the coordinator
(scaled) call ``fair_order`` and ``blocking_quota`` when they admit.
"""

from __future__ import annotations

import heapq
import json
import os
import threading
import time
from collections import defaultdict
from dataclasses import dataclass, field

from django.conf import settings
from django.db import transaction
from django.db.models import Count, F, Max, Q, Window
from django.db.models.functions import RowNumber

from aiconsole import audit, iam
from aiconsole.errors import FieldViolation, InvalidArgument, ResourceExhausted
from jobs import catalogue, dispatch, kinds
from jobs.models import ACTIVE_STATES, Job, JobState, ProjectQuota, ProjectShare

CPUS, REPLICAS = "CPUS", "REPLICAS"
MAX_LIMIT = 1_000_000


def metrics() -> list[str]:
    """Every metric a quota may name: CPUS, REPLICAS and the accelerator types."""
    return [CPUS, REPLICAS, *catalogue.ACCELERATORS]


@dataclass
class Demand:
    """What a job holds while it runs."""

    region: str
    amounts: dict[str, int] = field(default_factory=dict)  # metric → count

    def add(self, other: Demand) -> None:
        for metric, amount in other.amounts.items():
            self.amounts[metric] = self.amounts.get(metric, 0) + amount


_demands: dict[str, Demand] = {}  # by the job's inputs: a long line repeats a few shapes of job
_DEMANDS_KEPT = 4096


def demand(job: Job) -> Demand:
    """Replicas, CPUs and accelerators per type of ``job`` (a study: its parallel trials' replicas)."""
    key = json.dumps([job.training_input, job.prediction_input], sort_keys=True, default=str)
    found = _demands.get(key)
    if found is None:
        found = _compute_demand(job)
        if len(_demands) >= _DEMANDS_KEPT:
            _demands.clear()
        _demands[key] = found
    return Demand(found.region, dict(found.amounts))


def _compute_demand(job: Job) -> Demand:
    region = (job.training_input or {}).get("region") or (job.prediction_input or {}).get("region") or ""
    try:
        plans = kinds.of_job(job).plans(job)
    except Exception:  # an input an older release stored: it holds at least one small replica
        plans = []
    amounts: dict[str, int] = {REPLICAS: max(len(plans), 1)}
    cpus = 0
    for plan in plans:
        machine = catalogue.MACHINE_TYPES.get(plan.machine_type)
        cpus += (machine.vcpus or 0) if machine is not None else 0
        if plan.accelerator_type and plan.accelerator_count:
            amounts[plan.accelerator_type] = amounts.get(plan.accelerator_type, 0) + plan.accelerator_count
    amounts[CPUS] = cpus
    return Demand(region, amounts)


def _applies(quota: ProjectQuota, region: str) -> bool:
    return not quota.region or quota.region == region


LINE_FIELDS = ("pk", "project_id", "priority", "create_time", "job_id", "training_input", "prediction_input")


def waiting_line(per_project: int | None = None) -> list[Job]:
    """The QUEUED jobs, each project's in its own order (priority, then first come); with
    ``per_project``, only that many of each project's first: all an admission pass can reach."""
    jobs = Job.objects.filter(state=JobState.QUEUED)
    if per_project is not None:
        place = Window(
            RowNumber(),
            partition_by=[F("project_id")],
            order_by=[F("priority").desc(), F("create_time").asc(), F("pk").asc()],
        )
        jobs = jobs.annotate(place=place).filter(place__lte=per_project)
    return list(jobs.order_by("-priority", "create_time", "pk").only(*LINE_FIELDS))


def quotas_of(project_ids: set[int]) -> dict[int, list[ProjectQuota]]:
    found: dict[int, list[ProjectQuota]] = defaultdict(list)
    for quota in ProjectQuota.objects.filter(project_id__in=project_ids):
        found[quota.project_id].append(quota)
    return found


def _describe(quota: ProjectQuota) -> str:
    where = f" in {quota.region}" if quota.region else ""
    return f"{quota.metric}{where}"


def check_submission(job: Job) -> None:
    """RESOURCE_EXHAUSTED for a job larger than a quota of its project: it could never start."""
    need = demand(job)
    for quota in ProjectQuota.objects.filter(project=job.project):
        amount = need.amounts.get(quota.metric, 0)
        if _applies(quota, need.region) and amount > quota.limit:
            message = (
                f"Quota failure for project {job.project.project_id}: the job needs {amount} {_describe(quota)}, "
                f"more than the project's quota of {quota.limit} ({quota.metric}, "
                f"{quota.region or 'all regions'}). Ask an administrator to raise it, or ask for less."
            )
            raise ResourceExhausted(message, [FieldViolation("job.training_input", message)])


@dataclass
class Usage:
    """What each project's running jobs hold, per region."""

    held: dict[int, dict[str, Demand]] = field(default_factory=lambda: defaultdict(dict))
    holders: dict[int, list[Job]] = field(default_factory=lambda: defaultdict(list))

    def add(self, job: Job, need: Demand) -> None:
        current = self.held[job.project_id].setdefault(need.region, Demand(need.region))
        current.add(need)
        self.holders[job.project_id].append(job)

    def amount(self, project_id: int, metric: str, region: str) -> int:
        regions = self.held.get(project_id, {})
        if region:
            held = regions.get(region)
            return held.amounts.get(metric, 0) if held is not None else 0
        return sum(d.amounts.get(metric, 0) for d in regions.values())

    def total(self, project_id: int) -> dict[str, int]:
        totals: dict[str, int] = defaultdict(int)
        for held in self.held.get(project_id, {}).values():
            for metric, amount in held.amounts.items():
                totals[metric] += amount
        return totals


def running_usage() -> Usage:
    usage = Usage()
    active = ACTIVE_STATES - {JobState.QUEUED}
    for job in Job.objects.filter(state__in=active).select_related("project"):
        usage.add(job, demand(job))
    return usage


def blocking_quota(job: Job, need: Demand, usage: Usage, quotas: list[ProjectQuota]) -> str:
    """Why the job's project quota keeps it waiting now ("" when none does)."""
    for quota in quotas:
        if not _applies(quota, need.region):
            continue
        amount = need.amounts.get(quota.metric, 0)
        held = usage.amount(job.project_id, quota.metric, quota.region)
        if amount and held + amount > quota.limit:
            names = ", ".join(j.job_id for j in usage.holders.get(job.project_id, [])[:5])
            return (
                f"Waiting for its project's quota {_describe(quota)}: it needs {amount}, its limit is {quota.limit} "
                f"and {held} {'is' if held == 1 else 'are'} held by the project's running jobs ({names})."
            )
    return ""


def weights(project_ids: set[int]) -> dict[int, float]:
    found = dict(ProjectShare.objects.filter(project_id__in=project_ids).values_list("project_id", "weight"))
    return {pk: float(found.get(pk, 1.0)) or 1.0 for pk in project_ids}


def dominant_share(totals: dict[str, int], capacity: dict[str, int], weight: float) -> float:
    shares = [totals.get(metric, 0) / limit for metric, limit in capacity.items() if limit > 0]
    return max(shares, default=0.0) / (weight or 1.0)


# What an admitter tells ``fair_order`` of the job it was given.
ADMITTED = "admitted"  # it starts (or, projecting the line, would): its project's share grows
WAITS = "waits"  # it waits (its quota): its project's later jobs wait behind it
PASSED = "passed"  # it cannot run at all now (no worker could ever run it): it holds up nobody


def fair_order(queued: list[Job], usage: Usage, capacity: dict[str, int]):
    """The waiting jobs in the order slots go to them, as a generator told (``send``) what became of
    each: ``ADMITTED``, ``WAITS`` or ``PASSED``."""
    by_project: dict[int, list[Job]] = defaultdict(list)
    for job in queued:  # already priority, then first come
        by_project[job.project_id].append(job)
    weight = weights(set(by_project))
    totals = {pk: dict(usage.total(pk)) for pk in by_project}
    heap: list[tuple] = []

    def push(pk: int, index: int) -> None:
        if index < len(by_project[pk]):
            job = by_project[pk][index]
            share = dominant_share(totals[pk], capacity, weight[pk])
            heapq.heappush(heap, (share, -job.priority, job.create_time, job.pk, pk, index))

    for pk in by_project:
        push(pk, 0)
    while heap:
        *_, pk, index = heapq.heappop(heap)
        job = by_project[pk][index]
        outcome = yield job
        if outcome == ADMITTED:
            for metric, amount in demand(job).amounts.items():
                totals[pk][metric] = totals[pk].get(metric, 0) + amount
        if outcome != WAITS:
            push(pk, index + 1)


def projected_order(queued: list[Job], usage: Usage, capacity: dict[str, int]) -> list[Job]:
    """The order the waiting jobs would start in if each went in its turn: their places in line."""
    order = fair_order(queued, usage, capacity)
    line: list[Job] = []
    job = next(order, None)
    while job is not None:
        line.append(job)
        try:
            job = order.send(ADMITTED)
        except StopIteration:
            job = None
    return line


_line_cache: dict[str, tuple[float, tuple, dict[int, int]]] = {}
_line_lock = threading.Lock()
LINE_SECONDS = 1.0  # how long a computed line answers positions (a list of queued jobs asks once)


def position(job: Job) -> int:
    """The job's place in the fair queue's line (1 is next), as ``jobPosition`` answers it. The line
    is computed once a second at most, and again whenever the waiting or running jobs changed."""
    active = Job.objects.filter(state__in=ACTIVE_STATES)
    signature = tuple(
        active.aggregate(
            count=Count("pk"), last=Max("pk"), queued=Count("pk", filter=Q(state=JobState.QUEUED))
        ).values()
    )
    now = time.monotonic()
    with _line_lock:
        cached = _line_cache.get("line")
        if cached is None or cached[1] != signature or now - cached[0] > LINE_SECONDS:
            line = projected_order(waiting_line(), running_usage(), console_capacity())
            cached = _line_cache["line"] = (now, signature, {j.pk: i for i, j in enumerate(line, start=1)})
    return cached[2].get(job.pk) or job.job_position()


def console_capacity() -> dict[str, int]:
    """What the embedded console runs at once, for the fair shares: its replica slots and CPUs."""
    return {REPLICAS: settings.MAX_REPLICAS, CPUS: os.cpu_count() or 1}


# --- setting quotas ---------------------------------------------------------------------------------


def validate_limits(body: object) -> tuple[list[dict], float | None]:
    """A PATCH body: ``{"limits": [{"metric", "region", "limit"}], "weight": W}``."""
    if not isinstance(body, dict):
        raise InvalidArgument.from_violations([FieldViolation("quotas", "Expected a JSON object.")])
    violations = []
    limits = body.get("limits", [])
    if not isinstance(limits, list):
        violations.append(FieldViolation("limits", "limits is a list of {metric, region, limit}."))
        limits = []
    known = metrics()
    regions = set(catalogue.REGIONS)
    seen = set()
    cleaned = []
    for index, entry in enumerate(limits):
        path = f"limits[{index}]"
        if not isinstance(entry, dict):
            violations.append(FieldViolation(path, "Each limit is an object {metric, region, limit}."))
            continue
        metric, region, limit = entry.get("metric"), entry.get("region", "") or "", entry.get("limit")
        if metric not in known:
            violations.append(FieldViolation(f"{path}.metric", f"metric must be one of {', '.join(known)}."))
        if region and region not in regions:
            violations.append(
                FieldViolation(f"{path}.region", f"region must be one of {', '.join(sorted(regions))}, or empty.")
            )
        if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or not 0 <= limit <= MAX_LIMIT):
            violations.append(
                FieldViolation(f"{path}.limit", f"limit is a whole number from 0 to {MAX_LIMIT} (null: no limit).")
            )
        if (metric, region) in seen:
            violations.append(FieldViolation(path, f"{metric} in {region or 'all regions'} is given twice."))
        seen.add((metric, region))
        cleaned.append({"metric": metric, "region": region, "limit": limit})
    weight = body.get("weight")
    if weight is not None and (
        not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0 < weight <= 1000
    ):
        violations.append(FieldViolation("weight", "weight is a number above 0 and at most 1000 (1: an equal share)."))
    for key in sorted(set(body) - {"limits", "weight"}):
        violations.append(FieldViolation(key, f"Unknown field {key!r}: a quota body has limits and weight."))
    if violations:
        raise InvalidArgument.from_violations(violations)
    return cleaned, (float(weight) if weight is not None else None)


# --- reading and setting them (the REST API, the CLI and the page) ----------------------------------

SERVICE = "serviceusage.googleapis.com"
METHOD = "google.api.serviceusage.v1beta1.ServiceUsage"


def describe(project) -> dict:
    """The project's limits, weight and what its running jobs hold now."""
    usage = running_usage()
    limits = [
        {"metric": q.metric, "region": q.region, "limit": q.limit, "held": usage.amount(project.pk, q.metric, q.region)}
        for q in ProjectQuota.objects.filter(project=project)
    ]
    held = [{"metric": m, "held": n} for m, n in sorted(usage.total(project.pk).items()) if n]
    body: dict = {"name": f"{project.resource_name}/quotas", "weight": weights({project.pk})[project.pk]}
    if limits:
        body["limits"] = limits
    if held:
        body["usage"] = held
    return body


def read_quotas(project, *, actor) -> dict:
    """Anyone who may see the project may read its quotas (a Data Access read)."""
    method = f"{METHOD}.GetConsumerQuotaLimit"
    audit.authorize(actor, "ml.projects.getConfig", project, method=method, data_access=True, service_name=SERVICE)
    body = describe(project)
    audit.record(
        actor=actor,
        project=project,
        method=method,
        resource_name=body["name"],
        permission="ml.projects.getConfig",
        data_access=True,
        service_name=SERVICE,
    )
    return body


def set_quotas(project, body, *, actor) -> dict:
    """Platform admins set a project's limits (a null limit removes one) and its fair-queue weight."""
    method = f"{METHOD}.UpdateConsumerQuotaLimit"
    name = f"{project.resource_name}/quotas"
    if not iam.is_platform_admin(actor):
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=name,
            permission="serviceusage.quotas.update",
            granted=False,
            status_code=audit.CODE_PERMISSION_DENIED,
            status_message="Only platform admins set quotas.",
            service_name=SERVICE,
        )
        raise iam.PermissionDenied("serviceusage.quotas.update", name)
    limits, weight = validate_limits(body)
    with transaction.atomic():
        for entry in limits:
            key = {"project": project, "metric": entry["metric"], "region": entry["region"]}
            if entry["limit"] is None:
                ProjectQuota.objects.filter(**key).delete()
            else:
                ProjectQuota.objects.update_or_create(**key, defaults={"limit": entry["limit"]})
        if weight is not None:
            ProjectShare.objects.update_or_create(project=project, defaults={"weight": weight})
        answer = describe(project)
        audit.record(
            actor=actor,
            project=project,
            method=method,
            resource_name=name,
            permission="serviceusage.quotas.update",
            request=body,
            response=answer,
            service_name=SERVICE,
        )
    dispatch.wake()  # a raised limit may let a waiting job start now
    return answer
