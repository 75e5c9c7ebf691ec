// Plotly charts: drawn from JSON the server put on the page, themed, with a toolbar that works
// offline and costs one Tab stop; a job's metric curves also get controls (smoothing, log y axis,
// x by step or time) computed here from the data already on the page. Every page works without it.
//
// After each draw or redraw the graph div gets a bubbling "chart:drawn" event; a study's per-trial
// lines carry meta.trial, so other code can find a trial's lines across charts.

// --- drawing -------------------------------------------------------------------------------------

// Charts come as JSON (script.chart-figure, each before the element it is drawn in) and are drawn
// one per task: a 2,000-trial study's ~10 charts take seconds to draw, and the page keeps answering
// input between them. Charts swapped in by htmx too. A chart in a hidden tab (console.js's tabs) is
// drawn when its tab is shown, not before: a study's page opens on its trials, and drawing charts
// nobody sees would keep a sort clicked meanwhile waiting. Once drawn, showing the tab again only
// fits a chart whose width changed while it was hidden.
//
// The charts in view are drawn first (an IntersectionObserver says which), the first screen's before
// the rest, so what the reader looks at is there soonest; a chart scrolled to goes next. The others
// follow in page order, one per task, so the tab is whole by the time the reader scrolls down.
const chartQueue = [];
let chartTimer = null;
const chartsInView = new Set();
const chartsPlaced = new WeakSet();  // the observer has said where they are at least once
const chartWatch = window.IntersectionObserver ? new IntersectionObserver((entries) => {
  entries.forEach((entry) => {
    chartsPlaced.add(entry.target);
    if (entry.isIntersecting) chartsInView.add(entry.target);
    else chartsInView.delete(entry.target);
  });
  scheduleChart();
}, { rootMargin: "100px 0px" }) : null;

function queueCharts() {
  document.querySelectorAll("script.chart-figure:not([data-queued])").forEach((data) => {
    if (data.closest("[hidden]")) return;
    data.dataset.queued = "true";
    chartQueue.push(data);
    if (chartWatch) chartWatch.observe(data.nextElementSibling);
  });
  if (chartQueue.length && !window.Plotly) loadPlotly();
  scheduleChart();
}

function scheduleChart() {
  if (chartQueue.length && chartTimer === null && window.Plotly) chartTimer = setTimeout(drawNextChart, 0);
}

// Where in the queue the next chart to draw is: the first in view, else (once the observer has
// placed every one still on the page) the first in page order; -1 while the observer has not.
function nextChart() {
  const seen = chartQueue.findIndex((data) => chartsInView.has(data.nextElementSibling));
  if (seen >= 0) return seen;
  const unplaced = (data) => data.isConnected && !chartsPlaced.has(data.nextElementSibling);
  return chartWatch && chartQueue.some(unplaced) ? -1 : 0;
}

function drawNextChart() {
  chartTimer = null;
  const index = nextChart();
  if (index < 0) return;  // the observer's first report schedules the next
  const [data] = chartQueue.splice(index, 1);
  const graph = data.nextElementSibling;
  if (chartWatch && graph) {
    chartWatch.unobserve(graph);
    chartsInView.delete(graph);
  }
  scheduleChart();
  if (!data.isConnected) return;
  if (data.closest("[hidden]")) {
    delete data.dataset.queued;  // its tab was left before its turn: drawn when shown again
    return;
  }
  // Parallel coordinates are drawn as SVG by static/parallel.js, not by Plotly.
  if (data.dataset.chart === "parallel") window.aiconsoleParallel.draw(graph, JSON.parse(data.textContent));
  else drawChart(graph, JSON.parse(data.textContent));
}

// plotly.min.js (3.5 MB, a long task to compile and run) is loaded by the first chart shown: a job
// page says where it is (data-plotly-src) and loads it only once a tab with charts is shown; a page
// whose charts show at once loads it itself (script[data-plotly], async).
function loadPlotly() {
  const holder = document.querySelector("[data-plotly-src]");
  if (window.Plotly || !holder || document.querySelector("script[data-plotly]")) return;
  const script = document.createElement("script");
  script.src = holder.dataset.plotlySrc;
  script.async = true;
  script.dataset.plotly = "";
  document.head.append(script);
}

