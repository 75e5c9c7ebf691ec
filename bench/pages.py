"""Page performance in Chromium: the job list with 10,000 jobs, a job page with a 1,000,000-line log,
a finished tuning study's page with 2,000 trials, the compare page with 20 jobs of 10,000 metric
points each (and with 2 of them, for the ratio), and a metric chart of 20 runs of 10,000 points
redrawn by its controls (smoothing, log y axis) beside its first draw.

It starts its own ``aiconsole up`` (embedded mode) on a free port with a throw-away data dir,
fills the database directly with bulk inserts (one job through the API, then copies of its row;
the log lines with ``executemany``; the study's Trial rows through the ORM, on the same SQLite
file), signs in with Debian's Chromium (Playwright) and opens each page several times. For each
load it reads the browser's Navigation Timing: time to the first byte, DOMContentLoaded, the load
event and the first contentful paint, all from the start of navigation. On the study page (which
opens on its trial table, its charts in a Charts tab) it also measures what the user lives through
while the page settles: the main thread's time in long tasks (over 50 ms: the page answers no input
while one runs) up to the load event and in the 5 s after it, and the longest; a re-sort of the
trial table clicked 500 ms after the load event, click to painted; once the page is at rest, a
re-sort and a range filter, and a click on the Charts tab until every chart is drawn (each chart's
plot has its SVG, Plotly's or the parallel coordinates' own, or the chart is a note with nothing to
draw, checked on every animation frame). Medians are printed.

With ``--baseline DIR`` (another checkout, say ``git worktree add /tmp/base main``) the study page is
measured on a second console running that checkout's code, with the same trials copied into its
database, each round loading both consoles' pages in turn: a change's before and after, side by side
on one run's machine (a shared machine's load moves the numbers more than most changes do).

Run: ``.venv/bin/python bench/pages.py`` (several minutes; ``--help`` for sizes).
"""

from __future__ import annotations

import argparse
import json
import os
import sqlite3
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.common import say, scratch  # noqa: E402
from bench.support import harness  # noqa: E402
from bench.tuning import STUDY_SPEC, study_trials  # noqa: E402  (the study bench/tuning.py's page() measures)

TIMING = """() => {
  const n = performance.getEntriesByType("navigation")[0];
  const paint = performance.getEntriesByName("first-contentful-paint")[0];
  return {ttfb: n.responseStart, dcl: n.domContentLoadedEventEnd, load: n.loadEventEnd,
          fcp: paint ? paint.startTime : null, rows: document.querySelectorAll("tbody tr").length};
}"""


# A chart's plot drawn: Plotly's traces, or the parallel coordinates' SVG (static/parallel.js); a
# baseline from before that drew them with Plotly's WebGL parcoords, the .parcoords element Plotly adds.
DRAWN = ".js-plotly-plot .trace, .js-plotly-plot .parcoords, .parallel-plot[data-drawn]"

# Installed before every page load: records the main thread's long tasks from the start of navigation
# (when and how long), and checks on each animation frame (so only once the main thread is free to
# paint) whether the study's charts are all drawn, wherever the page draws them.
CHARTS_PROBE = """(() => {
  const DRAWN = $DRAWN;
  window.__chartsDrawn = null;
  window.__longTasks = [];
  try {
    new PerformanceObserver((list) => {
      for (const entry of list.getEntries()) window.__longTasks.push({start: entry.startTime, ms: entry.duration});
    }).observe({type: "longtask", buffered: true});
  } catch (error) {}
  // A chart with a plot is drawn once Plotly drew its traces (.plotly-graph-div; a console before
  // static/parallel.js drew its parallel coordinates with Plotly too) or static/parallel.js its SVG
  // (.parallel-plot); one without (a note: too few trials for importance) has nothing to draw.
  const drawn = (figure) => figure.querySelector(".plotly-graph-div, .parallel-plot") === null
    || figure.querySelector(DRAWN) !== null;
  window.__allChartsDrawn = () => {
    const figures = [...document.querySelectorAll("#study-charts figure.chart")];
    return figures.length >= (window.__chartsExpected || 1) && figures.every(drawn);
  };
  // The charts wait, unseen, for their tab to be shown (not fetched yet, nor being fetched).
  const unseen = () => document.querySelector("[hidden] #study-charts[aria-busy]:not(.htmx-request)") !== null;
  // Checked no longer while the charts wait, unseen, for their tab (a frame callback on every frame
  // would cost that page's table what the other's does not), and again once a tab is shown.
  let waiting = false;
  const check = () => {
    if (window.__allChartsDrawn()) window.__chartsDrawn = performance.now();
    else if (unseen()) waiting = true;
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
  document.addEventListener("tab:shown", () => {
    if (waiting) requestAnimationFrame(check);
    waiting = false;
  });
  // At rest: loaded, no request of the page's in flight, and its charts drawn or waiting, unseen, for
  // their tab (a page that fetches them when their tab is first shown).
  window.__atRest = () => document.readyState === "complete" && !document.querySelector(".htmx-request")
    && (window.__chartsDrawn !== null || unseen());
})()""".replace("$DRAWN", json.dumps(DRAWN))

