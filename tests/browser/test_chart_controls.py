"""Metric charts' controls in Chromium (static/charts.js): smoothing, log y axis and time axes kept in
the URL; evaluation tags drawn with their metric; a study's trials coloured by objective; a toolbar
that works offline, one Tab stop per chart, with a link to each chart; the compare page's aggregation
and baseline.

The jobs are submitted through the API and cancelled at once (their package does not exist); their
points and trials are then written into the console's database, as bench/pages.py fills it.
"""

from __future__ import annotations

import json
import re
import sqlite3

import pytest
from playwright.sync_api import expect

from bench.support import harness
from tests.helpers.browser import JOBS, axe_violations, login

pytestmark = pytest.mark.browser

PACKAGE = "gs://no-such-bucket/trainer-0.1.tar.gz"
WALL = 1_700_000_000.0  # the first point's wall time; each step 10 s later
STUDY_SPEC = {
    "goal": "MAXIMIZE",
    "hyperparameterMetricTag": "accuracy",
    "maxTrials": 24,
    "maxParallelTrials": 1,
    "params": [{"parameterName": "lr", "type": "DOUBLE", "minValue": 0.001, "maxValue": 0.1}],
}


def stopped_job(console, job_id: str, **training_input) -> int:
    """A job that never runs, by its database id."""
    console.submit(job_id, PACKAGE, **training_input)
    try:
        console.call("POST", f"/v1/projects/{harness.PROJECT}/jobs/{job_id}:cancel", {})
    except RuntimeError:  # failed already: its package does not exist
        pass
    console.wait(job_id)
    with sqlite3.connect(console.database, timeout=60) as conn:
        return conn.execute("SELECT id FROM jobs_job WHERE job_id = ?", (job_id,)).fetchone()[0]


def store(console, pk: int, points: list[tuple[str, str, str, int, float]]) -> None:
    """``(tag, trial_id, run, step, value)`` points, wall time 10 s a step."""
    with sqlite3.connect(console.database, timeout=60) as conn:
        conn.executemany(
            "INSERT INTO jobs_metricpoint (job_id, trial_id, source, run, tag, step, value, wall_time) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            [
                (pk, trial, "tfevents", run, tag, step, value, WALL + 10 * step)
                for tag, trial, run, step, value in points
            ],
        )


def noisy(step: int, offset: float = 0.0) -> float:
    return 1 / (step + 1) + offset + (0.2 if step % 2 else -0.2) / (step + 1) ** 0.5


def plain_job(console, job_id: str, tags=("loss", "val_loss")) -> None:
    pk = stopped_job(console, job_id)
    store(
        console, pk, [(tag, "", "", step, noisy(step, n / 10)) for n, tag in enumerate(tags) for step in range(1, 60)]
    )


def graph_data(page, tag: str) -> list[dict]:
    return page.evaluate(
        """(tag) => document.querySelector(`figure.metric-chart[data-tag="${tag}"] .js-plotly-plot`).data
          .map((t) => ({name: t.name, meta: t.meta || {}, opacity: t.opacity === undefined ? 1 : t.opacity,
                        x: Array.from(t.x || []), y: Array.from(t.y || []), width: (t.line || {}).width,
                        colour: (t.line || {}).color, showlegend: t.showlegend}))""",
        tag,
    )


def layout(page, tag: str) -> dict:
    return page.evaluate(
        """(tag) => { const l = document.querySelector(`figure.metric-chart[data-tag="${tag}"] .js-plotly-plot`)
            ._fullLayout; return {y: l.yaxis.type, x: l.xaxis.type, legend: l.showlegend}; }""",
        tag,
    )


def wiggle(values: list[float]) -> float:
    return sum(abs(b - a) for a, b in zip(values, values[1:], strict=False))


def drawn(page, tag: str, traces: int):
    expect(page.locator(f"figure.metric-chart[data-tag='{tag}'] .scatterlayer .trace")).to_have_count(traces)


