// Small progressive enhancements; every page works without them.
document.addEventListener("change", (event) => {
  const target = event.target;
  if (target.matches("[data-switch-project]")) {
    window.location.href = target.value;
  }
  if (target.matches("input[name=scale_tier]")) {
    document.querySelectorAll("[data-custom-only]").forEach((el) => {
      el.hidden = target.value !== "CUSTOM";
    });
  }
});

// Show times in the user's own timezone, with a relative hint ("3 minutes ago") outside logs.
const relativeFormat = new Intl.RelativeTimeFormat(undefined, { numeric: "auto" });
const UNITS = [["year", 31536000], ["month", 2592000], ["week", 604800], ["day", 86400], ["hour", 3600],
  ["minute", 60], ["second", 1]];

// ``now``: one instant for every time of a pass; ``unit``: the unit a group of times shares (the
// one its oldest time is told in), so "Created 1 minute ago" never sits above "Started now".
function relativeUnit(seconds) {
  if (Math.abs(seconds) < 45) return null;
  return UNITS.find(([, size]) => Math.abs(seconds) >= size);
}

function relativeTime(when, now = Date.now(), unit = undefined) {
  const seconds = (when.getTime() - now) / 1000;
  const chosen = unit === undefined ? relativeUnit(seconds) : unit;
  if (!chosen || Math.abs(seconds) < 1) return relativeFormat.format(0, "second");
  const [name, size] = chosen;
  return relativeFormat.format(Math.round(seconds / size), name);
}

// The unit shared by the times inside a [data-time-group] (a job's Created, Started, Ended).
function groupUnit(el, now) {
  const group = el.closest("[data-time-group]");
  if (!group) return undefined;
  const seconds = [...group.querySelectorAll("time[datetime]")]
    .map((t) => (new Date(t.getAttribute("datetime")).getTime() - now) / 1000)
    .filter((s) => !isNaN(s));
  return seconds.length ? relativeUnit(Math.min(...seconds)) : undefined;
}

// Absolute times say their time zone ("14 Jan 2025, 13:05:09 CET"); the relative hint is taken
// against one "now" per pass, so the times on a page agree with each other. In a table's cell a
// time is short ("Jan 14, 1:05 PM", the year only when it is not this one), so a row of times
// keeps to the page's width; its title has the rest: the relative hint, the zone, UTC.
const absoluteFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "long" });
const shortFormat = new Intl.DateTimeFormat(undefined, { month: "short", day: "numeric", hour: "numeric", minute: "2-digit" });
const shortYearFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

function timeText(el, when, now = Date.now()) {
  if (!el.closest("td")) return absoluteFormat.format(when) + " (" + relativeTime(when, now, groupUnit(el, now)) + ")";
  return (when.getFullYear() === new Date().getFullYear() ? shortFormat : shortYearFormat).format(when);
}

function timeTitle(el, when, now = Date.now()) {
  const utc = when.toISOString().replace(".000Z", "Z") + " (UTC)";
  if (!el.closest("td")) return utc;
  return absoluteFormat.format(when) + " (" + relativeTime(when, now) + ") · " + utc;
}

function localizeTimes(root) {
  const logTables = new Set();
  const now = Date.now();
  root.querySelectorAll("time[datetime]").forEach((el) => {
    const table = el.closest(".logs");
    if (table) { logTables.add(table); return; }
    const when = new Date(el.getAttribute("datetime"));
    if (isNaN(when)) return;
    el.title = timeTitle(el, when, now);
    el.textContent = timeText(el, when, now);
    el.dataset.localized = "true";
  });
  logTables.forEach((table) => table.querySelectorAll("tbody").forEach((body) => localizeLogRows([...body.rows])));
}