# The first seconds of a load: the main thread's time in long tasks and the longest, up to the load
# event and in the ``after`` ms after it (a task running at its end counted up to it).
FIRST_SECONDS = """async (after) => {
  const load = performance.getEntriesByType("navigation")[0].loadEventEnd;
  const end = load + after;
  await new Promise((resolve) => setTimeout(resolve, Math.max(0, end - performance.now())));
  await new Promise((resolve) => setTimeout(resolve, 0));  // the observer's last entries
  const within = (from, to) => window.__longTasks.filter((t) => t.start < to && t.start + t.ms > from)
    .map((t) => Math.min(t.start + t.ms, to) - Math.max(t.start, from));
  const sum = (values) => values.reduce((total, v) => total + v, 0);
  const before = within(0, load), after_ = within(load, end);
  return {busy_to_load: sum(before), busy_after: sum(after_), longest_after: Math.max(0, ...after_),
          longest: Math.max(0, ...before, ...after_)};
}"""

STUDY_TIMING = """() => ({
  figures: document.querySelectorAll("#study-charts figure.chart").length,
  tables: document.querySelectorAll("#study-charts figure.chart details table").length,
  html_kb: performance.getEntriesByType("navigation")[0].decodedBodySize / 1024,
  fragments_kb: performance.getEntriesByType("resource").filter((r) => r.name.includes("/fragments/charts/"))
    .reduce((sum, r) => sum + r.decodedBodySize / 1024, 0),
})"""

# The page at rest: a click on the Charts tab until every chart in it is drawn (at once where they
# were drawn with the page), and the longest task meanwhile; and until the charts of the first screen
# (those whose top is inside the window) are.
CHARTS_TAB = """async () => {
  const DRAWN = $DRAWN;
  const start = performance.now();
  let firstScreen = null;
  document.getElementById("tab-charts").click();
  const seen = () => [...document.querySelectorAll("#study-charts figure.chart")]
    .filter((figure) => figure.getBoundingClientRect().top < innerHeight);
  const drawnHere = (figure) => figure.querySelector(".plotly-graph-div, .parallel-plot") === null
    || figure.querySelector(DRAWN) !== null;
  await new Promise((resolve) => {
    const check = () => {
      const shown = seen();
      if (firstScreen === null && shown.length && shown.every(drawnHere)) firstScreen = performance.now() - start;
      if (window.__allChartsDrawn()) resolve();
      else requestAnimationFrame(check);
    };
    check();
  });
  const ms = performance.now() - start;
  await new Promise((resolve) => setTimeout(resolve, 0));  // the observer's last entries
  const tasks = window.__longTasks.filter((t) => t.start + t.ms > start).map((t) => t.ms);
  return {tab_ms: ms, first_screen_ms: firstScreen === null ? ms : firstScreen, tab_longest: Math.max(0, ...tasks)};
}""".replace("$DRAWN", json.dumps(DRAWN))


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
            rows = (
                (
                    job_pk,
                    "master-replica-0",
                    "",
                    n + 1,
                    "stdout",
                    "INFO",
                    f"step {n} loss=0.{n % 1000:03d} accuracy=0.9",
                    now,
                )
                for n in range(chunk, min(lines, chunk + 200_000))
            )
            conn.executemany(
                "INSERT INTO jobs_logline (job_id, task_name, trial_id, seq, stream, severity, "
                "message, time) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.commit()
    return time.perf_counter() - started


def fill_study(console, job_id: str, count: int) -> float:
    """``count`` finished trials of the study ``job_id`` (submitted through the API, stopped at once),
    made as bench/tuning.py's page() makes them: 10 reports each, every 25th FAILED with an error;
    then the job SUCCEEDED with its trainingOutput, as the executor would leave it."""
    started = time.perf_counter()
    for name in [n for n in os.environ if n.startswith("AICONSOLE_")]:
        del os.environ[name]
    os.environ["AICONSOLE_DATA_DIR"] = str(console.data_dir)  # the server's own SQLite file
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "console.settings")
    import django

    from aiconsole import datadir

    datadir.prepare()
    django.setup()
    from jobs.executor.trials import training_output
    from jobs.models import Job, JobState, Trial

    job = Job.objects.get(job_id=job_id)
    job.trials.all().delete()
    Trial.objects.bulk_create(study_trials(job, count), batch_size=500)
    spec = job.training_input["hyperparameters"]
    Job.objects.filter(pk=job.pk).update(
        state=JobState.SUCCEEDED, error_message="", training_output=training_output(job, spec)
    )
    return time.perf_counter() - started


