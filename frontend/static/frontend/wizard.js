// The batch wizard: HITs, judgements and the MTurk cost, estimated live while the admin types.
// The formulas are those of mitl/costs.py, computed in whole cents with BigInt so that no
// rounding differs from the server's Decimal arithmetic. No build step, no external code.

const form = document.getElementById("wizard");
const panel = document.getElementById("estimate");
const COMMISSION = BigInt(panel.dataset.commission); // percent of the reward
const COMMISSION_LARGE = BigInt(panel.dataset.commissionLarge); // for many assignments per HIT
const LARGE_HIT_ASSIGNMENTS = BigInt(panel.dataset.largeHitAssignments);
const MIN_FEE_CENTS = 1n; // MTurk's commission is at least $0.01 per assignment
const ID_SEPARATORS = /[\s,;]+/;

class Problem extends Error {}

// --- reading the form ---------------------------------------------------------------------

function wholeNumber(name, label) {
  const text = form.elements[name].value.trim();
  if (!/^\d+$/.test(text)) throw new Problem(`${label}: write a whole number.`);
  return BigInt(text);
}

function idCount(name) {
  const tokens = form.elements[name].value.split(ID_SEPARATORS).filter(Boolean);
  const bad = tokens.find((token) => !/^\d+$/.test(token));
  if (bad !== undefined) throw new Problem(`${JSON.stringify(bad)} is not an id: write whole numbers only.`);
  return BigInt(new Set(tokens.map((token) => BigInt(token).toString())).size);
}

/** Return the reward in cents, as the form's DecimalField accepts it (two decimals at most). */
function rewardCents() {
  const match = /^(\d+)(?:\.(\d{0,2}))?$/.exec(form.elements.reward.value.trim());
  if (!match) throw new Problem("Reward: an amount in dollars with at most two decimals, e.g. 0.10.");
  const cents = BigInt(match[1]) * 100n + BigInt((match[2] ?? "").padEnd(2, "0"));
  if (cents < 1n) throw new Problem("Reward: MTurk needs at least $0.01 per assignment.");
  return cents;
}

function queryMode() {
  return form.elements.query_mode.value || "sample";
}

function strategy() {
  return form.elements.strategy.value || "fixed";
}

// --- the estimate (mitl/costs.py) ---------------------------------------------------------

function estimate() {
  const queries =
    queryMode() === "list"
      ? idCount("image_ids") + idCount("caption_ids")
      : wholeNumber("n_image_queries", "Image queries") +
        wholeNumber("n_caption_queries", "Caption queries");
  const annotators = BigInt(form.querySelectorAll('input[name="annotators"]:checked').length);
  const k = wholeNumber("k", "k");
  const hitSize = wholeNumber("hit_size", "Pairs to judge per HIT");
  const goldens =
    wholeNumber("golden_tp", "Golden positives") + wholeNumber("golden_tn", "Golden negatives");
  const perHit = wholeNumber("assignments_per_hit", "Assignments per HIT");
  if (hitSize < 1n) throw new Problem("Pairs to judge per HIT: at least 1.");
  if (perHit < 1n) throw new Problem("Assignments per HIT: at least 1.");
  const reward = rewardCents();

  let candidates;
  let hits;
  if (strategy() === "adaptive") {
    // Adaptive rounds spend at most the budget: the whole HITs whose judgements fit in it.
    const budget = wholeNumber("budget_judgements", "Budget (judgements)");
    hits = budget / ((hitSize + goldens) * perHit);
    candidates = hits * hitSize;
  } else {
    candidates = queries * k * annotators; // before de-duplication: an upper bound
    hits = (candidates + hitSize - 1n) / hitSize; // ceil; 0 candidates → 0 HITs
  }
  const assignments = hits * perHit;
  const rate = perHit >= LARGE_HIT_ASSIGNMENTS ? COMMISSION_LARGE : COMMISSION;
  const rounded = (reward * rate + 50n) / 100n; // half up to the cent, as MTurk bills it
  const fee = rounded > MIN_FEE_CENTS ? rounded : MIN_FEE_CENTS;
  return {
    queries,
    candidates,
    hits,
    assignments,
    judgements: assignments * (hitSize + goldens),
    rate,
    rewards: reward * assignments,
    commission: fee * assignments,
    total: (reward + fee) * assignments,
  };
}

// --- showing it ---------------------------------------------------------------------------

const count = (value) => value.toLocaleString("en-US");
const dollars = (cents) =>
  `$${(cents / 100n).toLocaleString("en-US")}.${(cents % 100n).toString().padStart(2, "0")}`;

function show(id, text) {
  document.getElementById(id).value = text;
}

function refresh() {
  for (const block of form.querySelectorAll("[data-query-mode]")) {
    block.hidden = block.dataset.queryMode !== queryMode();
  }
  for (const block of form.querySelectorAll("[data-strategy]")) {
    block.hidden = block.dataset.strategy !== strategy();
  }
  const problem = document.getElementById("est-problem");
  let figures;
  try {
    figures = estimate();
  } catch (error) {
    if (!(error instanceof Problem)) throw error;
    problem.textContent = error.message;
    problem.hidden = false;
    for (const output of panel.querySelectorAll("output")) output.value = "–";
    return;
  }
  problem.hidden = true;
  show("est-queries", count(figures.queries));
  show("est-candidates", count(figures.candidates));
  show("est-hits", count(figures.hits));
  show("est-assignments", count(figures.assignments));
  show("est-judgements", count(figures.judgements));
  show("est-rate", `${figures.rate}%`);
  show("est-rewards", dollars(figures.rewards));
  show("est-commission", dollars(figures.commission));
  show("est-total", dollars(figures.total));
  panel.dataset.ready = "1"; // the browser test waits for the first live update
}

// --- enough people? (the server checks again: frontend/views/wizard.py) -------------------

const workersCheck = document.getElementById("workers-check");
const eligibleWorkers = Number(workersCheck?.dataset.eligibleWorkers ?? 0);

function checkWorkers() {
  if (!workersCheck) return;
  const perHit = Number(form.elements.assignments_per_hit.value);
  const simulated = form.elements.simulated_crowd?.checked;
  const short = eligibleWorkers > 0 && !simulated && perHit > eligibleWorkers;
  const warning = document.getElementById("workers-warning");
  if (short) {
    warning.textContent =
      `${perHit} assignments per HIT but only ${eligibleWorkers} annotator ` +
      `account${eligibleWorkers === 1 ? "" : "s"} can take HITs here: no HIT would get all ` +
      "its work from people on this platform.";
  }
  warning.hidden = !short;
  workersCheck.querySelector("[data-few-workers]").hidden = !short;
}

form.addEventListener("input", refresh);
form.addEventListener("change", refresh);
form.addEventListener("input", checkWorkers);
form.addEventListener("change", checkWorkers);
refresh();
checkWorkers();

// --- the plan: what the typed config buys per strategy and budget (server-drawn) -------------

const planButton = document.getElementById("plan-button");
const planPanel = document.getElementById("plan-panel");
if (planButton && planPanel) {
  planButton.addEventListener("click", async () => {
    const query = new URLSearchParams(new FormData(form));
    query.delete("csrfmiddlewaretoken");
    planButton.disabled = true;
    planPanel.textContent = "Predicting…";
    try {
      const response = await fetch(`${planButton.dataset.url}?${query}`, {
        headers: { Accept: "text/html" },
        credentials: "same-origin",
      });
      planPanel.innerHTML = await response.text(); // our own server's fragment
    } catch (error) {
      planPanel.textContent = `The plan could not be loaded (${error.message}).`;
    } finally {
      planButton.disabled = false;
    }
  });
}
