"""What each running replica uses: CPU, memory, network and GPUs, sampled into its job's metrics.

One :class:`Sampler` per runner (a job's runner, a scaled-mode worker's agent), never one per
replica: a thread that every ``AICONSOLE_SYSTEM_METRICS_SECONDS`` reads each replica it was given
(:meth:`Sampler.add`, with a probe; a study's trials' replicas too, under their trial) and stores the
readings as metric points of source ``system``, run the replica's name (``master-replica-0``),
within the job's bound of them (``AICONSOLE_SYSTEM_METRIC_POINTS_MAX``, apart from its trainers'
own points: ``jobs.metrics.points.budget_for``). Nothing that reads a job's or a trial's results
takes them for its own (its final metrics, a study's trial table, the Metrics tab, compare). A
replica's first reading is taken when it is added and the second a second later, so that a short
replica has a CPU point too.

The probes read ``/proc``, never the trainer's files, and cost no process start per sample:

- a package replica (:class:`ProcessTree`): the reaper's descendants, their CPU time and resident
  memory summed; the limit from the replica's cgroup when it has one, else its machine type, never
  more than the host has. It shares the host's network namespace, so no network is reported: the
  host's traffic is not the replica's.
- a container (:func:`container_tree`): the container's processes from its init's pid (asked of the
  engine once), with the network of its namespace when the replica has one of its own.
- GPUs: only for a replica given some, from one ``nvidia-smi`` query per sample for all of them;
  nothing is reported without GPUs or without ``nvidia-smi``.

``cpu_utilization`` is the share of the replica's CPUs in use (1.0: all of them busy; its machine
type's vCPUs, at most the host's), as the original's ``training/cpu/utilization``; an accelerator's
duty cycle is a percentage (0 to 100), as ``training/accelerator/duty_cycle``. A replica with
several GPUs has a line for each: run ``master-replica-0/gpu0``, ``…/gpu1``.
"""

from __future__ import annotations

import logging
import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from django.conf import settings
from django.db import connection

from jobs import catalogue
from jobs.metrics import points
from jobs.models import ACTIVE_STATES, MetricPoint, MetricSource, Trial

logger = logging.getLogger(__name__)

CPU_UTILIZATION = "system/cpu_utilization"
MEMORY_USED = "system/memory_bytes_used"
MEMORY_LIMIT = "system/memory_bytes_limit"
NETWORK_RECEIVED = "system/network_received_bytes"
NETWORK_SENT = "system/network_sent_bytes"
ACCELERATOR_DUTY_CYCLE = "system/accelerator_duty_cycle"
ACCELERATOR_MEMORY_USED = "system/accelerator_memory_bytes_used"
FIRST_CPU_SECONDS = 1.0  # the second reading of a replica, whatever the interval: a short one gets a CPU point
NVIDIA_SMI_TIMEOUT = 5.0
DRAWN_TRIALS = 8  # a study's Resources tab draws the use of this many trials: those running, then the last ended

_TICKS = os.sysconf("SC_CLK_TCK")
_PAGE = os.sysconf("SC_PAGE_SIZE")
_UNLIMITED = 1 << 60  # cgroup v1 writes "no limit" as a huge number


@dataclass
class Reading:
    """One look at a replica: its CPU seconds so far, memory, and what else could be measured."""

    cpu_seconds: float
    memory: int
    limit: int | None = None
    received: int | None = None
    sent: int | None = None


# --- /proc, pure enough to test on this process ------------------------------------------------


def _stat(pid: int) -> tuple[int, float, float] | None:
    """``(ppid, own CPU seconds, waited-for children's CPU seconds)`` of a process, or None when gone."""
    try:
        raw = Path(f"/proc/{pid}/stat").read_bytes()
    except OSError:
        return None
    fields = raw[raw.rfind(b")") + 2 :].split()
    ppid = int(fields[1])
    own = (int(fields[11]) + int(fields[12])) / _TICKS
    children = (int(fields[13]) + int(fields[14])) / _TICKS
    return ppid, own, children


def _resident(pid: int) -> int:
    try:
        return int(Path(f"/proc/{pid}/statm").read_bytes().split()[1]) * _PAGE
    except (OSError, IndexError, ValueError):
        return 0


Stat = tuple[int, float, float]  # _stat's
Table = tuple[dict[int, Stat], dict[int, list[int]]]  # every process's stat, and each one's children


def process_table() -> Table:
    """One pass over ``/proc``: each process's ``_stat`` and children (one per sample, whatever the
    number of replicas)."""
    stats: dict[int, Stat] = {}
    children: dict[int, list[int]] = {}
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit():
            continue
        pid = int(entry.name)
        stat = _stat(pid)
        if stat is not None:
            stats[pid] = stat
            children.setdefault(stat[0], []).append(pid)
    return stats, children