def copy_study(source: Path, target: Path, job_id: str) -> None:
    """The study ``job_id``'s trials and output copied from one console's database into another's
    (``--baseline``: the same job submitted there), so both consoles measure the same study."""
    with sqlite3.connect(target, timeout=60) as conn:
        conn.execute("ATTACH DATABASE ? AS source", (str(source),))
        pk = conn.execute("SELECT id FROM jobs_job WHERE job_id = ?", (job_id,)).fetchone()[0]
        from_pk = conn.execute("SELECT id FROM source.jobs_job WHERE job_id = ?", (job_id,)).fetchone()[0]
        # The target's columns: a baseline older than this checkout may have fewer.
        names = ", ".join(
            row[1] for row in conn.execute("PRAGMA main.table_info(jobs_trial)") if row[1] not in ("id", "job_id")
        )
        conn.execute("DELETE FROM jobs_trial WHERE job_id = ?", (pk,))
        conn.execute(
            f"INSERT INTO jobs_trial (job_id, {names}) SELECT ?, {names} FROM source.jobs_trial WHERE job_id = ?",
            (pk, from_pk),
        )
        conn.execute(
            "UPDATE jobs_job SET state = 'SUCCEEDED', error_message = '', "
            "training_output = (SELECT training_output FROM source.jobs_job WHERE id = ?) WHERE id = ?",
            (from_pk, pk),
        )
        conn.commit()
        conn.execute("DETACH DATABASE source")