document.addEventListener("tab:shown", (event) => {
  const panel = event.target;
  // Plotly loads while the tab's charts are fetched, not after.
  if (panel.matches("[data-plotly-src]") || panel.querySelector("[data-plotly-src]")) loadPlotly();
  queueCharts();
  // A chart drawn before the window changed size while its tab was hidden (Plotly's own resize
  // skips hidden charts).
  panel.querySelectorAll(".js-plotly-plot").forEach((graph) => {
    const layout = graph._fullLayout;
    if (window.Plotly && layout && Math.abs(layout.width - graph.clientWidth) > 1) Plotly.Plots.resize(graph);
  });
});

// A metric chart's figure as the server sent it (arrays decoded), redrawn from it on each change.
// A study's learning curves (figure.controlled-chart) take the same controls.
const chartSources = new WeakMap();
const CONTROLLED = "figure.metric-chart, figure.controlled-chart";

// What charts.py's Chart.figure_json sets, for figures built before it did (the data analysis
// page keeps its drawn charts): no Share, no logo, only the buttons that work offline.
const OFFLINE_CONFIG = { displaylogo: false, showSendToCloud: false };
const REMOVED_BUTTONS = ["sendChartToCloud", "select2d", "lasso2d", "autoScale2d", "zoomIn2d", "zoomOut2d",
  "toggleSpikelines", "hoverClosestCartesian", "hoverCompareCartesian", "toggleHover", "resetViews",
  "hoverClosestPie", "hoverClosestGl2d"];

function drawChart(graph, figure) {
  figure.config = { modeBarButtonsToRemove: REMOVED_BUTTONS, ...(figure.config || {}), ...OFFLINE_CONFIG,
    modeBarButtonsToAdd: [COPY_LINK_BUTTON] };
  if (graph.closest(CONTROLLED)) {
    decodeArrays(figure);
    chartSources.set(graph, figure);
    figure = withControls(figure, chartControls());
  }
  return plot(graph, "newPlot", themed(figure));
}

function plot(graph, how, figure) {
  return Plotly[how](graph, figure).then(() => {
    fitToolbar(graph);
    graph.dispatchEvent(new CustomEvent("chart:drawn", { bubbles: true }));
  });
}

// Charts follow the page's light or dark theme (console.css's colours, prefers-color-scheme),
// also when the system setting changes while the page is open.
const darkScheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;

function themeLayout(layout) {
  const style = getComputedStyle(document.body);
  const fg = style.getPropertyValue("--fg").trim() || "#1b1f24";
  const grid = style.getPropertyValue("--border").trim() || "#d0d7de";
  const update = { paper_bgcolor: "rgba(0,0,0,0)", plot_bgcolor: "rgba(0,0,0,0)", "font.color": fg,
    "legend.font.color": fg };
  Object.keys(layout).filter((key) => /^[xy]axis\d*$/.test(key)).concat(["xaxis", "yaxis"]).forEach((axis) => {
    update[axis + ".gridcolor"] = grid;
    update[axis + ".zerolinecolor"] = grid;
    update[axis + ".linecolor"] = grid;
  });
  return update;
}

function themed(figure) {
  const layout = figure.layout || (figure.layout = {});
  Object.entries(themeLayout(layout)).forEach(([path, value]) => {
    const keys = path.split(".");
    let target = layout;
    keys.slice(0, -1).forEach((key) => { target = target[key] || (target[key] = {}); });
    target[keys[keys.length - 1]] = value;
  });
  return figure;
}

if (darkScheme && darkScheme.addEventListener) {
  darkScheme.addEventListener("change", () => {
    document.querySelectorAll(".js-plotly-plot").forEach((chart) => {
      Plotly.relayout(chart, themeLayout(chart.layout));
    });
  });
}

