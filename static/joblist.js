// The jobs list's columns (jobs/job_list.html): the chooser's list of the list's own columns moves
// with buttons (keyboard and pointer alike), and the filter form's submit puts the columns in the
// URL as one value (columns=name,state,…) and, when they changed, remembers them for the user
// (a POST to the form's data-columns-save, the CSRF token as htmx sends it).
(() => {
  const form = document.querySelector("form[data-columns-save]");
  if (!form) return;
  const list = form.querySelector("[data-column-order]");
  const status = form.querySelector("[data-column-status]");
  const items = () => [...list.querySelectorAll("li[data-column]:not([data-pinned])")];
  const initial = items().map((li) => li.dataset.column);
  const title = (li) => li.querySelector("label").textContent.trim();

  function say(text, problem = false) {
    status.textContent = text;
    status.classList.toggle("problem", problem);
  }

  // The first item cannot go up nor the last down: said by aria-disabled, so the button keeps focus.
  function markEnds() {
    const all = items();
    all.forEach((li, index) => {
      li.querySelector("[data-move=up]").setAttribute("aria-disabled", String(index === 0));
      li.querySelector("[data-move=down]").setAttribute("aria-disabled", String(index === all.length - 1));
    });
  }

  list.addEventListener("click", (event) => {
    const button = event.target.closest("button[data-move]");
    if (!button || button.getAttribute("aria-disabled") === "true") return;
    const li = button.closest("li");
    const up = button.dataset.move === "up";
    const other = up ? li.previousElementSibling : li.nextElementSibling;
    if (!other || other.hasAttribute("data-pinned")) return;
    list.insertBefore(li, up ? other : other.nextElementSibling);
    button.focus();  // moving the item took the focus from its button
    items().forEach((item) => item.classList.toggle("moved", item === li));
    markEnds();
    const all = items();
    say(`${title(li)}: column ${all.indexOf(li) + 2} of ${all.length + 1}.`);
  });

  function putInOrder(keys) {
    const byKey = Object.fromEntries(items().map((li) => [li.dataset.column, li]));
    keys.forEach((key) => byKey[key] && list.appendChild(byKey[key]));
    items().forEach((li) => li.classList.remove("moved"));
    markEnds();
  }

  form.querySelector("[data-columns-reset]").addEventListener("click", () => {
    putInOrder(form.dataset.columnsDefault.split(",").slice(1));
    items().forEach((li) => { li.querySelector("input[type=checkbox]").checked = true; });
    say("Every column, in the default order: show them to keep it.");
  });

  // Back to a page kept in the browser's cache: the form shows what the URL says (navigation.js
  // resets its fields), and the list its order.
  window.addEventListener("pageshow", (event) => {
    if (event.persisted) { putInOrder(initial); say(""); }
  });

  function csrfToken() {
    try {
      return JSON.parse(document.body.getAttribute("hx-headers") || "{}")["X-CSRFToken"] || "";
    } catch (error) {
      return "";
    }
  }

  async function remember(columns) {
    const response = await fetch(form.dataset.columnsSave, {
      method: "POST",
      headers: { "X-CSRFToken": csrfToken(), Accept: "application/json" },
      body: new URLSearchParams({ columns }),
    });
    const answer = response.headers.get("Content-Type") === "application/json" ? await response.json() : {};
    if (!response.ok || !answer.columns) {
      throw new Error(answer.error || "The console could not be reached, or you are signed out: sign in and try again.");
    }
  }

  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const data = new FormData(form);
    const columns = data.getAll("columns").join(",");
    data.delete("columns");
    const params = new URLSearchParams(data);
    const defaults = form.dataset.columnsDefault;
    if (columns !== defaults || form.dataset.columnsImplied !== defaults) params.append("columns", columns);
    if (columns !== form.dataset.columnsShown) {
      try {
        await remember(columns);
      } catch (error) {
        form.querySelector(".column-chooser").open = true;
        say(`Your columns were not remembered: ${error.message}`, true);
        return;
      }
    }
    window.location.assign("?" + params.toString());
  });

  // A list opened on the user's saved columns names them in the address too, so a copied link
  // opens the same view for anyone.
  const url = new URL(window.location.href);
  if (form.dataset.columnsParam && !url.searchParams.has("columns")) {
    url.searchParams.set("columns", form.dataset.columnsParam);
    history.replaceState(history.state, "", url);
  }
  markEnds();
})();
