// Forms that make the admin wait (creating a batch, importing, publishing): on submit, the
// submit buttons are disabled (no second request) and the pressed one says what is going
// on, e.g. data-wait="Creating…", with a spinner. Every page loads this; only forms with a
// data-wait attribute take part. No build step and no external code.
// Attributes, not form.dataset: a form's named fields shadow its properties (the wizard
// has a field named "dataset").

const BUTTONS = 'button[type="submit"], button:not([type]), input[type="submit"]';

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !form.hasAttribute("data-wait")) return;
  if (event.defaultPrevented) return; // another script stopped it: nothing is sent
  if (form.hasAttribute("data-waiting")) {
    event.preventDefault(); // already on its way
    return;
  }
  const pressed = event.submitter ?? form.querySelector(BUTTONS);
  // The pressed button's name and value must still be sent: disabled buttons are not.
  if (pressed?.name) {
    const carried = document.createElement("input");
    carried.type = "hidden";
    carried.name = pressed.name;
    carried.value = pressed.value;
    form.append(carried);
  }
  form.setAttribute("data-waiting", "");
  form.setAttribute("aria-busy", "true");
  for (const button of form.querySelectorAll(BUTTONS)) button.disabled = true;
  if (pressed instanceof HTMLButtonElement) {
    const label = form.getAttribute("data-wait") || "Working…";
    const spinner = document.createElement("span");
    spinner.className = "spinner";
    spinner.setAttribute("aria-hidden", "true");
    pressed.replaceChildren(spinner, ` ${label}`);
  }
});

// Back from the next page (the browser's page cache): the form may be used again.
window.addEventListener("pageshow", (event) => {
  if (!event.persisted) return;
  for (const form of document.querySelectorAll("form[data-waiting]")) {
    form.removeAttribute("data-waiting");
    form.removeAttribute("aria-busy");
    for (const button of form.querySelectorAll(BUTTONS)) button.disabled = false;
  }
});
