"""CPU time per request of the console's HTTP application, in-process: no HTTP, no client.

``time.process_time()`` around 1,000 calls of ``console.asgi.application`` (the predict front
before Django, as ``aiconsole up`` serves it): jobs.list page 1 of 20 over 20,000 jobs (Django and
DRF, since the jobs.list front is gone), and a bearer-token predict of a model with no version
(the front: authentication, the target read, the IAM check and the FAILED_PRECONDITION answer;
no serving process). A loaded machine disturbs this less than wall-clock latency, so it compares
two versions of the code fairly.

Run: ``.venv/bin/python bench/fronts_cpu.py DATA_DIR`` (an empty folder; reused on a second run;
under a minute).
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
import time
from pathlib import Path

# Not this folder first on the path: bench/tensorboard.py would hide the package of that name.
sys.path[0] = str(Path(__file__).resolve().parent.parent)
JOBS = 20_000
REQUESTS = 1_000


def prepare(data_dir: str, jobs: int = JOBS) -> str:
    """A migrated data dir with the jobs and a model without versions; a fresh admin token."""
    os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
    os.environ["AICONSOLE_DATA_DIR"] = data_dir
    os.environ.setdefault("AICONSOLE_SECRET_KEY", os.urandom(24).hex())
    os.environ["AICONSOLE_ADMIN_PASSWORD"] = "bench-password-1"
    import django

    django.setup()
    from django.contrib.auth import get_user_model
    from django.core.management import call_command

    call_command("migrate", verbosity=0)
    from aiconsole.bootstrap import ensure_admin_and_project
    from aiconsole.tokens import create_token
    from jobs.models import Job, JobState
    from models_registry.models import Model

    project = ensure_admin_and_project().project
    if not Job.objects.exists():
        spec = {
            "scaleTier": "BASIC",
            "packageUris": ["gs://b/t-0.1.tar.gz"],
            "pythonModule": "trainer.task",
            "region": "us-central1",
            "runtimeVersion": "2.11",
            "pythonVersion": "3.7",
        }
        Job.objects.bulk_create(
            [
                Job(
                    project=project,
                    job_id=f"job_{i:07d}",
                    training_input=spec,
                    state=JobState.SUCCEEDED,
                    labels={"team": "t"},
                    training_output={"consumedMLUnits": 0.39},
                )
                for i in range(jobs)
            ],
            batch_size=5000,
        )
    if not Model.objects.filter(name="census").exists():
        Model.objects.create(project=project, name="census")  # not the service: nothing warms up behind
    return create_token(get_user_model().objects.get(username="admin"))[1]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("data_dir", metavar="DATA_DIR", help="an empty folder (reused, as it is, on a second run)")
    parser.add_argument("--jobs", type=int, default=JOBS, help="jobs in the list (on a new data dir)")
    parser.add_argument("--requests", type=int, default=REQUESTS, help="requests timed per case and round")
    args = parser.parse_args()
    token = prepare(args.data_dir, args.jobs)
    from console.asgi import application as app

    def scope(method: str, path: str, query: bytes = b"") -> dict:
        return {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": method,
            "scheme": "http",
            "path": path,
            "raw_path": path.encode(),
            "query_string": query,
            "root_path": "",
            "headers": [(b"host", b"127.0.0.1:8000"), (b"authorization", f"Bearer {token}".encode())],
            "client": ("127.0.0.1", 5000),
            "server": ("127.0.0.1", 8000),
        }

    async def one(request: dict, body: bytes) -> int:
        sent, pending = [], [{"type": "http.request", "body": body, "more_body": False}]

        async def receive():
            if pending:
                return pending.pop()
            await asyncio.Event().wait()  # the client stays connected until it has its answer

        async def send(message):
            sent.append(message)

        await app(request, receive, send)
        return sent[0]["status"]

    async def measure(request: dict, body: bytes, expect: int) -> tuple[float, float]:
        for _ in range(50):
            assert await one(request, body) == expect
        cpu, wall = time.process_time(), time.perf_counter()
        for _ in range(args.requests):
            await one(request, body)
        return (time.process_time() - cpu) / args.requests * 1000, (time.perf_counter() - wall) / args.requests * 1000

    cases = [
        ("jobs.list page 1", scope("GET", "/v1/projects/default-project/jobs", b"pageSize=20"), b"", 200),
        (
            "predict, no version (auth, target, IAM; no serving)",
            scope("POST", "/v1/projects/default-project/models/census:predict"),
            b'{"instances": [[1]]}',
            400,
        ),
    ]
    print(f"load average {os.getloadavg()[0]:.2f}")
    for name, request, body, expect in cases:
        runs = [asyncio.run(measure(request, body, expect)) for _ in range(3)]
        print(f"{name}: CPU ms/request {[round(c, 3) for c, _ in runs]}, wall {[round(w, 3) for _, w in runs]}")


if __name__ == "__main__":
    main()
