// Form helpers (issue 17): an in-page confirmation dialog, the built-in algorithm form's
// sections, and the kept upload's "remove". Each page works without this file.
(function () {
  "use strict";

  // A form with data-confirm="DIALOG_ID" asks in that <dialog> first (not window.confirm).
  // The dialog lives outside the part the page refreshes, so a refresh cannot close it.
  let pending = null;
  document.addEventListener("submit", function (event) {
    const form = event.target;
    if (!(form instanceof HTMLFormElement) || !form.dataset.confirm) return;
    const dialog = document.getElementById(form.dataset.confirm);
    if (!dialog || typeof dialog.showModal !== "function") return;  // plain submit
    event.preventDefault();
    event.stopPropagation();
    pending = form.dataset.confirm;
    dialog.returnValue = "";
    dialog.showModal();
    const first = dialog.querySelector("[data-dialog-default]");
    if (first) first.focus();
  }, true);

  document.addEventListener("close", function (event) {
    const dialog = event.target;
    if (!(dialog instanceof HTMLDialogElement) || dialog.id !== pending) return;
    pending = null;
    // The form may have been replaced by a refresh while the dialog was open: find it again.
    const form = document.querySelector('form[data-confirm="' + dialog.id + '"]');
    if (!form) return;
    if (dialog.returnValue === "confirm") {
      if (window.htmx && form.getAttribute("hx-trigger") === "confirmed") window.htmx.trigger(form, "confirmed");
      else form.submit();
    } else {
      const opener = form.querySelector("button");
      if (opener) opener.focus();
    }
  }, true);

  // The built-in algorithm form: only the chosen algorithm's arguments are shown.
  function showAlgorithm(form) {
    const chosen = form.querySelector('input[name="algorithm"]:checked');
    form.querySelectorAll("[data-algorithm-section]").forEach(function (section) {
      section.hidden = !!chosen && section.dataset.algorithmSection !== chosen.value;
    });
  }
  document.querySelectorAll("form").forEach(function (form) {
    if (!form.querySelector("[data-algorithm-section]")) return;
    showAlgorithm(form);
    form.addEventListener("change", function (event) {
      if (event.target.name === "algorithm") showAlgorithm(form);
    });
  });

  // The kept upload: ticking "Remove" hides it at once (the form may have been swapped in by the
  // upload-progress script, so this listens on the document rather than binding at load).
  document.addEventListener("change", function (event) {
    const check = event.target;
    if (!(check instanceof HTMLInputElement) || check.name !== "remove_kept_package" || !check.checked) return;
    const box = check.closest("[data-kept-upload]");
    if (!box) return;
    box.hidden = true;  // the ticked box is still sent, so the server drops the upload too
    const file = document.getElementById(box.dataset.keptUpload);
    if (file) file.focus();
  });
})();
