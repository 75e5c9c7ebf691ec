"""The console's side of online prediction: serving processes per version, kept as scaling says.

One ``Supervisor`` per console process. For each READY version it keeps a ``Pool`` of serving
processes forked from the zygote of the version's runtime environment:

- ``autoScaling.minNodes`` processes stay warm; more are started when every one is busy, up to
  ``maxNodes`` (or AICONSOLE_MODEL_MAX_NODES). With minNodes 0 a version idles out after
  AICONSOLE_MODEL_IDLE_SECONDS without requests and loads again on the next one (a cold start,
  timed and reported).
- ``manualScaling.nodes`` fixes the count; it never idles out.
- Requests go round-robin to a free process; a process that dies is replaced (at once for the
  minimum, on the next request otherwise).

A maintenance thread does the idling out, the replacing, writes ``lastUseTime`` every few
seconds (never once per request), and reconciles with the database: versions deleted or no
longer READY lose their processes, READY versions with a minimum get theirs after a restart.
"""

from __future__ import annotations

import atexit
import logging
import threading
import time
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path

from django.conf import settings
from django.db import close_old_connections, connection
from django.utils import timezone

from aiconsole import trainer_user
from aiconsole.models import Project
from jobs.catalogue import DEFAULT_RUNTIME_VERSION
from jobs.executor import environments
from models_registry import conf
from models_registry.models import Model, Version, VersionState
from models_registry.serving import containers
from models_registry.serving.processes import (
    ONLINE,
    LoadFailure,
    ServingError,
    ServingProcess,
    Zygote,
)

logger = logging.getLogger("aiconsole.models")

MAINTENANCE_SECONDS = 0.5
RECONCILE_SECONDS = 5.0
LAST_USE_FLUSH_SECONDS = 5.0
ZYGOTE_START_TIMEOUT = 180.0


@dataclass
class ModelSpec:
    """What a serving process needs to load one version's model."""

    version_pk: int
    label: str  # projects/P/models/M/versions/V
    runtime_version: str
    model_dir: str
    model_file: str
    framework: str
    min_nodes: int
    max_nodes: int
    fixed: bool
    console_logging: bool
    python_version: str | None = None  # None: the runtime's default Python
    project: object = None  # whose account serves it (aiconsole.trainer_user)

    @classmethod
    def of(cls, version) -> ModelSpec:
        minimum, maximum, fixed = version.scaling
        cap = conf.max_nodes()
        return cls(
            version.pk,
            version.resource_name,
            version.runtime_version,
            version.local_dir,
            version.model_file,
            version.framework,
            min(minimum, cap),
            min(maximum or cap, cap),
            fixed,
            bool(version.model.online_prediction_console_logging),
            version.python_version or None,
            version.model.project,
        )

    @property
    def identity(self) -> tuple:
        return (self.runtime_version, self.python_version, self.model_dir, self.model_file, self.framework)

    def worker_spec(self) -> dict:
        return {"modelDir": self.model_dir, "modelFile": self.model_file, "framework": self.framework}


@dataclass
class Pool:
    spec: ModelSpec
    processes: list[ServingProcess] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)
    spawning: threading.Lock = field(default_factory=threading.Lock)
    last_use: float = field(default_factory=time.monotonic)
    used_since_flush: bool = False
    counter: int = 0
    cold_starts: int = 0
    last_cold_start_ms: float | None = None
    last_load_ms: float | None = None
    console_log: list[str] = field(default_factory=list)
    failure: str = ""
    retired: bool = False
    etag: str = ""

    def live(self) -> list[ServingProcess]:
        return [p for p in self.processes if p.alive]


@dataclass
class Answer:
    code: int
    body: bytes
    cold_start_ms: float | None = None


