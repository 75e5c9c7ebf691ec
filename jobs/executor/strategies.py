"""How a job's replicas run, decided once: a launch strategy.

A job's input says what runs: the user's trainer package (``packageUris``, ``pythonModule``), the
user's container image (``masterConfig.imageUri``), or a built-in algorithm (one of the console's
own images, which runs as the console's own package). A job made through Vertex AI's API adds what
its worker pools give its replicas (``jobs.vertex.launch``). :func:`strategy_for` decides this
once, when a runner takes the job (embedded) or a worker a replica of it (scaled mode), and hands
on one object; the runner, the tuning loop, the scaled-mode agent and coordinator ask it how to
prepare the job and how to make a replica's process, and never ask the job's kind again.
"""

from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from django.conf import settings

from aiconsole import trainer_user
from jobs import catalogue
from jobs.builtin import algorithm as builtin
from jobs.containers import images as container_images
from jobs.containers import prebuilt
from jobs.containers.staged import Staged
from jobs.executor import containers, environments, preparing
from jobs.executor.environments import Environment
from jobs.executor.replicas import ReplicaProcess, failure_message, traceback_tail, trainer_command, trainer_environment
from jobs.executor.sink import LogSink
from jobs.models import Job, Replica
from jobs.vertex import launch as vertex


@dataclass
class ReplicaContext:
    """What one replica's process is made from, whoever starts it (the embedded replica set, a
    scaled-mode worker)."""

    job: Job
    replica: Replica
    plan: catalogue.ReplicaPlan
    replica_dir: Path
    tf_config: dict
    cluster_spec: dict
    extra_env: dict[str, str]
    account: trainer_user.TrainerUser | None
    job_dir: str | None
    trial_args: list[str]  # a trial's --param=value flags
    passthrough: dict[str, str]
    sink: LogSink
    trial_id: str = ""
    pod: containers.Pod | None = None
    devices: list[str] | None = None  # a scaled-mode worker's GPUs for it
    publish: int | None = None  # the port its peers on other hosts reach it on (scaled mode)
    preexec: Callable[[], None] | None = None  # scaled mode: die with the worker
    attempt: int = 0  # scaled mode: which start of the replica this is (its container's name has it)


