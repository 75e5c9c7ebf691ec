"""A Google pre-built PyTorch image built from nothing on this machine, then used again.

On one real ``aiconsole up`` with podman: any image built before for the recipe is removed, then a
job submits a real PyTorch trainer package as AI Platform's pre-built images were used
(``masterConfig.imageUri: gcr.io/cloud-ml-public/training/pytorch-cpu.1-13`` with
``packageUris``). The first job waits for the image to be built (Debian's python3-torch, 1.13.1
CPU, by mmdebstrap); a second job names it by Vertex's name and finds it built. Printed: the
build's time and the image's size (from the job's log), each job's submit → SUCCEEDED, and the
second over the first.

Run: ``.venv/bin/python bench/prebuilt.py [--image pytorch-cpu.1-13]`` (a few minutes; needs
podman, mmdebstrap and access to a Debian mirror and the package index).
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402
from bench.run import PROJECT, Console  # noqa: E402
from bench.support.packages import build_package  # noqa: E402

TRAINER = """\
import argparse, json, os, time
import torch

parser = argparse.ArgumentParser()
parser.add_argument("--steps", type=int, default=300)
parser.add_argument("--job-dir")
args = parser.parse_args()
torch.manual_seed(0)
x = torch.linspace(-1, 1, 256).unsqueeze(1)
y = 3 * x + 1
model = torch.nn.Linear(1, 1)
optimizer = torch.optim.SGD(model.parameters(), lr=0.1)
for step in range(args.steps):
    optimizer.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), y)
    loss.backward()
    optimizer.step()
print("torch", torch.__version__, "loss", float(loss), "weight", float(model.weight), "bias", float(model.bias))
os.makedirs(args.job_dir, exist_ok=True)
torch.save(model.state_dict(), os.path.join(args.job_dir, "model.pt"))
"""


def logs(console: Console, job_id: str) -> list[str]:
    found = console.call("GET", f"/v1/projects/{PROJECT}/jobs/{job_id}/logs?pageSize=1000")
    return [entry["message"] for entry in found["entries"]]


def run(console: Console, job_id: str, image: str, package: Path, job_dir: Path) -> float:
    started = time.monotonic()
    console.call(
        "POST",
        f"/v1/projects/{PROJECT}/jobs",
        {
            "jobId": job_id,
            "trainingInput": {
                "scaleTier": "BASIC",
                "region": "us-central1",
                "masterConfig": {"imageUri": image},
                "packageUris": [str(package)],
                "pythonModule": "trainer.task",
                "jobDir": str(job_dir),
            },
        },
    )
    console.wait(job_id, poll=0.2, timeout=3600)
    return time.monotonic() - started


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--image", default="pytorch-cpu.1-13", help="the pre-built image, family.M-m")
    add_env_dir_flag(parser)
    options = parser.parse_args()
    with scratch("aiconsole-bench-prebuilt-") as folder:
        data_dir = folder / "data"
        console = Console(data_dir, env_cache(options.env_dir))
        engine = {**os.environ, "CONTAINERS_CONF": str(data_dir / "containers" / "containers.conf")}
        try:
            old = subprocess.run(
                ["podman", "images", "--quiet", "--filter", f"label=ai-console.prebuilt={options.image}"],
                env=engine,
                capture_output=True,
                text=True,
            ).stdout.split()
            for image_id in dict.fromkeys(old):
                say(f"removing the {options.image} image built before ({image_id})")
                subprocess.run(["podman", "rmi", "--force", image_id], env=engine, capture_output=True)
            storage = data_dir / "storage"
            package = build_package(storage / "packages" / PROJECT / "torch", {"trainer/task.py": TRAINER})
            outputs = storage / "outputs" / PROJECT
            say(f"first job: {options.image} is built from nothing while it waits")
            first = run(
                console, "torch_first", f"gcr.io/cloud-ml-public/training/{options.image}", package, outputs / "a"
            )
            first_log = logs(console, "torch_first")
            say("second job: the image is built; Vertex's name for it")
            second = run(
                console,
                "torch_second",
                f"us-docker.pkg.dev/vertex-ai/training/{options.image}:latest",
                package,
                outputs / "b",
            )
            second_log = logs(console, "torch_second")
        finally:
            console.stop()
    built = next((line for line in first_log if line.startswith(f"Built {options.image} in ")), "")
    match = re.search(r"in (\d+) s \((\d+) MB\)", built)
    trained = next((line for line in second_log if line.startswith("torch ")), "(no training line)")
    print()
    print(f"{options.image} built from nothing: {match[1] if match else '?'} s, {match[2] if match else '?'} MB")
    print(f"  first job (build + install + train), submit → SUCCEEDED: {first:7.1f} s")
    print(f"  second job (image built),              submit → SUCCEEDED: {second:7.1f} s")
    print(f"  second / first: {second / first:.3f}")
    print(f"  the trainer said: {trained}")


if __name__ == "__main__":
    main()
