// The wizard's instructions examples: fill each answer's row with the examples proposed for
// the chosen dataset (when the dataset changes, when the rows are empty on load, or on the
// button); the admin may then change or clear any row. No build step, no external code.

const section = document.getElementById("instructions-examples");
const form = document.getElementById("wizard");
const status = document.getElementById("examples-status");
const PREFIX = "examples";
let latest = 0; // the last proposal asked for: an earlier answer arriving late is dropped

function field(level, name) {
  return form.elements[`${PREFIX}-${level}_${name}`];
}

function rowsEmpty() {
  return [...section.querySelectorAll(".example-row")].every((row) => {
    const level = row.dataset.level;
    return !field(level, "image").value && !field(level, "caption").value;
  });
}

/** Tick exactly `names` among a row's checkboxes called `name` (a RadioNodeList or one box). */
function tick(level, name, names) {
  const boxes = field(level, name);
  if (!boxes) return;
  for (const box of boxes.length === undefined ? [boxes] : boxes) box.checked = names.includes(box.value);
}

function fill(examples) {
  const byLevel = Object.fromEntries(examples.map((example) => [example.level, example]));
  for (const row of section.querySelectorAll(".example-row")) {
    const level = row.dataset.level;
    const example = byLevel[level];
    field(level, "image").value = example ? example.image : "";
    field(level, "caption").value = example ? example.caption : "";
    field(level, "note").value = example ? example.note : "";
    tick(level, "shortcomings", example ? example.shortcomings : []);
    tick(level, "wrong_concepts", example ? example.wrong_concepts : []);
    const reasons = row.querySelector("details");
    if (reasons) reasons.open = Boolean(example?.shortcomings.length);
    row.querySelector(".example-caption").textContent = example
      ? `Caption ${example.caption}: “${example.caption_text}”`
      : "No example proposed: choose one, or leave the row empty.";
  }
}

async function propose() {
  const dataset = form.elements.dataset.value;
  if (!dataset) {
    status.textContent = "Choose a dataset first.";
    return;
  }
  const query = new URLSearchParams({ dataset, seed: form.elements.seed?.value || "0" });
  const asked = ++latest;
  status.textContent = "Proposing…";
  try {
    const response = await fetch(`${section.dataset.proposalUrl}?${query}`, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
    });
    const body = await response.json();
    // The dataset changed meanwhile: these ids are another dataset's (ids repeat across
    // datasets, so they could pass the server's check and pair the wrong image and caption).
    if (asked !== latest) return;
    if (!response.ok) throw new Error(body.detail ?? response.statusText);
    fill(body.examples);
    status.textContent = `${body.examples.length} example(s) proposed for this dataset.`;
    section.dataset.ready = "1"; // the browser test waits for it
  } catch (error) {
    if (asked !== latest) return;
    status.textContent = `No proposal (${error.message}): fill the rows or leave them empty.`;
  }
}

if (section && form) {
  document.getElementById("examples-propose").addEventListener("click", propose);
  form.elements.dataset.addEventListener("change", propose);
  if (form.elements.dataset.value && rowsEmpty()) propose();
}