class Launch:
    """How a job's replicas run: its trainer package on the job's environment. ``training_input``
    is what runs (a built-in algorithm's names the console's package); ``profile`` what a Vertex AI
    job's replicas get besides (read when first asked: admission asks only ``needs_engine``)."""

    kind = "package"  # "package", "container", "built-in algorithm": the job's log and page say it
    needs_engine = False  # only workers with a container engine may run it
    builds_environment = True  # the queue's prebuild has an environment to build ahead
    gcs: Path | None = None  # the job's /gcs/ view of Cloud Storage while its replicas run (jobs.executor.gcs)

    def __init__(self, job: Job, training_input: dict, *, kind: str | None = None):
        self.job = job
        self.training_input = training_input
        if kind is not None:
            self.kind = kind

    @functools.cached_property
    def profile(self) -> vertex.LaunchProfile | None:
        return vertex.profile_for(self.job)

    def preparing(self) -> str:
        return "fetching trainer packages"

    def images_to_build(self) -> list[str]:
        """Google's pre-built images the job names that this machine has not built yet."""
        return []

    def prepare(self, *, packages: Path, log, check_cancel, gpu: bool) -> tuple[Environment | None, str | None]:
        """Everything before the replicas: the environment (None for a container) and the job dir."""
        project = self.job.project
        files = preparing.fetch_packages(self.training_input, packages, check_cancel, project=project)
        job_dir = preparing.prepare_job_dir(self.training_input, project=project)
        preparing.prepare_arguments(self.training_input, project=project)
        return self.environment(files, log, check_cancel, gpu=gpu), job_dir

    def environment(self, files: list[Path], log, check_cancel, *, gpu: bool) -> Environment:
        """The runtime's environment and the job's layer of ``files`` (its fetched packages)."""
        account = preparing.trainer_account(self.job.project)
        return preparing.build_environment(self.training_input, files, log, check_cancel, gpu=gpu, account=account)

    def uses_chief(self) -> bool:
        """Whether TF_CONFIG calls the master ``chief``: a package's by its runtime version."""
        return catalogue.uses_chief(self.training_input.get("runtimeVersion") or catalogue.DEFAULT_RUNTIME_VERSION)

    def job_dir_arg(self, job_dir: str | None) -> str | None:
        """The job dir the trainer is told with ``--job-dir`` (a Vertex AI job's is told none)."""
        return job_dir if self.profile is None or self.profile.job_dir_arg else None

    def replica_environment(self, *, task_type: str, job_dir: str | None, cluster_spec: dict, trial_id: str) -> dict:
        """What a Vertex AI job's replica gets on top of a v1 replica's variables (nothing for v1)."""
        if self.profile is None:
            return {}
        return self.profile.environment(
            task_type=task_type, job_dir=job_dir, cluster_spec=cluster_spec, trial_id=trial_id
        )

    def process(self, context: ReplicaContext, environment: Environment | None) -> ReplicaProcess:
        """A package replica: ``python -m <module> <args> <trial flags> --job-dir <dir>``."""
        assert environment is not None  # prepared by ``prepare`` (or a worker's ``environment``)
        return ReplicaProcess(
            replica_id=context.replica.pk,
            label=context.replica.label,
            task_type=context.plan.task_type,
            trial_id=context.trial_id,
            command=trainer_command(
                environment.python,
                self.training_input["pythonModule"],
                [*self.training_input.get("args", []), *context.trial_args],
                self.job_dir_arg(context.job_dir),  # last, after a trial's flags, where package trainers look for it
            ),
            env=trainer_environment(
                passthrough=context.passthrough,
                bin_dir=environment.bin_dir,
                tmp_dir=context.replica_dir / "tmp",
                tf_config=context.tf_config,
                cluster_spec=context.cluster_spec,
                job_id=context.job.job_id,
                replica_id=context.replica.pk,
                extra=context.extra_env,
            ),
            cwd=context.replica_dir,
            sink=context.sink,
            max_line_bytes=settings.LOG_LINE_MAX_BYTES,
            preexec=context.preexec,
            user=context.account,
            stop_grace=settings.STOP_GRACE_SECONDS,
            gcs=self.gcs,
        )

    def failure(self, message: str, process: ReplicaProcess) -> str:
        """A failed replica's errorMessage: the exit, and the trainer's traceback where it left one."""
        return failure_message(self.training_input, message, list(process.stderr_tail))


class ContainerLaunch(Launch):
    """Each replica a container of its role's image (``jobs.containers``)."""

    kind = "container"
    needs_engine = True
    builds_environment = False

    @functools.cached_property
    def images(self) -> list[str]:
        plans = catalogue.replica_plan(self.training_input)
        return sorted({containers.image_for(self.training_input, plan.task_type) for plan in plans})

    def preparing(self) -> str:
        return "checking its container images"

    def images_to_build(self) -> list[str]:
        return [image for image in self.images if prebuilt.needs_building(image)]

    def bring_image(self, image: str, log, check_cancel) -> container_images.Resolved:
        """The image, as the job's project may run it, here: an upload of the project loaded again
        from its stored archive, one of Google's pre-built images built (once per machine)."""
        project = self.job.project
        if container_images.resolve(image) is None and container_images.load_uploaded(project, image):
            log(f"Loaded the project's image {image} from its stored archive.")
        try:
            prebuilt.ensure(image, log, check_cancel)
            return container_images.runnable(image, project)
        except (prebuilt.BuildFailed, container_images.ImageUnavailable) as error:
            raise preparing.PrepareError(str(error)) from None

    def prepare(self, *, packages: Path, log, check_cancel, gpu: bool) -> tuple[Environment | None, str | None]:
        """Its images are still here and its project's, its job dir ready and its inputs lent."""
        job = self.job
        for image in self.images:
            resolved = self.bring_image(image, log, check_cancel)
            log(f"Image {image} is here (sha256:{resolved.image_id[:12]}, {resolved.size / 1e6:.1f} MB).")
        job_dir = preparing.prepare_job_dir(self.training_input, project=job.project)
        preparing.prepare_arguments(self.training_input, project=job.project)
        return None, job_dir

    def uses_chief(self) -> bool:
        """A container's TF_CONFIG says ``chief`` only with useChiefInTfConfig."""
        return bool(self.training_input.get("useChiefInTfConfig"))

    def process(self, context: ReplicaContext, environment: Environment | None) -> ReplicaProcess:
        return container_process(self, context)

    def failure(self, message: str, process: ReplicaProcess) -> str:
        message += containers.exit_explanation(process.poll(), process)  # type: ignore[arg-type]
        tail = traceback_tail(list(process.stderr_tail))
        return message + (" \n" + tail if tail else "")


