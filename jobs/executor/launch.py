"""A set of replicas, ready to start: a plain job's, or one trial's.

The runner and the tuning loop both start replicas through ``ReplicaSet``: one ``Replica`` row per
replica, its working folder, TF_CONFIG and CLUSTER_SPEC, and the process that runs it, either the
trainer package on the job's environment (``ReplicaProcess``) or the job's container image
(``jobs.containers.replica``), in a pod of its own.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass, field
from pathlib import Path

from django.conf import settings
from django.utils import timezone

from aiconsole import trainer_user
from jobs import catalogue
from jobs.containers import images as container_images
from jobs.containers import replica as containers
from jobs.containers.staged import Staged
from jobs.executor.environments import Environment
from jobs.executor.logs import LogSink
from jobs.executor.replicas import (
    Placement,
    ReplicaProcess,
    cluster_configs,
    failure_message,
    free_port,
    traceback_tail,
    trainer_command,
    trainer_environment,
)
from jobs.models import Job, Replica, ReplicaState
from jobs.vertex import launch as vertex


@dataclass
class ReplicaSet:
    """The replicas of a job (or of one of its trials), their processes and, for a container job, their pod."""

    job: Job
    training_input: dict
    environment: Environment | None  # the package job's environment (None for a container job)
    job_dir: str | None
    work: Path  # the folder under which each replica gets its own
    passthrough: dict[str, str]
    sink: LogSink
    trial_id: str = ""
    extra_args: list[str] = field(default_factory=list)  # a trial's --param=value flags
    processes: list[ReplicaProcess] = field(default_factory=list)
    pod: containers.Pod | None = None
    profile: vertex.LaunchProfile | None = None  # a Vertex AI job's: its replicas' variables, no --job-dir

    @property
    def container(self) -> bool:
        return containers.runs_container(self.training_input)

    def placements(self) -> list[Placement]:
        return [Placement(plan, "127.0.0.1", free_port()) for plan in catalogue.replica_plan(self.training_input)]

    def use_chief(self) -> bool:
        return uses_chief(self.training_input)

    def build(self, extra_env) -> list[ReplicaProcess]:
        """Create every replica's row, folder and process (not started). ``extra_env(replica_dir,
        task_type)``: the variables this set adds (the metric file, a trial's ids)."""
        placements = self.placements()
        configs = cluster_configs(
            placements,
            job_id=self.job.job_id,
            training_input=self.training_input,
            use_chief=self.use_chief(),
            trial_id=self.trial_id,
        )
        account = trainer_user.for_project(self.job.project)
        self.profile = vertex.profile_for(self.job)
        if self.profile is not None:
            vertex.prepare_output_dirs(self.job_dir, self.job.project)
        if self.container:
            self.pod = containers.pod_for(self.job, self.trial_id)
            if self.pod is not None:
                self.pod.shared = len(placements) > 1
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
            if self.profile is not None:
                extra.update(
                    self.profile.environment(
                        task_type=plan.task_type,
                        job_dir=self.job_dir,
                        cluster_spec=cluster_spec,
                        trial_id=self.trial_id,
                    )
                )
            if self.container and "CLOUD_ML_HP_METRIC_FILE" in extra:  # any language's trainer may just append
                Path(extra["CLOUD_ML_HP_METRIC_FILE"]).parent.mkdir(parents=True, exist_ok=True)
            if self.container:
                process = self._container_process(replica, plan, replica_dir, tf_config, cluster_spec, extra, account)
            else:
                assert self.environment is not None  # a package job's runner built it
                process = ReplicaProcess(
                    replica_id=replica.pk,
                    label=placement.label,
                    task_type=plan.task_type,
                    trial_id=self.trial_id,
                    command=trainer_command(
                        self.environment.python,
                        self.training_input["pythonModule"],
                        [*self.training_input.get("args", []), *self.extra_args],
                        self._job_dir_arg(),  # last, after a trial's flags, where package trainers look for it
                    ),
                    env=trainer_environment(
                        passthrough=self.passthrough,
                        bin_dir=self.environment.bin_dir,
                        tmp_dir=replica_dir / "tmp",
                        tf_config=tf_config,
                        cluster_spec=cluster_spec,
                        job_id=self.job.job_id,
                        replica_id=replica.pk,
                        extra=extra,
                    ),
                    cwd=replica_dir,
                    sink=self.sink,
                    max_line_bytes=settings.LOG_LINE_MAX_BYTES,
                    user=account,
                    stop_grace=settings.STOP_GRACE_SECONDS,
                )
            self.processes.append(process)
        return self.processes

    def _job_dir_arg(self) -> str | None:
        """The job dir the trainer is told with ``--job-dir`` (a Vertex AI job's is told none)."""
        return self.job_dir if self.profile is None or self.profile.job_dir_arg else None

    def _job_dir_args(self) -> list[str]:
        job_dir = self._job_dir_arg()
        return ["--job-dir", job_dir] if job_dir else []

    def _container_process(self, replica, plan, replica_dir, tf_config, cluster_spec, extra, account):
        assert self.pod is not None
        return container_process(
            self.job,
            self.training_input,
            replica=replica,
            plan=plan,
            replica_dir=replica_dir,
            tf_config=tf_config,
            cluster_spec=cluster_spec,
            extra_env=extra,
            account=account,
            job_dir=self.job_dir,
            extra_args=[*self._job_dir_args(), *self.extra_args],
            passthrough=self.passthrough,
            sink=self.sink,
            trial_id=self.trial_id,
            pod=self.pod,
        )

    def start(self) -> None:
        """Start every process (the pod first), recording each as RUNNING."""
        if self.pod is not None:
            self.pod.create()
        for process in self.processes:
            process.start()
            Replica.objects.filter(pk=process.replica_id).update(
                state=ReplicaState.RUNNING, pid=process.pid, start_time=timezone.now()
            )
            if isinstance(process, containers.ContainerReplicaProcess):
                self.sink.service(
                    f"Started {process.label} (container {process.container}, pid {process.pid}).",
                    trial_id=self.trial_id,
                )
            elif not self.trial_id:
                self.sink.service(f"Started {process.label} (pid {process.pid}).")

    def release(self) -> None:
        """Once every process has ended and its outcome is recorded: containers and the pod go."""
        for process in self.processes:
            if isinstance(process, containers.ContainerReplicaProcess):
                process.remove()
        if self.pod is not None:
            self.pod.remove()


def uses_chief(training_input: dict) -> bool:
    """Whether TF_CONFIG calls the master ``chief``: a container's only with useChiefInTfConfig, a
    package's by runtime version."""
    if containers.runs_container(training_input):
        return bool(training_input.get("useChiefInTfConfig"))
    return catalogue.uses_chief(training_input.get("runtimeVersion") or catalogue.DEFAULT_RUNTIME_VERSION)


def container_process(
    job: Job,
    training_input: dict,
    *,
    replica: Replica,
    plan: catalogue.ReplicaPlan,
    replica_dir: Path,
    tf_config: dict,
    cluster_spec: dict,
    extra_env: dict[str, str],
    account: trainer_user.TrainerUser | None,
    job_dir: str | None,
    extra_args: list[str],
    passthrough: dict[str, str],
    sink: LogSink,
    trial_id: str,
    pod: containers.Pod,
    devices: list[str] | None = None,
    publish: int | None = None,
) -> containers.ContainerReplicaProcess:
    """One replica as a container of its role's image (jobs/containers/replica.py). ``devices``: the
    GPUs a scaled-mode worker gave it (else taken from this host's); ``publish``: the port other
    hosts reach it on (scaled mode), published from the worker's address into its namespace."""
    engine = pod.engine
    if account is not None:
        account.hand_over(replica_dir)  # the container's user writes its own folder, as a trainer does
    entrypoint, args = containers.container_arguments(training_input, plan.task_type, extra_args)
    writable = [replica_dir]
    if job_dir and not job_dir.startswith("gs://"):
        writable.append(Path(job_dir))
    readable = [
        path
        for path in trainer_user.input_paths(training_input.get("args", []), project=job.project)
        if not any(path == w or path.is_relative_to(w) for w in writable)
    ]
    gpu = "TPU" not in (plan.accelerator_type or "")
    if devices is None:
        devices = containers.gpus.take(engine, plan.accelerator_count, replica.pk) if gpu else []
    if plan.accelerator_count and gpu and not devices:
        sink.service(
            f"{replica.label} asked for {plan.accelerator_count} {plan.accelerator_type}, and the container engine "
            "here can give it none: it runs without a GPU.",
            severity="WARNING",
            trial_id=trial_id,
        )
    name = containers.container_name(replica.pk)
    env = containers.container_environment(
        passthrough=passthrough,
        home=replica_dir,
        tf_config=tf_config,
        cluster_spec=cluster_spec,
        job_id=job.job_id,
        extra=extra_env,
    )
    staged = Staged(name, account, engine)  # through no link and no command line (jobs/containers/staged.py)
    try:
        options = [*staged.volumes(writable, readable), *staged.environment(env)]
    except BaseException:
        staged.release()
        raise
    return containers.ContainerReplicaProcess(
        replica_id=replica.pk,
        label=replica.label,
        task_type=plan.task_type,
        trial_id=trial_id,
        command=containers.run_command(
            engine,
            name=name,
            image=_image_id(containers.image_for(training_input, plan.task_type)),
            pod=pod,
            replica_id=replica.pk,
            job_pk=job.pk,
            entrypoint=entrypoint,
            args=args,
            staged=options,
            account=account,
            machine_type=plan.machine_type,
            devices=devices,
            publish=publish,
        ),
        env={},
        cwd=replica_dir,
        sink=sink,
        max_line_bytes=settings.LOG_LINE_MAX_BYTES,
        stop_grace=settings.STOP_GRACE_SECONDS,
        engine=engine,
        container=name,
        devices=devices,
        staged=staged,
    )


def _image_id(reference: str) -> str:
    """The id the job's preparation resolved ``reference`` to: what was checked is what runs, even if
    the name is given to another image meanwhile (the name itself where the engine no longer has it,
    so that ``run`` says so)."""
    resolved = container_images.resolve(reference)
    return resolved.image_id if resolved is not None else reference


def replica_failure(training_input: dict, message: str, process: ReplicaProcess) -> str:
    """A failed replica's errorMessage: the exit, what a container's status means, the traceback."""
    if isinstance(process, containers.ContainerReplicaProcess):
        message += containers.exit_explanation(process.poll(), process)
        tail = traceback_tail(list(process.stderr_tail))
        return message + (" \n" + tail if tail else "")
    return failure_message(training_input, message, list(process.stderr_tail))
