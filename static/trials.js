// A tuning study's page: its charts and its trial table talk to each other.
// - Hovering a trial in a chart (a point, a line) or in the table marks it everywhere: its row,
//   and its points or line in every chart on the page.
// - Clicking a trial's point or line opens that trial's logs.
// - Brushing an axis of the parallel-coordinates chart (static/parallel.js, its "parallel:brush"
//   events) filters the table by that column's range (the same "Filter by value" fields a user can
//   type in, so the URL keeps it).
// The page works without this file: the table sorts and filters through links and a form.
(() => {
  const table = () => document.getElementById("trial-table");
  const filters = () => document.getElementById("trial-filters");
  let marked = null;
  let brushing = false;  // the table's next swap answers a brush: the chart's note says what it left

  // The trial a Plotly point belongs to: a point's customdata, else its trace's meta.trial.
  function trialOf(point) {
    if (point.customdata !== undefined && point.customdata !== null && !Array.isArray(point.customdata)) {
      return String(point.customdata);
    }
    const meta = point.data && point.data.meta;
    return meta && meta.trial !== undefined ? String(meta.trial) : null;
  }

  function studyCharts() {
    return [...document.querySelectorAll("#study-charts .js-plotly-plot, #metrics .js-plotly-plot")];
  }

  // One extra trace per chart draws the marked trial's points on top ("highlight" in its meta).
  // Values are read from _fullData: gd.data may still hold a figure's arrays in their encoded form.
  function markInChart(chart, trial) {
    const index = chart.data.findIndex((trace) => trace.meta && trace.meta.highlight);
    const x = [], y = [];
    let lines = false;
    (chart._fullData || []).forEach((trace) => {
      if (trace.meta && (trace.meta.highlight || trace.meta.raw)) return;  // not a smoothed line's faint original
      const own = trace.meta && trace.meta.trial !== undefined;
      if (!trace.customdata && !own) return;
      if (trial !== null && own && String(trace.meta.trial) !== trial) return;
      const xs = trace.x || [], ys = trace.y || [];
      for (let i = 0; i < xs.length; i++) {
        const id = own ? String(trace.meta.trial) : trace.customdata[i];
        if (trial !== null && id !== null && id !== undefined && String(id) === trial) {
          x.push(xs[i]);
          y.push(ys[i]);
          if ((trace.mode || "").includes("lines")) lines = true;
        }
      }
      if (x.length && lines) { x.push(null); y.push(null); }
    });
    if (index >= 0) {
      Plotly.restyle(chart, { x: [x], y: [y], mode: [lines ? "lines+markers" : "markers"] }, [index]);
    } else if (x.length) {
      const colour = getComputedStyle(document.body).getPropertyValue("--accent").trim() || "#d6336c";
      Plotly.addTraces(chart, {
        x, y, mode: lines ? "lines+markers" : "markers", name: "Marked trial", showlegend: false, hoverinfo: "skip",
        meta: { highlight: true }, line: { color: colour, width: 4 },
        marker: { color: colour, size: 12, symbol: "circle-open", line: { width: 3, color: colour } },
      });
    }
  }

  function mark(trial) {
    if (trial === marked) return;
    marked = trial;
    document.querySelectorAll("#trial-table tr.marked-trial").forEach((row) => row.classList.remove("marked-trial"));
    if (trial !== null) {
      const row = document.querySelector(`#trial-table tr[data-trial="${CSS.escape(trial)}"]`);
      if (row) row.classList.add("marked-trial");
    }
    if (!window.Plotly) return;
    studyCharts().forEach((chart) => {
      if (chart.data && chart.data.some((trace) => !(trace.meta && trace.meta.highlight)
          && (trace.customdata || (trace.meta && trace.meta.trial !== undefined)))) {
        markInChart(chart, trial);
      }
    });
  }

  function openTrial(trial) {
    const query = new URLSearchParams(location.search);
    query.set("trial", trial);
    location.assign(location.pathname + "?" + query.toString() + "#logs");
  }

  // Brushing: each axis' range becomes that column's from/to (or its categories); an axis without
  // one clears its column's.
  function brushed({ axes, ranges }) {
    const form = filters();
    if (!form) return;
    axes.forEach((axis, index) => {
      const range = ranges[index];
      const low = range ? range[0] : null;
      const high = range ? range[1] : null;
      if (axis.categories) {
        form.querySelectorAll(`input[type=checkbox][name="in.${CSS.escape(axis.key)}"]`).forEach((box) => {
          const position = axis.categories.indexOf(box.value);
          box.checked = !range || (position >= low && position <= high);
        });
        return;
      }
      const value = (v) => (v === null ? "" : String(Number((axis.log ? 10 ** v : v).toPrecision(6))));
      const from = form.querySelector(`input[name="min.${CSS.escape(axis.key)}"]`);
      const to = form.querySelector(`input[name="max.${CSS.escape(axis.key)}"]`);
      if (from) from.value = value(low);
      if (to) to.value = value(high);
    });
    brushing = true;
    form.dispatchEvent(new Event("change", { bubbles: true }));
  }

  // The other way: the table's filters (the page's URL) as brushes on the axes of their columns, so
  // a link to a brushed study shows its brushes. A column's categories kept that are not next to
  // each other on its axis are no one range: that axis stays unbrushed.
  function filtersAsBrushes(axes) {
    const form = filters();
    if (!form) return [];
    return axes.map((axis) => {
      if (axis.categories) {
        const boxes = [...form.querySelectorAll(`input[type=checkbox][name="in.${CSS.escape(axis.key)}"]`)];
        const kept = axis.categories.map((c) => boxes.some((box) => box.value === c && box.checked));
        const first = kept.indexOf(true);
        const last = kept.lastIndexOf(true);
        if (!boxes.length || kept.every(Boolean) || first < 0 || kept.slice(first, last + 1).includes(false)) return null;
        return [first - 0.25, last + 0.25];
      }
      const bound = (name) => {
        const input = form.querySelector(`input[name="${name}.${CSS.escape(axis.key)}"]`);
        const value = input && input.value !== "" ? Number(input.value) : NaN;
        if (!Number.isFinite(value) || (axis.log && value <= 0)) return null;
        return axis.log ? Math.log10(value) : value;
      };
      const low = bound("min");
      const high = bound("max");
      return low === null && high === null ? null : [low === null ? -Infinity : low, high === null ? Infinity : high];
    });
  }

  // The table is in another tab than the charts: a note under the parallel coordinates says what a
  // brush left in it, with a link there.
  function brushNote(chart) {
    const figure = chart.closest("figure");
    if (!figure || figure.querySelector("[data-brush-result]")) return;
    const note = document.createElement("p");
    note.className = "note";
    note.setAttribute("role", "status");
    note.dataset.brushResult = "";
    (figure.querySelector("figcaption") || chart).after(note);
  }

  function sayBrushed() {
    const note = document.querySelector("[data-brush-result]");
    if (!note || !table()) return;
    const { matching, trials } = table().dataset;
    const link = document.createElement("a");
    link.href = "#trials";
    link.dataset.tabLink = "trials";
    link.textContent = "Open the trial table";
    note.replaceChildren(`The trial table now shows the ${matching} of ${trials} trials that match its filters. `, link);
  }

  document.addEventListener("chart:drawn", (event) => {
    const chart = event.target;
    if (!chart.closest("#study-charts, #metrics") || chart.dataset.trialLinked) return;
    chart.dataset.trialLinked = "true";
    if (chart.matches(".parallel-plot")) {
      brushNote(chart);
      window.aiconsoleParallel.setBrushes(chart, filtersAsBrushes(window.aiconsoleParallel.axes(chart)));
      return;
    }
    chart.on("plotly_hover", (data) => { const trial = trialOf(data.points[0]); if (trial) mark(trial); });
    chart.on("plotly_unhover", () => mark(null));
    chart.on("plotly_click", (data) => { const trial = trialOf(data.points[0]); if (trial) openTrial(trial); });
  });

  let pending = null;  // one request for a run of key presses, not one per press
  document.addEventListener("parallel:brush", (event) => {
    if (!event.target.closest("#study-charts")) return;
    clearTimeout(pending);
    pending = setTimeout(() => brushed(event.detail), 250);
  });

  // The table marks its trials in the charts: a row hovered or focused.
  ["mouseover", "focusin"].forEach((name) => document.addEventListener(name, (event) => {
    const row = event.target.closest && event.target.closest("#trial-table tr[data-trial]");
    if (row) mark(row.dataset.trial);
  }));
  document.addEventListener("mouseout", (event) => {
    const row = event.target.closest && event.target.closest("#trial-table tr[data-trial]");
    if (row && !row.contains(event.relatedTarget)) mark(null);
  });

  // Compare selected trials: the ticked boxes (kept across the table's refreshes) to the compare page.
  document.addEventListener("submit", (event) => {
    const form = event.target;
    if (!form.matches("form[data-trial-compare]")) return;
    const ticked = [...document.querySelectorAll('#trial-table input[form="trial-compare"]:checked')];
    const help = document.getElementById("trial-compare-help");
    if (ticked.length < 2) {
      event.preventDefault();
      help.textContent = "Tick at least two trials in the table to compare them.";
      help.setAttribute("role", "alert");
    }
  });
  // Ticks survive the table's swaps (a live study refreshes it; a sort or filter replaces it).
  const ticks = new Set();
  document.addEventListener("change", (event) => {
    if (!event.target.matches || !event.target.matches('#trial-table input[form="trial-compare"]')) return;
    if (event.target.checked) ticks.add(event.target.value); else ticks.delete(event.target.value);
  });
  // A swap of the table first has htmx clean up every element of the old one (two events each, and
  // a walk up the page for extensions): some 1,800 elements for 100 rows, two thirds of the swap.
  // The rows have no htmx behaviour to clean up, so they go at once when the old table's own
  // cleanup starts (the new table is in the page by then: nothing is drawn in between).
  document.addEventListener("htmx:beforeCleanupElement", (event) => {
    if (event.target.id !== "trial-table") return;
    const rows = event.target.querySelector("tbody");
    if (rows) rows.replaceChildren();
  });
  document.addEventListener("htmx:afterSwap", (event) => {
    if (!table()) return;
    // The address the table's view has (sort, filters, columns), other keys of the page's kept.
    const address = table().dataset.pageUrl;
    if (address && address !== location.pathname + location.search) {
      history.replaceState(history.state, "", address + location.hash);
    }
    table().querySelectorAll('input[form="trial-compare"]').forEach((box) => { box.checked = ticks.has(box.value); });
    if (marked !== null) { const trial = marked; marked = null; mark(trial); }
    const config = event.detail.requestConfig;
    if (brushing && config && config.elt === filters()) { brushing = false; sayBrushed(); }
  });
})();