class PackageImageLaunch(ContainerLaunch):
    """The trainer package in one of Google's pre-built images, as the original ran AI Platform's
    PyTorch images (``--master-image-uri`` with ``--package-path``) and Vertex AI a
    ``pythonPackageSpec.executorImageUri`` no runtime version here stands for: the image built here
    (``jobs.containers.prebuilt``), the package installed for it as in ``pip install``
    (``environments.image_layer``), each replica ``python -m <module>`` in its container."""

    kind = "package in a pre-built image"
    builds_environment = True  # the queue's prebuild builds the image and installs the package ahead

    @property
    def image(self) -> str:
        return self.training_input["masterConfig"]["imageUri"]

    def preparing(self) -> str:
        return "building its pre-built image and installing its trainer packages"

    prepare = Launch.prepare  # a package job's: its packages fetched, its environment made

    def environment(self, files: list[Path], log, check_cancel, *, gpu: bool) -> Environment:
        resolved = self.bring_image(self.image, log, check_cancel)
        made = prebuilt.manifest(resolved.image_id)
        if made is None:
            raise preparing.PrepareError(f"{self.image} is not an image this console built; it cannot run a package.")
        log(f"Image {self.image} is here (sha256:{resolved.image_id[:12]}, Python {made.python}).")
        check_cancel()
        try:
            return environments.image_layer(
                resolved.image_id,
                made.python_minor,
                made.packages,
                files,
                log,
                preparing.trainer_account(self.job.project),
            )
        except environments.EnvironmentError_ as error:
            raise preparing.PrepareError(f"Failed to install the trainer packages. {error}") from None

    def process(self, context: ReplicaContext, environment: Environment | None) -> ReplicaProcess:
        assert environment is not None  # prepared by ``prepare`` (or a worker's ``environment``)
        told = self.job_dir_arg(context.job_dir)
        command = [
            "-m",
            self.training_input["pythonModule"],
            *self.training_input.get("args", []),
            *context.trial_args,
            *(["--job-dir", told] if told else []),
        ]
        return container_process(self, context, command=(["python"], command), layer=environment.path)


def strategy_for(job: Job) -> Launch:
    """How ``job``'s replicas run, decided from its input (and its Vertex AI request, if any)."""
    training_input = builtin.runnable_input(job.training_input or {})  # a built-in algorithm: our package
    if containers.runs_container(training_input) and training_input.get("packageUris"):
        return PackageImageLaunch(job, training_input)
    if containers.runs_container(training_input):
        return ContainerLaunch(job, training_input)
    return Launch(
        job, training_input, kind="built-in algorithm" if builtin.is_builtin_input(job.training_input or {}) else None
    )


