"""Benchmarks of online prediction, against a real ``aiconsole up`` on a free port.

1. Deploy → first successful prediction: the client notes the time, POSTs versions.create, polls
   the operation every 20 ms and, once it is done, POSTs :predict until it answers 200.
   Measured with the runtime's serving environment already started (the usual case: creating a
   model starts it, and a running console keeps it) and, once, on a console that has just
   started (the environment's libraries are imported then).
2. Latency at a fixed rate: one instance per request, requests sent on a 200 per second
   schedule over keep-alive connections; latency counts from each request's scheduled time
   (so a slow answer that delays the next request is charged to it too: no coordinated omission).
3. Throughput: N client processes, each with a keep-alive connection, sending one-instance
   requests back to back for a fixed time against a linear model; and, as the web stack's own
   floor, the same requests without a token (refused with 401 before any database or model work).
4. Cold start: a version with autoScaling.minNodes 0 idles out (AICONSOLE_MODEL_IDLE_SECONDS=2
   here), then the next request starts a serving process and loads the model; the server
   reports the start in X-AIConsole-Cold-Start-Ms, the client times the whole request.

Everything runs twice: against ``aiconsole up`` as shipped (predictions through Django's
request path) and against the same console with ``models_registry.asgi.PredictFront`` mounted on
its HTTP application (bearer-token predictions answered before Django). Last, the serving layer
alone: the console's socket round trip to a serving process, without HTTP.

Run: ``.venv/bin/python bench/models.py [--seconds 10] [--rate 200] [--clients 2]`` (about 5 minutes).
"""

from __future__ import annotations

import argparse
import http.client
import json
import multiprocessing
import os
import platform
import statistics
import subprocess
import sys
import textwrap
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench import run  # noqa: E402
from bench.common import add_env_dir_flag, env_cache, say, scratch, wait_until  # noqa: E402
from bench.run import free_port, percentile  # noqa: E402
from bench.support.saved_models import TRAIN  # noqa: E402

PROJECT = "default-project"
INSTANCE = [0.9, 0.8, 0.1, 0.2]


class Console(run.Console):
    """``aiconsole up``, or with ``front`` this file's ``--serve-front`` (the predict front alone);
    ``call`` returns the status and headers too, and does not raise on an HTTP error."""

    def __init__(self, data_dir: Path, env_dir: Path, *, front: bool = False, **extra: str):
        port = free_port()
        super().__init__(
            data_dir,
            env_dir,
            [sys.executable, __file__, "--serve-front", str(port)] if front else None,
            port=port,
            **extra,
        )

    def call(self, method: str, path: str, body: dict | None = None) -> tuple[int, dict, dict]:
        request = urllib.request.Request(
            self.url + path,
            method=method,
            data=json.dumps(body).encode() if body is not None else None,
            headers={"Authorization": f"Bearer {self.token}", "Content-Type": "application/json"},
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as response:
                return response.status, json.loads(response.read() or b"{}"), dict(response.headers)
        except urllib.error.HTTPError as error:
            return error.code, json.loads(error.read() or b"{}"), dict(error.headers)


def summary(samples: list[float]) -> dict:
    return {
        "n": len(samples),
        "p50_ms": statistics.median(samples),
        "p90_ms": percentile(samples, 0.9),
        "p99_ms": percentile(samples, 0.99),
        "max_ms": max(samples),
    }


def runtime_python(env_dir: Path) -> Path:
    """The runtime 2.11 environment's interpreter, built into ``env_dir`` first on a new machine
    (as the console builds it for a first job), in a child process that sets Django up."""
    built = sorted(env_dir.glob("runtime-2.11-*/bin/python"))
    if built:
        return built[0]
    say(f"building runtime 2.11 into {env_dir} (minutes, once)")
    code = (
        "import django; django.setup(); from jobs.executor import environments; "
        "environments.runtime_environment('2.11', print)"
    )
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "console.settings",
        "AICONSOLE_ENV_DIR": str(env_dir),
        "AICONSOLE_DATA_DIR": str(env_dir / "build-data"),
        "AICONSOLE_SECRET_KEY": os.urandom(24).hex(),
    }
    subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=Path(__file__).resolve().parent.parent, check=True, timeout=1800
    )
    return sorted(env_dir.glob("runtime-2.11-*/bin/python"))[0]


def train(env_dir: Path, storage: Path) -> Path:
    python = runtime_python(env_dir)
    root = storage / "models"
    script = storage / "train.py"
    root.mkdir(parents=True)
    script.write_text(textwrap.dedent(TRAIN))
    say("training the models to serve")
    result = subprocess.run([str(python), "-I", str(script), str(root)], capture_output=True, text=True, timeout=600)
    if result.returncode != 0:
        raise SystemExit(f"training the models failed:\n{result.stderr[-3000:]}")
    return root