def descendants(root: int, table: Table | None = None) -> dict[int, Stat]:
    """Every live descendant of ``root`` and its ``_stat`` (a reaper is a child subreaper: whatever
    its trainer left behind is still below it)."""
    stats, children = table or process_table()
    found: dict[int, Stat] = {}
    todo = [root]
    while todo:
        for child in children.get(todo.pop(), []):
            found[child] = stats[child]
            todo.append(child)
    return found


def tree_usage(root: int, *, include_root: bool, table: Table | None = None) -> tuple[float, int] | None:
    """CPU seconds and resident bytes of ``root``'s tree: the live processes' own time and what
    their children that ended used, so a finished child's work still counts. ``include_root``:
    the root's own time and memory too (a container's init; never a reaper, which is ours)."""
    top = _stat(root)
    if top is None:
        return None
    cpu = top[2] + (top[1] if include_root else 0.0)
    memory = _resident(root) if include_root else 0
    for pid, (_ppid, own, ended) in descendants(root, table).items():
        cpu += own + ended
        memory += _resident(pid)
    return cpu, memory


def host_memory() -> int:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemTotal:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def cgroup_memory_limit(pid: int) -> int | None:
    """The memory limit of the cgroup ``pid`` is in (v2's ``memory.max``, v1's
    ``memory.limit_in_bytes``), None when it has none or it cannot be read from here."""
    try:
        lines = Path(f"/proc/{pid}/cgroup").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        number, controllers, path = (line.split(":", 2) + ["", ""])[:3]
        if number == "0" and not controllers:
            candidate = Path("/sys/fs/cgroup") / path.lstrip("/") / "memory.max"
        elif "memory" in controllers.split(","):
            candidate = Path("/sys/fs/cgroup/memory") / path.lstrip("/") / "memory.limit_in_bytes"
        else:
            continue
        try:
            text = candidate.read_text().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < _UNLIMITED:
            return int(text)
    return None


def network_bytes(pid: int) -> tuple[int, int] | None:
    """Bytes received and sent by the network namespace ``pid`` is in, loopback left out."""
    try:
        lines = Path(f"/proc/{pid}/net/dev").read_text().splitlines()[2:]
    except OSError:
        return None
    received = sent = 0
    for line in lines:
        name, _, counters = line.partition(":")
        values = counters.split()
        if name.strip() == "lo" or len(values) < 9:
            continue
        received += int(values[0])
        sent += int(values[8])
    return received, sent


def own_network_namespace(pid: int) -> bool:
    """Whether ``pid`` is in a network namespace other than the console's (whose traffic is the host's)."""
    try:
        return os.readlink(f"/proc/{pid}/ns/net") != os.readlink("/proc/self/ns/net")
    except OSError:
        return False


def machine_limits(machine_type: str) -> tuple[float, int | None]:
    """The CPUs and memory bytes a replica of ``machine_type`` is given here: the machine type's, at
    most the host's (the host's for a machine type the catalogue does not size)."""
    host_cpus = float(os.cpu_count() or 1)
    machine = catalogue.MACHINE_TYPES.get(machine_type)
    cpus = min(float(machine.vcpus), host_cpus) if machine is not None and machine.vcpus else host_cpus
    memory = host_memory() or None
    if machine is not None and machine.memory_gb:
        wanted = int(machine.memory_gb * 1024**3)
        memory = min(wanted, memory) if memory else wanted
    return cpus, memory


# --- probes ----------------------------------------------------------------------------------------


class ProcessTree:
    """A replica as a tree of processes under ``pid()`` (a package replica's reaper, a container's
    init): ``include_root`` counts the root itself; ``network`` reads its namespace's traffic
    when that namespace is its own; ``at_once``: its pid is known without asking anyone (no
    engine's ``inspect``), so its first reading is taken as it is added."""

    def __init__(
        self,
        pid: Callable[[], int | None],
        *,
        memory_limit: int | None,
        include_root: bool = False,
        network: bool = False,
        at_once: bool = True,
    ):
        self._pid = pid
        self.at_once = at_once
        self._root: int | None = None
        self.memory_limit = memory_limit
        self.include_root = include_root
        self.network = network
        self._cgroup_checked = False

    def read(self, table: Table | None = None) -> Reading | None:
        """Its use now; ``table``: the sample's one pass over ``/proc`` (:func:`process_table`)."""
        if self._root is None:
            self._root = self._pid()
            if self._root is None:
                return None
        usage = tree_usage(self._root, include_root=self.include_root, table=table)
        if usage is None:
            return None
        if not self._cgroup_checked:
            self._cgroup_checked = True
            limit = cgroup_memory_limit(self._root)
            if limit is not None:
                self.memory_limit = min(limit, self.memory_limit) if self.memory_limit else limit
        reading = Reading(cpu_seconds=usage[0], memory=usage[1], limit=self.memory_limit)
        if self.network and own_network_namespace(self._root):
            traffic = network_bytes(self._root)
            if traffic is not None:
                reading.received, reading.sent = traffic
        return reading