def container_process(
    launch: ContainerLaunch,
    context: ReplicaContext,
    *,
    command: tuple[list[str], list[str]] | None = None,
    layer: Path | None = None,
) -> containers.ContainerReplicaProcess:
    """One replica as a container of its role's image (jobs/executor/containers.py). ``devices``: the
    GPUs a scaled-mode worker gave it (else taken from this host's); ``publish``: the port other
    hosts reach it on (scaled mode), published from the worker's address into its namespace.
    ``command``: the entrypoint and arguments instead of the role's; ``layer``: a folder of Python
    packages it sees, read-only, first on ``PYTHONPATH``."""
    pod, plan, replica, account = context.pod, context.plan, context.replica, context.account
    assert pod is not None  # the replica set or the worker made one: this host has an engine
    engine = pod.engine
    if account is not None:
        account.hand_over(context.replica_dir)  # the container's user writes its own folder, as a trainer does
    told = launch.job_dir_arg(context.job_dir)
    job_dir_args = ["--job-dir", told] if told else []
    # The user's args, a trial's flags, then --job-dir last: one order for packages and containers.
    entrypoint, args = command or containers.container_arguments(
        launch.training_input, plan.task_type, [*context.trial_args, *job_dir_args]
    )
    writable, readable = folders_for(launch.training_input, context)
    if layer is not None:
        readable.append(layer)
    shown = [f"{path} (read-write)" for path in writable[1:]]
    shown += [f"{path} (read-only{', its trainer packages' if path == layer else ''})" for path in readable]
    context.sink.service(
        f"{replica.label} sees " + (", ".join(shown) if shown else "no host folder but its own") + ".",
        trial_id=context.trial_id,
    )
    devices = context.devices
    gpu = "TPU" not in (plan.accelerator_type or "")
    if devices is None:
        devices = containers.gpus.take(engine, plan.accelerator_count, replica.pk) if gpu else []
    if plan.accelerator_count and gpu and not devices:
        context.sink.service(
            f"{replica.label} asked for {plan.accelerator_count} {plan.accelerator_type}, and the container engine "
            "here can give it none: it runs without a GPU.",
            severity="WARNING",
            trial_id=context.trial_id,
        )
    name = containers.container_name(replica.pk, context.attempt)
    env = containers.container_environment(
        passthrough=context.passthrough,
        tf_config=context.tf_config,
        cluster_spec=context.cluster_spec,
        job_id=context.job.job_id,
        extra={**context.extra_env, **({"PYTHONPATH": str(layer)} if layer is not None else {})},
    )
    staged = Staged(name, account, engine)  # through no link and no command line (jobs/containers/staged.py)
    try:
        options = [*staged.volumes(writable, readable), *staged.environment(env)]
        if launch.gcs is not None:  # the console's own mount point, which no account can change
            options += ["--volume", f"{launch.gcs}:/gcs:rw"]
    except BaseException:
        staged.release()
        raise
    return containers.ContainerReplicaProcess(
        replica_id=replica.pk,
        label=replica.label,
        task_type=plan.task_type,
        trial_id=context.trial_id,
        command=containers.run_command(
            engine,
            name=name,
            image=_image_id(containers.image_for(launch.training_input, plan.task_type)),
            pod=pod,
            replica_id=replica.pk,
            job_pk=context.job.pk,
            entrypoint=entrypoint,
            args=args,
            staged=options,
            account=account,
            machine_type=plan.machine_type,
            devices=devices,
            publish=context.publish,
        ),
        env={},
        cwd=context.replica_dir,
        sink=context.sink,
        max_line_bytes=settings.LOG_LINE_MAX_BYTES,
        preexec=context.preexec,
        stop_grace=settings.STOP_GRACE_SECONDS,
        engine=engine,
        container=name,
        devices=devices,
        staged=staged,
    )


def folders_for(training_input: dict, context: ReplicaContext) -> tuple[list[Path], list[Path]]:
    """The host folders a container replica sees, at their own paths: read-write, its own folder,
    its job dir and what its arguments name that its project's account owns (an ``--model-dir``
    made for it beside the job dir, ``preparing.prepare_arguments``); read-only, the rest its
    arguments name (stored inputs)."""
    writable = [context.replica_dir]
    if context.job_dir and not context.job_dir.startswith("gs://"):
        writable.append(Path(context.job_dir))
    readable: list[Path] = []
    account = context.account
    for path in trainer_user.argument_paths(training_input.get("args", []), project=context.job.project):
        if not path.exists() or any(path == w or path.is_relative_to(w) for w in writable):
            continue
        owned = account is not None and path.is_dir() and path.stat().st_uid == account.uid
        (writable if owned or (account is None and os.access(path, os.W_OK)) else readable).append(path)
    return writable, readable


def _image_id(reference: str) -> str:
    """The id the job's preparation resolved ``reference`` to: what was checked is what runs, even if
    the name is given to another image meanwhile (the name itself where the engine no longer has it,
    so that ``run`` says so)."""
    resolved = container_images.resolve(reference)
    return resolved.image_id if resolved is not None else reference