class Supervisor:
    def __init__(self):
        self.pools: dict[int, Pool] = {}
        self.zygotes: dict[str, Zygote] = {}
        self._lock = threading.Lock()
        self._zygote_lock = threading.Lock()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._last_reconcile = 0.0
        self._last_flush = time.monotonic()
        self._sequence = 0

    # --- lifecycle --------------------------------------------------------------------------

    def start(self) -> None:
        with self._lock:
            if self._thread is not None:
                return
            self._thread = threading.Thread(target=self._loop, name="model-serving", daemon=True)
            self._thread.start()

    def pause(self) -> None:
        """Stop the maintenance thread, keeping the processes (tests, between databases)."""
        self._stopping.set()
        with self._lock:
            thread, self._thread = self._thread, None
        if thread is not None and thread is not threading.current_thread():
            thread.join(10)
        self._stopping.clear()

    def stop(self) -> None:
        self._stopping.set()
        if self._thread is not None and self._thread is not threading.current_thread():
            self._thread.join(10)
        with self._lock:
            pools, self.pools = list(self.pools.values()), {}
        for pool in pools:
            self._stop_pool(pool)
        containers.get().stop_all()
        with self._zygote_lock:
            zygotes, self.zygotes = list(self.zygotes.values()), {}
        for zygote in zygotes:
            zygote.stop()

    # --- environments -------------------------------------------------------------------------

    def zygote_for(self, runtime_version: str, python_version: str | None = None, log=None, *, project=None) -> Zygote:
        """The running zygote of a runtime version's environment on its Python (built on first use),
        as ``project``'s account: one per project and runtime, so no project's model shares a
        process, a user or a folder with another's."""

        environment = environments.runtime_environment(
            runtime_version, log or logger.info, python_version=python_version
        )
        account = trainer_user.for_project(project) if project is not None else None
        key = f"{environment.path}|{project.project_id if project is not None else ''}"
        if project is not None:
            work = (
                settings.WORK_DIR / project.project_id / ".serving" / environment.path.name
            )  # no job id starts with "."
        else:
            work = conf.models_dir() / "serving" / environment.path.name
        with self._zygote_lock:
            zygote = self.zygotes.get(key)
            if zygote is not None and zygote.alive and zygote.control is not None:
                return zygote
            if zygote is not None:
                zygote.stop()
            zygote = Zygote(environment.python, work, f"runtime-{runtime_version}", user=account)
            zygote.start(ZYGOTE_START_TIMEOUT)
            self.zygotes[key] = zygote
            return zygote

    def prewarm(self, runtime_version: str, project=None) -> threading.Thread:
        """Start a runtime's zygote (``project``'s) in the background, so the next deploy or cold
        start is quick."""

        if not conf.prewarm():
            return threading.current_thread()

        def warm() -> None:
            try:
                self.zygote_for(runtime_version, project=project)
            except Exception:
                logger.exception("Could not prepare the serving environment of runtime %s", runtime_version)

        thread = threading.Thread(target=warm, name=f"prewarm-{runtime_version}", daemon=True)
        thread.start()
        return thread

    def spawn(self, spec: ModelSpec, label: str, on_log=None) -> tuple[ServingProcess, float]:
        """A new serving process with the model loaded, and how long loading took (ms)."""
        started = time.monotonic()
        zygote = self.zygote_for(spec.runtime_version, spec.python_version, project=spec.project)
        if zygote.user is not None:  # the model's files, for a serving process of the project's account
            zygote.user.lend(Path(spec.model_dir))
        try:
            process = zygote.spawn(spec.worker_spec(), label, on_log)
        except ServingError:
            # it died: once more with a fresh one
            zygote = self.zygote_for(spec.runtime_version, spec.python_version, project=spec.project)
            process = zygote.spawn(spec.worker_spec(), label, on_log)
        process.wait_ready(conf.load_timeout())
        return process, (time.monotonic() - started) * 1000

    # --- pools -----------------------------------------------------------------------------------

    def pool_for(self, version) -> Pool:
        """The version's pool; its settings follow the row (any change gives the row a new etag)."""
        pool = self.pools.get(version.pk)
        if pool is not None and not pool.retired and pool.etag == version.etag:
            return pool
        spec = ModelSpec.of(version)
        with self._lock:
            pool = self.pools.get(version.pk)
            if pool is None or pool.retired or pool.spec.identity != spec.identity:
                if pool is not None:
                    self._stop_pool(pool)
                pool = self.pools[version.pk] = Pool(spec)
            else:
                pool.spec = spec
            pool.etag = version.etag
        self.start()
        return pool

    def configure(self, version) -> None:
        """Apply a version's (new) scaling now; the maintenance thread starts or stops processes."""
        if containers.is_custom(version):
            containers.get().configure(version)
        elif version.pk in self.pools:
            self.pool_for(version)

    def retire(self, version_pk: int) -> None:
        containers.get().retire(version_pk)
        with self._lock:
            pool = self.pools.pop(version_pk, None)
        if pool is not None:
            self._stop_pool(pool)

    def _stop_pool(self, pool: Pool) -> None:
        pool.retired = True
        with pool.lock:
            processes, pool.processes = pool.processes, []
        for process in processes:
            process.stop()

    def _on_log(self, pool: Pool):
        if not pool.spec.console_logging:
            return None

        def log(label: str, line: str) -> None:
            logger.info("%s %s: %s", pool.spec.label, label, line)
            pool.console_log.append(line)
            del pool.console_log[:-200]

        return log

    def _add_process(self, pool: Pool) -> ServingProcess:
        self._sequence += 1
        process, load_ms = self.spawn(pool.spec, f"serving-{pool.spec.version_pk}-{self._sequence}", self._on_log(pool))
        pool.last_load_ms = load_ms
        pool.failure = ""
        with pool.lock:
            if pool.retired:
                process.stop()
                raise ServingError("The version stopped serving.")
            pool.processes.append(process)
        return process

    def warm(self, version) -> float:
        """Start a version's first process (the deployer's load check); returns its load time."""
        if containers.is_custom(version):
            self.start()  # its maintenance stops the container once idle
            return containers.get().warm(version)
        pool = self.pool_for(version)
        with pool.spawning:
            live = pool.live()
            if live:
                return pool.last_load_ms or 0.0
            self._add_process(pool)
        pool.last_use = time.monotonic()
        return pool.last_load_ms or 0.0

    def _acquire(self, pool: Pool) -> tuple[ServingProcess, float | None]:
        """A free process, holding its lock; starts one when none is free and scaling allows."""
        processes = pool.processes
        count = len(processes)
        start = pool.counter
        pool.counter = start + 1
        for index in range(count):
            process = processes[(start + index) % count]
            if process.alive and process.lock.acquire(blocking=False):
                return process, None
        live = pool.live()
        if len(live) < pool.spec.max_nodes:
            with pool.spawning:
                live = pool.live()
                for process in live:
                    if process.lock.acquire(blocking=False):
                        return process, None
                if len(live) < pool.spec.max_nodes:
                    began = time.monotonic()
                    process = self._add_process(pool)
                    process.lock.acquire()
                    cold = (time.monotonic() - began) * 1000 if not live else None
                    if cold is not None:
                        pool.cold_starts += 1
                        pool.last_cold_start_ms = cold
                        logger.info("Cold start of %s: %.0f ms", pool.spec.label, cold)
                    return process, cold
        if not live:
            raise ServingError("The version has no serving process.")
        process = live[start % len(live)]
        process.lock.acquire()
        return process, None

    def predict(self, version, body: bytes) -> Answer:
        """One online request for a READY version: the worker's answer code and body."""
        if containers.is_custom(version):  # its own serving container answers
            self.start()
            code, payload = containers.get().predict(version, body)
            return Answer(code, payload)
        pool = self.pool_for(version)
        try:
            process, cold = self._acquire(pool)
        except LoadFailure as error:
            pool.failure = str(error)
            raise
        try:
            code, payload = process.request(ONLINE, body, conf.predict_timeout())
        finally:
            process.lock.release()
        pool.last_use = process.last_use
        pool.used_since_flush = True
        return Answer(code, payload, cold)

    def status(self, version_pk: int) -> dict:
        pool = self.pools.get(version_pk)
        if pool is None:
            return {"processes": 0}
        return {
            "processes": len(pool.live()),
            "coldStarts": pool.cold_starts,
            "lastColdStartMs": pool.last_cold_start_ms,
            "lastLoadMs": pool.last_load_ms,
            "idleSeconds": round(time.monotonic() - pool.last_use, 1),
            "failure": pool.failure,
            "consoleLog": list(pool.console_log[-50:]),
            "minNodes": pool.spec.min_nodes,
            "maxNodes": pool.spec.max_nodes,
            "fixed": pool.spec.fixed,
        }

    # --- maintenance -------------------------------------------------------------------------------

    def _loop(self) -> None:
        try:
            self._prewarm_used_runtimes()
        except Exception:
            logger.exception("Could not prepare the serving environments")
        while not self._stopping.wait(MAINTENANCE_SECONDS):
            try:
                self.maintain()
            except Exception:
                logger.exception("Model serving maintenance failed")
        connection.close()

    def _prewarm_used_runtimes(self) -> None:
        """The runtimes each project's versions use (and the default one of a project with a model
        but no version yet)."""

        close_old_connections()
        used = set(Version.objects.values_list("runtime_version", "model__project").distinct())
        used |= {
            (DEFAULT_RUNTIME_VERSION, project)
            for project in Model.objects.values_list("project", flat=True)
            if not any(p == project for _, p in used)
        }
        projects = {project.pk: project for project in Project.objects.filter(pk__in={p for _, p in used})}
        for runtime_version, project in sorted(used):
            self.prewarm(runtime_version, projects[project])

    def maintain(self) -> None:
        containers.get().maintain()
        now = time.monotonic()
        idle = conf.idle_seconds()
        for pool in list(self.pools.values()):
            self._maintain_pool(pool, now, idle)
        if now - self._last_flush >= LAST_USE_FLUSH_SECONDS:
            self._last_flush = now
            self._flush_last_use()
        if now - self._last_reconcile >= RECONCILE_SECONDS:
            self._last_reconcile = now
            self.reconcile()

    def _maintain_pool(self, pool: Pool, now: float, idle: float) -> None:
        with pool.lock:
            dead = [p for p in pool.processes if not p.alive]
            pool.processes = [p for p in pool.processes if p.alive]
        for process in dead:
            logger.warning(
                "Serving process %s of %s exited; %s",
                process.label,
                pool.spec.label,
                " | ".join(list(process.log_tail)[-3:])[-400:],
            )
        spec = pool.spec
        if not spec.fixed and spec.min_nodes == 0 and pool.processes and now - pool.last_use > idle:
            logger.info("%s idled out after %.0fs without requests", spec.label, now - pool.last_use)
            with pool.lock:
                processes, pool.processes = pool.processes, []
            for process in processes:
                process.stop()
            return
        # Beyond the minimum, processes that have been idle that long are stopped one by one.
        extra = [p for p in pool.processes if now - p.last_use > idle and not p.lock.locked()]
        while len(pool.processes) > max(spec.min_nodes, 1) and extra:
            process = extra.pop()
            with pool.lock:
                if process in pool.processes:
                    pool.processes.remove(process)
            process.stop()
        while not pool.retired and len(pool.live()) < spec.min_nodes and not pool.failure:
            try:
                with pool.spawning:
                    if len(pool.live()) < spec.min_nodes:
                        self._add_process(pool)
            except ServingError as error:
                pool.failure = str(error)
                logger.error("Could not start a serving process for %s: %s", spec.label, error)

    def _flush_last_use(self) -> None:
        close_old_connections()
        for pool in list(self.pools.values()):
            if pool.used_since_flush:
                pool.used_since_flush = False
                used = timezone.now() - timedelta(seconds=max(0.0, time.monotonic() - pool.last_use))
                Version.objects.filter(pk=pool.spec.version_pk).update(last_use_time=used)

    def reconcile(self) -> None:
        """Pools follow the database: gone or not-READY versions stop, READY ones keep a minimum."""

        close_old_connections()
        ready = {v.pk: v for v in Version.objects.filter(state=VersionState.READY).select_related("model__project")}
        for pk in {*self.pools, *containers.get().served}:
            if pk not in ready and not self._creating(pk):
                self.retire(pk)
        for version in ready.values():
            if containers.is_custom(version):
                continue  # a serving container starts on its first request (containers.Containers)
            minimum = version.scaling[0]
            if minimum > 0 or version.pk in self.pools:
                pool = self.pool_for(version)
                if minimum > 0 and pool.failure and not pool.live():
                    pool.failure = ""  # retry a failed minimum once per reconcile

    def _creating(self, pk: int) -> bool:
        return Version.objects.filter(pk=pk, state__in=[VersionState.CREATING, VersionState.UPDATING]).exists()


_supervisor: Supervisor | None = None
_global_lock = threading.Lock()


def get() -> Supervisor:
    """The process-wide supervisor (its maintenance thread starts with the first pool)."""
    global _supervisor
    supervisor = _supervisor
    if supervisor is not None:
        return supervisor
    with _global_lock:
        if _supervisor is None:
            _supervisor = Supervisor()
            atexit.register(_stop_at_exit)
        return _supervisor


def start() -> Supervisor:
    supervisor = get()
    supervisor.start()
    return supervisor


def stop() -> None:
    global _supervisor
    with _global_lock:
        supervisor, _supervisor = _supervisor, None
    if supervisor is not None:
        supervisor.stop()


def _stop_at_exit() -> None:
    try:
        stop()
    except Exception:  # the interpreter is going away; the zygotes die with their sockets anyway
        pass


def work_dir() -> Path:
    return conf.models_dir() / "serving"