def deploy(console: Console, model: str, version: str, uri: str, **fields) -> float:
    """versions.create → the first 200 from :predict, in ms, as a client sees it."""
    started = time.perf_counter()
    status, operation, _ = console.call(
        "POST", f"/v1/projects/{PROJECT}/models/{model}/versions", {"name": version, "deploymentUri": uri, **fields}
    )
    if status != 200:
        raise SystemExit(f"versions.create: {status} {operation}")
    name = operation["name"]
    operation = wait_until(
        lambda: (found := console.call("GET", f"/v1/{name}")[1]).get("done") and found,
        600,
        f"{model}/{version} to be created",
        0.02,
    )
    if "error" in operation:
        raise SystemExit(f"{model}/{version} failed: {operation['error']}")
    predict = f"/v1/projects/{PROJECT}/models/{model}/versions/{version}:predict"
    wait_until(
        lambda: console.call("POST", predict, {"instances": [INSTANCE]})[0] == 200,
        300,
        f"{model}/{version} to answer a prediction",
        0.01,
    )
    return (time.perf_counter() - started) * 1000


def _connection(url: str) -> http.client.HTTPConnection:
    host, port = url.removeprefix("http://").split(":")
    return http.client.HTTPConnection(host, int(port), timeout=30)


def _post(connection: http.client.HTTPConnection, path: str, body: bytes, headers: dict) -> int:
    connection.request("POST", path, body, headers)
    response = connection.getresponse()
    response.read()
    return response.status


def fixed_rate(console: Console, path: str, rate: float, seconds: float) -> dict:
    """Open-loop: request i is due at start + i/rate; latency counts from when it was due."""
    body = json.dumps({"instances": [INSTANCE]}).encode()
    headers = {"Authorization": f"Bearer {console.token}", "Content-Type": "application/json"}
    connection = _connection(console.url)
    for _ in range(50):  # warm up the connection and the serving process
        _post(connection, path, body, headers)
    total = int(rate * seconds)
    samples, errors = [], 0
    start = time.perf_counter() + 0.05
    for index in range(total):
        due = start + index / rate
        pause = due - time.perf_counter()
        if pause > 0:
            time.sleep(pause)
        if _post(connection, path, body, headers) != 200:
            errors += 1
        samples.append((time.perf_counter() - due) * 1000)
    achieved = total / (time.perf_counter() - start)
    return {**summary(samples), "rate": rate, "achieved_rate": achieved, "errors": errors}


def _hammer(url: str, token: str, path: str, seconds: float, results) -> None:
    body = json.dumps({"instances": [INSTANCE]}).encode()
    headers = {"Authorization": f"Bearer {token}", "Content-Type": "application/json"} if token else {}
    connection = _connection(url)
    for _ in range(20):
        _post(connection, path, body, headers)
    count, errors = 0, 0
    end = time.perf_counter() + seconds
    while time.perf_counter() < end:
        if _post(connection, path, body, headers) != (200 if token else 401):
            errors += 1
        count += 1
    results.put((count, errors))


def throughput(console: Console, path: str, clients: int, seconds: float, *, token: bool = True) -> dict:
    results: multiprocessing.Queue = multiprocessing.Queue()
    workers = [
        multiprocessing.Process(
            target=_hammer, args=(console.url, console.token if token else "", path, seconds, results)
        )
        for _ in range(clients)
    ]
    for worker in workers:
        worker.start()
    counts = [results.get(timeout=seconds + 120) for _ in workers]
    for worker in workers:
        worker.join()
    requests = sum(c for c, _ in counts)
    return {
        "clients": clients,
        "seconds": seconds,
        "requests": requests,
        "errors": sum(e for _, e in counts),
        "per_second": requests / seconds,
    }


def cold_start(console: Console, idle: float, runs: int) -> dict:
    path = f"/v1/projects/{PROJECT}/models/linear/versions/cold:predict"
    server, client = [], []
    for _ in range(runs):
        time.sleep(idle + 1.5)  # idle out (the maintenance pass runs every 0.5 s)
        started = time.perf_counter()
        status, body, headers = console.call("POST", path, {"instances": [INSTANCE]})
        elapsed = (time.perf_counter() - started) * 1000
        cold = {k.lower(): v for k, v in headers.items()}.get("x-aiconsole-cold-start-ms")
        if status != 200 or cold is None:
            raise SystemExit(f"expected a cold start: {status} {body} {headers}")
        server.append(float(cold))
        client.append(elapsed)
    return {
        "runs": runs,
        "server_p50_ms": statistics.median(server),
        "client_p50_ms": statistics.median(client),
        "client_max_ms": max(client),
    }


