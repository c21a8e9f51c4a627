// Forms that make the admin wait (creating a batch, importing, publishing): on submit, the
// submit buttons are disabled (no second request) and the pressed one says what is going
// on, e.g. data-wait="Creating…", with a spinner. Every page loads this; only forms with a
// data-wait attribute take part. No build step and no external code.

function submitterOf(form, event) {
  return event.submitter ?? form.querySelector('button[type="submit"], button:not([type])');
}

document.addEventListener("submit", (event) => {
  const form = event.target;
  if (!(form instanceof HTMLFormElement) || !("wait" in form.dataset)) return;
  if (event.defaultPrevented) return; // another script stopped it: nothing is sent
  if (form.dataset.waiting === "1") {
    event.preventDefault(); // already on its way
    return;
  }
  const pressed = submitterOf(form, event);
  // The pressed button's name and value must still be sent: disabled buttons are not.
  if (pressed?.name) {
    const carried = document.createElement("input");
    carried.type = "hidden";
    carried.name = pressed.name;
    carried.value = pressed.value;
    form.append(carried);
  }
  form.dataset.waiting = "1";
  form.setAttribute("aria-busy", "true");
  const buttons = 'button[type="submit"], button:not([type]), input[type="submit"]';
  for (const button of form.querySelectorAll(buttons)) button.disabled = true;
  if (pressed) {
    const label = form.dataset.wait || pressed.dataset.wait || "Working…";
    pressed.classList.add("waiting");
    pressed.textContent = "";
    const spinner = document.createElement("span");
    spinner.className = "spinner";
    spinner.setAttribute("aria-hidden", "true");
    pressed.append(spinner, ` ${label}`);
  }
});

// Back from the next page (the browser's page cache): the form may be used again.
window.addEventListener("pageshow", (event) => {
  if (!event.persisted) return;
  for (const form of document.querySelectorAll("form[data-waiting]")) {
    delete form.dataset.waiting;
    form.removeAttribute("aria-busy");
    for (const button of form.querySelectorAll("button, input[type=submit]")) button.disabled = false;
  }
});
