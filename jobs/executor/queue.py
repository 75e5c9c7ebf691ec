"""Why a QUEUED job still waits, in words for its page: what it needs, what is free, who is ahead.

The embedded executor admits the queue in the fair queue's order (``jobs.quotas``: the project owed
the most first, then ``scheduling.priority``, then first come), each job within its project's quotas,
while the replicas of the running jobs and the next job fit in ``AICONSOLE_MAX_REPLICAS``; a job
larger than that runs alone once nothing else runs (``controller.Controller._admit``). ``explain``
reads the same facts from the database, so any process can say why a job waits; ``reason`` is the
rule itself, over plain numbers. In scaled mode the coordinator says why (``Job.wait_reason``: no
worker fits it yet, or none ever could), and the jobs ahead are added here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from django.conf import settings

from jobs import kinds
from jobs.models import ACTIVE_STATES, Job, JobState
from jobs.quotas import admission as quotas

SHOWN_AHEAD = 5  # jobs ahead named on the page; the rest are counted


@dataclass(frozen=True)
class Holder:
    """A job that holds replica slots (running) or will before this one (ahead in the queue);
    ``job_id`` is empty for a job the reader may not see (``foreign``: it is another project's)."""

    job_id: str
    replicas: int
    project_id: str = ""
    foreign: bool = False

    @property
    def name(self) -> str:
        if self.job_id:
            return self.job_id
        return "a job of another project" if self.foreign else "a job you cannot see"


@dataclass
class QueueReason:
    summary: str  # the one sentence: what the job waits for
    needs: str  # what it needs
    free: str  # what is free and who holds the rest
    ahead: list[Holder] = field(default_factory=list)  # the first SHOWN_AHEAD jobs ahead of it
    ahead_count: int = 0
    # ``free`` in parts, for the page to link each holder: "1 of 4 replica slots are free", the slots
    # the running jobs hold, and those jobs.
    slots_free: str = ""
    busy: int = 0
    running: list[Holder] = field(default_factory=list)


def _slots(count: int) -> str:
    return f"{count} replica slot{'s' if count != 1 else ''}"


def _holders(holders: list[Holder]) -> str:
    return ", ".join(f"{h.name} ({h.replicas})" for h in holders)


def reason(
    need: int, limit: int, running: list[Holder], ahead: list[Holder], ahead_count: int | None = None
) -> QueueReason:
    """The embedded executor's admission rule, explained: ``need`` replicas for this job, ``limit``
    slots on the machine, the ``running`` jobs' holdings, and the jobs ``ahead`` in the queue."""
    busy = sum(h.replicas for h in running)
    free = max(0, limit - busy)
    slots_free = f"{free} of {limit} replica slots are free"
    count = len(ahead) if ahead_count is None else ahead_count
    beyond = f", more than the {limit} this console runs at once" if need > limit else ""
    needs = f"It needs {_slots(need)} (one per replica{beyond})."
    holding = f" in use by {_holders(running)}" if running else ""
    free_text = f"{slots_free}{';' if running else '.'}{f' {busy}{holding}.' if running else ''}"
    if count:
        first = ahead[0].name if ahead else "another job"
        summary = (
            f"Waiting for the {count} job{'s' if count != 1 else ''} ahead of it in the queue to start "
            f"(first come first served, higher priority first): {first} is next."
        )
    elif need > limit and busy:
        summary = (
            f"Waiting for the running jobs to end: it needs {_slots(need)}, more than this console runs at "
            f"once ({limit}), so it runs alone."
        )
    elif busy and busy + need > limit:
        summary = f"Waiting for {_slots(need - free)} more to free up: {_slots(free)} free, it needs {need}."
    else:
        summary = "Nothing holds it back: it starts as soon as the executor next looks at the queue."
    return QueueReason(
        summary=summary,
        needs=needs,
        free=free_text,
        ahead=ahead[:SHOWN_AHEAD],
        ahead_count=count,
        slots_free=slots_free,
        busy=busy,
        running=running,
    )


def _held(job: Job) -> int:
    try:
        return max(1, len(kinds.of_job(job).plans(job)))
    except Exception:  # an input an older release stored: it holds at least its master
        return 1


def explain(job: Job, *, actor) -> QueueReason | None:
    """Why ``job`` waits, from the database (None when it does not wait). The queue is the whole
    console's: jobs ``actor`` may not see are counted, never named."""
    if job.state != JobState.QUEUED:
        return None
    fields = ("pk", "job_id", "training_input", "prediction_input", "project__project_id", "priority", "create_time")
    usage = quotas.running_usage()
    queue = quotas.projected_order(quotas.waiting_line(), usage, quotas.console_capacity())  # the fair line
    position = next((i for i, queued in enumerate(queue) if queued.pk == job.pk), len(queue))
    held = list(
        Job.objects.filter(state__in=ACTIVE_STATES - {JobState.QUEUED})
        .select_related("project")
        .only(*fields)
        .order_by("pk")
    )
    shown = queue[: min(position, SHOWN_AHEAD)]
    visible = set(
        Job.objects.filter(pk__in=[j.pk for j in shown + held])
        .visible_to(actor, "ml.jobs.get")
        .values_list("pk", flat=True)
    )

    def holder(other: Job) -> Holder:
        if other.pk not in visible:
            return Holder("", _held(other), foreign=other.project_id != job.project_id)
        return Holder(other.job_id, _held(other), other.project.project_id)

    ahead = [holder(other) for other in shown]
    running = [holder(other) for other in held]
    explained = reason(_held(job), settings.MAX_REPLICAS, running, ahead, position)
    limits = quotas.quotas_of({job.project_id}).get(job.project_id, [])
    blocked = quotas.blocking_quota(job, quotas.demand(job), usage, limits)
    if blocked:  # its project's quota, not the machine, holds it back
        explained.summary = blocked
    if settings.EXECUTOR != "inprocess":
        # Workers on other hosts hold their own capacity: the coordinator's reason says what none has.
        explained.summary = job.wait_reason or (
            explained.summary if position else "Waiting for a worker with room for it (scaled mode)."
        )
        explained.free = ""
    return explained