def fill_compare(db: Path, template_id: int, jobs: int, points: int) -> tuple[float, list[str]]:
    """``jobs`` SUCCEEDED copies of one job row (cmp_00 …, each with its own ``--lr``) and
    ``points`` metric points each: loss and accuracy × train and validation, evenly split."""
    started = time.perf_counter()
    steps = max(1, points // 4)
    ids = [f"cmp_{n:02d}" for n in range(jobs)]
    with sqlite3.connect(db, timeout=60) as conn:
        conn.execute("PRAGMA synchronous=OFF")
        columns = [row[1] for row in conn.execute("PRAGMA table_info(jobs_job)") if row[1] != "id"]
        select = ", ".join("?" if c in ("job_id", "state") else c for c in columns)
        sql = f"INSERT INTO jobs_job ({', '.join(columns)}) SELECT {select} FROM jobs_job WHERE id = ?"
        values = {"job_id": None, "state": "SUCCEEDED"}
        for n, job_id in enumerate(ids):
            values["job_id"] = job_id
            conn.execute(sql, (*[values[c] for c in columns if c in values], template_id))
            pk = conn.execute("SELECT id FROM jobs_job WHERE job_id = ?", (job_id,)).fetchone()[0]
            conn.execute(
                "UPDATE jobs_job SET training_input = json_set(training_input, '$.args', "
                "json_array('--lr', ?, '--epochs', '10')) WHERE id = ?",
                (f"{0.001 * (n + 1):g}", pk),
            )
            lr = 0.001 * (n + 1)
            rows = (
                (
                    pk,
                    "",
                    "tfevents",
                    run,
                    tag,
                    step,
                    (1 / (1 + lr * step) if tag == "loss" else 1 - 1 / (1 + lr * step))
                    + (0.05 if run == "validation" else 0),
                    1_700_000_000.0 + step,
                )
                for step in range(steps)
                for tag in ("loss", "accuracy")
                for run in ("train", "validation")
            )
            conn.executemany(
                "INSERT INTO jobs_metricpoint (job_id, trial_id, source, run, tag, step, value, wall_time) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                rows,
            )
            conn.commit()
    return time.perf_counter() - started, ids


# Installed before each load of the compare page: when every chart on it is drawn (as CHARTS_PROBE).
COMPARE_PROBE = """(() => {
  const DRAWN = $DRAWN;
  window.__chartsDrawn = null;
  const drawn = (figure) => figure.querySelector(DRAWN) !== null;
  const check = () => {
    const figures = [...document.querySelectorAll("#compare-curves figure.chart, #compare-parallel figure.chart")];
    if (figures.length && figures.every(drawn)) window.__chartsDrawn = performance.now();
    else requestAnimationFrame(check);
  };
  requestAnimationFrame(check);
})()""".replace("$DRAWN", json.dumps(DRAWN))


def fill_curves(db: Path, template_id: int, runs: int, points: int) -> float:
    """A SUCCEEDED copy of one job row, ``curves``, with ``runs`` runs of ``points`` loss points each."""
    started = time.perf_counter()
    with sqlite3.connect(db, timeout=60) as conn:
        conn.execute("PRAGMA synchronous=OFF")
        columns = [row[1] for row in conn.execute("PRAGMA table_info(jobs_job)") if row[1] != "id"]
        select = ", ".join("?" if c in ("job_id", "state") else c for c in columns)
        sql = f"INSERT INTO jobs_job ({', '.join(columns)}) SELECT {select} FROM jobs_job WHERE id = ?"
        values = {"job_id": "curves", "state": "SUCCEEDED"}
        conn.execute(sql, (*[values[c] for c in columns if c in values], template_id))
        pk = conn.execute("SELECT id FROM jobs_job WHERE job_id = 'curves'").fetchone()[0]
        for run in range(runs):
            conn.executemany(
                "INSERT INTO jobs_metricpoint (job_id, trial_id, source, run, tag, step, value, wall_time) "
                "VALUES (?, '', 'tfevents', ?, 'loss', ?, ?, ?)",
                (
                    (
                        pk,
                        f"run{run:02d}",
                        step,
                        1 / (1 + 0.001 * (run + 1) * step) + 0.05 * ((step * 7919) % 13) / 13,
                        1_700_000_000.0 + step,
                    )
                    for step in range(points)
                ),
            )
            conn.commit()
    return time.perf_counter() - started


# Run on the job page once its metric chart is drawn: the first draw again (from the figure's JSON,
# as the page draws it), then each control turned on and off, every call timed with performance.now()
# until Plotly's promise resolves; medians of ``repeats`` rounds.
CONTROLS_TIMING = """async (repeats) => {
  const graph = document.querySelector("figure.metric-chart .js-plotly-plot");
  const figure = graph.previousElementSibling.textContent;
  const charts = window.aiconsoleCharts;
  const timed = async (call) => { const start = performance.now(); await call(); return performance.now() - start; };
  const samples = {first: [], smooth: [], unsmooth: [], log: [], unlog: []};
  for (let i = 0; i < repeats; i++) {
    samples.first.push(await timed(() => { Plotly.purge(graph); return charts.draw(graph, JSON.parse(figure)); }));
    samples.smooth.push(await timed(() => charts.setControls({smooth: 0.6})));
    samples.unsmooth.push(await timed(() => charts.setControls({smooth: 0})));
    samples.log.push(await timed(() => charts.setControls({ylog: true})));
    samples.unlog.push(await timed(() => charts.setControls({ylog: false})));
  }
  const median = (values) => values.sort((a, b) => a - b)[Math.floor(values.length / 2)];
  const result = Object.fromEntries(Object.entries(samples).map(([key, values]) => [key, median(values)]));
  // The fastest round too: on a shared machine the median says as much about the neighbours.
  Object.entries(samples).forEach(([key, values]) => { result[key + "_min"] = Math.min(...values); });
  result.points = graph.data.reduce((sum, trace) => sum + trace.y.length, 0);
  result.traces = graph.data.length;
  return result;
}"""


def measure_controls(page, path: str, repeats: int) -> dict:
    page.goto(path, wait_until="load")
    page.wait_for_function(
        "document.querySelector('figure.metric-chart .js-plotly-plot .scatterlayer .trace') !== null", timeout=180_000
    )
    return page.evaluate(CONTROLS_TIMING, repeats)


def server_time(console, path: str, cookies: dict, repeats: int, headers: dict | None = None) -> float:
    """Median seconds for the whole HTML of ``path``, fetched outside the browser (no drawing)."""
    import requests

    samples = []
    for _ in range(repeats):
        started = time.perf_counter()
        answer = requests.get(console.url + path, cookies=cookies, timeout=120, headers=headers)
        answer.raise_for_status()
        samples.append(time.perf_counter() - started)
    return statistics.median(samples)


def measure_compare(page, path: str, repeats: int) -> dict:
    samples = []
    for _ in range(repeats):
        page.goto(path, wait_until="load")
        page.wait_for_function("window.__chartsDrawn !== null", timeout=180_000)
        samples.append(
            page.evaluate(TIMING)
            | page.evaluate(
                "() => ({charts: window.__chartsDrawn, figures: document.querySelectorAll('figure.chart').length,"
                " html_kb: performance.getEntriesByType('navigation')[0].decodedBodySize / 1024})"
            )
        )
    return {
        key: statistics.median(s[key] for s in samples if s[key] is not None)
        for key in ("ttfb", "dcl", "load", "fcp", "charts", "html_kb")
    } | {"figures": samples[-1]["figures"]}


def fill_final_metrics(db: Path) -> float:
    """Every job's final accuracy and loss (the summary the jobs list sorts by), as inserting their
    points would leave them: accuracy spread over [0, 1) by the job's id, loss its complement."""
    started = time.perf_counter()
    with sqlite3.connect(db, timeout=60) as conn:
        conn.execute("PRAGMA synchronous=OFF")
        for name, value in (
            ("accuracy", "(id * 7919 % 10007) / 10007.0"),
            ("loss", "1 - (id * 7919 % 10007) / 10007.0"),
        ):
            conn.execute(
                f"INSERT INTO jobs_jobmetric (job_id, name, step, value) SELECT id, ?, 100, {value} FROM jobs_job",
                (name,),
            )
    return time.perf_counter() - started


RUNS_TABLE = "?col=metric%3Aaccuracy&col=metric%3Aloss&sort=-metric%3Aaccuracy"  # two metric columns, by one


def stop_at_once(console, job_id: str) -> None:
    """Cancel a job that is not to run (its package does not exist: it may have failed already)."""
    try:
        console.call("POST", f"/v1/projects/{harness.PROJECT}/jobs/{job_id}:cancel", {})
    except RuntimeError:
        pass
    console.wait(job_id)


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
        "rows": samples[-1]["rows"],
        "max_load": max(s["load"] for s in samples),
    }