document.addEventListener("DOMContentLoaded", () => { setUpControls(); queueCharts(); });
document.addEventListener("htmx:afterSettle", () => { setUpControls(); queueCharts(); });
// A study's metrics panel drawing every trial's lines or only the best ones' (its "Show every trial"):
// the page's URL says which (?metric_lines=all), so a copied link opens the same panel.
document.addEventListener("htmx:afterSwap", (event) => {
  const panel = document.querySelector("#metrics[data-lines]");
  if (!panel) return;
  const asked = event.detail.requestConfig && event.detail.requestConfig.elt;
  if (asked && asked.matches && asked.matches("[data-every-trial]")) {
    panel.querySelector("[data-every-trial]").focus();  // the pressed button was swapped: focus its successor
  }
  const url = new URL(location.href);
  if (panel.dataset.lines === "all") url.searchParams.set("metric_lines", "all");
  else url.searchParams.delete("metric_lines");
  if (url.href !== location.href) history.replaceState(history.state, "", url);
});
// The charts' first request failed: say so instead of "Loading the charts…" for ever.
["htmx:responseError", "htmx:sendError"].forEach((name) => document.addEventListener(name, (event) => {
  const asked = event.detail.elt;
  const note = asked.matches("#study-charts[aria-busy]") && asked.querySelector(".note");
  if (note) note.textContent = "The charts could not be loaded. Reload the page to try again.";
  // A chart's data table (fetched when its Data is first opened).
  const table = asked.matches("details.chart-data") && asked.querySelector(".chart-table > p");
  if (table) table.textContent = "The data could not be loaded. Reload the page to try again.";
}));
// plotly.min.js loads async, so that the page and the charts' request need not wait for it.
document.addEventListener("load", (event) => {
  if (event.target.matches && event.target.matches("script[data-plotly]")) queueCharts();
}, true);

// --- arrays --------------------------------------------------------------------------------------

// plotly.py sends numeric arrays as base64 typed arrays ({dtype, bdata}); the controls need numbers.
const TYPED_ARRAYS = { i1: Int8Array, u1: Uint8Array, u1c: Uint8ClampedArray, i2: Int16Array, u2: Uint16Array,
  i4: Int32Array, u4: Uint32Array, f4: Float32Array, f8: Float64Array };

function decodeArray(value) {
  if (!value || typeof value.bdata !== "string" || !TYPED_ARRAYS[value.dtype]) return value;
  const text = atob(value.bdata);
  const bytes = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) bytes[i] = text.charCodeAt(i);
  return new TYPED_ARRAYS[value.dtype](bytes.buffer);
}

function decodeArrays(figure) {
  (figure.data || []).forEach((trace) => {
    ["x", "y"].forEach((key) => { if (trace[key]) trace[key] = decodeArray(trace[key]); });
    if (trace.meta && trace.meta.wall) trace.meta.wall = decodeArray(trace.meta.wall);
  });
}

// --- metric chart controls -----------------------------------------------------------------------

// Kept in the URL (?smooth=0.6&ylog=1&xaxis=wall, other keys left alone) so a link shows what the
// sender saw, and in localStorage as this browser's default when the URL says nothing.
const CONTROLS_KEY = "aiconsole.chartControls";
const X_AXES = { step: "Step", wall: "Wall time", relative: "Relative time (s)" };
let controlsNow = null;

function storedControls() {
  try {
    return JSON.parse(localStorage.getItem(CONTROLS_KEY) || "{}") || {};
  } catch (error) {
    return {};
  }
}

function chartControls() {
  if (controlsNow) return controlsNow;
  const query = new URLSearchParams(location.search);
  const stored = storedControls();
  const pick = (key) => (query.has(key) ? query.get(key) : stored[key] != null ? String(stored[key]) : null);
  const smooth = parseFloat(pick("smooth"));
  const xaxis = pick("xaxis");
  controlsNow = {
    smooth: smooth >= 0 && smooth <= 0.99 ? smooth : 0,
    ylog: pick("ylog") === "1",
    xaxis: X_AXES[xaxis] ? xaxis : "step",
  };
  return controlsNow;
}

