"""A set of replicas, ready to start: a plain job's, or one trial's.

The runner and the tuning loop both start replicas through ``ReplicaSet``: one ``Replica`` row per
replica, its working folder, TF_CONFIG and CLUSTER_SPEC, and the process its job's launch strategy
makes for it (``jobs.executor.strategies``: the trainer package on the job's environment, or the
job's container image in a pod of its own).
"""

from __future__ import annotations

import functools
import shutil
import threading
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from aiconsole import trainer_user
from jobs import catalogue
from jobs.executor import containers
from jobs.executor.environments import Environment
from jobs.executor.replicas import Placement, ReplicaProcess, cluster_configs, free_port
from jobs.executor.sink import LogSink
from jobs.executor.strategies import Launch, ReplicaContext
from jobs.metrics import system
from jobs.models import Job, Replica, ReplicaState
from jobs.vertex import launch as vertex
from jobs.webaccess import host as webaccess


def all_at_once(calls: Iterable[Callable[[], object]]) -> None:
    """Make each call in a thread of its own and wait for them all: stopping several replicas (or
    trials) takes one grace period, not one each."""
    threads = [threading.Thread(target=call) for call in calls]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()


@dataclass
class ReplicaSet:
    """The replicas of a job (or of one of its trials), their processes and, for a container job, their pod."""

    job: Job
    launch: Launch  # how they run, decided once for the job
    environment: Environment | None  # the package job's environment (None for a container job)
    job_dir: str | None
    work: Path  # the folder under which each replica gets its own
    passthrough: dict[str, str]
    sink: LogSink
    trial_id: str = ""
    extra_args: list[str] = field(default_factory=list)  # a trial's --param=value flags
    processes: list[ReplicaProcess] = field(default_factory=list)
    pod: containers.Pod | None = None  # given: a pod the caller made and removes (a study's lone trials share one)
    owns_pod: bool = True
    sampler: system.Sampler | None = None  # its runner's: each replica's use of the machine, while it runs
    plans: dict[int, catalogue.ReplicaPlan] = field(default_factory=dict)  # by replica row id

    @property
    def training_input(self) -> dict:
        return self.launch.training_input

    def placements(self) -> list[Placement]:
        return [Placement(plan, "127.0.0.1", free_port()) for plan in catalogue.replica_plan(self.training_input)]

    def build(self, extra_env) -> list[ReplicaProcess]:
        """Create every replica's row, folder and process (not started). ``extra_env(replica_dir,
        task_type)``: the variables this set adds (the metric file, a trial's ids)."""
        placements = self.placements()
        configs = cluster_configs(
            placements,
            job_id=self.job.job_id,
            training_input=self.training_input,
            use_chief=self.launch.uses_chief(),
            trial_id=self.trial_id,
        )
        account = trainer_user.for_project(self.job.project)
        if self.launch.profile is not None:
            vertex.prepare_output_dirs(self.job_dir, self.job.project)
        if self.launch.needs_engine and self.pod is None:
            self.pod = containers.pod_for(self.job, self.trial_id)
            if self.pod is not None:
                self.pod.shared = len(placements) > 1
                self.pod.take_spare()
        elif self.pod is not None:
            self.owns_pod = False
        for placement in placements:
            plan = placement.plan
            replica = Replica.objects.create(
                job=self.job,
                trial_id=self.trial_id,
                task_type=plan.task_type,
                task_index=plan.index,
                label=placement.label,
                machine_type=plan.machine_type,
                accelerator_type=plan.accelerator_type or "",
                accelerator_count=plan.accelerator_count,
                host=placement.host,
                port=placement.port,
            )
            replica_dir = self.work / placement.label
            shutil.rmtree(replica_dir, ignore_errors=True)
            (replica_dir / "tmp").mkdir(parents=True)
            tf_config, cluster_spec = configs[placement.label]
            extra = extra_env(replica_dir, plan.task_type)
            extra.update(
                self.launch.replica_environment(
                    task_type=plan.task_type, job_dir=self.job_dir, cluster_spec=cluster_spec, trial_id=self.trial_id
                )
            )
            if self.launch.needs_engine and "CLOUD_ML_HP_METRIC_FILE" in extra:  # any language's trainer may append
                Path(extra["CLOUD_ML_HP_METRIC_FILE"]).parent.mkdir(parents=True, exist_ok=True)
            context = ReplicaContext(
                job=self.job,
                replica=replica,
                plan=plan,
                replica_dir=replica_dir,
                tf_config=tf_config,
                cluster_spec=cluster_spec,
                extra_env=extra,
                account=account,
                job_dir=self.job_dir,
                trial_args=self.extra_args,
                passthrough=self.passthrough,
                sink=self.sink,
                trial_id=self.trial_id,
                pod=self.pod,
            )
            self.processes.append(self.launch.process(context, self.environment))
            self.plans[replica.pk] = plan
        return self.processes

    def start(self) -> None:
        """Start every process (the pod first), recording each as RUNNING."""
        if self.pod is not None:
            self.pod.create()
        for process in self.processes:
            process.start()
            Replica.objects.filter(pk=process.replica_id).update(
                state=ReplicaState.RUNNING,
                pid=process.pid,
                start_time=timezone.now(),
                shell_port=webaccess.offer_replica(
                    process,
                    training_input=self.training_input,
                    labels=None if self.trial_id else self.job.labels,  # a trial's replica is not held
                ),
            )
            if isinstance(process, containers.ContainerReplicaProcess):
                self.sink.service(
                    f"Started {process.label} (container {process.container}, pid {process.pid}).",
                    trial_id=self.trial_id,
                )
            elif not self.trial_id:
                self.sink.service(f"Started {process.label} (pid {process.pid}).")
            self._sample(process)

    def _sample(self, process: ReplicaProcess) -> None:
        """Have the runner's sampler watch the replica's use of the machine until it stops."""
        plan = self.plans.get(process.replica_id)
        if self.sampler is None or plan is None or not self.sampler.enabled():
            return
        _cpus, memory = system.machine_limits(plan.machine_type)
        own_network = self.pod is None or not self.pod.shared  # a shared pod's traffic is no one replica's
        self.sampler.add(
            self.job.pk,
            process.label,
            process.usage_probe(memory, own_network=own_network),
            trial_id=self.trial_id,
            machine_type=plan.machine_type,
            gpus=process.gpu_devices(plan.accelerator_count),
            say=lambda message: self.sink.service(message, trial_id=self.trial_id),
        )

    def unsample(self) -> None:
        """Its replicas are sampled no more."""
        if self.sampler is not None:
            for process in self.processes:
                self.sampler.remove(self.job.pk, process.label, trial_id=self.trial_id)

    def stop(self, *, said: bool = False) -> None:
        """Stop every replica still running (in parallel: SIGTERM, SIGKILL after the grace), record
        each STOPPED, and reap what finished ones left in their groups. ``said``: each stop is in
        the job's log."""
        self.unsample()
        running = [p for p in self.processes if p.poll() is None]
        if said:
            for process in running:
                self.sink.service(f"Stopping {process.label}.", trial_id=self.trial_id)
        all_at_once(functools.partial(p.stop, settings.STOP_GRACE_SECONDS) for p in running)
        for process in running:
            process.wait_output()
            Replica.objects.filter(pk=process.replica_id).update(
                state=ReplicaState.STOPPED, exit_code=process.poll(), end_time=timezone.now()
            )
        for process in self.processes:
            process.stop(0)  # reap anything a finished replica left behind in its group

    def release(self) -> None:
        """Once every process has ended and its outcome is recorded: containers and the pod go."""
        for process in self.processes:
            if isinstance(process, containers.ContainerReplicaProcess):
                process.remove()
        if self.pod is not None and self.owns_pod:
            self.pod.remove()