# On the study page: a click on a column heading (a re-sort) or a range typed into the filters, each
# timed from the input to the new table painted (the htmx:afterSettle that brings it, then the next
# frame). ``at`` (ms after the load event): the moment the user clicks; the time runs from then, also
# when the main thread was busy and the click had to wait for it.
TABLE_TIMING = """async (action) => {
  const old = document.getElementById("trial-table");
  const load = performance.getEntriesByType("navigation")[0].loadEventEnd;
  if (action.at !== undefined) {
    await new Promise((resolve) => setTimeout(resolve, Math.max(0, load + action.at - performance.now())));
  }
  const start = action.at !== undefined ? Math.min(performance.now(), load + action.at) : performance.now();
  const settled = new Promise((resolve) => document.addEventListener("htmx:afterSettle", function done() {
    if (document.getElementById("trial-table") === old) return;  // another part's swap (the charts)
    document.removeEventListener("htmx:afterSettle", done);
    resolve();
  }));
  if (action.sort) document.querySelector(`#trial-table [data-sort-key="${action.sort}"]`).click();
  else {
    const input = document.querySelector(`#trial-filters input[name="${action.name}"]`);
    input.value = action.value;
    input.dispatchEvent(new Event("change", {bubbles: true}));
  }
  await settled;
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  return {ms: performance.now() - start, rows: document.querySelectorAll("#trial-table tbody tr").length};
}"""

EARLY_CLICK_MS = 500  # a re-sort clicked this long after the load event
FIRST_SECONDS_MS = 5000  # the window after the load event whose long tasks are counted


def measure_study(page, console, path: str) -> dict:
    """One round on the study page: the trial table's fragment and the whole page on the server
    (outside the browser); a load, its first seconds, then at rest a re-sort, a range filter and the
    Charts tab opened; another load, and a re-sort clicked ``EARLY_CLICK_MS`` after its load event."""
    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
    fragment = server_time(
        console, path + "fragments/trials/?trial_sort=-p.learning_rate", cookies, 1, {"HX-Request": "true"}
    )
    whole = server_time(console, path, cookies, 1)
    page.goto(path, wait_until="load")
    result = page.evaluate(TIMING) | page.evaluate(FIRST_SECONDS, FIRST_SECONDS_MS)
    page.wait_for_function("window.__atRest()", timeout=180_000)
    result["charts_at_load"] = page.evaluate("window.__chartsDrawn")  # None: they wait for their tab
    result["resort"] = page.evaluate(TABLE_TIMING, {"sort": "p.layers"})["ms"]
    filtered = page.evaluate(TABLE_TIMING, {"name": "min.p.layers", "value": "5"})
    result |= {"filter": filtered["ms"], "filtered_rows": filtered["rows"]}
    result |= page.evaluate(CHARTS_TAB) | page.evaluate(STUDY_TIMING)
    page.goto(path, wait_until="load")
    result["early_resort"] = page.evaluate(TABLE_TIMING, {"sort": "p.layers", "at": EARLY_CLICK_MS})["ms"]
    return result | {"fragment": fragment, "page": whole}