def container_tree(find_pid: Callable[[], int | None], *, memory_limit: int | None, network: bool) -> ProcessTree:
    """A container replica: its init's tree, the pid asked of the engine until it has one."""
    return ProcessTree(find_pid, memory_limit=memory_limit, include_root=True, network=network, at_once=False)


def gpu_devices(accelerator_count: int, visible: str | None, devices: list[str] | None = None) -> list[str] | None:
    """The GPUs a replica was given, as ``nvidia-smi`` indexes or UUIDs: its container's devices, or
    its ``CUDA_VISIBLE_DEVICES``; ``[]`` for every GPU (a replica that asked for some and sees all);
    None for a replica given none."""
    if devices:
        return [device.rsplit("=", 1)[-1] for device in devices]
    if visible is not None:
        return [d.strip() for d in visible.split(",") if d.strip()] or None
    return [] if accelerator_count > 0 else None


def read_gpus() -> dict[str, tuple[float, int]]:
    """Each GPU's duty cycle (percent) and memory used (bytes), by index and by UUID; empty without
    ``nvidia-smi`` or when it fails."""
    binary = shutil.which("nvidia-smi")
    if binary is None:
        return {}
    try:
        out = subprocess.run(
            [binary, "--query-gpu=index,uuid,utilization.gpu,memory.used", "--format=csv,noheader,nounits"],
            capture_output=True,
            text=True,
            timeout=NVIDIA_SMI_TIMEOUT,
            check=True,
        ).stdout
    except (OSError, subprocess.SubprocessError):
        return {}
    return parse_gpus(out)


def parse_gpus(text: str) -> dict[str, tuple[float, int]]:
    found: dict[str, tuple[float, int]] = {}
    for line in text.splitlines():
        parts = [part.strip() for part in line.split(",")]
        if len(parts) != 4:
            continue
        try:
            value = (float(parts[2]), int(float(parts[3]) * 1024 * 1024))
        except ValueError:
            continue  # "[N/A]" on a GPU that cannot say
        found[parts[0]] = found[parts[1]] = value
    return found


# --- the sampler -----------------------------------------------------------------------------------


@dataclass
class Target:
    """One replica being sampled."""

    job_pk: int
    trial_id: str
    label: str
    probe: ProcessTree
    cpus: float
    gpus: list[str] | None = None
    say: Callable[[str], None] | None = None
    step: int = 0
    due: float = 0.0
    cleared: bool = False
    last: tuple[float, float] | None = None  # (monotonic time, CPU seconds) of the previous reading
    budget: Any = field(default=None, repr=False)  # the job's (points.budget_for, system), held while it samples


