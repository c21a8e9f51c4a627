// The instructions of the HIT pages (_instructions.html): a modal dialog opened by its button
// or the ? key, closed by Escape, ? again or its buttons; open on load on a worker's first HIT
// with this version of the instructions. hit.js ignores its pair keys while a dialog is open.
// No build step and no external code: it must run offline and inside MTurk's iframe.

const dialog = document.getElementById("instructions");
const button = document.getElementById("instructions-button");
let returnTo = null; // where the focus goes back to when the dialog closes

/** Keys typed into a text box are text, not shortcuts. */
function typingIn(target) {
  if (target instanceof HTMLTextAreaElement || target?.isContentEditable) return true;
  const textTypes = ["text", "search", "email", "url", "tel", "password", "number"];
  return target instanceof HTMLInputElement && textTypes.includes(target.type);
}

function openInstructions() {
  if (dialog.open) return;
  returnTo = document.activeElement;
  dialog.showModal(); // focus moves to the autofocus Close button, the page behind is inert
  dialog.dataset.state = "open";
}

function closeInstructions() {
  if (dialog.open) dialog.close();
}

function restoreFocus() {
  dialog.dataset.state = "closed";
  const target = returnTo && document.contains(returnTo) ? returnTo : document.getElementById("hit");
  returnTo = null;
  target?.focus?.();
}

if (dialog && button) {
  button.addEventListener("click", openInstructions);
  for (const closer of dialog.querySelectorAll("[data-close]")) {
    closer.addEventListener("click", closeInstructions);
  }
  // A click on the backdrop (outside the dialog's body) closes it too.
  dialog.addEventListener("click", (event) => {
    if (event.target === dialog) closeInstructions();
  });
  dialog.addEventListener("close", restoreFocus);
  document.addEventListener(
    "keydown",
    (event) => {
      if (event.altKey || event.ctrlKey || event.metaKey) return;
      if (event.key === "Escape" && dialog.open) {
        event.preventDefault(); // closed here, the same way whatever the browser's rules
        closeInstructions();
      } else if (event.key === "?" && !typingIn(event.target)) {
        event.preventDefault();
        if (dialog.open) closeInstructions();
        else openInstructions();
      }
    },
    true,
  );
  if (dialog.dataset.open === "1") openInstructions();
  else dialog.dataset.state = "closed";
}
