// The practice page of a qualification round: keys 1–4 answer, as on the HIT page, and the
// time spent on the pair goes with the answer; on the feedback, Enter goes on.
const form = document.getElementById("answer-form");
if (form) {
  const shown = performance.now();
  form.addEventListener("submit", () => {
    form.elements.elapsed_ms.value = String(Math.round(performance.now() - shown));
  });
  document.addEventListener("keydown", (event) => {
    if (event.altKey || event.ctrlKey || event.metaKey || event.repeat) return;
    const button = form.querySelector(`button[data-key="${event.key}"]`);
    if (button) {
      event.preventDefault();
      button.click();
    }
  });
}
document.querySelector("[data-focus]")?.focus();
