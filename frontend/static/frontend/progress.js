// Live progress: poll a JSON URL once a second and update the page's bars in place.
// The JSON has the batch API's shape: {state, error, progress: [{stage, done, total,
// finished}], human_work?, next_url?}; every element with a data-human-work path (e.g.
// "current_round.approved") shows that value of human_work ("$" before data-format="money"). Polling stops once the state is one of data-stop-states;
// reaching one of data-reload-states reloads the page once, so the server draws the result.
// No build step and no external code: it must run offline.

const POLL_MS = 1000;
const MAX_POLL_MS = 30_000; // back off while the server does not answer

const root = document.getElementById("live-progress");
const stopStates = new Set((root?.dataset.stopStates ?? "").split(/\s+/).filter(Boolean));
const reloadStates = new Set((root?.dataset.reloadStates ?? "").split(/\s+/).filter(Boolean));
const statusLine = document.getElementById("live-status");
// What the server drew around the bars (tables, reports) belongs to the state at load.
const loadedState = root?.dataset.state;

function setText(id, text) {
  const element = document.getElementById(id);
  if (element && element.textContent !== text) element.textContent = text;
}

function showError(message) {
  const element = document.getElementById("live-error");
  if (!element) return;
  element.textContent = message ?? "";
  element.hidden = !message;
}

function updateRow(row) {
  const line = root.querySelector(`[data-stage="${CSS.escape(row.stage)}"]`);
  if (!line) return;
  const bar = line.querySelector("progress");
  bar.max = Math.max(row.total, 1); // as the server draws it: a stage not started is empty
  bar.value = row.done;
  const count = line.querySelector(".count");
  if (count) count.textContent = `${row.done}/${row.total}`;
  line.classList.toggle("finished", Boolean(row.finished));
}

function updateHumanWork(work) {
  for (const element of document.querySelectorAll("[data-human-work]")) {
    let value = work;
    for (const key of element.dataset.humanWork.split(".")) value = value?.[key];
    if (value === undefined || value === null) continue;
    const text = element.dataset.format === "money" ? `$${value}` : String(value);
    if (element.textContent !== text) element.textContent = text;
  }
}

function render(data) {
  root.dataset.state = data.state;
  setText("live-state", data.state);
  const stale = document.getElementById("live-stale");
  if (stale) stale.hidden = data.state === loadedState;
  showError(data.error);
  for (const row of data.progress ?? []) updateRow(row);
  if (data.human_work) updateHumanWork(data.human_work);
  for (const element of root.querySelectorAll("[data-show-when]")) {
    element.hidden = !element.dataset.showWhen.split(/\s+/).includes(data.state);
  }
  const next = document.getElementById("live-next");
  if (next && data.next_url) {
    next.querySelector("a").href = data.next_url;
    next.hidden = false;
  }
}

async function poll(delay) {
  let wait = POLL_MS;
  try {
    const response = await fetch(root.dataset.progressUrl, {
      headers: { Accept: "application/json" },
      credentials: "same-origin",
      cache: "no-store",
    });
    if (!response.ok) throw new Error(`the server answered ${response.status}`);
    const data = await response.json();
    render(data);
    statusLine.textContent = "";
    if (reloadStates.has(data.state) && data.state !== loadedState) {
      root.dataset.live = "reloading";
      window.location.reload();
      return;
    }
    if (stopStates.has(data.state)) {
      root.dataset.live = "stopped";
      return;
    }
  } catch (error) {
    wait = Math.min(delay * 2, MAX_POLL_MS);
    statusLine.textContent = `Progress is not updating (${error.message}); trying again.`;
  }
  setTimeout(() => poll(wait), wait);
}

if (root && root.dataset.progressUrl) {
  if (stopStates.has(root.dataset.state)) {
    root.dataset.live = "stopped";
  } else {
    root.dataset.live = "polling";
    poll(POLL_MS);
  }
}