def measure_study_rounds(targets: dict, path: str, repeats: int) -> dict[str, dict]:
    """``measure_study`` on each target (name → (page, console)), one round of each in turn, the order
    turned round by round; medians over the rounds (of those that measured it: charts drawn with the
    page, a first paint)."""
    rounds: dict[str, list[dict]] = {name: [] for name in targets}
    for n in range(repeats):
        for name, (page, live) in list(targets.items())[:: 1 if n % 2 == 0 else -1]:
            rounds[name].append(measure_study(page, live, path))
    last = ("figures", "tables", "filtered_rows")

    def median(values) -> float | None:
        values = [v for v in values if v is not None]
        return statistics.median(values) if values else None

    summary = {}
    for name, samples in rounds.items():
        summary[name] = {
            key: samples[-1][key] if key in last else median(s[key] for s in samples) for key in samples[0]
        }
        summary[name]["max_early_resort"] = max(s["early_resort"] for s in samples)
    return summary


def signed_in_page(browser, console):
    page = browser.new_page(base_url=console.url, viewport={"width": 1280, "height": 900})
    page.goto("/login/")
    page.get_by_label("Username").fill("admin")
    page.get_by_label("Password").fill(harness.ADMIN_PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    page.wait_for_url("**/jobs/")
    return page


def print_study(label: str, r: dict, loads: int) -> None:
    drawn = f"{r['charts_at_load']:.0f}" if r["charts_at_load"] is not None else "not drawn (their tab is not shown)"
    fcp = f"{r['fcp']:.0f}" if r["fcp"] is not None else "—"  # Chromium reports none for some loads
    print(
        f"  {label} ({loads} rounds): first byte "
        f"{r['ttfb']:.0f}   first paint {fcp}   DOMContentLoaded {r['dcl']:.0f}   load {r['load']:.0f}"
        f"   all {r['figures']} charts drawn with the page: {drawn}"
    )
    print(
        f"  {'':34} main thread in long tasks: {r['busy_to_load']:.0f} to load, {r['busy_after']:.0f} in the "
        f"{FIRST_SECONDS_MS / 1000:.0f} s after it (longest {r['longest_after']:.0f}; longest from navigation "
        f"{r['longest']:.0f})"
    )
    print(
        f"  {'':34} a re-sort clicked {EARLY_CLICK_MS} ms after load, click to painted: {r['early_resort']:.0f} "
        f"(max {r['max_early_resort']:.0f})"
    )
    print(
        f"  {'':34} at rest: Charts tab clicked to the first screen's charts drawn {r['first_screen_ms']:.0f}, "
        f"to all charts drawn {r['tab_ms']:.0f} (longest task {r['tab_longest']:.0f})"
        f"\n  {'':34} HTML {r['html_kb']:,.0f} kB + fragments {r['fragments_kb']:,.0f} kB   data tables {r['tables']}"
    )
    print(
        f"  {'':34} trial table sorted by a parameter: server {1000 * r['fragment']:.0f} ms (whole page "
        f"{1000 * r['page']:.0f} ms, ratio {r['fragment'] / r['page']:.2f});  at rest in the browser, input to "
        f"painted: re-sort {r['resort']:.0f} ms, range filter {r['filter']:.0f} ms ({r['filtered_rows']:,} rows left)"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--jobs", type=int, default=10_000)
    parser.add_argument("--log-lines", type=int, default=1_000_000)
    parser.add_argument("--study-trials", type=int, default=2000)
    parser.add_argument(
        "--study-charts",
        type=int,
        default=9,
        help="charts the study page shows (history, parallel coordinates, 4 slices, contour, "
        "learning curves, importance): all drawn is when this many are",
    )
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--study-repeats", type=int, default=None, help="loads of the study page (default: --repeats)")
    parser.add_argument("--compare-jobs", type=int, default=20, help="jobs on the compare page (at most 20)")
    parser.add_argument("--compare-points", type=int, default=10_000, help="metric points of each compared job")
    parser.add_argument("--curve-runs", type=int, default=20, help="runs in the chart whose controls are timed")
    parser.add_argument("--curve-points", type=int, default=10_000, help="points of each of those runs")
    parser.add_argument(
        "--baseline",
        type=Path,
        help="another checkout of the console: its study page is measured beside this one's, "
        "the loads interleaved (before and after a change in one run)",
    )
    parser.add_argument(
        "--skip",
        choices=["jobs", "log", "study", "compare", "controls"],
        action="append",
        default=[],
        help="leave a page out (repeatable)",
    )
    args = parser.parse_args()
    if harness.ensure_chromium() is None:
        raise SystemExit("needs /usr/bin/chromium (scripts/install-chromium)")
    from bench.support.needs_playwright import sync_playwright  # exits naming its install command where missing

    with scratch("aiconsole-bench-pages-") as folder:  # as root, trainers run as another user
        say("starting a console and filling its database")
        console = harness.LiveConsole(folder / "data")
        baseline = None
        try:
            db = console.database
            # One job through the API, cancelled at once (nothing runs); its row is the template.
            console.submit("big_log", "gs://bench-bucket/trainer-0.1.tar.gz")
            stop_at_once(console, "big_log")
            jobs_s = fill_jobs(db, job_pk(db, "big_log"), args.jobs - 1) if "jobs" not in args.skip else 0.0
            runs_s = fill_final_metrics(db) if "jobs" not in args.skip else 0.0
            log_s = fill_log(db, job_pk(db, "big_log"), args.log_lines) if "log" not in args.skip else 0.0
            study_s = 0.0
            if "study" not in args.skip:
                console.submit(
                    "study",
                    "gs://bench-bucket/trainer-0.1.tar.gz",
                    hyperparameters={**STUDY_SPEC, "maxTrials": args.study_trials},
                )
                stop_at_once(console, "study")
                study_s = fill_study(console, "study", args.study_trials)
                if args.baseline:
                    say(f"starting the baseline console from {args.baseline}")
                    baseline = harness.LiveConsole(folder / "baseline", code=args.baseline)
                    baseline.submit(
                        "study",
                        "gs://bench-bucket/trainer-0.1.tar.gz",
                        hyperparameters={**STUDY_SPEC, "maxTrials": args.study_trials},
                    )
                    stop_at_once(baseline, "study")
                    copy_study(db, baseline.database, "study")
            compare_s, compare_ids = 0.0, []
            if "compare" not in args.skip:
                compare_s, compare_ids = fill_compare(db, job_pk(db, "big_log"), args.compare_jobs, args.compare_points)
            curves_s = 0.0
            if "controls" not in args.skip:
                curves_s = fill_curves(db, job_pk(db, "big_log"), args.curve_runs, args.curve_points)
            load = os.getloadavg()
            say(f"loading the pages in Chromium, {args.repeats} times each")
            with sync_playwright() as playwright:
                browser = playwright.chromium.launch(executable_path=harness.CHROMIUM, args=harness.CHROMIUM_ARGS)
                page = signed_in_page(browser, console)
                base = f"/projects/{harness.PROJECT}/jobs/"
                results = {}
                if "jobs" not in args.skip:
                    results["job list"] = measure(page, base, args.repeats)
                    results["job list, filtered to SUCCEEDED"] = measure(page, base + "?state=SUCCEEDED", args.repeats)
                    # Issue 17: a search (job id or label text, a scan of the project's rows) and a
                    # sort on a computed column, over all 10,000 jobs.
                    results["job list, search"] = measure(page, base + "?q=bulk_0999", args.repeats)
                    results["job list, search, by duration"] = measure(
                        page, base + "?q=bulk&sort=-duration", args.repeats
                    )
                    results["job list, 2 metric columns, by one"] = measure(page, base + RUNS_TABLE, args.repeats)
                    # The runs table's server time beside the plain list's, the two loads interleaved.
                    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
                    runs_server = {"plain": [], "runs": []}
                    for _ in range(args.repeats):
                        runs_server["plain"].append(server_time(console, base, cookies, 1))
                        runs_server["runs"].append(server_time(console, base + RUNS_TABLE, cookies, 1))
                if "log" not in args.skip:
                    results["job page, newest lines"] = measure(page, base + "big_log/", args.repeats)
                    results["job page, oldest lines"] = measure(page, base + "big_log/?after=0", args.repeats)
                studies = {}
                if "study" not in args.skip:
                    targets = {"this checkout": (page, console)}
                    if baseline is not None:
                        targets["baseline"] = (signed_in_page(browser, baseline), baseline)
                    for target, _ in targets.values():
                        target.add_init_script(f"window.__chartsExpected = {args.study_charts};" + CHARTS_PROBE)
                    studies = measure_study_rounds(targets, base + "study/", args.study_repeats or args.repeats)
                compared = {}
                if compare_ids:
                    cookies = {c["name"]: c["value"] for c in page.context.cookies()}
                    compare_base = f"/projects/{harness.PROJECT}/compare/?jobs="
                    page.add_init_script(COMPARE_PROBE)
                    for count in sorted({2, len(compare_ids)}):
                        path = compare_base + ",".join(compare_ids[:count])
                        compared[count] = measure_compare(page, path, args.repeats) | {
                            "server": server_time(console, path, cookies, args.repeats)
                        }
                controls = None
                if "controls" not in args.skip:
                    controls = measure_controls(page, base + "curves/", args.repeats)
                browser.close()
        finally:
            console.stop()
            if baseline is not None:
                baseline.stop()
    print(
        f"{args.jobs:,} jobs inserted in {jobs_s:.1f} s; {args.log_lines:,} log lines in {log_s:.1f} s; "
        f"{args.study_trials:,} study trials in {study_s:.1f} s"
    )
    print(
        f"{os.cpu_count()} CPUs, load average {load[0]:.2f} {load[1]:.2f} {load[2]:.2f} before the loads, "
        f"{os.getloadavg()[0]:.2f} after"
    )
    print(f"Chromium (headless), medians of {args.repeats} loads, ms from the start of navigation:")
    for name, r in results.items():
        fcp = f"{r['fcp']:.0f}" if r["fcp"] is not None else "—"
        print(
            f"  {name:34} first byte {r['ttfb']:6.0f}   first paint {fcp:>5}   DOMContentLoaded "
            f"{r['dcl']:6.0f}   load {r['load']:6.0f} (max {r['max_load']:.0f})   rows {r['rows']:,}"
        )
    if "jobs" not in args.skip:
        plain, runs = (statistics.median(runs_server[k]) for k in ("plain", "runs"))
        print(
            f"  runs table, {args.jobs:,} jobs with 2 final metrics each ({runs_s:.1f} s to insert), server time "
            f"(whole HTML, outside the browser, medians of {args.repeats}): plain list {1000 * plain:.0f} ms, "
            f"2 metric columns sorted by one {1000 * runs:.0f} ms, ratio {runs / plain:.2f}"
        )
    if compared:
        print(f"  compare page, {args.compare_points:,} points a job ({compare_s:.1f} s to insert):")
        for count, r in compared.items():
            print(
                f"  {count:3} jobs: server (whole HTML, outside the browser) {1000 * r['server']:6.0f}   first byte "
                f"{r['ttfb']:6.0f}   DOMContentLoaded {r['dcl']:6.0f}   load {r['load']:6.0f}   all {r['figures']} "
                f"charts drawn {r['charts']:6.0f}   HTML {r['html_kb']:,.0f} kB"
            )
        if len(compared) == 2:
            small, large = compared.values()
            print(
                f"  ratio {max(compared)} jobs / 2 jobs: server {large['server'] / small['server']:.2f}   load "
                f"{large['load'] / small['load']:.2f}   charts drawn {large['charts'] / small['charts']:.2f}"
            )
    loads = args.study_repeats or args.repeats
    if len(studies) == 1:
        print_study(f"study page, {args.study_trials:,} trials", studies["this checkout"], loads)
    elif studies:
        for name, r in studies.items():
            print_study(f"study page, {args.study_trials:,} trials, {name}", r, loads)
        new, old = studies["this checkout"], studies["baseline"]

        def ratio(key: str) -> str:
            return f"{new[key] / old[key]:.2f}" if new[key] is not None and old[key] else "—"

        print(
            f"  {'':34} ratio this checkout / baseline (medians, the rounds interleaved): first paint "
            f"{ratio('fcp')}   long tasks in the {FIRST_SECONDS_MS / 1000:.0f} s after load {ratio('busy_after')}   "
            f"longest task after load {ratio('longest_after')}   re-sort {EARLY_CLICK_MS} ms after load "
            f"{ratio('early_resort')}   re-sort at rest {ratio('resort')}   range filter {ratio('filter')}   "
            f"trial table on the server {ratio('fragment')}   Charts tab to its first screen drawn "
            f"{ratio('first_screen_ms')}   to all drawn {ratio('tab_ms')}   longest task meanwhile "
            f"{ratio('tab_longest')}   fragments {ratio('fragments_kb')}"
        )

    if controls is not None:
        c = controls
        print(
            f"  metric chart, {args.curve_runs} runs × {args.curve_points:,} points ({curves_s:.1f} s to insert; "
            f"{c['points']:,} points drawn after thinning), medians of {args.repeats} rounds, ms (performance.now()):"
        )
        print(
            f"  {'':34} first draw {c['first']:6.1f}   smoothing on {c['smooth']:6.1f}   off {c['unsmooth']:6.1f}   "
            f"log y on {c['log']:6.1f}   off {c['unlog']:6.1f}"
        )
        print(
            f"  {'':34} fastest:   first draw {c['first_min']:6.1f}   smoothing on {c['smooth_min']:6.1f}   "
            f"off {c['unsmooth_min']:6.1f}   log y on {c['log_min']:6.1f}   off {c['unlog_min']:6.1f}"
        )
        print(
            f"  {'':34} ratio to the first draw (medians): smoothing on {c['smooth'] / c['first']:.2f}   "
            f"log y on {c['log'] / c['first']:.2f}"
        )


if __name__ == "__main__":
    main()
