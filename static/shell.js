// The web access terminal: xterm.js (its DOM renderer: the text is in the page) over the shell's
// WebSocket (jobs/webaccess/consumer.py). Keys go as {"type": "input"}, sizes as {"type":
// "resize"}; the shell's output comes back as binary frames, what happens as JSON text frames.
(function () {
  "use strict";
  const box = document.getElementById("terminal");
  const status = document.getElementById("shell-status");
  const again = document.getElementById("shell-again");
  const hint = document.getElementById("shell-hint");
  if (!box || !window.Terminal) return;
  const label = box.dataset.label;
  const hintText = hint.innerHTML;

  // ANSI colours for each scheme; the background, text and cursor come from shell.css, so the
  // terminal and its frame agree. xterm lifts any colour below 4.5:1 against the background.
  const PALETTES = {
    light: {
      black: "#24292f", red: "#cf222e", green: "#116329", yellow: "#7d4e00", blue: "#0969da",
      magenta: "#8250df", cyan: "#1b7c83", white: "#6e7781", brightBlack: "#57606a", brightRed: "#a40e26",
      brightGreen: "#1a7f37", brightYellow: "#633c01", brightBlue: "#0550ae", brightMagenta: "#6639ba",
      brightCyan: "#135e63", brightWhite: "#8c959f",
    },
    dark: {
      black: "#484f58", red: "#ff7b72", green: "#3fb950", yellow: "#d29922", blue: "#58a6ff",
      magenta: "#bc8cff", cyan: "#39c5cf", white: "#b1bac4", brightBlack: "#6e7681", brightRed: "#ffa198",
      brightGreen: "#56d364", brightYellow: "#e3b341", brightBlue: "#79c0ff", brightMagenta: "#d2a8ff",
      brightCyan: "#56d4dd", brightWhite: "#f0f6fc",
    },
  };
  const darkScheme = window.matchMedia("(prefers-color-scheme: dark)");
  const narrow = window.matchMedia("(max-width: 40rem)");
  function theme() {
    const css = getComputedStyle(box);
    const read = (name) => css.getPropertyValue(name).trim();
    return Object.assign({}, PALETTES[darkScheme.matches ? "dark" : "light"], {
      background: read("--shell-bg"), foreground: read("--shell-fg"), cursor: read("--shell-cursor"),
      cursorAccent: read("--shell-bg"), selectionBackground: read("--shell-selection"),
    });
  }

  const term = new window.Terminal({
    convertEol: false, cursorBlink: true, screenReaderMode: true, scrollback: 5000,
    fontFamily: 'ui-monospace, SFMono-Regular, Menlo, Consolas, "DejaVu Sans Mono", monospace',
    fontSize: narrow.matches ? 13 : 14, lineHeight: 1.15, minimumContrastRatio: 4.5, theme: theme(),  // 1.15: an underscore is not cut off
  });
  const fit = window.FitAddon ? new window.FitAddon.FitAddon() : null;
  if (fit) term.loadAddon(fit);
  term.open(box);
  if (fit) fit.fit();
  if (term.textarea) term.textarea.setAttribute("aria-describedby", "shell-hint");
  darkScheme.addEventListener("change", () => { term.options.theme = theme(); });

  // The terminal fills the space the page gives it (shell.css) and follows it: the window, a
  // phone turned, the bar above wrapping. The server hears each new size once.
  let fitting = 0;
  if (fit && window.ResizeObserver) {
    new ResizeObserver(() => {
      cancelAnimationFrame(fitting);
      fitting = requestAnimationFrame(() => fit.fit());
    }).observe(box);
  }
  narrow.addEventListener("change", () => { term.options.fontSize = narrow.matches ? 13 : 14; });

  // Tab and Escape belong to the shell (completion, vi), so a keyboard user leaves the terminal as
  // in code editors: Escape, then Tab or Shift+Tab. At the shell's prompt an Escape only prefixes
  // the next key (Meta), so it waits for that key and one that leaves is not left behind to eat
  // the first key typed on return; a full-screen program (vi, less) gets its Escape at once.
  let leaving = false;
  let heldEscape = false;
  function setLeaving(on) {
    if (on === leaving) return;
    leaving = on;
    hint.classList.toggle("armed", on);
    hint.innerHTML = on ? "<kbd>Tab</kbd> or <kbd>Shift</kbd>+<kbd>Tab</kbd> now leaves the terminal; any other key stays in it." : hintText;
  }
  term.attachCustomKeyEventHandler((event) => {
    if (event.type !== "keydown" || ["Shift", "Control", "Alt", "Meta"].includes(event.key)) return true;
    if (event.key === "Tab" && leaving) {
      setLeaving(false);
      heldEscape = false;
      return false; // not the shell's: the browser moves focus
    }
    const escape = event.key === "Escape" && !event.ctrlKey && !event.altKey && !event.metaKey && !event.shiftKey;
    setLeaving(escape);
    if (escape && term.buffer.active.type === "normal") {
      heldEscape = true;
      return false;
    }
    return true;
  });
  if (term.textarea) {
    term.textarea.addEventListener("blur", () => {
      setLeaving(false);
      heldEscape = false;
    });
  }

  let socket = null;
  let ended = false;
  let focusNext = false;

  function say(text, state) {
    status.textContent = text;
    status.dataset.state = state;
    status.setAttribute("role", state === "refused" ? "alert" : "status");
  }
  function send(message) {
    if (!ended && socket && socket.readyState === WebSocket.OPEN) socket.send(JSON.stringify(message));
  }
  function end(text, state) {
    if (ended) return;
    ended = true;
    say(text, state);
    box.dataset.ended = "true";
    delete box.dataset.connected;
    term.options.disableStdin = true;
    term.write("\x1b[?25l"); // no cursor in a terminal that takes no more keys
    setLeaving(false);
    focusNext = box.contains(document.activeElement);
  }
  // Keys typed into a terminal that ended go nowhere: the focus moves on to what can be done next.
  function moveOn() {
    if (focusNext) (again.hidden ? document.getElementById("shell-back") : again).focus();
    focusNext = false;
  }

  // A new shell is offered while the replica still runs, as the job's Replicas tab says, and taken
  // back once it stops (the tab learns of a replica's end a moment after its shell does).
  let checking = 0;
  async function stillRuns() {
    const response = await fetch(box.dataset.replicas, { credentials: "same-origin" });
    if (!response.ok || response.redirected) return null; // signed out: not known
    const fragment = new DOMParser().parseFromString(await response.text(), "text/html");
    return [...fragment.querySelectorAll("a[data-open-shell]")].some((link) => {
      const row = link.closest("tr");
      return link.dataset.openShell === label && ((row && row.dataset.replicaTrial) || "") === box.dataset.trial;
    });
  }
  async function offerAgain() {
    let runs = null;
    try {
      runs = await stillRuns();
    } catch (error) {
      runs = null; // offline: the Back link remains
    }
    if (!ended) return; // a new shell was opened meanwhile
    if (runs !== true && document.activeElement === again) focusNext = true;
    again.hidden = runs !== true;
    moveOn();
    if (runs === false && !status.textContent.includes(label)) {
      status.textContent += " " + label + " no longer runs.";
    } else if (runs) {
      checking = setTimeout(offerAgain, 5000);
    }
  }

  function connect() {
    clearTimeout(checking);
    if (socket) socket.close();
    ended = false;
    delete box.dataset.ended;
    again.hidden = true;
    term.options.disableStdin = false;
    say("Connecting to " + label + "…", "connecting");
    const scheme = location.protocol === "https:" ? "wss://" : "ws://";
    const address = new URL(scheme + location.host + box.dataset.socket);
    address.searchParams.set("rows", term.rows);
    address.searchParams.set("cols", term.cols);
    const ws = new WebSocket(address);
    socket = ws;
    ws.binaryType = "arraybuffer";
    ws.addEventListener("message", (event) => {
      if (ws !== socket) return; // the shell before this one
      if (typeof event.data !== "string") {
        term.write(new Uint8Array(event.data));
        return;
      }
      const message = JSON.parse(event.data);
      if (message.type === "open") {
        say("Connected to " + message.replica + ".", "connected");
        box.dataset.connected = "true";
        term.focus();
      } else if (message.type === "exit") {
        end(message.reason, "ended");
      } else if (message.type === "error") {
        end(message.message, "refused");
      }
    });
    ws.addEventListener("close", (event) => {
      if (ws !== socket) return;
      end("The connection closed.", "ended");
      // Below 4400 the shell ended and the user may open another; from 4400 the server refused
      // (4410: the replica does not run) or took the right away (4401 signed out, 4403, 4404).
      if (event.code < 4400) offerAgain();
      else moveOn();
    });
  }

  again.addEventListener("click", () => {
    term.reset();
    connect();
  });
  term.onData((data) => {
    send({ type: "input", data: (heldEscape ? "\x1b" : "") + data });
    heldEscape = false;
  });
  term.onResize((size) => send({ type: "resize", rows: size.rows, cols: size.cols }));
  connect();
})();
