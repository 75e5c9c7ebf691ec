// The new-job form's help (issue 17): the package or container fields, as chosen (issue 28);
// machine descriptions, the live ML-unit estimate and equivalent command (both computed by the
// server from the same catalogue and builders as the job page), a tuning-parameter builder kept
// in sync with the YAML, and the Copy buttons (also on the job page). The form works without this
// file: the YAML textarea is what is submitted, and the server reads only the chosen kind's fields.
(function () {
  "use strict";

  // --- Copy buttons: data-copy names the element whose text is copied. ----------------------
  document.addEventListener("click", function (event) {
    const button = event.target.closest && event.target.closest("button[data-copy]");
    if (!button) return;
    const source = document.getElementById(button.dataset.copy);
    const status = button.closest("[data-equivalent]").querySelector("[data-copy-status]");
    const text = source ? source.textContent : "";
    const done = function (ok) {
      button.dataset.copied = ok ? "true" : "false";
      if (status) status.textContent = ok ? button.textContent.replace(/^Copy/, "Copied") + "." :
        "Copying was refused by the browser: select the text and copy it yourself.";
    };
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(text).then(function () { done(true); }, function () { done(fallbackCopy(source)); });
    } else {
      done(fallbackCopy(source));
    }
  });

  function fallbackCopy(source) {
    if (!source) return false;
    const range = document.createRange();
    range.selectNodeContents(source);
    const selection = window.getSelection();
    selection.removeAllRanges();
    selection.addRange(range);
    try { return document.execCommand("copy"); } catch (error) { return false; }
  }

  const form = () => document.getElementById("job-form");
  if (!form()) return;
  const machines = JSON.parse((document.getElementById("machine-types") || {}).textContent || "{}");

  // --- Machine descriptions under each CUSTOM picker. ----------------------------------------
  function describeMachine(select) {
    const help = document.getElementById(select.id + "_helptext");
    const machine = machines[select.value];
    if (!help) return;
    help.textContent = machine
      ? machine.summary + ". Accelerators: " + machine.accelerators + ". " + machine.units + " ML units per hour."
      : "Choose a type to see its vCPUs, memory and the accelerators it takes.";
  }

  // --- Python package or custom container: only the chosen kind's fields are shown and sent. ---
  // Without this the form shows both and the server reads only the chosen kind's.
  function showCode() {
    const current = form();
    if (!current) return;
    const chosen = current.querySelector('input[name="code"]:checked');
    const kind = chosen ? chosen.value : "package";
    current.querySelectorAll("[data-code-section]").forEach(function (section) {
      const off = section.dataset.codeSection !== kind;
      section.hidden = off;
      section.querySelectorAll("input, select, textarea").forEach(function (control) { control.disabled = off; });
    });
  }

  // --- The Python choices follow the runtime version: only pairs submit accepts are offered. ---
  // A Python the new runtime also has stays chosen; otherwise the runtime's default is.
  const runtimePythons = JSON.parse((document.getElementById("runtime-pythons") || {}).textContent || "{}");
  function offerPythons() {
    const current = form();
    const runtime = current && current.querySelector('select[name="runtime_version"]');
    const python = current && current.querySelector('select[name="python_version"]');
    const offered = runtime && runtimePythons[runtime.value];
    if (!python || !offered) return;
    const kept = offered.pythons.includes(python.value) ? python.value : "";
    python.replaceChildren(new Option(offered.default + " (the runtime's default)", ""),
      ...offered.pythons.map(function (version) { return new Option(version, version); }));
    python.value = kept;
  }

  // --- A job dir named after the job (<folder>/<job id>, as suggested) follows the id typed (or
  // suggested from the module), until the user edits the job dir. -----------------------------
  function followJobId(idField) {
    const current = form();
    const dir = current && current.querySelector('input[name="job_dir"][data-folder]');
    const id = idField.value.trim();
    if (!dir || !id || dir.value !== dir.dataset.suggested) return;
    dir.value = dir.dataset.suggested = dir.dataset.folder + "/" + id;
  }

  // --- The live preview: estimate, command, REST body, and the server's reading of the YAML. --
  let timer = null, sequence = 0, lastSource = "form";
  function schedulePreview(source) {
    lastSource = source;
    clearTimeout(timer);
    timer = setTimeout(preview, 250);
  }

  function preview() {
    const current = form();
    if (!current) return;
    const data = new FormData(current);
    const file = data.get("package_file");
    data.delete("package_file");
    if (file && file.name) data.set("package_file_name", file.name);
    const number = ++sequence;
    const source = lastSource;
    fetch(current.dataset.previewUrl, { method: "POST", body: data, credentials: "same-origin",
      headers: { "X-Requested-With": "fetch" } })
      .then(function (answer) { return answer.ok ? answer.text() : Promise.reject(answer.status); })
      .then(function (html) {
        if (number !== sequence) return;  // a newer request is on its way
        const part = new DOMParser().parseFromString(html, "text/html");
        swap(part, "[data-estimate]", "[data-estimate-box] [data-estimate]");
        swap(part, "[data-equivalent]", "[data-equivalent-box] [data-equivalent]");
        if (source === "yaml") {
          const parsed = part.getElementById("tuning-parsed");
          if (parsed) builderFromParsed(JSON.parse(parsed.textContent));
        }
      })
      .catch(function () { /* the help stays as it was; the form itself is unaffected */ });
  }

  function swap(part, from, to) {
    const fresh = part.querySelector(from), old = document.querySelector(to);
    if (fresh && old) old.replaceWith(document.importNode(fresh, true));
  }

  document.addEventListener("input", function (event) { onEdit(event); });
  document.addEventListener("change", function (event) { onEdit(event); });
  function onEdit(event) {
    const target = event.target;
    if (!target.form || target.form.id !== "job-form") return;
    if (target.closest("[data-tuning-builder]")) {
      if (event.type === "input" || target.tagName === "SELECT") writeYaml();
      return;
    }
    if (target.name === "code") showCode();
    if (target.name === "runtime_version" && event.type === "change") offerPythons();
    if (target.name === "job_id" && event.type === "input") followJobId(target);
    if (target.tagName === "SELECT" && /_type$/.test(target.name) && !/accelerator/.test(target.name)) {
      describeMachine(target);
    }
    schedulePreview(target.name === "hyperparameters" ? "yaml" : "form");
  }

  // --- The tuning builder. -------------------------------------------------------------------
  const TOP = ["goal", "hyperparameterMetricTag", "maxTrials", "maxParallelTrials", "algorithm"];
  const PARAM_KEYS = ["parameterName", "type", "minValue", "maxValue", "categoricalValues", "discreteValues", "scaleType"];
  const CHOICES = {
    goal: ["", "MAXIMIZE", "MINIMIZE"],
    algorithm: ["", "ALGORITHM_UNSPECIFIED", "GRID_SEARCH", "RANDOM_SEARCH"],
    type: ["DOUBLE", "INTEGER", "CATEGORICAL", "DISCRETE"],
    scaleType: ["", "NONE", "UNIT_LINEAR_SCALE", "UNIT_LOG_SCALE", "UNIT_REVERSE_LOG_SCALE"],
  };
  const LABELS = { goal: "Goal", hyperparameterMetricTag: "Metric tag", maxTrials: "Maximum trials",
    maxParallelTrials: "Parallel trials", algorithm: "Search algorithm" };
  let extra = {}, uid = 0;

  function builder() { return document.querySelector("[data-tuning-builder]"); }
  function yamlArea() { const b = builder(); return b && document.getElementById(b.dataset.for); }

  function field(label, control) {
    const wrap = document.createElement("div");
    wrap.className = "field";
    const id = "tb-" + (++uid);
    control.id = id;
    const text = document.createElement("label");
    text.htmlFor = id;
    text.textContent = label;
    wrap.append(text, control);
    return wrap;
  }

  function select(name, values, value) {
    const control = document.createElement("select");
    control.dataset.key = name;
    values.forEach(function (v) { control.add(new Option(v || "—", v, false, v === (value || ""))); });
    return control;
  }

  function input(name, value, kind) {
    const control = document.createElement("input");
    control.type = "text";
    if (kind) control.inputMode = kind;
    control.dataset.key = name;
    control.value = value === undefined || value === null ? "" : Array.isArray(value) ? value.join(", ") : String(value);
    return control;
  }

  function paramRow(param, index) {
    const box = document.createElement("fieldset");
    box.className = "tb-param";
    box.dataset.param = "";
    const legend = document.createElement("legend");
    legend.textContent = "Parameter " + (index + 1);
    box.append(legend);
    const row = document.createElement("div");
    row.className = "row";
    row.append(field("Name", input("parameterName", param.parameterName)),
      field("Type", select("type", CHOICES.type, param.type || "DOUBLE")),
      field("Minimum", input("minValue", param.minValue, "decimal")),
      field("Maximum", input("maxValue", param.maxValue, "decimal")),
      field("Values (comma-separated)", input("values", param.categoricalValues || param.discreteValues)),
      field("Scale", select("scaleType", CHOICES.scaleType, param.scaleType)));
    const remove = document.createElement("button");
    remove.type = "button";
    remove.textContent = "Remove parameter " + (index + 1);
    remove.dataset.removeParam = "";
    box.append(row, remove);
    showParamFields(box);
    return box;
  }

  function showParamFields(box) {
    const type = box.querySelector('[data-key="type"]').value;
    const ranged = type === "DOUBLE" || type === "INTEGER";
    ["minValue", "maxValue", "scaleType"].forEach(function (k) { box.querySelector('[data-key="' + k + '"]').parentNode.hidden = !ranged; });
    box.querySelector('[data-key="values"]').parentNode.hidden = ranged;
  }

  function render(spec, problem) {
    const root = builder();
    if (!root) return;
    root.replaceChildren();
    root.hidden = false;
    const heading = document.createElement("p");
    heading.className = "tb-status";
    heading.setAttribute("role", "status");
    heading.dataset.builderStatus = "";
    heading.textContent = problem
      ? "The builder cannot show this spec (" + problem + "). The YAML below is what is submitted; edit it there."
      : "Build the spec here, or edit the YAML below: each follows the other.";
    const body = document.createElement("fieldset");
    body.className = "tb-body";
    body.disabled = !!problem;
    const legend = document.createElement("legend");
    legend.textContent = "Tuning builder";
    const top = document.createElement("div");
    top.className = "row";
    TOP.forEach(function (key) {
      const value = spec ? spec[key] : undefined;
      top.append(field(LABELS[key], CHOICES[key] ? select(key, CHOICES[key], value) : input(key, value, /max/.test(key) ? "numeric" : "")));
    });
    const params = document.createElement("div");
    params.dataset.params = "";
    ((spec && spec.params) || []).forEach(function (p, i) { params.append(paramRow(p, i)); });
    const add = document.createElement("button");
    add.type = "button";
    add.textContent = "Add a parameter";
    add.dataset.addParam = "";
    body.append(legend, top, params, add);
    root.append(heading, body);
  }

  // Whether the builder can show `spec` (null: it can); keys it has no input for are kept as they are.
  function problemWith(spec) {
    if (spec === null || spec === undefined) return null;
    if (typeof spec !== "object" || Array.isArray(spec)) return "it is not a mapping";
    for (const key of ["goal", "hyperparameterMetricTag", "algorithm"]) {
      if (key in spec && typeof spec[key] !== "string") return key + " is not text";
      if (CHOICES[key] && key in spec && !CHOICES[key].includes(spec[key])) return key + " " + spec[key] + " is not one the builder offers";
    }
    for (const key of ["maxTrials", "maxParallelTrials"]) {
      if (key in spec && !/^\d+$/.test(String(spec[key]))) return key + " is not a whole number";
    }
    if ("params" in spec && !Array.isArray(spec.params)) return "params is not a list";
    for (const [i, p] of (spec.params || []).entries()) {
      if (!p || typeof p !== "object" || Array.isArray(p)) return "parameter " + (i + 1) + " is not a mapping";
      const other = Object.keys(p).filter(function (k) { return !PARAM_KEYS.includes(k); });
      if (other.length) return "parameter " + (i + 1) + " has " + other.join(", ");
      if (p.type && !CHOICES.type.includes(p.type)) return "parameter " + (i + 1) + " has type " + p.type;
      if (p.categoricalValues && p.discreteValues) return "parameter " + (i + 1) + " has both value lists";
      for (const list of ["categoricalValues", "discreteValues"]) {
        if (list in p && (!Array.isArray(p[list]) || p[list].some(function (v) { return typeof v === "object" || String(v).includes(","); }))) {
          return "parameter " + (i + 1) + " " + list + " is not a plain list";
        }
      }
    }
    return null;
  }

  function builderFromParsed(parsed) {
    const text = (yamlArea() || {}).value || "";
    const problem = parsed.error ? "it does not parse: " + parsed.error : problemWith(parsed.spec);
    extra = {};
    if (!problem && parsed.spec) {
      Object.keys(parsed.spec).forEach(function (k) { if (!TOP.includes(k) && k !== "params") extra[k] = parsed.spec[k]; });
    }
    render(problem ? null : parsed.spec, text.trim() ? problem : null);
  }

  // --- builder → YAML ---------------------------------------------------------------------
  function scalar(value) {
    if (typeof value === "number") return String(value);
    const text = String(value);
    if (/^[A-Za-z_][\w.\-/]*$/.test(text) && !/^(true|false|yes|no|on|off|null|y|n)$/i.test(text)) return text;
    return JSON.stringify(text);
  }

  function number(text) {
    const trimmed = text.trim();
    return trimmed !== "" && !isNaN(Number(trimmed)) ? Number(trimmed) : trimmed;
  }

  function readBuilder() {
    const root = builder();
    const spec = {};
    root.querySelectorAll(".tb-body > .row [data-key]").forEach(function (control) {
      const value = control.value.trim();
      if (value) spec[control.dataset.key] = /^max/.test(control.dataset.key) ? number(value) : value;
    });
    const params = [];
    root.querySelectorAll("[data-param]").forEach(function (box) {
      const get = function (k) { return box.querySelector('[data-key="' + k + '"]').value.trim(); };
      const p = { parameterName: get("parameterName"), type: get("type") };
      if (p.type === "DOUBLE" || p.type === "INTEGER") {
        if (get("minValue")) p.minValue = number(get("minValue"));
        if (get("maxValue")) p.maxValue = number(get("maxValue"));
        if (get("scaleType")) p.scaleType = get("scaleType");
      } else {
        const values = get("values").split(",").map(function (v) { return v.trim(); }).filter(Boolean);
        if (p.type === "CATEGORICAL") p.categoricalValues = values;
        else p.discreteValues = values.map(number);
      }
      params.push(p);
    });
    if (params.length) spec.params = params;
    return Object.assign(spec, extra);
  }

  function toYaml(spec) {
    const lines = [];
    Object.keys(spec).forEach(function (key) {
      if (key === "params") {
        lines.push("params:");
        spec.params.forEach(function (p) {
          Object.keys(p).forEach(function (k, i) {
            const value = Array.isArray(p[k]) ? "[" + p[k].map(scalar).join(", ") + "]" : scalar(p[k]);
            lines.push((i === 0 ? "  - " : "    ") + k + ": " + value);
          });
        });
      } else if (spec[key] !== null && typeof spec[key] === "object") {
        lines.push(key + ": " + JSON.stringify(spec[key]));  // YAML reads JSON as it is
      } else {
        lines.push(key + ": " + scalar(spec[key]));
      }
    });
    return lines.length ? lines.join("\n") + "\n" : "";
  }

  function writeYaml() {
    const area = yamlArea();
    if (!area) return;
    area.value = toYaml(readBuilder());
    schedulePreview("builder");
  }

  document.addEventListener("click", function (event) {
    const root = builder();
    if (!root || !root.contains(event.target)) return;
    if (event.target.matches("[data-add-param]")) {
      const params = root.querySelector("[data-params]");
      const row = paramRow({}, params.children.length);
      params.append(row);
      row.querySelector("input").focus();
      writeYaml();
    } else if (event.target.matches("[data-remove-param]")) {
      event.target.closest("[data-param]").remove();
      root.querySelectorAll("[data-param]").forEach(function (box, i) {
        box.querySelector("legend").textContent = "Parameter " + (i + 1);
        box.querySelector("[data-remove-param]").textContent = "Remove parameter " + (i + 1);
      });
      root.querySelector("[data-add-param]").focus();
      writeYaml();
    }
  });
  document.addEventListener("change", function (event) {
    if (event.target.matches && event.target.matches('[data-param] [data-key="type"]')) showParamFields(event.target.closest("[data-param]"));
  });

  function start() {
    showCode();
    const parsed = document.getElementById("tuning-parsed");
    if (builder() && !builder().children.length) builderFromParsed(parsed ? JSON.parse(parsed.textContent) : { spec: null });
  }
  start();
  // After a failed upload the form is swapped in anew (console.js): set it up again.
  new MutationObserver(start).observe(document.querySelector("main").parentNode, { childList: true });
})();
