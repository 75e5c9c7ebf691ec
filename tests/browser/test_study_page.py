"""A 24-trial study's page, as an ML team uses it: the trial table first, a column per parameter and
metric, sorted and filtered with the view in the URL, and charts that talk to the table."""

from __future__ import annotations

import math
import re
from urllib.parse import parse_qs, urlsplit

import pytest
from playwright.sync_api import expect

from tests.browser.studies import seed_study
from tests.browser.test_jobs_list_phone_keyboard import OVERFLOW
from tests.helpers.browser import JOBS, axe_violations, login

STUDY = "wide_study"
TRIALS = 24
# History, parallel coordinates, four slices, contour, intermediate values, importance, and the
# objective against duration and against ML units (at one rate: the chart says so).
STUDY_CHARTS = 11
# The charts wait for plotly.js (3.5 MB to parse) and draw one after another: on a busy 2-core
# machine the first takes more than expect's 5 s.
DRAWN_MS = 30_000
# A chart drawn: Plotly's SVG, or the parallel coordinates' own (static/parallel.js).
DRAWN = ".main-svg, .parallel-plot[data-drawn] svg"
PARALLEL = "#study-charts .parallel-plot[data-drawn]"


@pytest.fixture(scope="module")
def study(console):
    seed_study(console, STUDY, TRIALS)
    return f"{JOBS}{STUDY}/"


def column(page, key: str) -> list[str]:
    """The cells of a column (by its sort key) in the table's order."""
    return page.evaluate(
        """(key) => {
          const heads = [...document.querySelectorAll("#trial-table thead th")];
          const index = heads.findIndex((th) => th.querySelector(`[data-sort-key="${key}"]`));
          const rows = [...document.querySelectorAll("#trial-table tbody tr")];
          return rows.map((tr) => tr.children[index].textContent.trim());
        }""",
        key,
    )


def numbers(cells: list[str]) -> list[float]:
    return [math.nan if cell == "—" else float(cell) for cell in cells]


def test_the_trial_table_comes_first_with_a_column_per_parameter_and_metric(page, study):
    login(page)
    page.goto(study)
    expect(page.get_by_role("tab", name="Trials")).to_have_attribute("aria-selected", "true")
    expect(page.get_by_role("tablist", name="Job sections").get_by_role("tab")).to_have_text(
        ["Trials", "Charts", "Logs", "Replicas", "Resources", "Outputs", "Training input"]  # its trials are sampled
    )
    # The trials open the study's sections, not 1,400 px down behind one replica row per trial.
    tabs = page.get_by_role("tablist", name="Job sections").bounding_box()
    top = page.locator("#trial-table").bounding_box()["y"]
    assert top - (tabs["y"] + tabs["height"]) < 250 and top < 1000, top
    expect(page.locator("#job-status table")).to_have_count(0)  # the replicas are behind their own tab
    headings = page.locator("#trial-table thead th a").all_inner_texts()
    for name in [
        "Trial",
        "State",
        "learning_rate",
        "layers",
        "dropout",
        "optimizer",
        "accuracy",
        "loss",
        "Step",
        "Duration",
    ]:
        assert any(h.startswith(name) for h in headings), (name, headings)
    expect(page.locator("#trial-table tbody tr")).to_have_count(TRIALS)
    # The table uses the page's width.
    table, main = page.locator("#trial-table table").bounding_box(), page.locator("main").bounding_box()
    assert table["width"] > 0.85 * (main["width"] - 60)
    assert not axe_violations(page)