def test_smoothing_draws_the_raw_line_faint_behind_and_survives_a_reload(page, console):
    plain_job(console, "curves_smooth")
    login(page)
    page.goto(f"{JOBS}curves_smooth/")
    loss = page.locator("#metrics figure.metric-chart[data-tag='loss']")
    drawn(page, "loss", 2)
    # val_loss is drawn in the loss chart, dashed, and its CSV has both tags.
    expect(loss.locator(".legendtext")).to_have_text(["loss", "val_loss"])
    assert [t["name"] for t in graph_data(page, "loss")] == ["loss", "val_loss"]
    csv = loss.get_by_role("link", name="Download loss as CSV").get_attribute("href")
    assert csv.endswith("?tag=loss&tag=val_loss")
    raw = graph_data(page, "loss")

    page.get_by_label("Smoothing").fill("0.6")
    expect(page).to_have_url(re.compile(r"[?&]smooth=0\.6"))
    drawn(page, "loss", 4)
    traces = graph_data(page, "loss")
    faint = [t for t in traces if t["meta"].get("raw")]
    smooth = [t for t in traces if not t["meta"].get("raw")]
    assert [t["y"] for t in faint] == [t["y"] for t in raw] and all(t["opacity"] <= 0.3 for t in faint)
    assert all(t["opacity"] == 1 for t in smooth)
    assert smooth[0]["y"] != raw[0]["y"] and smooth[0]["y"][0] == pytest.approx(raw[0]["y"][0])  # debiased
    # Smoothing evens the zigzag out: the smoothed line moves less from step to step.
    assert wiggle(smooth[0]["y"]) < 0.5 * wiggle(raw[0]["y"])

    page.evaluate("() => localStorage.clear()")  # only the URL says it now
    page.reload()
    drawn(page, "loss", 4)
    expect(page.get_by_label("Smoothing")).to_have_value("0.6")
    assert len([t for t in graph_data(page, "loss") if t["meta"].get("raw")]) == 2


def test_log_y_and_time_axes_change_the_drawing_and_survive_the_panel_refresh(page, console):
    plain_job(console, "curves_axes")
    login(page)
    page.goto(f"{JOBS}curves_axes/?smooth=0")
    drawn(page, "loss", 2)
    page.get_by_label("Log y axis").check()
    expect(page).to_have_url(re.compile(r"[?&]ylog=1"))
    page.wait_for_function(
        "() => document.querySelector('figure.metric-chart .js-plotly-plot')._fullLayout.yaxis.type === 'log'"
    )
    assert layout(page, "loss")["y"] == "log"
    steps = graph_data(page, "loss")[0]["x"]
    assert steps[:2] == [1, 2]

    page.get_by_label("X axis").select_option("relative")
    expect(page).to_have_url(re.compile(r"[?&]xaxis=relative"))
    page.wait_for_function("() => document.querySelector('figure.metric-chart .js-plotly-plot').data[0].x[1] === 10")
    assert graph_data(page, "loss")[0]["x"][:3] == [0, 10, 20]  # seconds since the line's first point
    page.get_by_label("X axis").select_option("wall")
    page.wait_for_function(
        "() => document.querySelector('figure.metric-chart .js-plotly-plot')._fullLayout.xaxis.type === 'date'"
    )
    assert graph_data(page, "loss")[0]["x"][0] == (WALL + 10) * 1000  # the first point's time, as a date

    # A running job's panel is swapped in anew every few seconds: the settings stay on it.
    page.evaluate("() => { document.querySelector('figure.metric-chart .js-plotly-plot').dataset.old = '1'; }")
    page.evaluate("""() => htmx.ajax("GET", location.pathname + "metrics/", {target: "#metrics", swap: "outerHTML"})""")
    page.wait_for_function(
        """() => { const g = document.querySelector('figure.metric-chart .js-plotly-plot');
                   return g && !g.dataset.old && g._fullLayout && g._fullLayout.yaxis.type === 'log'
                     && g._fullLayout.xaxis.type === 'date'; }"""
    )
    expect(page.get_by_label("Log y axis")).to_be_checked()
    expect(page.get_by_label("X axis")).to_have_value("wall")


