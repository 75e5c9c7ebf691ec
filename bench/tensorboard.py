"""TensorBoard's first response after a cold start, through a real ``aiconsole up``.

TensorBoard's environment is built beforehand (warm, as on a console that served one before); each
round opens the TensorBoard of a job no TensorBoard serves yet, signed in as a browser is, and
times from the request to:

1. the first page (TensorBoard's ``index.html``, about 200 KB): the process started, listening,
   and the answer streamed through the console's proxy;
2. the scalars' tags (``data/plugin/scalars/tags``) listing both runs: TensorBoard has read the
   event files (it reads them in the background once it listens), polled every 50 ms.

Then the latency of a small data request to a running TensorBoard through the proxy (``data/runs``).
Each job holds ``--steps`` steps of 2 tags × train/validation. Medians over ``--rounds`` jobs.

Run: ``.venv/bin/python bench/tensorboard.py [--rounds 5] [--steps 1000]`` (about a minute).
"""

from __future__ import annotations

import argparse
import http.cookiejar
import json
import os
import statistics
import subprocess
import sys
import time
import urllib.parse
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import add_env_dir_flag, env_cache, say, scratch  # noqa: E402
from bench.run import Console  # noqa: E402

PROJECT = "default-project"


def seed(data_dir: Path, env_dir: Path, jobs: list[str], steps: int) -> float:
    """The jobs and their event files, as trainers leave them; TensorBoard's environment built.
    Returns the seconds the environment took (near 0 when it was cached)."""
    code = f"""
import json, os, time
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
from aiconsole import datadir; datadir.prepare()
import django; django.setup()
from django.conf import settings
from django.core.management import call_command
call_command("migrate", verbosity=0)
from tensorboard.compat.proto import event_pb2, summary_pb2
from tensorboard.summary.writer.event_file_writer import EventFileWriter
from aiconsole import trainer_user
from aiconsole.bootstrap import ensure_admin_and_project
from jobs.models import Job, JobState
from jobs.tensorboard.environment import tensorboard_environment

project = ensure_admin_and_project().project
for job_id in {jobs!r}:
    job_dir = settings.STORAGE_DIR / "jobs" / project.project_id / job_id
    for run in ("train", "validation"):
        writer = EventFileWriter(str(job_dir / run))
        for step in range({steps}):
            values = [summary_pb2.Summary.Value(tag="epoch_loss", simple_value=1.0 / (step + 1)),
                      summary_pb2.Summary.Value(tag="epoch_accuracy", simple_value=step / {steps})]
            writer.add_event(event_pb2.Event(step=step, wall_time=1.7e9 + step,
                                             summary=summary_pb2.Summary(value=values)))
        writer.close()
    trainer_user.give_job_dir(str(job_dir), project)
    Job.objects.create(project=project, job_id=job_id, state=JobState.SUCCEEDED,
                       training_input={{"jobDir": str(job_dir)}})
started = time.perf_counter()
tensorboard_environment()
print(json.dumps({{"environment": time.perf_counter() - started}}))
"""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
    env.update(
        {
            "AICONSOLE_DATA_DIR": str(data_dir),
            "AICONSOLE_ENV_DIR": str(env_dir),
            "AICONSOLE_ADMIN_PASSWORD": "bench-password-1",
        }
    )
    say(f"writing {len(jobs)} jobs' event files; TensorBoard's environment in {env_dir} (a first run builds it)")
    result = subprocess.run(
        [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800
    )
    if result.returncode != 0:
        raise SystemExit(f"seeding the jobs failed:\n{result.stderr[-3000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])["environment"]


def signed_in(base: str) -> urllib.request.OpenerDirector:
    jar = http.cookiejar.CookieJar()
    opener = urllib.request.build_opener(urllib.request.HTTPCookieProcessor(jar))
    page = opener.open(base + "/login/").read().decode()
    csrf = page.split('name="csrfmiddlewaretoken" value="', 1)[1].split('"', 1)[0]
    form = urllib.parse.urlencode(
        {"username": "admin", "password": "bench-password-1", "csrfmiddlewaretoken": csrf}
    ).encode()
    opener.open(urllib.request.Request(base + "/login/", data=form, headers={"Referer": base + "/login/"})).read()
    return opener


def cold_start(opener, base: str, job_id: str) -> tuple[float, float]:
    """Seconds to the first page, and to the tags of both runs."""
    prefix = f"{base}/projects/{PROJECT}/jobs/{job_id}/tensorboard/"
    started = time.perf_counter()
    page = opener.open(prefix, timeout=120).read()
    first_page = time.perf_counter() - started
    assert b"tensorboard" in page.lower(), page[:200]
    while True:
        tags = json.loads(opener.open(prefix + "data/plugin/scalars/tags", timeout=60).read())
        if set(tags) == {"train", "validation"}:
            return first_page, time.perf_counter() - started
        if time.perf_counter() - started > 120:
            raise SystemExit(f"TensorBoard did not read {job_id}'s event files in 120 s")
        time.sleep(0.05)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--steps", type=int, default=1000)
    add_env_dir_flag(parser)
    args = parser.parse_args()
    jobs = [f"tensorboard_{n}" for n in range(args.rounds)]
    with scratch("aiconsole-bench-tensorboard-") as folder:  # a root console's TensorBoard runs as another user
        data_dir = folder / "data"
        environment = seed(data_dir, env_cache(args.env_dir), jobs, args.steps)
        console = Console(data_dir, env_cache(args.env_dir), AICONSOLE_TENSORBOARD_MAX=str(args.rounds + 1))
        try:
            say(f"{args.rounds} cold starts, then 50 small requests")
            opener = signed_in(console.url)
            first, data = zip(*(cold_start(opener, console.url, job_id) for job_id in jobs), strict=True)
            runs = f"{console.url}/projects/{PROJECT}/jobs/{jobs[0]}/tensorboard/data/runs"
            warm = []
            for _ in range(50):
                started = time.perf_counter()
                opener.open(runs).read()
                warm.append(time.perf_counter() - started)
        finally:
            console.stop()
    print(
        f"TensorBoard behind the console, cold start with its environment built "
        f"(environment ready in {environment:.2f} s), {args.rounds} jobs of {args.steps:,} steps "
        "× 2 tags × train/validation, medians:"
    )
    print(
        f"  first page (index.html through the proxy): {statistics.median(first):.2f} s "
        f"(min {min(first):.2f}, max {max(first):.2f})"
    )
    print(f"  scalars' tags of both runs: {statistics.median(data):.2f} s (min {min(data):.2f}, max {max(data):.2f})")
    print(
        f"  then a small data request (data/runs) to the running TensorBoard: "
        f"{statistics.median(warm) * 1000:.1f} ms (p90 {sorted(warm)[int(0.9 * (len(warm) - 1))] * 1000:.1f} ms)"
    )


if __name__ == "__main__":
    main()