function saveControls(controls) {
  const url = new URL(location.href);
  const values = { smooth: controls.smooth ? String(controls.smooth) : null, ylog: controls.ylog ? "1" : null,
    xaxis: controls.xaxis !== "step" ? controls.xaxis : null };
  Object.entries(values).forEach(([key, value]) => {
    if (value === null) url.searchParams.delete(key);
    else url.searchParams.set(key, value);
  });
  history.replaceState(history.state, "", url);
  try {
    localStorage.setItem(CONTROLS_KEY, JSON.stringify({ smooth: controls.smooth, ylog: controls.ylog ? "1" : "0",
      xaxis: controls.xaxis }));
  } catch (error) { /* storage full or refused: the URL still says it */ }
}

// TensorBoard's smoothing: an exponential moving average, debiased so the line starts at the data.
// With ``gaps`` (a trace of many lines, a non-number between two), each line is smoothed on its own.
function smoothed(values, weight, gaps = false) {
  const out = new Float64Array(values.length);
  let last = 0;
  let count = 0;
  for (let i = 0; i < values.length; i++) {
    const value = values[i];
    if (!Number.isFinite(value)) {
      out[i] = value;
      if (gaps) { last = 0; count = 0; }
      continue;
    }
    last = last * weight + (1 - weight) * value;
    count += 1;
    out[i] = last / (1 - Math.pow(weight, count));
  }
  return out;
}

// Relative time runs from a line's first point (in a trace of many lines, from each one's own).
function xValues(trace, xaxis) {
  const wall = trace.meta && trace.meta.wall;
  if (xaxis === "step" || !wall || !wall.length) return trace.x;
  const out = new Float64Array(wall.length);
  const gaps = Boolean(trace.meta.gaps);
  let first = null;
  for (let i = 0; i < wall.length; i++) {
    if (gaps && !Number.isFinite(wall[i])) { out[i] = NaN; first = null; continue; }
    if (first === null) first = wall[i];
    out[i] = xaxis === "wall" ? wall[i] * 1000 : wall[i] - first;
  }
  return out;
}

// Points drawn per chart, shared by its lines (each keeps at least LINE_POINTS_MIN): SVG drawing
// costs by the point, and 20 lines of 2,000 points, twice over when smoothed, took 200 ms to redraw.
// A chart is about a thousand pixels wide: a line cut down keeps each stretch's lowest and highest
// point, so its envelope looks the same. The data table and the CSV have every point.
const CHART_POINTS = 10000;
const LINE_POINTS_MIN = 250;

function decimated(trace, limit) {
  const y = trace.y;
  // A trace of many lines keeps every point: its gaps between lines must stay where they are.
  if (!y || y.length <= limit || (trace.meta && trace.meta.gaps)) return trace;
  const buckets = Math.max(1, Math.floor(limit / 2));
  const size = y.length / buckets;
  const keep = [];
  for (let b = 0; b < buckets; b++) {
    const start = Math.floor(b * size);
    const end = Math.min(y.length, Math.floor((b + 1) * size));
    let low = start;
    let high = start;
    for (let i = start; i < end; i++) {
      if (y[i] < y[low]) low = i;
      if (y[i] > y[high]) high = i;
    }
    if (low === high) keep.push(low);
    else keep.push(Math.min(low, high), Math.max(low, high));
  }
  if (keep[keep.length - 1] !== y.length - 1) keep.push(y.length - 1);
  const pick = (values) => {
    if (!values || values.length !== y.length) return values;
    if (Array.isArray(values)) return keep.map((i) => values[i]);  // customdata: each point's trial
    const out = new Float64Array(keep.length);
    for (let i = 0; i < keep.length; i++) out[i] = values[keep[i]];
    return out;
  };
  return { ...trace, x: pick(trace.x), y: pick(y), customdata: pick(trace.customdata) };
}