def test_sorting_by_a_parameter_column_is_in_the_url_and_survives_a_reload(page, study):
    login(page)
    page.goto(study)
    page.locator('#trial-table [data-sort-key="p.layers"]').click()
    expect(page.locator("#trial-table th[aria-sort=ascending]")).to_contain_text("layers")
    expect(page).to_have_url(re.compile(r"trial_sort=p\.layers"))
    values = numbers(column(page, "p.layers"))
    assert values == sorted(values) and len(values) == TRIALS
    page.locator('#trial-table [data-sort-key="p.layers"]').click()
    expect(page.locator("#trial-table th[aria-sort=descending]")).to_contain_text("layers")
    expect(page).to_have_url(re.compile(r"trial_sort=-p\.layers"))
    descending = numbers(column(page, "p.layers"))
    assert descending == sorted(descending, reverse=True)
    # The metric columns sort too, and a reload shows the same order.
    page.locator('#trial-table [data-sort-key="objective"]').click()
    expect(page).to_have_url(re.compile(r"trial_sort=objective"))
    order = page.locator("#trial-table tbody tr").evaluate_all("(rows) => rows.map((r) => r.dataset.trial)")
    page.reload()
    assert page.locator("#trial-table tbody tr").evaluate_all("(rows) => rows.map((r) => r.dataset.trial)") == order
    accuracy = [v for v in numbers(column(page, "objective")) if not math.isnan(v)]
    assert accuracy == sorted(accuracy)


def test_a_range_and_category_filter_in_the_url_restores_the_same_rows(page, study):
    login(page)
    page.goto(study)
    page.get_by_text("Filter by value").click()
    layers = page.locator('fieldset[data-range="p.layers"]')
    layers.get_by_label("from").fill("3")
    layers.get_by_label("to").fill("5")
    layers.get_by_label("to").press("Tab")  # a change: the table follows
    page.locator('fieldset[data-categories="p.optimizer"]').get_by_label("sgd").uncheck()
    expect(page).to_have_url(re.compile(r"in\.p\.optimizer=adam"))
    expect(page).to_have_url(re.compile(r"min\.p\.layers=3"))
    shown = page.locator("#trial-table tbody tr").evaluate_all("(rows) => rows.map((r) => r.dataset.trial)")
    assert 0 < len(shown) < TRIALS
    assert all(3 <= v <= 5 for v in numbers(column(page, "p.layers")))
    assert set(column(page, "p.optimizer")) == {"adam"}
    expect(page.locator("#trial-summary")).to_contain_text(f"{len(shown)} of {TRIALS} match the filters")

    link = page.url
    page.goto("about:blank")
    page.goto(link)
    assert page.locator("#trial-table tbody tr").evaluate_all("(rows) => rows.map((r) => r.dataset.trial)") == shown
    expect(page.locator('fieldset[data-range="p.layers"]').get_by_label("from")).to_have_value("3")
    expect(page.locator('fieldset[data-categories="p.optimizer"]').get_by_label("sgd")).not_to_be_checked()


def test_the_column_chooser_hides_a_column_and_the_link_keeps_it_hidden(page, study):
    login(page)
    page.goto(study)
    page.get_by_text(re.compile(r"^Columns")).click()
    page.locator(".column-choices").get_by_label("Duration").uncheck()
    expect(page.locator('#trial-table [data-sort-key="duration"]')).to_have_count(0)
    expect(page).to_have_url(re.compile(r"cols="))
    page.reload()
    expect(page.locator('#trial-table [data-sort-key="duration"]')).to_have_count(0)
    expect(page.locator('#trial-table [data-sort-key="p.dropout"]')).to_have_count(1)


def tick_y(axis, text: str) -> float:
    """Where an axis' tick labelled ``text`` is, down the page."""
    box = axis.locator("text").filter(has_text=re.compile(rf"^{re.escape(text)}$")).bounding_box()
    return box["y"] + box["height"] / 2