def serving_alone(env_dir: Path, models: Path, scratch: Path, seconds: float) -> dict:
    """The serving layer without HTTP: the console's socket round trip to a serving process of
    the linear model, one instance per request, back to back (what each predict call costs after
    the web stack, authentication and the permission check)."""
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    os.environ.setdefault("AICONSOLE_DATA_DIR", str(scratch / "serving-alone"))
    os.environ.setdefault("AICONSOLE_SECRET_KEY", os.urandom(24).hex())  # no ``aiconsole`` command made this data dir
    import django

    django.setup()
    from models_registry.serving.processes import ONLINE, Zygote

    python = runtime_python(env_dir)
    zygote = Zygote(python, scratch / "zygote", "bench")
    zygote.start(180)
    try:
        process = zygote.spawn(
            {"modelDir": str(models / "linear"), "modelFile": "model.pkl", "framework": "SCIKIT_LEARN"}, "bench"
        )
        process.wait_ready(60)
        body = json.dumps({"instances": [INSTANCE]}).encode()
        for _ in range(200):
            process.request(ONLINE, body, 10)
        samples = []
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            process.request(ONLINE, body, 10)
            samples.append((time.perf_counter() - started) * 1000)
        process.stop()
    finally:
        zygote.stop()
    return {**summary(samples), "per_second": len(samples) / seconds}


def serve_front(port: int) -> None:
    """The console's ASGI application (the predict front mounted, as in ``aiconsole up``) in one
    process with the executor, as ``aiconsole up`` ran before the web and worker processes split."""
    import uvicorn

    from console.cli.server import migrate, setup_django

    setup_django(None)
    migrate()
    from aiconsole.bootstrap import ensure_admin_and_project
    from jobs.executor import controller

    ensure_admin_and_project()
    controller.start()
    try:
        uvicorn.run("console.asgi:application", host="127.0.0.1", port=port, lifespan="off", log_level="warning")
    finally:
        controller.stop()


def run_suite(console: Console, models: Path, args, idle: float) -> dict:
    results: dict = {}
    for name in ("sklearn", "xgboost", "linear"):
        console.call("POST", f"/v1/projects/{PROJECT}/models", {"name": name})
    # The first deploy after start imports the runtime's libraries once (in the zygote).
    results["deploy_first_after_start_ms"] = deploy(console, "sklearn", "v1", str(models / "sklearn"))
    results["deploy_ms"] = [deploy(console, "sklearn", f"w{i}", str(models / "sklearn")) for i in range(5)]
    results["deploy_xgboost_ms"] = deploy(console, "xgboost", "v1", str(models / "xgboost"), manualScaling={"nodes": 1})
    results["deploy_linear_ms"] = deploy(console, "linear", "v1", str(models / "linear"), manualScaling={"nodes": 1})
    for name in ("sklearn", "xgboost", "linear"):
        results[f"rate_{name}"] = fixed_rate(
            console, f"/v1/projects/{PROJECT}/models/{name}:predict", args.rate, args.seconds
        )
    linear = f"/v1/projects/{PROJECT}/models/linear/versions/v1:predict"
    results["throughput_linear"] = throughput(console, linear, args.clients, args.seconds)
    results["throughput_linear_1_client"] = throughput(console, linear, 1, args.seconds)
    # The web stack's own floor at the same moment: the same request without a token is
    # refused (401) before any database or model work.
    results["throughput_unauthenticated_401"] = throughput(console, linear, args.clients, args.seconds, token=False)
    deploy(console, "linear", "cold", str(models / "linear"))
    results["cold_start"] = cold_start(console, idle, args.cold_runs) if args.cold_runs else {}
    return results


def main() -> None:
    if len(sys.argv) == 3 and sys.argv[1] == "--serve-front":
        serve_front(int(sys.argv[2]))
        return
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--clients", type=int, default=2)
    parser.add_argument("--cold-runs", type=int, default=5)
    parser.add_argument("--json", type=Path, help="also write the results here")
    parser.add_argument("--only", choices=["as_shipped", "with_predict_front"], help="run one console variant")
    add_env_dir_flag(parser)
    args = parser.parse_args()
    env_dir = env_cache(args.env_dir)
    idle = 2.0
    results: dict = {
        "machine": f"{os.cpu_count()} CPUs, {platform.python_version()}, load average {os.getloadavg()[0]:.2f} at start"
    }
    with scratch("aiconsole-bench-models-") as folder:  # as root, serving processes run as another user
        models = train(env_dir, folder / "trained")
        variants = (("as_shipped", False), ("with_predict_front", True))
        for label, front in [v for v in variants if args.only in (None, v[0])]:
            data_dir = folder / label
            console = Console(
                data_dir,
                env_dir,
                front=front,
                AICONSOLE_MODEL_IDLE_SECONDS=str(idle),
                AICONSOLE_STORAGE_ROOTS=str(models),
            )
            try:
                say(
                    f"{label}: deploys, {args.seconds:.0f} s at {args.rate:.0f} req/s per model, throughput, "
                    f"{args.cold_runs} cold starts"
                )
                results[label] = run_suite(console, models, args, idle)
            finally:
                console.stop()
        say("the serving layer alone")
        results["serving_alone_linear"] = serving_alone(env_dir, models, folder, args.seconds)
        results["load_average_at_end"] = round(os.getloadavg()[0], 2)
    print(json.dumps(results, indent=1))
    if args.json:
        args.json.write_text(json.dumps(results, indent=1))


if __name__ == "__main__":
    main()
