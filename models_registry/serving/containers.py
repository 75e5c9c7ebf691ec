"""A model's own serving container, run as Vertex AI runs one.

A Vertex model uploaded with an image that is not one of Google's pre-built prediction images is
served by that image (loaded into the container engine for its project, as training images are),
under Vertex's contract: the container listens on ``AIP_HTTP_PORT`` (its ``ports[0]``, else 8080),
answers ``AIP_HEALTH_ROUTE`` with 200 once ready and ``AIP_PREDICT_ROUTE`` with the predictions,
and finds the model's artifacts at ``AIP_STORAGE_URI`` (mounted read-only at the path the URI
names: ``gs://b/p`` at ``/gcs/b/p``, as Vertex's Cloud Storage mount gives it, a local folder at
its own path). ``AIP_MODE`` is ``PREDICTION``; the spec's ``env``, ``command`` and ``args`` are the
container's.

It runs as every container of its project does: as the project's account, in the project's
network, without capabilities, under the engine's seccomp profile, its port published on the
host's loopback only, where the console forwards each request. It starts when the version is
deployed (the health route must answer within ``deploymentTimeout``, else the version fails with
the container's last lines), again on the next request after it stopped, and stops after the idle
time like serving processes (unless a deployment keeps it warm), when the version is deleted, and
with the console.
"""

from __future__ import annotations

import http.client
import json
import logging
import os
import socket
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from aiconsole import trainer_user
from jobs.containers import engine as engines
from jobs.executor import containers as replicas
from jobs.vertex import images
from models_registry import conf
from models_registry.serving.processes import FAILED, OK, ServingError

logger = logging.getLogger("aiconsole.models")

LABEL = "ai-console.serving"
LABEL_PROCESS = "ai-console.serving-process"  # host:pid of the console process that runs it
DEFAULT_PORT = 8080
DEFAULT_PREDICT_ROUTE = "/predict"
DEFAULT_HEALTH_ROUTE = "/health"
MACHINE_TYPE = "n1-standard-4"  # the limits a serving container gets, as a batch worker's
HEALTH_POLL_SECONDS = 0.1
LOG_LINES = 20
LOG_MAX_BYTES = 10_000_000  # what the engine keeps of a serving container's output


def is_custom(version) -> bool:
    """Whether the version is served by its own container (not a framework server)."""
    spec = version.container_spec or {}
    return bool(spec.get("imageUri")) and images.prediction_server(spec["imageUri"]) is None


def mount_point(storage_uri: str) -> str:
    """Where a container finds its artifacts: ``gs://b/p`` at ``/gcs/b/p``, a path at itself."""
    if storage_uri.startswith("gs://"):
        return "/gcs/" + storage_uri.removeprefix("gs://").rstrip("/")
    return storage_uri.rstrip("/") or "/model"


@dataclass
class Served:
    version_pk: int
    name: str
    host_port: int
    predict_route: str
    health_route: str
    last_use: float = field(default_factory=time.monotonic)
    keep_warm: bool = False


