"""The Vertex AI SDK's ``CustomJob.run()`` to SUCCEEDED for a one-second trainer, beside the same
trainer as a v1 job, against a real ``aiconsole up`` on a free port.

Each round runs, in turn (the order rotating round by round, so drift hits all alike):

1. **v1**: ``POST /v1/projects/P/jobs``, then ``GET`` every 50 ms until SUCCEEDED (as bench/run.py).
2. **SDK**: ``aiplatform.CustomJob(...).run()``, unchanged: it polls the job every
   ``_JOB_WAIT_TIME`` seconds (5 in google-cloud-aiplatform).
3. **SDK at 50 ms**: the same call with the SDK's own polling interval set to the v1 client's 50 ms
   (a benchmark-only patch of ``google.cloud.aiplatform.jobs._JOB_WAIT_TIME``).

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
import statistics
import sys
import time
from datetime import datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

try:
    from google.cloud import aiplatform
    from google.cloud.aiplatform import jobs as sdk_jobs
except ImportError:  # the console's own install has no SDK: this bench runs a real notebook's client
    sys.exit("bench/vertex.py runs Google's Vertex AI SDK: .venv/bin/pip install google-cloud-aiplatform")
from google.oauth2.credentials import Credentials  # noqa: E402

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402
from bench.run import PROJECT, Console  # noqa: E402
from tests.helpers.jobs import build_package  # noqa: E402

TASK = """\
import time
time.sleep(1.0)
"""
IMAGE = "us-docker.pkg.dev/vertex-ai/training/tf-cpu.2-11.py310:latest"  # runtime 2.11, as the v1 jobs
SDK_INTERVAL = sdk_jobs._JOB_WAIT_TIME


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
    samples: dict[str, list[float]] = {"v1": [], "sdk": [], "sdk_fast": [], "sdk_server": [], "sdk_fast_server": []}
    with scratch("aiconsole-bench-vertex-") as folder:
        data_dir = folder / "data"
        console = Console(data_dir, env_cache(args.env_dir))
        try:
            storage = data_dir / "storage"
            package = build_package(storage / "vertex-pkg" / PROJECT, {"trainer/task.py": TASK})
            aiplatform.init(
                project=PROJECT,
                location="us-central1",
                api_endpoint=console.url,
                api_transport="rest",
                credentials=Credentials(token=console.token),
                staging_bucket="gs://unused-staging",
            )
            say("a first v1 job and a first SDK job build the job's environment (on a new machine the runtime too)")
            run_v1(console, package, "warmup_v1", storage)
            run_sdk(package, "warmup-sdk", storage, 0.05)
            runs = ("v1", "sdk", "sdk_fast")
            for index in range(args.rounds):
                order = runs[index % 3 :] + runs[: index % 3]
                say(f"round {index + 1} of {args.rounds}: {', '.join(order)}")
                for kind in order:
                    if kind == "v1":
                        samples["v1"].append(run_v1(console, package, f"v1_{index}", storage))
                    else:
                        interval = SDK_INTERVAL if kind == "sdk" else 0.05
                        wall, server = run_sdk(package, f"{kind.replace('_', '-')}-{index}", storage, interval)
                        samples[kind].append(wall)
                        samples[f"{kind}_server"].append(server)
        finally:
            sdk_jobs._JOB_WAIT_TIME = SDK_INTERVAL
            console.stop()
    med = {kind: statistics.median(values) for kind, values in samples.items()}
    report = {
        "rounds": args.rounds,
        "sdk_poll_interval_s": SDK_INTERVAL,
        **{f"{kind}_s": value for kind, value in med.items()},
        "sdk_over_v1": med["sdk"] / med["v1"],
        "sdk_fast_over_v1": med["sdk_fast"] / med["v1"],
        "sdk_client_wait_s": med["sdk"] - med["sdk_server"],
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
    print(f"  ratio SDK / v1: {report['sdk_over_v1']:.2f};  ratio SDK at 50 ms / v1: {report['sdk_fast_over_v1']:.3f}")
    if args.json:
        args.json.write_text(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