def test_brushing_a_parallel_coordinates_axis_narrows_the_table(page, study):
    login(page)
    page.goto(study)
    page.get_by_role("tab", name="Charts").click()
    chart = page.locator(PARALLEL)
    expect(chart).to_have_count(1, timeout=DRAWN_MS)
    # Drag along the "layers" axis from its tick 4 to its tick 6, as a user brushes it.
    axis = chart.get_by_role("group", name=re.compile(r"^layers axis"))
    expect(axis).to_have_accessible_name(re.compile(r"not brushed$"))
    axis.scroll_into_view_if_needed()
    box = axis.locator(".parallel-hit").bounding_box()
    x = box["x"] + box["width"] / 2
    start, end = tick_y(axis, "4"), tick_y(axis, "6")
    page.mouse.move(x, start)
    page.mouse.down()
    page.mouse.move(x, (start + end) / 2, steps=5)
    page.mouse.move(x, end, steps=5)
    page.mouse.up()
    expect(axis).to_have_accessible_name(re.compile(r"brushed: \d"))
    expect(page).to_have_url(re.compile(r"min\.p\.layers="))
    query = parse_qs(urlsplit(page.url).query)
    brushed = (float(query["min.p.layers"][0]), float(query["max.p.layers"][0]))
    assert brushed[0] == pytest.approx(4, abs=0.3) and brushed[1] == pytest.approx(6, abs=0.3)
    # The lines outside the range turn faint, behind the others.
    assert 0 < chart.locator(".parallel-lines path").count() < TRIALS
    # The table is in the Trials tab: the chart says what the brush left there, and links to it.
    note = page.locator("#study-charts [data-brush-result]")
    expect(note).to_have_text(re.compile(rf"now shows the \d+ of {TRIALS} trials that match its filters"))
    shown = int(re.search(r"the (\d+) of", note.inner_text()).group(1))
    assert chart.locator(".parallel-lines path").count() == shown
    note.get_by_role("link", name="Open the trial table").click()
    expect(page.get_by_role("tab", name="Trials")).to_have_attribute("aria-selected", "true")
    values = numbers(column(page, "p.layers"))
    assert len(values) == shown
    assert values and all(brushed[0] <= v <= brushed[1] for v in values)
    assert len(values) < TRIALS

    # The brushed table's link (the page's address now) shows the brush on its axis too.
    page.reload()
    page.get_by_role("tab", name="Charts").click()
    expect(axis).to_have_accessible_name(re.compile(r"brushed: \d"), timeout=DRAWN_MS)
    expect(chart.locator(".parallel-lines path")).to_have_count(shown)

    # A click on the axis clears its brush, and the table's filter with it.
    axis.scroll_into_view_if_needed()
    box = axis.locator(".parallel-hit").bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(axis).to_have_accessible_name(re.compile(r"not brushed$"))
    expect(page).not_to_have_url(re.compile(r"min\.p\.layers=\d"))
    expect(note).to_have_text(re.compile(rf"now shows the {TRIALS} of {TRIALS} trials"))
    expect(chart.locator(".parallel-lines path")).to_have_count(TRIALS)


def test_a_keyboard_user_brushes_a_parallel_coordinates_axis_and_clears_it(page, study):
    login(page)
    page.goto(f"{study}?tab=charts")
    chart = page.locator(PARALLEL)
    expect(chart).to_have_count(1, timeout=DRAWN_MS)
    objective = chart.get_by_role("group", name=re.compile(r"^Objective axis"))
    objective.focus()
    for _ in range(8):  # its range's bottom up by 8 of 20 steps
        page.keyboard.press("Shift+ArrowUp")
    expect(objective).to_have_accessible_name(re.compile(r"brushed: \d"))
    expect(chart.get_by_role("status")).to_contain_text("lines kept")
    expect(page).to_have_url(re.compile(r"min\.objective=\d"))
    note = page.locator("#study-charts [data-brush-result]")
    expect(note).to_have_text(re.compile(rf"now shows the \d+ of {TRIALS} trials"))
    assert int(re.search(r"the (\d+) of", note.inner_text()).group(1)) < TRIALS
    page.keyboard.press("Escape")
    expect(objective).to_have_accessible_name(re.compile(r"not brushed$"))
    expect(page).not_to_have_url(re.compile(r"min\.objective=\d"))
    expect(note).to_have_text(re.compile(rf"now shows the {TRIALS} of {TRIALS} trials"))


