// Navigation helpers: keyboard shortcuts, and forms that mirror the URL.
// Keyboard shortcuts, listed in the page footer's "Keyboard shortcuts" (base.html):
// n opens the new training job form, / goes to the jobs list's search, ? shows the list.
// They act only when focus is not in a field, and never with Ctrl, Alt or Meta held.
document.addEventListener("keydown", (event) => {
  if (event.defaultPrevented || event.ctrlKey || event.altKey || event.metaKey) return;
  const target = event.target;
  if (target.closest && target.closest("input, textarea, select, [contenteditable], dialog[open]")) return;
  if (event.key === "n") {
    const link = document.querySelector("a[data-shortcut=n]");
    if (link) { event.preventDefault(); window.location.assign(link.href); }
  } else if (event.key === "/") {
    const search = document.querySelector("[aria-keyshortcuts='/']");
    if (search) { event.preventDefault(); search.focus(); search.select(); }
  } else if (event.key === "?") {
    const help = document.getElementById("keyboard-help");
    if (help) { event.preventDefault(); help.open = true; help.querySelector("summary").focus(); }
  }
});

// The new job form's suggested id (``trainer_20260121_160502``) follows the Python module typed,
// until the user edits the id.
document.addEventListener("input", (event) => {
  if (!event.target.matches("#id_python_module")) return;
  const id = document.querySelector("#id_job_id[data-suggested]");
  const stamp = id && id.dataset.suggested.match(/_(\d{8}_\d{6}(?:_\d+)?)$/);
  if (!stamp || id.value !== id.dataset.suggested) return;
  let head = event.target.value.trim().split(".")[0].replace(/\W/g, "_");
  if (!/^[A-Za-z]/.test(head)) head = "job" + (head ? "_" + head : "");
  id.value = id.dataset.suggested = head + "_" + stamp[1];
  id.dispatchEvent(new Event("input", { bubbles: true }));  // what follows the id (the job dir) follows it
});

// A form that mirrors its page's URL (the jobs list's search and filters, data-url-state) shows
// what the URL says also after Back: the browser would restore what was typed before submitting.
window.addEventListener("pageshow", () => {
  document.querySelectorAll("form[data-url-state]").forEach((form) => form.reset());
});

// Folded filters open by themselves where there is room (they fold on a phone so jobs come first).
document.addEventListener("DOMContentLoaded", () => {
  if (!window.matchMedia("(min-width: 641px)").matches) return;
  document.querySelectorAll("details[data-open-wide]").forEach((details) => { details.open = true; });
});
