"""The Vertex AI SDK's ``CustomJob.run()`` to SUCCEEDED for a one-second trainer, beside the same
trainer as a v1 job, against a real ``aiconsole up`` on a free port.

Each round runs, in turn (the order rotating round by round, so drift hits all alike):

1. **v1**: ``POST /v1/projects/P/jobs``, then ``GET`` every 50 ms until SUCCEEDED (as bench/run.py).
2. **SDK**: ``aiplatform.CustomJob(...).run()``, unchanged: it polls the job every
   ``_JOB_WAIT_TIME`` seconds (5 in google-cloud-aiplatform).
3. **SDK at 50 ms**: the same call with the SDK's own polling interval set to the v1 client's 50 ms
   (a benchmark-only patch of ``google.cloud.aiplatform.jobs._JOB_WAIT_TIME``).
4. **Pipeline**: ``aiplatform.CustomTrainingJob(script_path=…).run()``, unchanged: the SDK packages the
   script, uploads it to the staging bucket (an in-memory Cloud Storage emulator the console reads
   too), creates a TrainingPipeline and polls it every 5 s.
5. **Pipeline at 50 ms**: the same with ``training_jobs._JOB_WAIT_TIME`` at 50 ms.

For the SDK jobs the server's own time is read from the job's Vertex resource (``createTime`` to
``endTime``, in microseconds): what the client waits beyond it is its polling. Reported as medians
and ratios to v1.

Run: ``.venv/bin/python bench/vertex.py [--rounds N]`` (about a minute for 3 rounds once the runtime
is built; a first run builds it, minutes more). ``--help`` for the rest.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:
    from gcp_storage_emulator.server import create_server
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs as sdk_jobs
    from google.cloud.aiplatform import training_jobs as sdk_pipelines
except ImportError as missing:  # the console's install has the SDK but not the storage emulator its client writes to
    sys.exit(
        f"bench/vertex.py runs Google's Vertex AI SDK against a Cloud Storage emulator; {missing.name} is missing: "
        ".venv/bin/pip install -e '.[bench]'"
    )
from google.oauth2.credentials import Credentials  # noqa: E402

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402
from bench.run import PROJECT, Console  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

TASK = """\
import time
time.sleep(1.0)
"""
IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest"  # runtime 2.11, as the v1 jobs
SDK_INTERVAL = sdk_jobs._JOB_WAIT_TIME
PIPELINE_INTERVAL = sdk_pipelines._JOB_WAIT_TIME


def _seconds(stamp) -> float:
    return stamp.timestamp() if isinstance(stamp, datetime) else float(stamp)


def run_v1(console: Console, package: Path, job_id: str, storage: Path) -> float:
    started = time.perf_counter()
    console.submit(job_id, package, storage / "out" / PROJECT / job_id)
    console.wait(job_id, poll=0.05)
    return time.perf_counter() - started


def run_sdk(package: Path, name: str, storage: Path, interval: float) -> tuple[float, float]:
    """The SDK's wall time for ``run()`` and the server's createTime → endTime of that job."""
    sdk_jobs._JOB_WAIT_TIME = interval
    job = aiplatform.CustomJob(
        display_name=name,
        worker_pool_specs=[
            {
                "machine_spec": {"machine_type": "n1-standard-4"},
                "replica_count": 1,
                "python_package_spec": {
                    "executor_image_uri": IMAGE,
                    "package_uris": [str(package)],
                    "python_module": "trainer.task",
                },
            }
        ],
        base_output_dir=str(storage / "out" / PROJECT / name),
    )
    started = time.perf_counter()
    job.run()
    wall = time.perf_counter() - started
    resource = job.gca_resource
    if resource.state.name != "JOB_STATE_SUCCEEDED":
        raise SystemExit(f"{name} ended {resource.state.name}: {resource.error.message}")
    return wall, _seconds(resource.end_time) - _seconds(resource.create_time)


def run_pipeline(script: Path, name: str, storage: Path, interval: float) -> tuple[float, float]:
    """``CustomTrainingJob.run()``'s wall time and the server's createTime → endTime of its pipeline."""
    sdk_pipelines._JOB_WAIT_TIME = interval
    job = aiplatform.CustomTrainingJob(display_name=name, script_path=str(script), container_uri=IMAGE)
    started = time.perf_counter()
    job.run(replica_count=1, machine_type="n1-standard-4", base_output_dir=str(storage / "out" / PROJECT / name))
    wall = time.perf_counter() - started
    resource = job.gca_resource
    if resource.state.name != "PIPELINE_STATE_SUCCEEDED":
        raise SystemExit(f"{name} ended {resource.state.name}: {resource.error.message}")
    return wall, _seconds(resource.end_time) - _seconds(resource.create_time)


def start_storage_emulator():
    """An in-memory Cloud Storage the SDK uploads the script to and the console reads it from."""
    logging.getLogger("gcp_storage_emulator").setLevel(logging.CRITICAL)
    server = create_server("127.0.0.1", 0, in_memory=True)
    server.start()
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{server._api._httpd.server_address[1]}"
    from google.auth.credentials import AnonymousCredentials
    from google.cloud import storage as gcs

    gcs.Client(project=PROJECT, credentials=AnonymousCredentials()).create_bucket("bench-staging")
    return server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the three runs (default 5)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    add_env_dir_flag(parser)
    args = parser.parse_args()
    if args.rounds < 1:
        parser.error("--rounds must be at least 1")
    for name in list(logging.root.manager.loggerDict):  # the SDK logs every call at INFO, module by module
        if name.startswith("google.cloud.aiplatform"):
            logging.getLogger(name).setLevel(logging.WARNING)
    kinds = ("v1", "sdk", "sdk_fast", "pipeline", "pipeline_fast")
    samples: dict[str, list[float]] = {kind: [] for kind in kinds}
    samples.update({f"{kind}_server": [] for kind in kinds[1:]})
    emulator = start_storage_emulator()
    with scratch("aiconsole-bench-vertex-") as folder:
        data_dir = folder / "data"
        console = Console(data_dir, env_cache(args.env_dir))
        try:
            storage = data_dir / "storage"
            package = build_package(storage / "vertex-pkg" / PROJECT, {"trainer/task.py": TASK})
            script = folder / "train.py"
            script.write_text(TASK)
            aiplatform.init(
                project=PROJECT,
                location="us-central1",
                api_endpoint=console.url,
                api_transport="rest",
                credentials=Credentials(token=console.token),
                staging_bucket="gs://bench-staging",
            )
            say("a first v1 job and a first SDK job build the job's environment (on a new machine the runtime too)")
            run_v1(console, package, "warmup_v1", storage)
            run_sdk(package, "warmup-sdk", storage, 0.05)
            run_pipeline(script, "warmup-pipeline", storage, 0.05)
            for index in range(args.rounds):
                order = kinds[index % len(kinds) :] + kinds[: index % len(kinds)]
                say(f"round {index + 1} of {args.rounds}: {', '.join(order)}")
                for kind in order:
                    name = f"{kind.replace('_', '-')}-{index}"
                    if kind == "v1":
                        samples["v1"].append(run_v1(console, package, f"v1_{index}", storage))
                        continue
                    if kind.startswith("sdk"):
                        wall, server = run_sdk(package, name, storage, SDK_INTERVAL if kind == "sdk" else 0.05)
                    else:
                        interval = PIPELINE_INTERVAL if kind == "pipeline" else 0.05
                        wall, server = run_pipeline(script, name, storage, interval)
                    samples[kind].append(wall)
                    samples[f"{kind}_server"].append(server)
        finally:
            sdk_jobs._JOB_WAIT_TIME = SDK_INTERVAL
            sdk_pipelines._JOB_WAIT_TIME = PIPELINE_INTERVAL
            console.stop()
            emulator.stop()
    med = {kind: statistics.median(values) for kind, values in samples.items()}
    report = {
        "rounds": args.rounds,
        "sdk_poll_interval_s": SDK_INTERVAL,
        **{f"{kind}_s": value for kind, value in med.items()},
        "sdk_over_v1": med["sdk"] / med["v1"],
        "sdk_fast_over_v1": med["sdk_fast"] / med["v1"],
        "sdk_client_wait_s": med["sdk"] - med["sdk_server"],
        "pipeline_over_v1": med["pipeline"] / med["v1"],
        "pipeline_fast_over_v1": med["pipeline_fast"] / med["v1"],
    }
    print(
        f"A one-second trainer to SUCCEEDED, {args.rounds} rounds (medians; server = the job's createTime → endTime):"
    )
    print(f"  v1 job, client polling every 50 ms:            {med['v1']:.3f} s")
    print(
        f"  SDK CustomJob.run(), unchanged ({SDK_INTERVAL} s polls):   {med['sdk']:.3f} s   "
        f"(server {med['sdk_server']:.3f} s; the client waited {report['sdk_client_wait_s']:.3f} s more)"
    )
    print(
        f"  SDK CustomJob.run(), polling every 50 ms:      {med['sdk_fast']:.3f} s   "
        f"(server {med['sdk_fast_server']:.3f} s)"
    )
    print(
        f"  SDK CustomTrainingJob.run(), unchanged:       {med['pipeline']:.3f} s   "
        f"(server {med['pipeline_server']:.3f} s)"
    )
    print(
        f"  SDK CustomTrainingJob.run(), polling 50 ms:   {med['pipeline_fast']:.3f} s   "
        f"(server {med['pipeline_fast_server']:.3f} s)"
    )
    print(
        f"  ratio pipeline / v1: {report['pipeline_over_v1']:.2f};  "
        f"ratio pipeline at 50 ms / v1: {report['pipeline_fast_over_v1']:.3f}"
    )
    print(f"  ratio SDK / v1: {report['sdk_over_v1']:.2f};  ratio SDK at 50 ms / v1: {report['sdk_fast_over_v1']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