class Containers:
    """The serving containers this process runs, one per version."""

    def __init__(self):
        self.served: dict[int, Served] = {}
        self._lock = threading.Lock()
        self._starting: dict[int, threading.Lock] = {}

    def warm(self, version) -> float:
        """Start the version's container (when not running) and wait until it is healthy; the ms taken."""
        started = time.monotonic()
        self._ensure(version)
        return (time.monotonic() - started) * 1000

    def _ensure(self, version) -> Served:
        with self._lock:
            gate = self._starting.setdefault(version.pk, threading.Lock())
        with gate:
            served = self.served.get(version.pk)
            if served is not None and self._running(served):
                return served
            if served is not None:
                self._remove(served)
            served = self._start(version)
            with self._lock:
                self.served[version.pk] = served
            return served

    def predict(self, version, body: bytes) -> tuple[int, bytes]:
        """(answer code, body) of the container's predict route for one request."""
        served = self._ensure(version)
        served.keep_warm = _min_nodes(version) > 0
        try:
            status, payload = _http(served.host_port, "POST", served.predict_route, body, conf.predict_timeout())
        except OSError as error:
            raise ServingError(f"The serving container did not answer: {error}") from None
        served.last_use = time.monotonic()
        return (OK, payload) if status == 200 else (FAILED, payload or f"HTTP {status}".encode())

    def retire(self, version_pk: int) -> None:
        with self._lock:
            served = self.served.pop(version_pk, None)
        if served is not None:
            self._remove(served)

    def maintain(self) -> None:
        """Stop the containers idle past the idle time that no deployment keeps warm."""
        idle = conf.idle_seconds()
        now = time.monotonic()
        for served in list(self.served.values()):
            if not served.keep_warm and now - served.last_use > idle:
                logger.info("Stopping the idle serving container %s", served.name)
                self.retire(served.version_pk)

    def stop_all(self) -> None:
        for pk in list(self.served):
            self.retire(pk)

    def configure(self, version) -> None:
        served = self.served.get(version.pk)
        if served is not None:
            served.keep_warm = _min_nodes(version) > 0

    # --- the engine -----------------------------------------------------------------------------------

    def _start(self, version) -> Served:
        engine = engines.available()
        if engine is None:
            raise ServingError("No container engine is available on this machine to run the serving container.")
        spec = version.container_spec or {}
        ports = spec.get("ports") or []
        port = int(ports[0].get("containerPort") or DEFAULT_PORT) if ports else DEFAULT_PORT
        predict_route = spec.get("predictRoute") or DEFAULT_PREDICT_ROUTE
        health_route = spec.get("healthRoute") or DEFAULT_HEALTH_ROUTE
        project = version.model.project
        name = f"aic-{replicas.console_label()}-serve-{version.pk}-{int(time.time() * 1000) % 10**9}"
        host_port = _free_port()
        storage_uri = version.deployment_uri
        env = {
            **{item["name"]: item.get("value", "") for item in spec.get("env", [])},
            "AIP_HTTP_PORT": str(port),
            "AIP_PREDICT_ROUTE": predict_route,
            "AIP_HEALTH_ROUTE": health_route,
            "AIP_MODE": "PREDICTION",
            "AIP_MODE_VERSION": "1.0.0",
            "AIP_PROJECT_NUMBER": str(project.project_number),
            "AIP_MACHINE_TYPE": MACHINE_TYPE,
            "AIP_DEPLOYED_MODEL_ID": str(version.model.vertex_id),
        }
        account = trainer_user.for_project(project)
        mounts: list[str] = []
        if storage_uri and version.local_dir:
            env["AIP_STORAGE_URI"] = storage_uri
            target = mount_point(storage_uri)
            mounts = ["--mount", f"type=bind,source={version.local_dir},destination={target},readonly=true"]
            if account is not None:
                account.lend(Path(version.local_dir))  # read, as the project's account, what the deployer copied
        options = [
            "run",
            "--detach",
            "--name",
            name,
            "--pull=never",
            "--init",
            "--cap-drop=all",
            "--security-opt",
            "no-new-privileges",
            *engine.security,
            *replicas.owner_labels(),
            "--label",
            f"{LABEL}={version.pk}",
            "--label",
            f"{LABEL_PROCESS}={_process()}",
            "--pids-limit",
            "4096",
            "--network",
            replicas.project_network(engine, project),
            "--publish",
            f"127.0.0.1:{host_port}:{port}",
            *replicas.resource_options(engine, MACHINE_TYPE),
            *mounts,
        ]
        if engine.is_podman:
            # Its output is read only for its last lines when it fails (``_last_lines``): kept in a
            # file the engine truncates past this size, so an endpoint that logs every request
            # for months does not fill the disk.
            options += ["--log-opt", f"max-size={LOG_MAX_BYTES}"]
        userns = replicas.user_namespace(engine, account)
        if userns:
            options += ["--user", "0:0", "--mount", "type=devpts,destination=/dev/pts", *userns]
        elif account is not None:
            options += ["--user", f"{account.uid}:{account.gid}"]
        if spec.get("command"):
            options += ["--entrypoint", json.dumps(spec["command"])]
        # The variables go through a private file, never on a command line others can read.
        with tempfile.NamedTemporaryFile("w", prefix="aic-serve-env-", delete=False) as handle:
            os.chmod(handle.name, 0o600)
            for key, value in env.items():
                handle.write(f"{key}={value}\n".replace("\0", ""))
        try:
            engine.call(*options, "--env-file", handle.name, spec["imageUri"], *spec.get("args", []), timeout=60)
        except engines.EngineError as error:
            raise ServingError(f"The serving container {spec['imageUri']} could not start: {error}") from None
        finally:
            Path(handle.name).unlink(missing_ok=True)
        served = Served(version.pk, name, host_port, predict_route, health_route, keep_warm=_min_nodes(version) > 0)
        try:
            self._wait_healthy(engine, served, _deadline_seconds(spec))
        except ServingError:
            self._remove(served)
            raise
        logger.info("Serving container %s of %s answers on 127.0.0.1:%s", name, version, host_port)
        return served

    def _wait_healthy(self, engine: engines.Engine, served: Served, seconds: float) -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline:
            try:
                status, _ = _http(served.host_port, "GET", served.health_route, b"", 5)
                if status == 200:
                    return
            except OSError:
                pass
            if not self._running(served, engine):
                raise ServingError(f"The serving container exited before it was healthy. {_last_lines(engine, served)}")
            time.sleep(HEALTH_POLL_SECONDS)
        raise ServingError(
            f"The serving container did not answer {served.health_route} with 200 within {seconds:.0f} s "
            f"(containerSpec.deploymentTimeout). {_last_lines(engine, served)}"
        )

    def _running(self, served: Served, engine: engines.Engine | None = None) -> bool:
        engine = engine or engines.available()
        if engine is None:
            return False
        try:
            return engine.call("inspect", "--format", "{{.State.Running}}", served.name).strip() == "true"
        except engines.EngineError:
            return False

    def _remove(self, served: Served) -> None:
        engine = engines.available()
        if engine is not None:
            replicas.remove_container(engine, served.name)


