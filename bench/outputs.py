"""The outputs browser: a job dir of 10,000 files, and a 100 MB CSV previewed beside a 1 KB one.

In one process with the console's settings on a throw-away data dir (SQLite, local storage), a job
whose job dir holds ``--files`` files is listed through the console's own URL, middleware, view
and template (Django's test client, signed in as the admin): the first page (200 entries, what the
Outputs tab and the page show first), a later page, and the listing service alone. Then a CSV of
``--csv-mb`` megabytes and one of 1 KB are previewed the same way: the preview reads the first
64 KiB of a file whatever its size, so the ratio of the two should stay near 1 (it would be about
the size ratio if the file were read whole). Times are server times (request in, response out),
medians of ``--repeats`` rounds, alternated.

Run: ``.venv/bin/python bench/outputs.py [--files 10000] [--csv-mb 100] [--repeats 15]`` (about a minute).
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

MEASURE = """
import json, os, statistics, sys, time
os.environ["DJANGO_SETTINGS_MODULE"] = "console.settings"
from aiconsole import datadir; datadir.prepare()
import django; django.setup()
from django.conf import settings
from django.core.management import call_command
call_command("migrate", verbosity=0)
settings.ALLOWED_HOSTS = ["*"]
from django.test import Client
from django.contrib.auth import get_user_model
from aiconsole.bootstrap import ensure_admin_and_project
from jobs.models import Job, JobState
from jobs.outputs import files

FILES, CSV_MB, REPEATS = {files}, {csv_mb}, {repeats}
made = ensure_admin_and_project()
project = made.project
admin = get_user_model().objects.get(username=made.username)
job_dir = settings.STORAGE_DIR / "job-dirs" / project.project_id / "outputs_bench"
many = job_dir / "many"
many.mkdir(parents=True, exist_ok=True)
for n in range(FILES):
    (many / f"checkpoint-{{n:06d}}.index").write_bytes(b"x" * (n % 97))
line = b"0.123456,0.654321,12345,abcdefgh,0.5,0.25,0.125,1\\n"
with open(job_dir / "big.csv", "wb") as handle:
    handle.write(b"a,b,c,d,e,f,g,h\\n")
    block = line * 2000
    while handle.tell() < CSV_MB * 1024 * 1024:
        handle.write(block)
(job_dir / "small.csv").write_bytes(b"a,b,c,d,e,f,g,h\\n" + line * 20)
job = Job.objects.create(project=project, job_id="outputs_bench", state=JobState.SUCCEEDED,
                         training_input={{"scaleTier": "BASIC", "jobDir": str(job_dir)}})
client = Client()
client.force_login(admin)
base = "/projects/" + project.project_id + "/jobs/outputs_bench/outputs/"

def timed(path, **headers):
    started = time.perf_counter()
    response = client.get(path, **headers)
    elapsed = time.perf_counter() - started
    assert response.status_code == 200, (path, response.status_code, response.content[-500:])
    return elapsed, response

_, first = timed(base + "?path=many")
body = first.content.decode()
assert body.count("data-entry=") == files.PAGE_ENTRIES or FILES < files.PAGE_ENTRIES, body.count("data-entry=")
after = "checkpoint-%06d.index" % min(FILES - 1, FILES // 2)
rounds = {{"page": [], "fragment": [], "later": [], "service": [], "big": [], "small": []}}
for _ in range(REPEATS):
    rounds["page"].append(timed(base + "?path=many")[0])
    rounds["fragment"].append(timed(base + "?path=many", HTTP_HX_REQUEST="true")[0])
    rounds["later"].append(timed(base + "?path=many&after=" + after)[0])
    started = time.perf_counter()
    files.list_folder(job, "many", actor=admin)
    rounds["service"].append(time.perf_counter() - started)
    rounds["big"].append(timed(base + "file/?path=big.csv")[0])
    rounds["small"].append(timed(base + "file/?path=small.csv")[0])
big = files.preview_file(job, "big.csv", actor=admin)
print(json.dumps({{
    "medians_ms": {{key: statistics.median(values) * 1000 for key, values in rounds.items()}},
    "csv_bytes": (job_dir / "big.csv").stat().st_size,
    "csv_bytes_read": big.bytes_read, "csv_rows": len(big.rows), "files": FILES,
}}))
"""


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--files", type=int, default=10_000, help="files in the listed folder (10,000)")
    parser.add_argument("--csv-mb", type=int, default=100, help="size of the large CSV in MB (100)")
    parser.add_argument("--repeats", type=int, default=15, help="rounds of each request (15)")
    args = parser.parse_args(argv)
    with scratch("aiconsole-bench-outputs-") as folder:
        env = {k: v for k, v in os.environ.items() if not k.startswith("AICONSOLE_")}
        env.update({"AICONSOLE_DATA_DIR": str(folder / "data"), "AICONSOLE_ADMIN_PASSWORD": "bench-password-1"})
        say(f"a job dir of {args.files:,} files and a {args.csv_mb} MB CSV; {args.repeats} rounds of each request")
        code = MEASURE.format(files=args.files, csv_mb=args.csv_mb, repeats=args.repeats)
        result = subprocess.run(
            [sys.executable, "-c", code], env=env, cwd=ROOT, capture_output=True, text=True, timeout=1800
        )
        if result.returncode != 0:
            raise SystemExit(f"the outputs benchmark failed:\n{result.stderr[-3000:]}")
        report = json.loads(result.stdout.strip().splitlines()[-1])
    ms = report["medians_ms"]
    say(f"outputs browser, a folder of {report['files']:,} files (server time, median):")
    print(f"  first page (200 entries), whole page     {ms['page']:8.1f} ms")
    print(f"  first page, the tab's fragment (htmx)    {ms['fragment']:8.1f} ms")
    print(f"  a later page (after=…)                   {ms['later']:8.1f} ms")
    print(f"  the listing service alone                {ms['service']:8.1f} ms")
    size_mb = report["csv_bytes"] / 1024 / 1024
    print(f"CSV preview, {size_mb:.0f} MB file: {ms['big']:.1f} ms; 1 KB file: {ms['small']:.1f} ms")
    print(f"  read {report['csv_bytes_read']:,} bytes of {report['csv_bytes']:,} for {report['csv_rows']} rows")
    print(f"csv preview, {size_mb:.0f} MB / 1 KB: {ms['big'] / ms['small']:.2f}")


if __name__ == "__main__":
    main()
