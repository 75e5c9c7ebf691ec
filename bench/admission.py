"""How long admission takes to decide the next slot with many projects and a long line.

Seeds a scratch embedded database with ``--projects`` projects, ``--queued`` QUEUED jobs spread over
them (one in seven held back by its quota) and two running jobs each, then times, in one process, interleaved:

1. **fair**: what the executor does per slot (``jobs.executor.controller.Controller._admit``): read
   the line, what each project holds and their quotas, order them by the fair queue and decide the
   first job (its demand, its quota).
2. **first come**: the line's first job read and its demand, the rule before the fair queue.
3. **jobPosition**: a queued job's place in the fair line, computed afresh.

Reported: medians in ms and the ratio fair / first come (goal: fair ≤ 50 ms per slot at 20
projects and 10,000 queued jobs).

Run: ``.venv/bin/python bench/admission.py [--projects 20] [--queued 10000] [--repeats 15]``.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import say, scratch  # noqa: E402

CHILD = """
import json, os, statistics, sys, time
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
import django; django.setup()
from django.core.management import call_command
call_command("migrate", verbosity=0)
from django.db import connection
from aiconsole.models import Project
from jobs.models import Job, JobState, ProjectQuota
from jobs.quotas import admission as quotas

projects_count, queued_count, repeats = (int(a) for a in sys.argv[1:4])
ti = {"scaleTier": "BASIC", "packageUris": ["gs://b/trainer-0.1.tar.gz"], "pythonModule": "trainer.task",
      "region": "us-central1", "runtimeVersion": "2.11", "pythonVersion": "3.7"}
projects = Project.objects.bulk_create([Project(project_id=f"team-{i:02d}") for i in range(projects_count)])
projects = list(Project.objects.filter(project_id__startswith="team-").order_by("pk"))
running = [Job(project=p, job_id=f"run_{p.pk}_{k}", training_input=ti, state=JobState.RUNNING)
           for p in projects for k in range(2)]
Job.objects.bulk_create(running)
batch = []
for i in range(queued_count):
    batch.append(Job(project=projects[i % len(projects)], job_id=f"q_{i:06d}", training_input=ti,
                     state=JobState.QUEUED, priority=i % 3))
    if len(batch) == 5000:
        Job.objects.bulk_create(batch); batch = []
Job.objects.bulk_create(batch)
for p in projects[: len(projects) // 7]:  # one in seven is held back by its quota
    ProjectQuota.objects.create(project=p, metric="REPLICAS", limit=2)

def fair():
    queued = quotas.waiting_line(per_project=21)  # as the executor reads it
    usage = quotas.running_usage()
    limits = quotas.quotas_of({j.project_id for j in queued})
    order = quotas.fair_order(queued, usage, quotas.console_capacity())
    job = next(order, None)
    while job is not None and quotas.blocking_quota(job, quotas.demand(job), usage, limits.get(job.project_id, [])):
        try:
            job = order.send(quotas.WAITS)
        except StopIteration:
            job = None
    return job

def first_come():
    job = Job.objects.queued_in_order().only("pk", "training_input", "prediction_input").first()
    quotas.demand(job)
    return job

probe = Job.objects.filter(state=JobState.QUEUED).order_by("-pk").first()

def position():
    quotas._line_cache.clear()
    return quotas.position(probe)

samples = {"fair": [], "first_come": [], "position": []}
for _ in range(repeats):
    for name, call in (("fair", fair), ("first_come", first_come), ("position", position)):
        started = time.perf_counter()
        call()
        samples[name].append((time.perf_counter() - started) * 1000)
print(json.dumps({name: statistics.median(values) for name, values in samples.items()}))
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--projects", type=int, default=20, help="projects with queued jobs (default 20)")
    parser.add_argument("--queued", type=int, default=10_000, help="queued jobs in all (default 10,000)")
    parser.add_argument("--repeats", type=int, default=15, help="timed decisions of each kind (default 15)")
    parser.add_argument("--json", type=Path, help="also write the results here")
    args = parser.parse_args()
    if args.projects < 1 or args.queued < args.projects or args.repeats < 1:
        parser.error("--projects ≥ 1, --queued ≥ --projects, --repeats ≥ 1")
    with scratch("aiconsole-bench-admission-") as folder:
        env = {
            **{k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")},
            "AICONSOLE_DATA_DIR": str(folder / "data"),
            "AICONSOLE_SECRET_KEY": os.urandom(24).hex(),
            "AICONSOLE_MAX_REPLICAS": "8",
        }
        (folder / "data").mkdir()
        say(f"seeding {args.projects} projects and {args.queued:,} queued jobs, then timing {args.repeats} decisions")
        done = subprocess.run(
            [sys.executable, "-c", CHILD, str(args.projects), str(args.queued), str(args.repeats)],
            env=env,
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=1800,
        )
        if done.returncode != 0:
            raise SystemExit(f"the timed process failed:\n{done.stderr[-3000:]}")
        result = json.loads(done.stdout.strip().splitlines()[-1])
    result["fair_over_first_come"] = result["fair"] / result["first_come"]
    print(f"Admission with {args.projects} projects and {args.queued:,} queued jobs (medians of {args.repeats}):")
    print(f"  fair queue, deciding the next slot:   {result['fair']:.1f} ms   (goal ≤ 50 ms)")
    print(f"  first come, deciding the next slot:   {result['first_come']:.1f} ms")
    print(f"  a queued job's jobPosition, afresh:   {result['position']:.1f} ms")
    print(f"  ratio fair / first come: {result['fair_over_first_come']:.1f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
