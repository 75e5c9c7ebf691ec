// Parallel coordinates drawn as plain SVG from the plain data jobs/metrics/charts.py's ParallelChart
// puts on the page; static/charts.js queues them with the other charts and calls draw(). plotly.js
// drew them with WebGL in three contexts, which a browser without a GPU rasterizes in software for
// seconds however few the lines; 300 SVG paths take milliseconds.
//
// - One vertical axis per parameter and one for the objective (a log axis holds log10 of the values,
//   a categorical one each category's index); each line is a trial (or a job), coloured by its
//   spec.color on a scale that keeps contrast with the page's light or dark background, the highest
//   drawn in front.
// - Brushing: a drag along an axis keeps the lines whose value there is in the range (the others turn
//   faint, behind); a click on the axis clears it. From the keyboard each axis is a Tab stop: Up and
//   Down move the top of its range, Shift with Up and Down its bottom, Escape clears it.
// - Each change of the brushes dispatches a bubbling "parallel:brush" event on the plot (detail: the
//   axes and, per axis, [low, high] in the axis' own units or null); static/trials.js filters a
//   study's trial table by it. Each draw dispatches "chart:drawn", as the Plotly charts do.
(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const HEIGHT = 450;
  const MARGIN = { top: 64, right: 88, bottom: 28, left: 64 };
  const AXIS_MIN_GAP = 88;  // px between axes: a narrower window scrolls the chart sideways
  const KEY_STEPS = 20;  // a key press moves a brush's end by 1/20 of its axis (a category on one)

  // Viridis without the end the background would hide: the high end is the one that stands out (on a
  // light page the dark purple, on a dark page the yellow), the low end recedes into the background.
  const SCALES = {
    light: ["#7ad151", "#22a884", "#2a788e", "#414487", "#440154"],
    dark: ["#414487", "#2a788e", "#22a884", "#7ad151", "#fde725"],
  };
  const darkScheme = window.matchMedia ? window.matchMedia("(prefers-color-scheme: dark)") : null;
  const charts = new WeakMap();  // plot → {spec, brushes, width, axes, paths, …}
  let drawnCount = 0;  // for ids unique on the page

  function node(name, attributes, parent) {
    const element = document.createElementNS(SVG, name);
    Object.entries(attributes).forEach(([key, value]) => element.setAttribute(key, value));
    if (parent) parent.append(element);
    return element;
  }

  function colourAt(scale, t) {
    const at = Math.min(1, Math.max(0, t)) * (scale.length - 1);
    const i = Math.min(scale.length - 2, Math.floor(at));
    const [a, b] = [scale[i], scale[i + 1]].map((c) => [1, 3, 5].map((k) => parseInt(c.slice(k, k + 2), 16)));
    const mix = a.map((v, k) => Math.round(v + (b[k] - v) * (at - i)));
    return `rgb(${mix.join(",")})`;
  }

  const finite = (value) => typeof value === "number" && Number.isFinite(value);

  function extent(values) {
    let low = Infinity, high = -Infinity;
    values.forEach((v) => { if (finite(v)) { low = Math.min(low, v); high = Math.max(high, v); } });
    return low <= high ? [low, high] : [0, 1];
  }

  // Each axis' place and scale for a plot ``width`` wide.
  function layout(spec, width) {
    const count = spec.axes.length;
    const inner = Math.max(1, width - MARGIN.left - MARGIN.right);
    const bottom = HEIGHT - MARGIN.bottom;
    return spec.axes.map((axis, i) => {
      let [low, high] = axis.categories ? [0, axis.categories.length - 1] : extent(axis.values);
      if (high - low < 1e-12) { low -= 0.5; high += 0.5; }
      const x = MARGIN.left + (count > 1 ? (inner * i) / (count - 1) : inner / 2);
      const y = (v) => bottom - ((v - low) / (high - low)) * (bottom - MARGIN.top);
      const value = (py) => low + ((bottom - py) / (bottom - MARGIN.top)) * (high - low);
      return { axis, x, low, high, y, value };
    });
  }

  // A value of an axis as its column says it: the value itself on a log axis, a category's name.
  function shown(placed, value) {
    const { axis } = placed;
    if (axis.categories) return axis.categories[Math.min(axis.categories.length - 1, Math.max(0, Math.round(value)))];
    return String(Number((axis.log ? 10 ** value : value).toPrecision(4)));
  }

  function rangeText(placed, range) {
    const { axis } = placed;
    if (axis.categories) {
      const kept = axis.categories.filter((_, i) => i >= range[0] && i <= range[1]);
      return kept.length ? kept.join(", ") : "none";
    }
    return `${shown(placed, range[0])} to ${shown(placed, range[1])}`;
  }

  function axisName(placed, range) {
    const { axis, low, high } = placed;
    const all = axis.categories ? axis.categories.join(", ") : `${shown(placed, low)} to ${shown(placed, high)}`;
    return `${axis.label} axis, ${all}; ` + (range ? `brushed: ${rangeText(placed, range)}` : "not brushed");
  }

  function button(text, action) {
    const element = document.createElement("button");
    element.type = "button";
    element.textContent = text;
    element.addEventListener("click", action);
    return element;
  }

  // The whole chart, from its spec and brushes (a first draw, a new width, a new theme).
  function render(plot) {
    const chart = charts.get(plot);
    const visible = plot.clientWidth;
    if (!visible) return;  // in a hidden panel: the resize observer draws it once shown
    const { spec } = chart;
    const width = Math.max(visible, MARGIN.left + MARGIN.right + AXIS_MIN_GAP * (spec.axes.length - 1));
    const focused = plot.contains(document.activeElement) ? document.activeElement.dataset.axis : undefined;
    const style = getComputedStyle(plot);
    const fg = style.getPropertyValue("--fg").trim() || "#1b1f24";
    const muted = style.getPropertyValue("--muted").trim() || "#59636e";
    const accent = style.getPropertyValue("--accent").trim() || "#0b57d0";
    const scale = SCALES[darkScheme && darkScheme.matches ? "dark" : "light"];
    const axes = layout(spec, width);
    const bottom = HEIGHT - MARGIN.bottom;
    const id = chart.id;
    chart.width = visible;
    chart.axes = axes;

    const svg = node("svg", { width, height: HEIGHT, viewBox: `0 0 ${width} ${HEIGHT}`, class: "parallel-svg",
      role: "group", "aria-label": `${spec.trials.length} lines across ${spec.axes.length} axes`, "font-size": 12 });
    const [cmin, cmax] = extent(spec.color);
    const position = (c) => (cmax > cmin ? (c - cmin) / (cmax - cmin) : 1);
    // The lowest colour first, so that the highest is drawn in front.
    const order = spec.trials.map((_, i) => i);
    const rank = (i) => (finite(spec.color[i]) ? spec.color[i] : -Infinity);
    order.sort((a, b) => rank(a) - rank(b));
    const faint = node("g", { class: "parallel-faint", fill: "none", "aria-hidden": "true" }, svg);
    const chosen = node("g", { class: "parallel-lines", fill: "none", "stroke-width": 1.5, "aria-hidden": "true" }, svg);
    chart.order = order;
    chart.faint = faint;
    chart.chosen = chosen;
    chart.paths = order.map((i) => {
      let d = "";
      let pen = "M";
      axes.forEach(({ axis, x, y }) => {
        const v = axis.values[i];
        if (!finite(v)) { pen = "M"; return; }  // no value there: the line breaks
        d += `${pen}${x.toFixed(1)},${y(v).toFixed(1)}`;
        pen = "L";
      });
      const colour = finite(spec.color[i]) ? colourAt(scale, position(spec.color[i])) : muted;
      return node("path", { d, stroke: colour, "data-trial": spec.trials[i] }, chosen);
    });

    const gap = axes.length > 1 ? axes[1].x - axes[0].x : width;
    // Labels alternate between two rows where one would run into the next, each cut to its room.
    const crowded = spec.axes.some((axis) => axis.label.length * 7 + 8 > gap);
    const room = Math.max(4, Math.floor(((crowded ? 2 : 1) * gap) / 7) - 1);
    chart.axisNodes = axes.map((placed, i) => {
      const { axis, x, low, high, y } = placed;
      const group = node("g", { class: "parallel-axis", tabindex: 0, role: "group", "data-axis": i,
        "aria-describedby": `${id}-help` }, svg);
      const drawn = node("g", { "aria-hidden": "true", fill: fg }, group);
      node("line", { class: "parallel-axis-line", x1: x, x2: x, y1: MARGIN.top, y2: bottom, stroke: fg }, drawn);
      const ticks = axis.ticks.filter(([v]) => v >= low - 1e-9 && v <= high + 1e-9);
      const every = Math.max(1, Math.ceil(ticks.length / 12));
      ticks.filter((_, k) => k % every === 0).forEach(([v, text]) => {
        node("line", { x1: x - 4, x2: x, y1: y(v), y2: y(v), stroke: fg }, drawn);
        const label = node("text", { x: x - 7, y: y(v), "text-anchor": "end", "dominant-baseline": "middle" }, drawn);
        label.textContent = text;
      });
      // The first and last labels keep inside the chart, the others are centred over their axis.
      const first = i === 0 && axes.length > 1, last = i === axes.length - 1 && axes.length > 1;
      const title = node("text", { x: first ? 2 : last ? Math.min(width - 2, x + 40) : x,
        y: MARGIN.top - 14 - (crowded && i % 2 ? 18 : 0), "text-anchor": first ? "start" : last ? "end" : "middle",
        "font-weight": 600, class: "parallel-label" }, drawn);
      title.textContent = axis.label.length > room ? axis.label.slice(0, room - 1) + "…" : axis.label;
      node("rect", { class: "parallel-brush", x: x - 7, y: MARGIN.top, width: 14, height: 0, fill: accent,
        "fill-opacity": 0.3, stroke: accent, visibility: "hidden" }, group);
      node("rect", { class: "parallel-hit", x: x - 14, y: MARGIN.top - 4, width: 28,
        height: bottom - MARGIN.top + 8, fill: "transparent" }, group);
      return group;
    });

    // The colour bar, labelled with the objective (a minimized one is coloured by its negative).
    const bar = node("g", { "aria-hidden": "true", fill: fg }, svg);
    const barX = width - MARGIN.right + 34;
    const gradient = node("linearGradient", { id: `${id}-scale`, x1: 0, x2: 0, y1: 1, y2: 0 }, node("defs", {}, bar));
    scale.forEach((colour, k) => node("stop", { offset: k / (scale.length - 1), "stop-color": colour }, gradient));
    node("rect", { x: barX, y: MARGIN.top, width: 12, height: bottom - MARGIN.top, fill: `url(#${id}-scale)` }, bar);
    (spec.colorbar || []).forEach(([value, text]) => {
      const at = bottom - position(value) * (bottom - MARGIN.top);
      const label = node("text", { x: barX + 16, y: at, "dominant-baseline": "middle" }, bar);
      label.textContent = text;
    });

    const tools = document.createElement("div");
    tools.className = "parallel-tools";
    chart.clear = button("Clear brushes", () => {
      chart.brushes = chart.brushes.map(() => null);
      changed(plot, "Every line shown.");
    });
    tools.append(chart.clear, button("Copy link to this chart", () => window.aiconsoleCharts.copyLink(plot)),
      button("Download SVG", () => download(plot)));
    // Too narrow a window (a phone) scrolls the chart sideways, in a region that says so.
    const scroller = document.createElement("div");
    scroller.className = "parallel-scroll table-scroll";
    scroller.setAttribute("role", "region");
    scroller.setAttribute("aria-label", "Parallel coordinates" + (width > visible ? " (scrolls sideways)" : ""));
    scroller.append(svg);
    const help = document.createElement("p");
    help.className = "help parallel-help";
    help.id = `${id}-help`;
    help.textContent = "Drag along an axis to keep the lines in that range, click it to clear it; from the keyboard, "
      + "Tab to an axis: Up and Down move the top of its range, Shift with Up and Down its bottom, Escape clears it.";
    const status = document.createElement("p");
    status.className = "visually-hidden";
    status.setAttribute("role", "status");
    chart.status = status;
    plot.replaceChildren(tools, scroller, help, status);
    applyBrushes(plot);
    if (focused !== undefined) chart.axisNodes[Number(focused)].focus({ preventScroll: true });
    plot.dataset.drawn = "true";
    plot.dispatchEvent(new CustomEvent("chart:drawn", { bubbles: true }));
  }

  // The brushes shown, each axis' name saying its own, and the lines they keep in front.
  function applyBrushes(plot) {
    const chart = charts.get(plot);
    const { spec, brushes } = chart;
    chart.axes.forEach((placed, i) => {
      const range = brushes[i];
      const rect = chart.axisNodes[i].querySelector(".parallel-brush");
      if (range) {
        const top = placed.y(Math.min(range[1], placed.high));
        const end = placed.y(Math.max(range[0], placed.low));
        rect.setAttribute("y", Math.min(top, end));
        rect.setAttribute("height", Math.max(2, Math.abs(end - top)));
        rect.setAttribute("visibility", "visible");
      } else {
        rect.setAttribute("visibility", "hidden");
      }
      chart.axisNodes[i].setAttribute("aria-label", axisName(placed, range));
    });
    let kept = 0;
    chart.order.forEach((i, k) => {
      const keep = brushes.every((range, j) => {
        if (!range) return true;
        const v = spec.axes[j].values[i];
        return finite(v) && v >= range[0] && v <= range[1];
      });
      if (keep) kept += 1;
      (keep ? chart.chosen : chart.faint).append(chart.paths[k]);
    });
    chart.kept = kept;
    chart.clear.disabled = !brushes.some(Boolean);
  }

  function changed(plot, said) {
    const chart = charts.get(plot);
    applyBrushes(plot);
    chart.status.textContent = `${said} ${chart.kept} of ${chart.spec.trials.length} lines kept.`;
    plot.dispatchEvent(new CustomEvent("parallel:brush", { bubbles: true,
      detail: { axes: axesOf(plot), ranges: chart.brushes.map((range) => (range ? [...range] : null)) } }));
  }

  // A drag along an axis brushes it, a click clears it.
  document.addEventListener("pointerdown", (event) => {
    const group = event.target.closest && event.target.closest(".parallel-plot .parallel-axis");
    if (!group || event.button !== 0) return;
    const plot = group.closest(".parallel-plot");
    const chart = charts.get(plot);
    const i = Number(group.dataset.axis);
    const placed = chart.axes[i];
    const svg = group.ownerSVGElement;
    const yOf = (e) => Math.min(HEIGHT - MARGIN.bottom, Math.max(MARGIN.top, e.clientY - svg.getBoundingClientRect().top));
    const start = yOf(event);
    let moved = false;
    let frame = null;
    event.preventDefault();
    group.focus({ preventScroll: true });
    group.setPointerCapture(event.pointerId);
    const move = (e) => {
      const now = yOf(e);
      if (!moved && Math.abs(now - start) < 3) return;
      moved = true;
      const [a, b] = [placed.value(start), placed.value(now)];
      chart.brushes[i] = [Math.min(a, b), Math.max(a, b)];
      if (frame === null) frame = requestAnimationFrame(() => { frame = null; applyBrushes(plot); });
    };
    const end = () => {
      group.removeEventListener("pointermove", move);
      group.removeEventListener("pointerup", end);
      group.removeEventListener("pointercancel", end);
      if (frame !== null) cancelAnimationFrame(frame);
      if (!moved) chart.brushes[i] = null;
      const range = chart.brushes[i];
      changed(plot, range ? `${placed.axis.label}: ${rangeText(placed, range)}.` : `${placed.axis.label}: not brushed.`);
    };
    group.addEventListener("pointermove", move);
    group.addEventListener("pointerup", end);
    group.addEventListener("pointercancel", end);
  });

  document.addEventListener("keydown", (event) => {
    const group = event.target.closest && event.target.closest(".parallel-plot .parallel-axis");
    if (!group || event.altKey || event.ctrlKey || event.metaKey) return;
    const plot = group.closest(".parallel-plot");
    const chart = charts.get(plot);
    const i = Number(group.dataset.axis);
    const placed = chart.axes[i];
    const { low, high } = placed;
    const categories = Boolean(placed.axis.categories);
    const pad = categories ? 0.5 : 0;
    if (["Escape", "Delete", "Backspace"].includes(event.key)) {
      if (!chart.brushes[i]) return;
      chart.brushes[i] = null;
    } else if (event.key === "ArrowUp" || event.key === "ArrowDown") {
      const range = chart.brushes[i] ? [...chart.brushes[i]] : [low - pad, high + pad];
      const step = (categories ? 1 : (high - low) / KEY_STEPS) * (event.key === "ArrowUp" ? 1 : -1);
      const end = event.shiftKey ? 0 : 1;
      range[end] = Math.min(high + pad, Math.max(low - pad, range[end] + step));
      if (range[0] > range[1]) range[1 - end] = range[end];  // an end pushed past the other takes it along
      chart.brushes[i] = range;
    } else {
      return;
    }
    event.preventDefault();
    const range = chart.brushes[i];
    changed(plot, range ? `${placed.axis.label}: ${rangeText(placed, range)}.` : `${placed.axis.label}: not brushed.`);
  });

  // The SVG as a file, its faint lines as they look (the page's style sheet stays behind).
  function download(plot) {
    const svg = plot.querySelector("svg").cloneNode(true);
    svg.setAttribute("xmlns", SVG);
    const faint = getComputedStyle(plot).getPropertyValue("--border").trim() || "#d0d7de";
    svg.querySelectorAll(".parallel-faint path").forEach((path) => path.setAttribute("stroke", faint));
    svg.querySelectorAll(".parallel-hit, .parallel-brush[visibility=hidden]").forEach((rect) => rect.remove());
    const url = URL.createObjectURL(new Blob([new XMLSerializer().serializeToString(svg)], { type: "image/svg+xml" }));
    const link = document.createElement("a");
    link.href = url;
    link.download = "parallel-coordinates.svg";
    link.click();
    setTimeout(() => URL.revokeObjectURL(url), 60_000);
  }

  // A new width (the window, a tab shown after the window changed) draws it again, brushes kept.
  const resized = window.ResizeObserver ? new ResizeObserver((entries) => {
    entries.forEach(({ target }) => {
      const chart = charts.get(target);
      if (chart && target.clientWidth && target.clientWidth !== chart.width) render(target);
    });
  }) : null;

  if (darkScheme && darkScheme.addEventListener) {
    darkScheme.addEventListener("change", () => {
      document.querySelectorAll(".parallel-plot[data-drawn]").forEach((plot) => { if (charts.has(plot)) render(plot); });
    });
  }

  // A new figure for this plot: drawn without brushes (as Plotly's newPlot drew it).
  function draw(plot, spec) {
    drawnCount += 1;
    charts.set(plot, { spec, brushes: spec.axes.map(() => null), id: `parallel-${drawnCount}`, width: 0 });
    if (resized) resized.observe(plot);
    render(plot);
    return Promise.resolve();
  }

  // Brushes set from outside (static/trials.js: the filters the page opened with), each range kept
  // within its axis; no "parallel:brush" event, as they say what is filtered already.
  function setBrushes(plot, ranges) {
    const chart = charts.get(plot);
    if (!chart || !chart.axes) return;
    chart.brushes = chart.axes.map((placed, i) => {
      const range = ranges[i];
      const pad = placed.axis.categories ? 0.5 : 0;
      const within = (v) => Math.min(placed.high + pad, Math.max(placed.low - pad, v));
      return range ? [within(range[0]), within(range[1])] : null;
    });
    applyBrushes(plot);
  }

  // The axes as "parallel:brush" events describe them.
  function axesOf(plot) {
    const chart = charts.get(plot);
    return chart ? chart.spec.axes.map(({ key, label, log, categories }) => ({ key, label, log, categories })) : [];
  }

  window.aiconsoleParallel = { draw, setBrushes, axes: axesOf };
})();
