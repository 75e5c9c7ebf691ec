"""Page performance in Chromium: the job list with 10,000 jobs, a job page with a 1,000,000-line log.

It starts its own ``aiconsole up`` (embedded mode) on a free port with a throw-away data dir,
fills the database directly with bulk inserts (one job through the API, then copies of its row;
the log lines with ``executemany``), signs in with Debian's Chromium (Playwright) and opens each
page several times. For each load it reads the browser's Navigation Timing: time to the first
byte, DOMContentLoaded, the load event and the first contentful paint, all from the start of
navigation. Medians are printed.

Run: ``.venv/bin/python bench/pages.py`` (``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import sqlite3
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from tests.browser import harness  # noqa: E402

TIMING = """() => {
  const n = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  return {ttfb: n.responseStart, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd,
          fcp: paint ? paint.startTime : null, rows: document.querySelectorAll("tbody tr").length};
}"""


def fill_jobs(db: Path, template_id: int, count: int) -> float:
    """``count`` SUCCEEDED copies of one job row, job ids bulk_00000 …"""
    started = time.perf_counter()
    with sqlite3.connect(db, timeout=60) as conn:
        columns = [row[1] for row in conn.execute("PRAGMA table_info(jobs_job)") if row[1] != "id"]
        select = ", ".join("?" if c in ("job_id", "state") else c for c in columns)
        sql = f"INSERT INTO jobs_job ({', '.join(columns)}) SELECT {select} FROM jobs_job WHERE id = ?"
        rows = []
        for n in range(count):
            values = [f"bulk_{n:05d}" if c == "job_id" else "SUCCEEDED" for c in columns if c in ("job_id", "state")]
            rows.append((*values, template_id))
        conn.executemany(sql, rows)
    return time.perf_counter() - started


def fill_log(db: Path, job_pk: int, lines: int) -> float:
    started = time.perf_counter()
    now = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%S.%f")
    with sqlite3.connect(db, timeout=60) as conn:
        conn.execute("PRAGMA synchronous=OFF")
        for chunk in range(0, lines, 200_000):
            rows = ((job_pk, "master-replica-0", "", n + 1, "stdout", "INFO",
                     f"step {n} loss=0.{n % 1000:03d} accuracy=0.9", now)
                    for n in range(chunk, min(lines, chunk + 200_000)))
            conn.executemany("INSERT INTO jobs_logline (job_id, task_name, trial_id, seq, stream, severity, "
                             "message, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
            conn.commit()
    return time.perf_counter() - started


def job_pk(db: Path, job_id: str) -> int:
    with sqlite3.connect(f"file:{db}?mode=ro", uri=True) as conn:
        return conn.execute("SELECT id FROM jobs_job WHERE job_id = ?", (job_id,)).fetchone()[0]


def measure(page, path: str, repeats: int) -> dict:
    samples = []
    for _ in range(repeats):
        page.goto(path, wait_until="load")
        samples.append(page.evaluate(TIMING))
    def med(values):
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    return {key: med(s[key] for s in samples) for key in ("ttfb", "dcl", "load", "fcp")} | {
        "rows": samples[-1]["rows"], "max_load": max(s["load"] for s in samples)}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--log-lines", type=int, default=1_000_000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    if harness.ensure_chromium() is None:
        raise SystemExit("needs /usr/bin/chromium (scripts/install-chromium)")
    from playwright.sync_api import sync_playwright

    with tempfile.TemporaryDirectory(prefix="aiconsole-bench-pages-") as scratch:
        console = harness.LiveConsole(Path(scratch) / "data")
        try:
            db = console.database
            # One job through the API, cancelled at once (nothing runs); its row is the template.
            console.submit("big_log", "gs://bench-bucket/trainer-0.1.tar.gz")
            console.call("POST", f"/v1/projects/{harness.PROJECT}/jobs/big_log:cancel", {})
            console.wait("big_log")
            jobs_s = fill_jobs(db, job_pk(db, "big_log"), args.jobs - 1)
            log_s = fill_log(db, job_pk(db, "big_log"), args.log_lines)
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
                page = browser.new_page(base_url=console.url, viewport={"width": 1280, "height": 900})
                page.goto("/login/")
                page.get_by_label("Username").fill("admin")
                page.get_by_label("Password").fill(harness.ADMIN_PASSWORD)
                page.get_by_role("button", name="Sign in").click()
                page.wait_for_url("**/jobs/")
                base = f"/projects/{harness.PROJECT}/jobs/"
                results = {
                    "job list": measure(page, base, args.repeats),
                    "job list, filtered to SUCCEEDED": measure(page, base + "?state=SUCCEEDED", args.repeats),
                    "job page, newest lines": measure(page, base + "big_log/", args.repeats),
                    "job page, oldest lines": measure(page, base + "big_log/?after=0", args.repeats),
                }
                browser.close()
        finally:
            console.stop()
    print(f"{args.jobs:,} jobs inserted in {jobs_s:.1f} s; {args.log_lines:,} log lines in {log_s:.1f} s")
    print(f"Chromium (headless), medians of {args.repeats} loads, ms from the start of navigation:")
    for name, r in results.items():
        fcp = f"{r['fcp']:.0f}" if r["fcp"] is not None else "—"
        print(f"  {name:34} first byte {r['ttfb']:6.0f}   first paint {fcp:>5}   DOMContentLoaded "
              f"{r['dcl']:6.0f}   load {r['load']:6.0f} (max {r['max_load']:.0f})   rows {r['rows']:,}")


if __name__ == "__main__":
    main()