// The figure to draw for these settings, built from the server's figure (never changed).
function withControls(source, controls) {
  const lines = source.data.filter((trace) => !(trace.meta && trace.meta.role === "scale"));
  const scales = source.data.filter((trace) => trace.meta && trace.meta.role === "scale");
  const limit = Math.max(LINE_POINTS_MIN, Math.floor(CHART_POINTS / (lines.length * (controls.smooth ? 2 : 1) || 1)));
  const faint = [];
  const drawn = lines.map((source) => {
    const x = xValues(source, controls.xaxis);
    // The wall times stay out of what Plotly gets: it walks a trace's meta on every redraw.
    const { wall, ...meta } = source.meta || {};
    const trace = { ...source, meta };
    if (!controls.smooth) return decimated({ ...trace, x }, limit);
    const group = trace.legendgroup || trace.name;
    const raw = { ...trace, x, mode: "lines", opacity: 0.25 * (trace.opacity || 1), showlegend: false,
      hoverinfo: "skip", legendgroup: group, meta: { ...meta, raw: true } };
    delete raw.hovertemplate;
    faint.push(decimated(raw, limit));
    const y = smoothed(trace.y, controls.smooth, Boolean(meta.gaps));
    return decimated({ ...trace, x, y, mode: "lines", legendgroup: group }, limit);
  });
  const layout = source.layout || {};
  const metric = (layout.meta && layout.meta.metric) || "";
  return {
    data: [...faint, ...drawn, ...scales],
    layout: {
      ...layout,
      xaxis: { ...(layout.xaxis || {}), title: { text: X_AXES[controls.xaxis] },
        type: controls.xaxis === "wall" ? "date" : "linear", uirevision: metric + controls.xaxis },
      yaxis: { ...(layout.yaxis || {}), type: controls.ylog ? "log" : "linear",
        uirevision: metric + (controls.ylog ? "log" : "linear") },
    },
    config: source.config,
  };
}

function metricGraphs() {
  return [...document.querySelectorAll(CONTROLLED.split(", ").map((figure) => figure + " .js-plotly-plot").join(", "))]
    .filter((g) => chartSources.has(g));
}

// Applies new settings to every metric chart on the page; resolves once all are redrawn.
function setChartControls(changes, { save = true } = {}) {
  controlsNow = { ...chartControls(), ...changes };
  if (save) saveControls(controlsNow);
  syncControls();
  return Promise.all(metricGraphs().map((graph) =>
    plot(graph, "react", themed(withControls(chartSources.get(graph), controlsNow)))));
}

// The settings' form, built here (it needs this script to do anything) in each [data-chart-controls].
function setUpControls() {
  document.querySelectorAll("[data-chart-controls]:not([data-ready])").forEach((box) => {
    box.dataset.ready = "true";
    const id = "chart-controls-" + box.dataset.chartControls;
    box.innerHTML = `
      <span class="chart-control"><label for="${id}-smooth">Smoothing</label>
        <input type="range" id="${id}-smooth" name="smooth" min="0" max="0.99" step="0.01"
          aria-describedby="${id}-smooth-value"><output id="${id}-smooth-value" for="${id}-smooth"></output></span>
      <span class="chart-control"><input type="checkbox" id="${id}-ylog" name="ylog">
        <label for="${id}-ylog">Log y axis</label></span>
      <span class="chart-control"><label for="${id}-xaxis">X axis</label>
        <select id="${id}-xaxis" name="xaxis">${Object.entries(X_AXES).map(([value, text]) =>
          `<option value="${value}">${text}</option>`).join("")}</select></span>`;
    let frame = null;
    box.addEventListener("input", (event) => {
      if (event.target.name !== "smooth") return;
      box.querySelector("output").textContent = Number(event.target.value).toFixed(2);
      // Dragging the slider redraws once per frame, not once per pixel.
      if (frame === null) frame = requestAnimationFrame(() => {
        frame = null;
        setChartControls({ smooth: Number(event.target.value) }, { save: false });
      });
    });
    box.addEventListener("change", (event) => {
      const target = event.target;
      const change = { smooth: { smooth: Number(target.value) }, ylog: { ylog: target.checked },
        xaxis: { xaxis: target.value } }[target.name];
      if (change) setChartControls(change);
    });
  });
  syncControls();
}

function syncControls() {
  const controls = chartControls();
  document.querySelectorAll("[data-chart-controls][data-ready]").forEach((box) => {
    const slider = box.querySelector("[name=smooth]");
    if (document.activeElement !== slider) slider.value = String(controls.smooth);
    box.querySelector("output").textContent = controls.smooth.toFixed(2);
    box.querySelector("[name=ylog]").checked = controls.ylog;
    box.querySelector("[name=xaxis]").value = controls.xaxis;
  });
}