class Sampler:
    """The one thread of a runner that samples its replicas (see the module's docstring)."""

    def __init__(self, name: str = "system-metrics"):
        self.name = name
        self._targets: dict[tuple[int, str, str], Target] = {}
        self._lock = threading.Lock()
        self._wake = threading.Event()
        self._closed = False
        self._thread: threading.Thread | None = None

    @staticmethod
    def enabled() -> bool:
        return settings.SYSTEM_METRICS_SECONDS > 0

    def add(
        self,
        job_pk: int,
        label: str,
        probe: ProcessTree,
        *,
        trial_id: str = "",
        machine_type: str = "",
        gpus: list[str] | None = None,
        say: Callable[[str], None] | None = None,
    ) -> None:
        """Sample this replica from now until :meth:`remove`; its earlier start's points go. A
        probe that can be read at once is read here, on the caller's thread (a few ms): a replica
        that ends within moments of its start, before the thread's next pass, still has a reading."""
        if not self.enabled():
            return
        cpus, _ = machine_limits(machine_type)
        target = Target(job_pk, trial_id, label, probe, cpus, gpus=gpus, say=say, due=time.monotonic())
        if probe.at_once:
            try:
                self.sample([target])  # not yet the thread's: no lock needed
            except Exception:
                logger.exception("Could not sample %s of job %s", label, job_pk)
        with self._lock:
            if self._closed:
                return
            self._targets[(job_pk, trial_id, label)] = target
            if self._thread is None:
                self._thread = threading.Thread(target=self._loop, name=self.name, daemon=True)
                self._thread.start()
        self._wake.set()

    def remove(self, job_pk: int, label: str, *, trial_id: str = "") -> None:
        with self._lock:
            self._targets.pop((job_pk, trial_id, label), None)

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._targets.clear()
            thread = self._thread
        self._wake.set()
        if thread is not None and thread is not threading.current_thread():
            thread.join(timeout=NVIDIA_SMI_TIMEOUT + 5)

    def _loop(self) -> None:
        try:
            while True:
                with self._lock:
                    if self._closed:
                        return
                    now = time.monotonic()
                    due = [t for t in self._targets.values() if t.due <= now]
                    upcoming = min((t.due for t in self._targets.values()), default=now + 60)
                if due:
                    try:
                        self.sample(due)
                    except Exception:
                        logger.exception("Could not sample the replicas' use of the machine")
                    continue
                self._wake.wait(max(0.0, upcoming - time.monotonic()))
                self._wake.clear()
        finally:
            connection.close()

    def sample(self, targets: list[Target]) -> None:
        """Read each of ``targets`` once, store their points, and say when each is next due."""
        interval = settings.SYSTEM_METRICS_SECONDS
        gpus = read_gpus() if any(t.gpus is not None for t in targets) else {}
        wall = time.time()
        table = process_table()
        rows: dict[int, tuple[Target, list[tuple]]] = {}  # per job: one of its targets (its budget), its points
        for target in targets:
            target.due = time.monotonic() + (min(FIRST_CPU_SECONDS, interval) if target.last is None else interval)
            self._clear_earlier(target)
            reading = target.probe.read(table)
            if reading is None:
                continue
            rows.setdefault(target.job_pk, (target, []))[1].extend(self._points(target, reading, gpus, wall))
        for owner, job_rows in rows.values():
            points.store_within(owner.budget, job_rows, owner.say)

    def _clear_earlier(self, target: Target) -> None:
        """What an earlier start of this replica stored (its run again from the start, as the
        collector's), once, and the job's budget with it."""
        if target.cleared:
            return
        target.cleared = True
        earlier = MetricPoint.objects.filter(
            job_id=target.job_pk, trial_id=target.trial_id, source=MetricSource.SYSTEM, run__startswith=target.label
        )
        cleared = (
            earlier.filter(run=target.label).delete()[0]
            + earlier.filter(run__startswith=f"{target.label}/").delete()[0]
        )
        target.budget = points.budget_for(target.job_pk, cleared, system=True)

    def _points(self, target: Target, reading: Reading, gpus: dict, wall: float) -> list[tuple]:
        now = time.monotonic()
        values: list[tuple[str, str, float]] = []
        if target.last is not None and now > target.last[0]:
            busy = max(0.0, reading.cpu_seconds - target.last[1]) / (now - target.last[0])
            values.append((target.label, CPU_UTILIZATION, busy / target.cpus))
        target.last = (now, reading.cpu_seconds)
        values.append((target.label, MEMORY_USED, float(reading.memory)))
        if reading.limit:
            values.append((target.label, MEMORY_LIMIT, float(reading.limit)))
        if reading.received is not None and reading.sent is not None:
            values += [(target.label, NETWORK_RECEIVED, float(reading.received))]
            values += [(target.label, NETWORK_SENT, float(reading.sent))]
        if target.gpus is not None and gpus:
            names = target.gpus or sorted({k for k in gpus if k.isdigit()}, key=int)
            for ordinal, name in enumerate(names):
                if name in gpus:
                    duty, memory = gpus[name]
                    run = f"{target.label}/gpu{ordinal}"
                    values += [
                        (run, ACCELERATOR_DUTY_CYCLE, duty),
                        (run, ACCELERATOR_MEMORY_USED, float(memory)),
                    ]
        step = target.step
        target.step += 1
        source = MetricSource.SYSTEM.value
        return [(target.job_pk, target.trial_id, source, run, tag, step, value, wall) for run, tag, value in values]


# --- the read side -------------------------------------------------------------------------------


def drawn_trials(job) -> list[Trial] | None:
    """The trials of a study whose use of the machine its Resources tab draws (None for a job
    without trials): those running, the oldest first, then those that ended last, ``DRAWN_TRIALS``
    in all, so that a study of thousands draws a few readable lines; the CSV has every trial's."""
    if not job.is_hyperparameter_job:
        return None
    trials = job.trials.only("trial_id", "number", "state", "start_time", "end_time")
    running = list(trials.filter(state__in=ACTIVE_STATES).order_by("number")[:DRAWN_TRIALS])
    ended = trials.exclude(state__in=ACTIVE_STATES).exclude(end_time=None).order_by("-end_time", "-number")
    return running + list(ended[: DRAWN_TRIALS - len(running)])