def test_a_study_of_24_trials_colours_lines_by_objective_without_a_legend(page, console):
    pk = stopped_job(console, "curves_study", hyperparameters=STUDY_SPEC)
    with sqlite3.connect(console.database, timeout=60) as conn:
        columns = {row[1]: row for row in conn.execute("PRAGMA table_info(jobs_trial)")}
        values = {
            "job_id": pk,
            "hyperparameters": json.dumps({"lr": "0.01"}),
            "state": "SUCCEEDED",
            "all_metrics": "[]",
            "is_stopped_early": 0,
            "error_message": "",
            "consumed_ml_units": 0.0,
        }
        missing = [n for n, c in columns.items() if c[3] and c[4] is None and not c[5] and n not in values]
        assert set(missing) <= {"trial_id", "number", "final_metric"}, f"jobs_trial needs {missing}"
        names = [*values, "trial_id", "number", "final_metric"]
        conn.executemany(
            f"INSERT INTO jobs_trial ({', '.join(names)}) VALUES ({', '.join('?' * len(names))})",
            [
                (*values.values(), str(n), n, json.dumps({"trainingStep": "9", "objectiveValue": n / 100}))
                for n in range(1, 25)
            ],
        )
    store(console, pk, [("loss", str(n), "", step, 1 / (step + n)) for n in range(1, 25) for step in range(10)])
    login(page)
    page.goto(f"{JOBS}curves_study/#metrics-panel")
    chart = page.locator("#metrics figure.metric-chart[data-tag='loss']")
    expect(chart.locator(".scatterlayer .trace")).to_have_count(25)  # a line per trial, and the colour bar's
    expect(chart.locator(".legend")).to_have_count(0)  # no legend over the axis, nor anywhere
    expect(chart.locator(".colorbar")).to_have_count(1)
    expect(chart.locator(".colorbar .cbtitle")).to_have_text("accuracy")
    lines = [t for t in graph_data(page, "loss") if t["meta"].get("trial")]
    assert len(lines) == 24 and len({t["colour"] for t in lines}) == 24
    assert lines[-1]["meta"]["trial"] == "24" and lines[-1]["width"] > lines[0]["width"]  # the best, on top
    # Hovering a line names its trial and its value.
    page.evaluate(
        """() => { const g = document.querySelector('figure.metric-chart .js-plotly-plot');
                   Plotly.Fx.hover(g, [{curveNumber: 0, pointNumber: 3}]); }"""
    )
    expect(chart.locator(".hoverlayer")).to_contain_text("Trial 1")


def test_toolbar_has_offline_buttons_only_and_each_chart_is_one_tab_stop(page, console):
    plain_job(console, "curves_keys", tags=("loss", "val_loss", "accuracy", "learning_rate"))
    login(page)
    page.goto(f"{JOBS}curves_keys/")
    charts = page.locator("#metrics figure.metric-chart")
    expect(charts).to_have_count(3)
    for tag, traces in (("loss", 2), ("accuracy", 1), ("learning_rate", 1)):
        drawn(page, tag, traces)
    toolbar = charts.first.get_by_role("toolbar", name="Chart tools: accuracy")
    names = [b.get_attribute("aria-label") for b in toolbar.get_by_role("button").all()]
    assert sorted(names) == sorted(["Download plot as a PNG", "Zoom", "Pan", "Reset axes", "Copy link to this chart"])
    assert not any("Share" in n or "Chart Studio" in n for n in names)

    # Tab through the panel: each plot takes exactly one stop, its toolbar's first button.
    page.locator("#metrics .actions a").focus()
    stops: dict[str, int] = {}
    for _ in range(40):
        page.keyboard.press("Tab")
        where = page.evaluate(
            """() => { const el = document.activeElement;
                       if (!el.closest('#metrics')) return 'out';
                       const plot = el.closest('.js-plotly-plot');
                       return plot ? plot.closest('figure').dataset.tag : ''; }"""
        )
        if where == "out":
            break
        if where:
            stops[where] = stops.get(where, 0) + 1
    assert stops == {"accuracy": 1, "learning_rate": 1, "loss": 1}

    # Arrow keys move along the toolbar, which shows while a keyboard user is in it (else on hover only).
    toolbar.get_by_role("button").first.focus()
    expect(toolbar.locator(".modebar-group").first).to_have_css("opacity", "1")
    first = page.evaluate("() => document.activeElement.getAttribute('aria-label')")
    page.keyboard.press("ArrowRight")
    second = page.evaluate("() => document.activeElement.getAttribute('aria-label')")
    assert second != first and page.evaluate("() => document.activeElement.tabIndex") == 0
    assert toolbar.locator("[tabindex='0']").count() == 1
    assert axe_violations(page) == []

    # A figure stored before the toolbar was trimmed (the data analysis page keeps its charts) too.
    page.evaluate(
        """() => { const div = document.createElement("div"); div.id = "stored-chart"; document.body.append(div);
                   return aiconsoleCharts.draw(div, {data: [{x: [1, 2], y: [3, 4]}], layout: {}}); }"""
    )
    stored = page.locator("#stored-chart").get_by_role("toolbar")
    expect(stored.get_by_role("button", name="Copy link to this chart")).to_have_count(1)
    assert sorted(b.get_attribute("aria-label") for b in stored.get_by_role("button").all()) == sorted(names)


