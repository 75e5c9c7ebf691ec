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

// Show times in the user's own timezone, with a relative hint.
function localizeTimes(root) {
  root.querySelectorAll("time[datetime]").forEach((el) => {
    const when = new Date(el.getAttribute("datetime"));
    if (isNaN(when)) return;
    el.title = when.toISOString();
    el.textContent = when.toLocaleString();
  });
}
document.addEventListener("DOMContentLoaded", () => {
  localizeTimes(document);
  const tier = document.querySelector("input[name=scale_tier]:checked");
  document.querySelectorAll("[data-custom-only]").forEach((el) => {
    el.hidden = !tier || tier.value !== "CUSTOM";
  });
});
document.addEventListener("htmx:afterSwap", (event) => localizeTimes(event.target));
document.addEventListener("htmx:oobAfterSwap", (event) => localizeTimes(event.target));