// Log rows show the local time, and the date only on the first row of each day (and on a
// table's first row). ``previousDay`` is the day of the row before ``rows``; the last row's day
// is returned, for the rows that come next.
const logDayFormat = new Intl.DateTimeFormat(undefined, { weekday: "short", year: "numeric", month: "short", day: "numeric" });
const logClockFormat = new Intl.DateTimeFormat(undefined, { hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23" });
const logZone = new Intl.DateTimeFormat(undefined, { timeZoneName: "short" }).formatToParts(new Date())
  .find((part) => part.type === "timeZoneName");

function localizeLogRows(rows, previousDay = null) {
  rows.forEach((tr) => {
    const el = tr.querySelector("time[datetime]");
    if (!el) return;
    const when = new Date(el.getAttribute("datetime"));
    if (isNaN(when)) return;
    const day = when.getFullYear() + "-" + (when.getMonth() + 1) + "-" + when.getDate();
    const dated = day !== previousDay;
    el.textContent = (dated ? logDayFormat.format(when) + " " : "") + logClockFormat.format(when);
    el.title = absoluteFormat.format(when) + " · " + when.toISOString() + " (UTC)";
    tr.dataset.day = day;
    tr.classList.toggle("new-day", dated);
    el.dataset.localized = "true";
    previousDay = day;
  });
  return previousDay;
}
window.localizeLogRows = localizeLogRows;

// The log's Time heading names the zone its times are in.
function labelLogZone() {
  const heading = document.querySelector("table.logs th[data-time-heading]");
  if (heading && logZone) heading.textContent = "Time (" + logZone.value + ")";
}

function toggleCustomMachines() {
  const tier = document.querySelector("input[name=scale_tier]:checked");
  document.querySelectorAll("[data-custom-only]").forEach((el) => {
    el.hidden = !tier || tier.value !== "CUSTOM";
  });
}

// A form that came back with errors opens on their summary (at the top of the form), which links
// each error to its field: following a link puts the cursor in that field, its label in view.
function showErrorSummary(root) {
  const summary = root.querySelector("[data-error-summary]");
  if (summary) summary.focus();
  return summary;
}
document.addEventListener("click", (event) => {
  const link = event.target.closest && event.target.closest("a[data-error-for]");
  const field = link && document.getElementById(link.dataset.errorFor);
  if (!field) return;
  event.preventDefault();
  const holder = field.closest(".field, fieldset") || field;
  holder.hidden = false;
  holder.scrollIntoView({ block: "center" });
  field.focus({ preventScroll: true });
});

document.addEventListener("DOMContentLoaded", () => {
  showErrorSummary(document);
  localizeTimes(document);
  labelLogZone();
  toggleCustomMachines();
  document.querySelectorAll("[data-tabs]").forEach(makeTabs);
  // The relative hints move on; log rows keep what they show (and are many).
  setInterval(() => {
    const now = Date.now();
    document.querySelectorAll("main time[datetime]").forEach((el) => {
      const when = new Date(el.getAttribute("datetime"));
      if (isNaN(when) || el.closest(".logs")) return;
      el.textContent = timeText(el, when, now);
      el.title = timeTitle(el, when, now);
    });
  }, 30000);
});

// A job's sections as tabs (WAI-ARIA tabs, automatic activation): the links in [data-tabs]
// become tab buttons, and the elements with a matching data-tab their panels. Left/Right move
// between tabs, Home/End go to the first and last. The page opens on the panel a link names: an
// element inside it (#logs), or one it fetches once shown (#chart-contour: a panel's data-holds
// says which ids it fetches, "chart-"); else ?tab=charts; else the log for a log query (?trial=3,
// ?severity=); else the tab data-open names (the log of a running job); else the first.
//
// Each time a panel is shown it gets a "tab:shown" event: what it fetches or draws only once seen
// waits for that (hx-trigger="tab:shown once from:closest [data-tab]"; static/charts.js's charts).
// htmx.min.js comes before this file in base.html, so htmx listens before the first tab is shown.
function makeTabs(container) {
  const links = [...container.querySelectorAll("a[data-tab-for]")];
  const panelsOf = (name) => [...document.querySelectorAll(`[data-tab="${name}"]`)];
  if (!links.length) return;
  container.setAttribute("role", "tablist");
  const tabs = links.map((link) => {
    const name = link.dataset.tabFor;
    const tab = document.createElement("button");
    tab.type = "button";
    tab.id = "tab-" + name;
    tab.dataset.tabFor = name;
    tab.textContent = link.textContent;
    tab.setAttribute("role", "tab");
    const panels = panelsOf(name);
    tab.setAttribute("aria-controls", panels.map((panel) => panel.id).join(" "));
    panels.forEach((panel) => {
      panel.setAttribute("role", "tabpanel");
      panel.setAttribute("aria-labelledby", tab.id);
      panel.tabIndex = 0;
    });
    link.replaceWith(tab);
    return tab;
  });

  function select(tab, focus) {
    tabs.forEach((other) => {
      const chosen = other === tab;
      other.setAttribute("aria-selected", String(chosen));
      other.tabIndex = chosen ? 0 : -1;
      panelsOf(other.dataset.tabFor).forEach((panel) => { panel.hidden = !chosen; });
    });
    if (focus) tab.focus();
    panelsOf(tab.dataset.tabFor).forEach((panel) => panel.dispatchEvent(new CustomEvent("tab:shown", { bubbles: true })));
  }

  // A tab the user picks goes in the address (?tab=), so a copied link or a reload opens it again;
  // a #fragment pointing into another tab's panel would win over it, so it goes.
  function remember(tab) {
    const url = new URL(location.href);
    url.searchParams.set("tab", tab.dataset.tabFor);
    const other = tabFor(url.hash);
    if (other && other !== tab) url.hash = "";
    history.replaceState(history.state, "", url);
  }

  container.addEventListener("click", (event) => {
    const tab = event.target.closest("[role=tab]");
    if (!tab) return;
    select(tab, false);
    remember(tab);
  });
  container.addEventListener("keydown", (event) => {
    const index = tabs.indexOf(document.activeElement);
    if (index < 0) return;
    const next = { ArrowRight: index + 1, ArrowLeft: index - 1, Home: 0, End: tabs.length - 1 }[event.key];
    if (next === undefined) return;
    event.preventDefault();
    const tab = tabs[(next + tabs.length) % tabs.length];
    select(tab, true);
    remember(tab);
  });
  window.addEventListener("hashchange", () => {
    const tab = tabFor(location.hash);
    if (!tab) return;
    select(tab, false);
    scrollToHash();  // the browser's own scroll found it hidden, or not there yet
  });

  function hashId(hash) {
    try {
      return hash && hash.length > 1 ? decodeURIComponent(hash.slice(1)) : null;
    } catch (error) {
      return null;  // not an id this page could have (a stray %)
    }
  }
  function tabFor(hash) {
    const id = hashId(hash);
    const target = id && document.getElementById(id);
    const panel = target ? target.closest("[data-tab]")
      : id && [...document.querySelectorAll("[data-tab][data-holds]")].find((p) => id.startsWith(p.dataset.holds));
    return panel ? tabs.find((tab) => tab.dataset.tabFor === panel.dataset.tab) : null;
  }

  // A link to what a panel fetches once shown: the page scrolls to it when it arrives, and again as
  // each part of its tab fetched above it comes in, until the last has (nothing of the tab is still
  // aria-busy) or the user scrolls, types or clicks first.
  let awaited = null;
  function scrollToHash() {
    const id = hashId(location.hash);
    const target = id && document.getElementById(id);
    const tab = tabFor(location.hash);
    if (target) target.scrollIntoView();
    const busy = tab && panelsOf(tab.dataset.tabFor).some((panel) => panel.querySelector("[aria-busy=true]"));
    awaited = !target || busy ? id : null;
  }
  ["wheel", "touchmove", "keydown", "mousedown"].forEach((name) => window.addEventListener(name, () => {
    awaited = null;
  }, { passive: true }));
  document.addEventListener("htmx:afterSettle", () => {
    if (awaited && awaited === hashId(location.hash)) scrollToHash();
  });

  const query = new URLSearchParams(location.search);
  const logQuery = ["task", "trial", "severity", "text", "first_error", "before", "after"].some((key) => query.get(key));
  const named = (name) => tabs.find((tab) => tab.dataset.tabFor === name);
  select(tabFor(location.hash) || named(query.get("tab")) || (logQuery && named("logs")) || named(container.dataset.open)
    || tabs[0], false);
  // A link elsewhere on the page to a section (data-tab-link="outputs") opens its tab.
  document.addEventListener("click", (event) => {
    const link = event.target.closest && event.target.closest("a[data-tab-link]");
    const tab = link && named(link.dataset.tabLink);
    if (!tab) return;
    event.preventDefault();
    select(tab, true);
  });
  if (hashId(location.hash)) scrollToHash();
}
document.addEventListener("htmx:afterSwap", (event) => {
  localizeTimes(event.target);
  adoptPanels();
});

// A panel swapped in anew (the log, filtered in place) takes its tab's place: labelled by it,
// and shown only while its tab is chosen.
function adoptPanels() {
  document.querySelectorAll("[data-tab]:not([role=tabpanel])").forEach((panel) => {
    const tab = document.getElementById("tab-" + panel.dataset.tab);
    if (!tab) return;
    panel.setAttribute("role", "tabpanel");
    panel.setAttribute("aria-labelledby", tab.id);
    panel.tabIndex = 0;
    panel.hidden = tab.getAttribute("aria-selected") !== "true";
  });
}
document.addEventListener("htmx:oobAfterSwap", (event) => localizeTimes(event.target));

// Charts are drawn by static/charts.js.

// A value shown once (a set-password link, a new token): its Copy button puts it on the clipboard
// and says so; where the browser refuses, the value is selected for the user to copy.
document.addEventListener("click", (event) => {
  const button = event.target.closest && event.target.closest("button[data-copy-value]");
  const field = button && document.getElementById(button.dataset.copyValue);
  if (!field) return;
  const status = button.parentElement.querySelector("[data-copy-status]");
  const say = (ok) => {
    if (status) status.textContent = ok ? "Copied." : "Copying was refused by the browser: the text is selected, copy it yourself.";
  };
  const fallback = () => { field.focus(); field.select(); say(document.execCommand && document.execCommand("copy")); };
  if (navigator.clipboard && window.isSecureContext) navigator.clipboard.writeText(field.value).then(() => say(true), fallback);
  else fallback();
});

// A model page opened while its first version was being created: show the prediction panel
// once a version is READY (the versions table refreshes itself; the panel is server-rendered).
document.addEventListener("htmx:afterSettle", () => {
  const versions = document.querySelector("#versions[data-ready]");
  if (versions && versions.dataset.ready !== "0" && document.querySelector("[data-awaits-ready-version]")) {
    window.location.reload();
  }
});

// Forms that upload a file show the upload's progress; the server's answer then replaces the
// page as a plain submit would (a redirect is followed, a form with errors is shown again).
document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!form.matches("form[data-upload-progress]") || !window.XMLHttpRequest) return;
  const files = [...form.querySelectorAll("input[type=file]")].some((input) => input.files.length);
  if (!files) return;
  event.preventDefault();
  const box = form.querySelector("[data-upload-status]");
  const bar = box.querySelector("progress");
  const text = box.querySelector("[data-upload-text]");
  box.hidden = false;
  form.querySelectorAll("button[type=submit]").forEach((button) => { button.disabled = true; });
  const request = new XMLHttpRequest();
  request.open("POST", form.action || window.location.href);
  request.upload.addEventListener("progress", (progress) => {
    if (!progress.lengthComputable) return;
    bar.max = progress.total;
    bar.value = progress.loaded;
    const percent = Math.round((100 * progress.loaded) / progress.total);
    text.textContent = progress.loaded < progress.total ? `Uploading… ${percent}%` : "Uploaded; checking the package…";
  });
  request.addEventListener("load", () => {
    const landed = new URL(request.responseURL || window.location.href);
    if (landed.pathname !== window.location.pathname) {
      window.location.assign(landed.href);
      return;
    }
    const answer = new DOMParser().parseFromString(request.responseText, "text/html");
    const main = answer.querySelector("main");
    if (!main) { window.location.assign(landed.href); return; }
    document.querySelector("main").replaceWith(main);
    document.title = answer.title;
    localizeTimes(main);
    toggleCustomMachines();
    if (!showErrorSummary(main)) {
      const firstError = main.querySelector(".has-error input, .has-error select, .has-error textarea, .errors");
      if (firstError) firstError.focus();
    }
  });
  request.addEventListener("error", () => {
    text.textContent = "The upload failed: the console could not be reached. Try again.";
    form.querySelectorAll("button[type=submit]").forEach((button) => { button.disabled = false; });
  });
  request.send(new FormData(form));
});
