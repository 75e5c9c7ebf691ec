// The job page's live log. A WebSocket (jobs/consumers.py) sends the lines stored since the page
// was rendered, then lines as replicas print them, and progress bars as one updating row.
// Without this script the page still works: server-rendered lines, links to page through them,
// and an htmx poller, which this script replaces with the socket (or falls back to).
// The filters apply in place: htmx swaps in the panel again, filtered, and the log starts anew on
// it (the old socket closed), the address bar keeping the filters for a reload or a copied link.
(function () {
  "use strict";
  const LOG_KEYS = ["task", "trial", "severity", "text", "first_error", "before", "after"];
  let current = null;

  function begin(section, initial) {
    if (current) current.stop();
    current = start(section, initial);
  }

  document.addEventListener("htmx:afterSwap", () => {
    const section = document.getElementById("logs");
    if (!section || (current && current.section === section)) return;
    const url = new URL(location.href);
    LOG_KEYS.forEach((key) => url.searchParams.delete(key));
    new URLSearchParams(section.dataset.filters).forEach((value, key) => url.searchParams.set(key, value));
    history.replaceState(history.state, "", url.pathname + url.search + url.hash);
    begin(section, false);
  });

  // The header follows the job's state as the log does: the socket says it first, so the badge
  // changes and a finished job's Cancel goes at once; the header's own refresh then follows.
  const TERMINAL = ["SUCCEEDED", "FAILED", "CANCELLED"];
  function showState(state) {
    if (!state) return;
    const badge = document.querySelector("#job-status [data-state]");
    if (badge && badge.dataset.state !== state) {
      badge.dataset.state = state;
      badge.textContent = state;
      badge.className = "state state-" + state.toLowerCase();
    }
    if (TERMINAL.includes(state)) {
      document.querySelectorAll("#job-status [data-cancel-form]").forEach((form) => { form.hidden = true; });
    }
    document.dispatchEvent(new CustomEvent("job:state", { detail: { state } }));
  }

  const first = document.getElementById("logs");
  if (first) begin(first, true);

  function start(section, initial) {
    let socket = null;
    let ended = false;
    const handle = { section, stop() { ended = true; if (socket) socket.close(1000); } };

    const MAX_ROWS = 20000; // rows kept while following; "Earlier lines" brings older ones back
    const HOLD_LIMIT = 100000; // lines held while paused
    const rows = document.getElementById("log-lines");
    const progressRows = document.getElementById("log-progress");
    const scroller = document.getElementById("log-scroll");
    const countText = document.getElementById("log-count");
    const statusText = document.getElementById("log-status");
    const follow = document.getElementById("log-follow");
    const pauseButton = document.getElementById("log-pause");
    const earlierWrap = document.getElementById("log-earlier-wrap");
    const earlierLink = document.getElementById("log-earlier");
    const firstErrorLink = document.getElementById("log-first-error");
    const filtersForm = document.getElementById("log-filters");

    // Choosing a replica, trial or severity applies at once; the Apply button stays for text.
    filtersForm.addEventListener("change", (event) => {
      if (event.target.tagName === "SELECT") filtersForm.requestSubmit();
    });

    const firstError = rows.querySelector("tr.first-error");
    if (firstError) whenReady(() => firstError.scrollIntoView({ block: "center" }));
    if (section.dataset.live !== "true" || !("WebSocket" in window)) return handle;

    // The socket replaces the poller; htmx has not started it yet (this script runs first), or
    // stops it when it is taken out (a panel swapped in).
    const poller = document.getElementById("log-poller");
    const pollerHome = poller && poller.parentNode;
    if (poller) poller.remove();
    section.querySelectorAll(".live-only").forEach((el) => { el.hidden = false; });

    let cursor = section.dataset.cursor || "0";
    let everOpened = false;
    let failures = 0;
    let stored = null;
    let paused = false;
    let held = [];
    let queued = [];
    let frame = 0;

    function say(text) { statusText.textContent = text; }

    // --- rows, built like templates/jobs/_log_rows.html ------------------------------------------

    function cell(content, className) {
      const td = document.createElement("td");
      if (className) td.className = className;
      if (typeof content === "string") td.textContent = content; else td.appendChild(content);
      return td;
    }

    function row(entry, extraClass) {
      const tr = document.createElement("tr");
      tr.className = "sev-" + entry.severity.toLowerCase() + (extraClass ? " " + extraClass : "");
      const time = document.createElement("time");
      time.dateTime = entry.timestamp; // its text: localizeLogRows (console.js), once the row is placed
      const replica = entry.taskName + (entry.trialId ? " · trial " + entry.trialId : "");
      tr.append(cell(time), cell(entry.severity), cell(replica), cell(entry.message, "msg"));
      if (entry.id) { tr.id = "line-" + entry.id; tr.dataset.id = entry.id; }
      return tr;
    }

    const progressKey = (entry) => [entry.taskName, entry.trialId, entry.stream].join("|");

    function showProgress(entry) {
      const key = progressKey(entry);
      const fresh = row(entry, "progress");
      fresh.dataset.key = key;
      const old = [...progressRows.children].find((tr) => tr.dataset.key === key);
      localizeRows([fresh], rows.lastElementChild);
      if (old) old.replaceWith(fresh); else progressRows.appendChild(fresh);
      if (follow.checked) scrollToEnd();
    }

    function dropProgress(entry) {
      const key = progressKey(entry);
      [...progressRows.children].forEach((tr) => { if (tr.dataset.key === key) tr.remove(); });
    }

    // --- adding lines ---------------------------------------------------------------------------

    function add(entries) {
      if (!entries.length) return;
      if (paused) {
        held.push(...entries);
        if (held.length > HOLD_LIMIT) held = held.slice(-HOLD_LIMIT);
        say(`Paused: ${held.length.toLocaleString()} new line${held.length === 1 ? "" : "s"} waiting.`);
        return;
      }
      queued.push(...entries);
      if (!frame) frame = requestAnimationFrame(render);
    }

    // The date shows once per day (console.js); rows carry their day for the rows after them.
    function localizeRows(list, before) {
      if (window.localizeLogRows) window.localizeLogRows(list, before ? before.dataset.day : null);
    }

    // A trial's lines can arrive before the page knew of the trial: offer it in the filter.
    const trialSelect = document.getElementById("log-trial");
    const knownTrials = new Set(trialSelect ? [...trialSelect.options].map((option) => option.value) : []);

    function offerTrial(trialId) {
      if (!trialSelect || !trialId || knownTrials.has(trialId)) return;
      knownTrials.add(trialId);
      const option = new Option(trialId, trialId);
      const after = [...trialSelect.options].find((o) => o.value && Number(o.value) > Number(trialId));
      trialSelect.add(option, after || null);
    }

    function render() {
      frame = 0;
      const fragment = document.createDocumentFragment();
      const previous = rows.lastElementChild;
      const added = [];
      for (const entry of queued) {
        const tr = row(entry);
        added.push(tr);
        fragment.appendChild(tr);
        offerTrial(entry.trialId);
        if (progressRows.children.length) dropProgress(entry);
      }
      queued = [];
      localizeRows(added, previous);
      rows.appendChild(fragment);
      const empty = document.getElementById("no-logs");
      if (empty) empty.remove();
      trim();
      updateCount();
      if (follow.checked) scrollToEnd();
    }

    function trim() {
      const limit = follow.checked ? MAX_ROWS : MAX_ROWS * 2;
      if (rows.children.length <= limit) return;
      while (rows.children.length > limit) rows.firstElementChild.remove();
      localizeRows([rows.firstElementChild], null); // the new first row shows its date
      showEarlier(true);
    }

    function prepend(entries) {
      const before = scroller.scrollHeight;
      const fragment = document.createDocumentFragment();
      entries.forEach((entry) => fragment.appendChild(row(entry)));
      rows.insertBefore(fragment, rows.firstChild);
      localizeRows([...rows.children], null);
      scroller.scrollTop += scroller.scrollHeight - before; // keep the reader's place
      updateCount();
    }

    function scrollToEnd() { scroller.scrollTop = scroller.scrollHeight; }

    function updateCount() {
      const shown = rows.children.length;
      let text = `${shown.toLocaleString()} line${shown === 1 ? "" : "s"} shown`;
      if (stored !== null) text += ` · ${stored.toLocaleString()} stored`;
      countText.textContent = text;
    }

    function showEarlier(more) {
      earlierWrap.hidden = !more;
      const first = rows.querySelector("tr[data-id]");
      if (first) {
        const url = new URL(earlierLink.href, location.href);
        url.searchParams.set("before", first.dataset.id);
        earlierLink.href = url.pathname + url.search;
      }
    }

    function setEnded(isEnded, state) {
      if (!isEnded || ended) return;
      ended = true;
      say(`Job ${state}.`);
      // Lines the platform writes as the job ends still arrive; then let the socket go.
      setTimeout(() => { if (socket) socket.close(1000); }, 3000);
    }

    // --- the socket -----------------------------------------------------------------------------

    const handlers = {
      backlog(msg) {
        if (msg.earlier && rows.children.length) {
          rows.replaceChildren(); // too much was missed to fill in here: start from the newest
          say("Reconnected; lines printed meanwhile are under “Earlier lines”.");
        }
        add(msg.entries);
        cursor = msg.cursor;
        if (msg.earlier) showEarlier(true);
        showState(msg.jobState);
        setEnded(msg.jobEnded, msg.jobState);
      },
      lines(msg) { add(msg.entries); cursor = msg.cursor; stored = msg.stored; updateCount(); },
      skipped(msg) { // too fast to show live: one row says how many went by (they are stored)
        add([{ severity: "WARNING", taskName: "console", trialId: "", timestamp: new Date().toISOString(),
               message: msg.message }]);
        cursor = msg.cursor; stored = msg.stored; updateCount();
      },
      count(msg) { stored = msg.stored; updateCount(); },
      progress(msg) { if (!paused) msg.entries.forEach(showProgress); },
      state(msg) { showState(msg.jobState); setEnded(msg.jobEnded, msg.jobState); },
      earlier(msg) { prepend(msg.entries); showEarlier(msg.earlier); },
      firstError(msg) { jumpTo(msg.id); },
    };

    function connect() {
      const query = new URLSearchParams(section.dataset.filters);
      query.set("after", cursor);
      query.set("tail", "5000");
      const scheme = location.protocol === "https:" ? "wss:" : "ws:";
      socket = new WebSocket(`${scheme}//${location.host}${section.dataset.socketPath}?${query}`);
      socket.onopen = () => { everOpened = true; failures = 0; if (!ended && !paused) say("Live"); };
      socket.onmessage = (event) => {
        const msg = JSON.parse(event.data);
        if (handlers[msg.type]) handlers[msg.type](msg);
      };
      socket.onclose = (event) => closed(event.code);
    }

    function closed(code) {
      socket = null;
      if (current !== handle) return; // this panel was replaced: its successor has its own socket
      if (code === 4401) return say("Signed out: sign in again to see new lines.");
      if (code === 4403 || code === 4404) return say("You cannot see this job's log.");
      if (ended) return;
      failures += 1;
      if (!everOpened && failures >= 3) return fallBackToPolling();
      say("Reconnecting…");
      setTimeout(connect, Math.min(10000, 250 * 2 ** Math.min(failures, 6)));
    }

    function fallBackToPolling() {
      if (!poller || !poller.hasAttribute("hx-get") || !window.htmx) return say("Live updates are unavailable.");
      const url = new URL(poller.getAttribute("hx-get"), location.href);
      url.searchParams.set("after", cursor);
      poller.setAttribute("hx-get", url.pathname + url.search);
      pollerHome.appendChild(poller);
      window.htmx.process(poller);
      say("Live updates every second (WebSockets are unavailable).");
    }

    function send(request) {
      if (!socket || socket.readyState !== WebSocket.OPEN) return false;
      socket.send(JSON.stringify(request));
      return true;
    }

    function jumpTo(id) {
      if (!id) return say("No errors in this log.");
      const target = document.getElementById("line-" + id);
      if (!target) { window.location.href = firstErrorLink.href; return; } // not loaded: open a page from it
      follow.checked = false;
      rows.querySelectorAll("tr.highlight").forEach((tr) => tr.classList.remove("highlight"));
      target.classList.add("highlight");
      target.scrollIntoView({ block: "center" });
    }

    // --- controls -------------------------------------------------------------------------------

    scroller.addEventListener("scroll", () => {
      follow.checked = scroller.scrollHeight - scroller.scrollTop - scroller.clientHeight < 40;
    });
    follow.addEventListener("change", () => { if (follow.checked) scrollToEnd(); });
    pauseButton.addEventListener("click", () => {
      paused = !paused;
      pauseButton.setAttribute("aria-pressed", String(paused));
      pauseButton.textContent = paused ? "Resume" : "Pause";
      if (paused) { say("Paused."); return; }
      const waiting = held;
      held = [];
      say(ended ? "" : "Live");
      add(waiting);
    });
    earlierLink.addEventListener("click", (event) => {
      const first = rows.querySelector("tr[data-id]");
      if (send({ action: "earlier", before: first ? first.dataset.id : String(Number(cursor) + 1) })) {
        event.preventDefault();
      }
    });
    firstErrorLink.addEventListener("click", (event) => {
      if (send({ action: "firstError" })) event.preventDefault();
    });

    whenReady(scrollToEnd);
    section.addEventListener("tab:shown", () => { if (follow.checked) scrollToEnd(); });
    updateCount();
    connect();
    return handle;

    function whenReady(work) {
      if (initial && document.readyState === "loading") document.addEventListener("DOMContentLoaded", work);
      else work();
    }
  }
})();