def _min_nodes(version) -> int:
    minimum, _, _ = version.scaling
    return minimum


def _deadline_seconds(spec: dict) -> float:
    timeout = spec.get("deploymentTimeout", "")
    if timeout.endswith("s"):
        try:
            return max(float(timeout[:-1]), 1.0)
        except ValueError:
            pass
    return conf.load_timeout()


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def _http(port: int, method: str, path: str, body: bytes, timeout: float) -> tuple[int, bytes]:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        headers = {"Content-Type": "application/json"} if body else {}
        connection.request(method, path, body=body or None, headers=headers)
        response = connection.getresponse()
        return response.status, response.read()
    finally:
        connection.close()


def _last_lines(engine: engines.Engine, served: Served) -> str:
    try:
        lines = engine.call("logs", "--tail", str(LOG_LINES), served.name, timeout=10).strip()
    except engines.EngineError:
        return ""
    return f"Its last lines: {lines}" if lines else "It printed nothing."


def _process() -> str:
    return f"{socket.gethostname()}:{os.getpid()}"


def sweep() -> None:
    """Remove the serving containers that console processes of this data dir on this host left when
    they ended (a live process's containers stay: scaled mode runs several web processes)."""
    engine = engines.available()
    if engine is None:
        return
    mine = ["--filter", f"label={replicas.LABEL_CONSOLE}={replicas.console_label()}"]
    shown = '{{.Names}} {{index .Labels "' + LABEL_PROCESS + '"}}'
    try:
        listed = engine.call("ps", "--all", "--filter", f"label={LABEL}", *mine, "--format", shown, timeout=30)
    except engines.EngineError:
        return
    host = socket.gethostname()
    for line in listed.splitlines():
        name, _, process = line.partition(" ")
        owner_host, _, pid = process.partition(":")
        if owner_host == host and pid.isdigit() and int(pid) != os.getpid() and _alive(int(pid)):
            continue
        if owner_host == host or not process:
            replicas.remove_container(engine, name)


def _alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


_containers = Containers()


def get() -> Containers:
    return _containers
