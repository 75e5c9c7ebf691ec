"""Online prediction through Vertex AI's endpoints, over REST and over gRPC, beside the v1
``:predict`` of the same model version, against a real ``aiconsole up`` on free ports.

One scikit-learn model (trained by the runtime's Python, as bench/models.py trains it) is uploaded
with ``models:upload`` and deployed to an endpoint; then, in rounds whose order rotates (so drift
hits all alike), each client sends ``--requests`` one-instance predictions back to back:

1. **v1 REST**: ``POST /v1/projects/P/models/M:predict`` over one keep-alive connection.
2. **Vertex raw HTTP**: ``POST …/endpoints/E:predict`` the same way: the server's cost beside v1's.
3. **Vertex REST**: the SDK's ``PredictionServiceClient`` with ``transport="rest"``.
4. **Vertex gRPC**: the same client on its default transport, over TLS to the console's gRPC port.

Reported: p50 and p99 per client (ms) and the ratios of each Vertex client's p50 to v1's.

Run: ``.venv/bin/python bench/vertex_predict.py [--rounds 3] [--requests 300]`` (about a minute
once the runtime is built). ``--help`` for the rest.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from google.api_core.client_options import ClientOptions  # noqa: E402  (the SDK is the console's own dependency)
from google.cloud.aiplatform_v1 import PredictionServiceClient  # noqa: E402
from google.oauth2.credentials import Credentials  # noqa: E402

from bench.common import add_env_dir_flag, env_cache, say, scratch, wait_until  # noqa: E402
from bench.models import train  # noqa: E402
from bench.run import PROJECT, Console, free_port, percentile  # noqa: E402

IMAGE = "us-docker.pkg.dev/vertex-ai/prediction/sklearn-cpu.1-0:latest"
INSTANCE = [0.5, 0.5, 0.5, 0.5]
LOCATION = "us-central1"


def upload_and_deploy(console: Console, artifacts: Path) -> tuple[str, str]:
    """(the v1 model name, the endpoint's resource name) once the endpoint answers."""
    base = f"/v1/projects/{PROJECT}/locations/{LOCATION}"
    model = {"displayName": "bench", "artifactUri": str(artifacts), "containerSpec": {"imageUri": IMAGE}}
    name = console.call("POST", f"{base}/models:upload", {"model": model})["name"]
    done = wait_until(
        lambda: (found := console.call("GET", f"/v1/{name}")).get("done") and found, 600, "the upload", 0.05
    )
    if "error" in done:
        raise SystemExit(f"the upload failed: {done['error']}")
    model_name = done["response"]["model"]
    endpoint_name = console.call("POST", f"{base}/endpoints", {"displayName": "bench"})["response"]["name"]
    body = {"deployedModel": {"model": model_name}, "trafficSplit": {"0": 100}}
    console.call("POST", f"/v1/{endpoint_name}:deployModel", body)  # an HTTP error raises, with its answer
    v1 = console.call("GET", f"/v1/projects/{PROJECT}/models")
    return v1["models"][0]["name"].rsplit("/", 1)[1], endpoint_name


def raw_client(console: Console, path: str):
    """POSTs of one instance to ``path`` over one keep-alive connection, as bench/models.py sends them
    (opened again when the server closed it while the other clients ran: on the untimed first call)."""
    host, port = console.url.removeprefix("http://").split(":")
    held = [http.client.HTTPConnection(host, int(port), timeout=30)]
    body = json.dumps({"instances": [INSTANCE]}).encode()
    headers = {"Authorization": f"Bearer {console.token}", "Content-Type": "application/json"}

    def send() -> None:
        held[0].request("POST", path, body=body, headers=headers)
        response = held[0].getresponse()
        payload = response.read()
        if response.status != 200:
            raise SystemExit(f"{path}: {response.status} {payload[:300]!r}")

    def call() -> None:
        try:
            send()
        except (ConnectionError, http.client.HTTPException):
            held[0].close()
            held[0] = http.client.HTTPConnection(host, int(port), timeout=30)
            send()

    return call


def vertex_client(endpoint: str, client: PredictionServiceClient):
    def call() -> None:
        client.predict(endpoint=endpoint, instances=[INSTANCE])

    return call


def timed(call, count: int) -> list[float]:
    call()  # a first call opens the connection
    samples = []
    for _ in range(count):
        started = time.perf_counter()
        call()
        samples.append((time.perf_counter() - started) * 1000)
    return samples


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the four clients (default 3)")
    parser.add_argument("--requests", type=int, default=300, help="predictions per client per round (default 300)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    add_env_dir_flag(parser)
    args = parser.parse_args()
    if args.rounds < 1 or args.requests < 10:
        parser.error("--rounds must be at least 1 and --requests at least 10")
    samples: dict[str, list[float]] = {"v1_rest": [], "vertex_raw": [], "vertex_rest": [], "vertex_grpc": []}
    with scratch("aiconsole-bench-vertex-predict-") as folder:
        data_dir = folder / "data"
        grpc_port = free_port()
        console = Console(data_dir, env_cache(args.env_dir), AICONSOLE_GRPC_PORT=str(grpc_port))
        try:
            artifacts = train(env_cache(args.env_dir), data_dir / "storage" / "bench-models" / PROJECT) / "sklearn"
            model, endpoint = upload_and_deploy(console, artifacts)
            ca = data_dir / "grpc" / "ca.pem"
            wait_until(ca.is_file, 60, "the gRPC certificate", 0.1)
            os.environ["GRPC_DEFAULT_SSL_ROOTS_FILE_PATH"] = str(ca)
            credentials = Credentials(token=console.token)
            rest = PredictionServiceClient(
                transport="rest", credentials=credentials, client_options=ClientOptions(api_endpoint=console.url)
            )
            grpc_client = PredictionServiceClient(
                credentials=credentials, client_options=ClientOptions(api_endpoint=f"localhost:{grpc_port}")
            )
            clients = {
                "v1_rest": raw_client(console, f"/v1/projects/{PROJECT}/models/{model}:predict"),
                "vertex_raw": raw_client(console, f"/v1/{endpoint}:predict"),
                "vertex_rest": vertex_client(endpoint, rest),
                "vertex_grpc": vertex_client(endpoint, grpc_client),
            }
            kinds = list(clients)
            for index in range(args.rounds):
                order = kinds[index % len(kinds) :] + kinds[: index % len(kinds)]
                say(f"round {index + 1} of {args.rounds}: {', '.join(order)}")
                for kind in order:
                    samples[kind] += timed(clients[kind], args.requests)
        finally:
            console.stop()
    report: dict = {"rounds": args.rounds, "requests_per_round": args.requests}
    for kind, values in samples.items():
        report[f"{kind}_p50_ms"] = statistics.median(values)
        report[f"{kind}_p99_ms"] = percentile(values, 0.99)
    for kind in ("vertex_raw", "vertex_rest", "vertex_grpc"):
        report[f"{kind}_over_v1"] = report[f"{kind}_p50_ms"] / report["v1_rest_p50_ms"]
    print(f"One-instance predictions back to back, {args.rounds} × {args.requests} per client:")
    for kind, label in (
        ("v1_rest", "v1 :predict (REST)"),
        ("vertex_raw", "Vertex endpoint :predict (raw HTTP)"),
        ("vertex_rest", "Vertex endpoint :predict (REST)"),
        ("vertex_grpc", "Vertex endpoint Predict (gRPC)"),
    ):
        print(f"  {label:34} p50 {report[f'{kind}_p50_ms']:7.2f} ms   p99 {report[f'{kind}_p99_ms']:7.2f} ms")
    print(
        f"  ratios of p50 to v1: Vertex raw HTTP {report['vertex_raw_over_v1']:.2f}, "
        f"Vertex REST {report['vertex_rest_over_v1']:.2f}, "
        f"Vertex gRPC {report['vertex_grpc_over_v1']:.2f}"
    )
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