// --- toolbar -------------------------------------------------------------------------------------

// Two interlocked rings: "Copy link to this chart" copies the page's URL (with the controls' settings)
// ending in the chart's #id.
const COPY_LINK_BUTTON = {
  name: "copyLink",
  title: "Copy link to this chart",
  icon: { width: 24, height: 24, path: "M6 8h4a4 4 0 0 1 0 8h-4a4 4 0 0 1 0-8zM6 10a2 2 0 0 0 0 4h4a2 2 0 0 0 0-4z"
    + "M14 8h4a4 4 0 0 1 0 8h-4a4 4 0 0 1 0-8zM14 10a2 2 0 0 0 0 4h4a2 2 0 0 0 0-4z" },
  click: (graph) => copyChartLink(graph),
};

function chartLink(graph) {
  const target = graph.closest("[id]");
  const url = new URL(location.href);
  url.hash = target ? target.id : "";
  return url.href;
}

function copyChartLink(graph) {
  const link = chartLink(graph);
  const say = (text) => {
    let status = graph.parentElement.querySelector(":scope > .chart-copied");
    if (!status) {
      status = document.createElement("p");
      status.className = "chart-copied";
      status.setAttribute("role", "status");
      graph.after(status);
    }
    status.textContent = text;
  };
  const copied = navigator.clipboard ? navigator.clipboard.writeText(link) : Promise.reject(new Error("no clipboard"));
  return copied.then(() => say("Link to this chart copied."), () => say("Copy this link to the chart: " + link));
}

function chartName(graph) {
  const caption = graph.closest("figure") && graph.closest("figure").querySelector("figcaption");
  const text = caption ? caption.textContent.replace(/\s*\(CSV\)\s*$/, "").trim() : "";
  return text || (graph.layout && graph.layout.meta && graph.layout.meta.metric) || "chart";
}

// WAI-ARIA toolbar: one Tab stop per chart (the last button used), Left/Right/Home/End move along
// it; nothing else inside the plot is a Tab stop. Plotly may rebuild its buttons on any redraw.
function fitToolbar(graph) {
  graph.querySelectorAll("a[href], button, input, select, textarea, [tabindex]").forEach((el) => {
    if (!el.closest(".modebar")) el.tabIndex = -1;
  });
  const bar = graph.querySelector(".modebar");
  if (!bar) return;
  bar.setAttribute("role", "toolbar");
  bar.setAttribute("aria-label", "Chart tools: " + chartName(graph));
  const buttons = [...bar.querySelectorAll(".modebar-btn")];
  buttons.forEach((button) => {
    if (!button.getAttribute("aria-label")) button.setAttribute("aria-label", button.dataset.title || "Chart tool");
  });
  const current = buttons.find((button) => button.dataset.title === bar.dataset.current) || buttons[0];
  buttons.forEach((button) => { button.tabIndex = button === current ? 0 : -1; });
  if (bar.dataset.roving) return;
  bar.dataset.roving = "true";
  if (!graph.dataset.toolbarWatched) {
    graph.dataset.toolbarWatched = "true";
    graph.on("plotly_afterplot", () => fitToolbar(graph));
  }
  bar.addEventListener("focusin", (event) => {
    const button = event.target.closest(".modebar-btn");
    if (!button) return;
    bar.dataset.current = button.dataset.title || "";
    bar.querySelectorAll(".modebar-btn").forEach((other) => { other.tabIndex = other === button ? 0 : -1; });
  });
  bar.addEventListener("keydown", (event) => {
    const all = [...bar.querySelectorAll(".modebar-btn")];
    const index = all.indexOf(document.activeElement);
    if (index < 0) return;
    const next = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: all.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    all[(next + all.length) % all.length].focus();
  });
}

window.aiconsoleCharts = { draw: drawChart, controls: chartControls, setControls: setChartControls, smoothed,
  copyLink: copyChartLink };