def test_charts_and_table_mark_the_same_trial_and_a_click_opens_it(page, study):
    login(page)
    page.goto(study)
    page.get_by_role("tab", name="Charts").click()
    history = (
        page.locator("#study-charts figure.chart").filter(has_text="Optimization history").locator(".js-plotly-plot")
    )
    expect(history.locator(".scatterlayer .trace").first).to_be_visible(timeout=DRAWN_MS)
    # Hovering a point marks its trial in the table (a real mouse over the drawn point).
    point = history.locator(".scatterlayer .trace").first.locator("path.point").nth(4)
    trial = history.evaluate("(gd) => String(gd._fullData[0].customdata[4])")
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    centre = (box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.mouse.move(*centre)  # Plotly's drag layer takes the pointer, as it does for a user
    expect(page.locator(f'#trial-table tr[data-trial="{trial}"]')).to_have_class(re.compile(r"\bmarked-trial\b"))
    # The intermediate-values chart draws the marked trial on top.
    curves = (
        page.locator("#study-charts figure.chart").filter(has_text="Intermediate values").locator(".js-plotly-plot")
    )
    marked = curves.evaluate(
        "(gd) => gd.data.filter((t) => t.meta && t.meta.highlight).map((t) => t.x.filter((x) => x !== null).length)"
    )
    assert marked and marked[0] == 10  # its ten reports
    # Its legend names a handful of lines (the best five), never one entry per trial, and is not over the axis.
    legend = curves.locator(".legend .traces")
    assert 1 <= legend.count() <= 7
    legend_box, title_box = curves.locator(".legend").bounding_box(), curves.locator(".xtitle").bounding_box()
    assert (
        legend_box["y"] >= title_box["y"] + title_box["height"] - 1
        or legend_box["y"] + legend_box["height"] <= title_box["y"]
    )
    # Clicking the point opens that trial (its logs).
    point.scroll_into_view_if_needed()
    box = point.bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    expect(page).to_have_url(re.compile(rf"[?&]trial={trial}(&|#|$)"))
    expect(page.get_by_role("tab", name="Logs")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#log-trial")).to_have_value(trial)


def test_hovering_a_row_marks_the_trial_in_the_charts(page, study):
    login(page)
    page.goto(study)
    page.get_by_role("tab", name="Charts").click()
    history = (
        page.locator("#study-charts figure.chart").filter(has_text="Optimization history").locator(".js-plotly-plot")
    )
    expect(history.locator(".scatterlayer .trace").first).to_be_visible(timeout=DRAWN_MS)
    page.get_by_role("tab", name="Trials").click()
    page.locator('#trial-table tr[data-trial="7"] th').hover()
    marked = history.evaluate("(gd) => gd.data.filter((t) => t.meta && t.meta.highlight).map((t) => [...t.x])")
    assert marked == [[7]]


def test_compare_selected_trials_opens_the_compare_page(page, study):
    login(page)
    page.goto(study)
    page.get_by_role("button", name="Compare selected trials").click()
    expect(page.locator("#trial-compare-help")).to_contain_text("at least two")
    page.get_by_label("Select trial 3 to compare").check()
    page.get_by_label("Select trial 5 to compare").check()
    page.get_by_role("button", name="Compare selected trials").click()
    expect(page).to_have_url(re.compile(r"/compare/\?jobs="))
    assert set(parse_qs(urlsplit(page.url).query)["jobs"][0].split(",")) == {f"{STUDY}/3", f"{STUDY}/5"}
    expect(page.locator("#compare-inputs")).to_contain_text("trial 3")


def test_on_a_phone_the_trial_table_scrolls_inside_its_own_region(browser, console, study):
    context = browser.new_context(base_url=console.url, viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = context.new_page()
    try:
        login(page)
        page.goto(study)
        region = page.get_by_role("region", name=re.compile("Trials"))
        expect(region).to_be_visible()
        assert region.evaluate("(el) => el.scrollWidth > el.clientWidth")  # the table scrolls here
        page.get_by_text("Filter by value").click()
        page.get_by_text(re.compile(r"^Columns")).click()
        width = page.evaluate(OVERFLOW)  # nothing else sticks out: the filters and columns wrap
        assert width["document"] <= width["viewport"] and width["loose"] == [], width
        assert not axe_violations(page)
    finally:
        context.close()


def test_on_a_phone_the_parallel_coordinates_scroll_inside_their_own_region(browser, console, study):
    context = browser.new_context(base_url=console.url, viewport={"width": 390, "height": 844}, color_scheme="dark")
    page = context.new_page()
    try:
        login(page)
        page.goto(f"{study}?tab=charts#chart-parallel")
        expect(page.locator(PARALLEL)).to_have_count(1, timeout=DRAWN_MS)
        region = page.locator(PARALLEL).get_by_role("region", name=re.compile("scrolls sideways"))
        expect(region).to_be_visible()
        assert region.evaluate("(el) => el.scrollWidth > el.clientWidth")  # its axes keep their room
        width = page.evaluate(OVERFLOW)  # and nothing else sticks out
        assert width["document"] <= width["viewport"] and width["loose"] == [], width
        assert not axe_violations(page)
    finally:
        context.close()


def test_a_finished_study_shows_trial_rows_on_its_first_screen(browser, console, study):
    """At 1440×900 the job's header, its labels, the tabs and the table's filters leave room for
    trial rows before any scroll (the first row's top was at 925 px)."""
    context = browser.new_context(base_url=console.url, viewport={"width": 1440, "height": 900})
    page = context.new_page()
    try:
        login(page)
        page.goto(study)
        rows = page.locator("#trial-table tbody tr")
        expect(rows).to_have_count(TRIALS)
        assert page.evaluate("window.scrollY") == 0
        third = rows.nth(2).bounding_box()
        assert third["y"] + third["height"] <= 900, third  # three rows at least on the first screen
        expect(rows.first).to_be_in_viewport()
        # A study is deployed from its best trial: no "Nothing to deploy" notice takes room here.
        expect(page.locator("[data-no-deploy]")).to_have_count(0)
    finally:
        context.close()


# Counts what would redraw a chart: a first draw or a redraw from its figure, or a fit to a new size.
COUNT_DRAWS = """() => {
  window.__draws = {newPlot: 0, react: 0, resize: 0};
  for (const [owner, name] of [[Plotly, "newPlot"], [Plotly, "react"], [Plotly.Plots, "resize"]]) {
    const original = owner[name];
    owner[name] = function (...args) { window.__draws[name] += 1; return original.apply(this, args); };
  }
}"""
# What was drawn once the tasks a tab's switch queued have run (a macrotask, then a frame).
DRAWS_SO_FAR = """async () => {
  await new Promise((resolve) => setTimeout(resolve, 0));
  await new Promise((resolve) => requestAnimationFrame(() => setTimeout(resolve, 0)));
  return window.__draws;
}"""


def chart_requests(page) -> list[str]:
    """The URLs of the requests for the Charts tab's parts (the study's charts, its metric curves)."""
    asked: list[str] = []
    page.on(
        "request",
        lambda request: (
            asked.append(request.url) if "/fragments/charts/" in request.url or ("/metrics/" in request.url) else None
        ),
    )
    return asked


def test_the_charts_are_fetched_and_drawn_only_once_their_tab_is_opened(page, study):
    login(page)
    asked = chart_requests(page)
    page.goto(study)
    expect(page.get_by_role("tab", name="Trials")).to_have_attribute("aria-selected", "true")
    # A sort takes the table's round trip; the charts' request, were it made with the page, came first.
    page.locator('#trial-table [data-sort-key="p.layers"]').click()
    expect(page.locator("#trial-table th[aria-sort=ascending]")).to_contain_text("layers")
    assert asked == []
    expect(page.locator("#study-charts")).to_have_attribute("aria-busy", "true")
    expect(page.locator(".js-plotly-plot")).to_have_count(0)
    assert page.evaluate("() => typeof window.Plotly") == "undefined"  # not even loaded

    page.get_by_role("tab", name="Charts").click()
    charts = page.locator("#study-charts figure.chart")
    expect(charts).to_have_count(STUDY_CHARTS)
    for index in range(STUDY_CHARTS):
        expect(charts.nth(index).locator(DRAWN).first).to_be_visible(timeout=DRAWN_MS)
    expect(page.locator("#metrics figure.metric-chart .main-svg").first).to_be_visible(timeout=DRAWN_MS)  # its curves
    assert any("/fragments/charts/" in url for url in asked) and any("/metrics/" in url for url in asked)

    # Switching away and back fetches and draws nothing again.
    fetched = len(asked)
    page.evaluate(COUNT_DRAWS)
    page.get_by_role("tab", name="Trials").click()
    page.get_by_role("tab", name="Charts").click()
    assert page.evaluate(DRAWS_SO_FAR) == {"newPlot": 0, "react": 0, "resize": 0}
    expect(charts.first.locator(".main-svg").first).to_be_visible()
    assert len(asked) == fetched


def test_a_link_to_a_chart_opens_the_charts_tab_and_scrolls_to_it(page, study, console):
    page.context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.url)
    login(page)
    page.goto(study)
    page.get_by_role("tab", name="Charts").click()
    figure = page.locator("#chart-intermediate")
    expect(figure.locator(".main-svg").first).to_be_visible(timeout=DRAWN_MS)
    figure.locator(".js-plotly-plot").hover()
    figure.get_by_role("button", name="Copy link to this chart").click()
    expect(figure.get_by_role("status").filter(has_text="Link")).to_have_text("Link to this chart copied.")
    link = page.evaluate("() => navigator.clipboard.readText()")
    assert link == f"{console.url}{study}?tab=charts#chart-intermediate"  # the page's address, the tab in it

    # Opened afresh, the link shows the chart: its tab, fetched and drawn, scrolled to once it came in.
    page.goto("about:blank")
    page.goto(link)
    expect(page.get_by_role("tab", name="Charts")).to_have_attribute("aria-selected", "true")
    expect(figure.locator(".main-svg").first).to_be_visible(timeout=DRAWN_MS)
    expect(figure).to_be_in_viewport()
    assert page.evaluate("() => window.scrollY") > 1000  # the seventh chart, well below the tabs
    # A metric curve's link too: its panel comes after the study's charts.
    page.goto("about:blank")
    page.goto(f"{study}#chart-metric-loss")
    expect(page.get_by_role("tab", name="Charts")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#study-charts figure.chart")).to_have_count(STUDY_CHARTS)
    expect(page.locator("#chart-metric-loss .main-svg").first).to_be_visible(timeout=DRAWN_MS)
    expect(page.locator("#chart-metric-loss")).to_be_in_viewport()
    # ?tab= names a tab to open on.
    page.goto(f"{study}?tab=charts")
    expect(page.get_by_role("tab", name="Charts")).to_have_attribute("aria-selected", "true")
    expect(page.locator("#chart-1 .main-svg").first).to_be_visible(timeout=DRAWN_MS)


# The line the parallel coordinates draw in front of every other (the last), its trial, the study's
# best, and the contrast of its colour with the card behind it.
BEST_LINE = """(plot) => {
  const lines = plot.querySelectorAll(".parallel-lines path");
  const front = lines[lines.length - 1];
  const rgb = (text) => text.match(/\\d+/g).slice(0, 3).map(Number);
  const luminance = ([r, g, b]) => [r, g, b].map((c) => c / 255)
    .map((c) => (c <= 0.03928 ? c / 12.92 : ((c + 0.055) / 1.055) ** 2.4))
    .reduce((sum, c, i) => sum + c * [0.2126, 0.7152, 0.0722][i], 0);
  const line = luminance(rgb(getComputedStyle(front).stroke));
  const card = luminance(rgb(getComputedStyle(plot.closest(".card")).backgroundColor));
  return {contrast: (Math.max(line, card) + 0.05) / (Math.min(line, card) + 0.05),
          front: front.dataset.trial, best: document.getElementById("trial-table").dataset.best};
}"""
PARALLEL_PLOT = "document.querySelector('#study-charts .parallel-plot')"


@pytest.mark.parametrize("scheme", ["light", "dark"])
def test_the_best_trials_stand_out_in_parallel_coordinates_in_light_and_dark(page, study, scheme):
    login(page)
    page.emulate_media(color_scheme=scheme)
    page.goto(f"{study}?tab=charts")
    chart = page.locator(PARALLEL)
    expect(chart).to_have_count(1, timeout=DRAWN_MS)
    best = chart.evaluate(BEST_LINE)
    assert best["front"] == best["best"]  # no worse trial's line covers it
    assert best["contrast"] >= 3, best  # WCAG's 3:1 for the parts of a graphic one must see
    assert not axe_violations(page)
    # The system switching between light and dark while the page is open recolours the lines.
    before = best["contrast"]
    page.emulate_media(color_scheme="dark" if scheme == "light" else "light")
    page.wait_for_function(
        f"() => {{ const b = ({BEST_LINE})({PARALLEL_PLOT}); return b.contrast >= 3 && b.contrast !== {before}; }}"
    )


def test_a_trial_links_to_its_files_only_where_the_study_has_a_job_dir(page, console, study):
    login(page)
    page.goto(study)  # submitted without a job dir: its trials have no folder to browse
    table = page.locator("#trial-table")
    expect(table.get_by_role("link", name="Logs of trial 1", exact=True)).to_have_count(1)
    expect(table.get_by_role("link", name=re.compile(r"^Files of trial"))).to_have_count(0)
    expect(table.locator("thead th").last).to_have_text("Logs")
    console.wait(console.background["tuning"], timeout=240)
    page.goto(f"{JOBS}study_1/")  # its job dir holds a folder per trial
    page.locator("#trial-table").get_by_role("link", name="Files of trial 1", exact=True).click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Outputs of study_1, trial 1")
    expect(page.get_by_text("names no job directory")).to_have_count(0)


def test_a_charts_data_table_arrives_when_its_data_is_opened(page, study):
    login(page)
    asked: list[str] = []
    page.on("request", lambda request: asked.append(request.url) if "/fragments/chart-data/" in request.url else None)
    page.goto(f"{study}?tab=charts")
    history = page.locator("#study-charts figure.chart").filter(has_text="Optimization history")
    expect(history.locator(".main-svg").first).to_be_visible(timeout=DRAWN_MS)
    # The charts come without their tables: each arrives when its Data is opened.
    expect(page.locator("#study-charts details table")).to_have_count(0)
    assert asked == []
    history.locator("summary", has_text="Data").focus()
    page.keyboard.press("Enter")  # the disclosure opens from the keyboard as before
    expect(history.locator("details table thead")).to_contain_text("Best so far")
    expect(history.locator("details table tbody tr").first).to_be_visible()
    assert len(asked) == 1 and "chart=1" in asked[0]
    # Closed and opened again, it shows the same table without asking again.
    page.keyboard.press("Enter")
    page.keyboard.press("Enter")
    expect(history.locator("details table thead")).to_be_visible()
    assert len(asked) == 1


DRAWN_ORDER = """window.__drawnOrder = [];
document.addEventListener("chart:drawn", (event) => {
  const figure = event.target.closest("figure.chart");
  if (figure && !window.__drawnOrder.includes(figure.id)) window.__drawnOrder.push(figure.id);
});"""


def test_a_linked_chart_is_drawn_before_the_charts_above_it(page, study):
    """The charts in view are drawn first: a link to one far down the tab shows it first, and the
    ones above it follow."""
    login(page)
    page.add_init_script(DRAWN_ORDER)
    page.goto(f"{study}#chart-importance")
    importance = page.locator("#chart-importance")
    expect(importance.locator(".main-svg").first).to_be_visible(timeout=DRAWN_MS)
    expect(importance).to_be_in_viewport()
    history = page.locator("#study-charts figure.chart").first
    expect(history.locator(".main-svg").first).to_be_attached(timeout=DRAWN_MS)  # the rest follow unseen
    order = page.evaluate("window.__drawnOrder")
    assert order.index("chart-importance") < order.index(history.get_attribute("id"))