def test_copy_link_puts_the_chart_url_with_its_settings_on_the_clipboard(page, console):
    plain_job(console, "curves_link")
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.url)
    login(page)
    page.goto(f"{JOBS}curves_link/?ylog=1")
    drawn(page, "loss", 2)
    loss = page.locator("#metrics figure.metric-chart[data-tag='loss']")
    loss.locator(".js-plotly-plot").hover()
    loss.get_by_role("button", name="Copy link to this chart").click()
    expect(loss.get_by_role("status")).to_have_text("Link to this chart copied.")
    copied = page.evaluate("() => navigator.clipboard.readText()")
    assert copied.startswith(console.url + f"{JOBS}curves_link/?") and "ylog=1" in copied
    assert copied.endswith("#chart-metric-loss")
    page.goto(copied)
    expect(page.locator("#chart-metric-loss")).to_be_visible()


def test_controls_fit_a_phone(page, console):
    plain_job(console, "curves_phone")
    page.set_viewport_size({"width": 390, "height": 800})
    login(page)
    page.goto(f"{JOBS}curves_phone/")
    drawn(page, "loss", 2)
    expect(page.get_by_label("Smoothing")).to_be_visible()
    assert page.evaluate("() => document.documentElement.scrollWidth") <= 390


def test_compare_page_aggregates_and_reads_against_a_baseline(page, console):
    for job_id, scale in (("cmp_base", 1.0), ("cmp_other", 2.0)):
        pk = stopped_job(console, job_id)
        store(console, pk, [("loss", "", "", step, scale * (step - 3) ** 2 + 1) for step in range(7)])
    login(page)
    page.goto("/projects/default-project/compare/?jobs=cmp_base,cmp_other")
    row = page.locator("#compare-metrics tr[data-metric='loss']")
    expect(row.locator("td").nth(0)).to_contain_text("10")  # the last value: (6 - 3)² + 1
    page.get_by_label("Value").select_option("min")
    page.get_by_label("Baseline").select_option("cmp_base")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"agg=min.*baseline=cmp_base"))
    expect(row.locator("td").nth(0)).to_contain_text("1 step 3")
    expect(page.locator("#compare-metrics th.baseline")).to_contain_text("cmp_base (baseline)")
    expect(row.locator("td.baseline")).to_have_count(1)
    expect(row.locator("td").nth(1)).to_contain_text("(+0)")
    drawn(page, "loss", 2)
    baseline = [t for t in graph_data(page, "loss") if "(baseline)" in t["name"]]
    assert len(baseline) == 1 and baseline[0]["width"] > 2 and baseline[0]["opacity"] < 1
    expect(page.locator("#compare-curves")).to_contain_text("thick, faint reference line")

    page.get_by_label("Value").select_option("step")
    page.get_by_label("Step", exact=True).fill("5")
    page.get_by_role("button", name="Apply").click()
    expect(page).to_have_url(re.compile(r"agg=step&at=5"))
    expect(row.locator("td").nth(1)).to_contain_text("9 step 5")  # 2 × (5 - 3)² + 1
    assert axe_violations(page) == []
