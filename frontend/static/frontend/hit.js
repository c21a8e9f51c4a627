// The HIT page: one pair at a time, keyboard first, time per pair, an idempotent submit.
// No build step and no external code: it must run offline and inside MTurk's iframe.

const root = document.getElementById("hit");
const pairs = [...root.querySelectorAll(".pair")];
const middleLevels = new Set(JSON.parse(root.dataset.middleLevels));
const followupsOn = root.dataset.followups === "1";
// The MTurk page has no session, hence no token: its endpoint authenticates otherwise.
const csrfToken = root.querySelector("input[name=csrfmiddlewaretoken]")?.value ?? "";
// An MTurk preview (data-preview): the pairs can be looked at, not answered.
const preview = root.dataset.preview === "1";
const submitButton = document.getElementById("submit");
const statusLine = document.getElementById("status");
const LEVEL_KEYS = { 1: "yes", 2: "weak_yes", 3: "weak_no", 4: "no" };
const ADVANCE_DELAY_MS = 150; // long enough to see the choice, short enough not to wait

const elapsedMs = pairs.map(() => 0);
let current = 0;
let shownAt = performance.now();
let submitting = false;
let submitted = false;

// --- reading a pair ---------------------------------------------------------------------

function checkedValues(pair, prefix) {
  return [...pair.querySelectorAll(`input[name^="${prefix}-"]:checked`)].map((i) => i.value);
}

function answerOf(pair) {
  const level = pair.querySelector('input[type=radio]:checked')?.value ?? null;
  const asksWhy = followupsOn && middleLevels.has(level);
  const shortcomings = asksWhy ? checkedValues(pair, "shortcomings") : [];
  const concepts = shortcomings.includes("wrong_description") ? checkedValues(pair, "concepts") : [];
  const otherInput = pair.querySelector('input[name^="other-"]');
  const otherText = concepts.includes("other") && otherInput ? otherInput.value.trim() : "";
  return { level, shortcomings, concepts, otherText };
}

/** Return what is still missing on a pair, or "" when it is complete. */
function problemOf(pair) {
  const answer = answerOf(pair);
  if (!answer.level) return "Choose one of the four answers (keys 1 to 4).";
  if (!followupsOn || !middleLevels.has(answer.level)) return "";
  if (answer.shortcomings.length === 0) return "Choose at least one reason.";
  if (answer.shortcomings.includes("wrong_description") && answer.concepts.length === 0)
    return "Choose which concept is described in a wrong way.";
  if (answer.concepts.includes("other") && !answer.otherText) return "Describe the other concept.";
  return "";
}

// --- showing ----------------------------------------------------------------------------

function stopClock() {
  const now = performance.now();
  elapsedMs[current] += now - shownAt;
  shownAt = now;
}

function refreshFollowups(pair) {
  if (!followupsOn) return;
  const answer = answerOf(pair);
  const followups = pair.querySelector(".followups");
  followups.hidden = !middleLevels.has(answer.level);
  pair.querySelector(".concepts").hidden = !answer.shortcomings.includes("wrong_description");
  pair.querySelector(".other-text").hidden = !answer.concepts.includes("other");
}

function refreshProgress() {
  const done = pairs.filter((pair) => !problemOf(pair)).length;
  document.getElementById("progress-text").textContent = `${current + 1} / ${pairs.length}`;
  document.getElementById("answered-text").textContent = `${done} answered`;
  document.getElementById("progress").value = done;
  submitButton.disabled = preview || submitted || submitting || done !== pairs.length;
  document.getElementById("prev").disabled = current === 0;
  document.getElementById("next").disabled = current === pairs.length - 1;
}

function show(index) {
  if (index < 0 || index >= pairs.length || index === current) return;
  stopClock();
  pairs[current].hidden = true;
  current = index;
  pairs[current].hidden = false;
  pairs[current].focus();
  refreshProgress();
}

function complain(pair, message) {
  pair.querySelector(".pair-error").textContent = message;
}

// --- answering --------------------------------------------------------------------------

function choose(pair, level) {
  if (preview) return;
  const radio = pair.querySelector(`input[type=radio][value="${level}"]`);
  radio.checked = true;
  afterChange(pair);
  if (followupsOn && middleLevels.has(level)) {
    pair.querySelector(".followups input").focus();
  } else {
    setTimeout(() => advance(false), ADVANCE_DELAY_MS);
  }
}

function afterChange(pair) {
  refreshFollowups(pair);
  complain(pair, "");
  refreshProgress();
}

/**
 * Go to the next pair; after the last one, submit (Enter: `submitAtEnd`) or put the focus on
 * the submit button (an answer that moves on by itself); refuse while a pair is incomplete.
 */
function advance(submitAtEnd) {
  if (preview) return show(current + 1); // nothing to answer yet: just look through
  const pair = pairs[current];
  const problem = problemOf(pair);
  if (problem) {
    complain(pair, problem);
    return;
  }
  if (current < pairs.length - 1) {
    show(current + 1);
    return;
  }
  const firstOpen = pairs.findIndex((p) => problemOf(p));
  if (firstOpen >= 0) {
    show(firstOpen);
    complain(pairs[firstOpen], problemOf(pairs[firstOpen]));
  } else if (submitAtEnd) {
    submit();
  } else {
    submitButton.focus();
  }
}

// --- submitting -------------------------------------------------------------------------

function payload() {
  return {
    answers: pairs.map((pair, index) => {
      const answer = answerOf(pair);
      return {
        item: Number(pair.dataset.item),
        level: answer.level,
        shortcomings: answer.shortcomings,
        wrong_concepts: answer.concepts,
        other_text: answer.otherText,
        elapsed_ms: Math.round(elapsedMs[index]),
      };
    }),
  };
}

async function postWithRetry(body, tries = 3) {
  // The server stores a HIT once and answers a repeat of the same answers with the stored
  // result, so a retry after a lost response is safe.
  let lastError;
  for (let attempt = 0; attempt < tries; attempt += 1) {
    try {
      const response = await fetch(root.dataset.submitUrl, {
        method: "POST",
        credentials: "same-origin",
        headers: { "Content-Type": "application/json", "X-CSRFToken": csrfToken },
        body: JSON.stringify(body),
      });
      if (response.status < 500) return response;
      lastError = new Error(`server error ${response.status}`);
    } catch (error) {
      lastError = error;
    }
    await new Promise((resolve) => setTimeout(resolve, 500 * 2 ** attempt));
  }
  throw lastError;
}

async function submit() {
  if (preview || submitting || submitted) return;
  const firstOpen = pairs.findIndex((p) => problemOf(p));
  if (firstOpen >= 0) {
    show(firstOpen);
    complain(pairs[firstOpen], problemOf(pairs[firstOpen]));
    return;
  }
  stopClock();
  submitting = true;
  refreshProgress();
  statusLine.textContent = "Submitting…";
  try {
    const response = await postWithRetry(payload());
    const body = await response.json();
    if (response.status === 409 && body.stored) {
      // Submitted before with other answers (another tab, an edited retry): those stand.
      submitted = true;
      statusLine.textContent = `Not stored: ${body.detail}.`;
      root.dispatchEvent(new CustomEvent("hit:submitted", { detail: body.stored, bubbles: true }));
      offerNextHit();
      return;
    }
    if (!response.ok) {
      statusLine.textContent = `Not submitted: ${body.detail ?? response.statusText}`;
      return;
    }
    submitted = true;
    statusLine.textContent = body.message ?? `HIT submitted (${body.status}).`;
    root.dispatchEvent(new CustomEvent("hit:submitted", { detail: body, bubbles: true }));
    offerNextHit();
  } catch (error) {
    statusLine.textContent = `Could not reach the server (${error.message}). Press Submit to try again.`;
  } finally {
    submitting = false;
    refreshProgress();
  }
}

function offerNextHit() {
  const nextUrl = root.dataset.nextUrl;
  if (!nextUrl) return;
  const form = document.createElement("form");
  form.method = "post";
  form.action = nextUrl;
  form.innerHTML = `<input type="hidden" name="csrfmiddlewaretoken" value="${csrfToken}">
    <button type="submit" id="next-hit">Start next HIT</button>`;
  statusLine.after(form);
  form.querySelector("button").focus();
}

// --- wiring -----------------------------------------------------------------------------

/** Enter moves on only from the pair itself; links, buttons and summaries keep their own. */
function enterIsOurs(target) {
  if (target === document.body || target === document.documentElement) return true;
  return root.contains(target) && !target.closest("a, button, summary, textarea");
}

function typingInText(target) {
  return target instanceof HTMLInputElement && target.type === "text";
}

document.addEventListener(
  "keydown",
  (event) => {
    if (submitted || event.altKey || event.ctrlKey || event.metaKey) return;
    // A dialog (the instructions) has the keys while it is open: the pair behind is inert.
    if (document.querySelector("dialog[open]")) return;
    const pair = pairs[current];
    if (typingInText(event.target)) {
      if (event.key === "Enter") {
        event.preventDefault();
        advance(true);
      }
      return;
    }
    if (event.key in LEVEL_KEYS) {
      event.preventDefault();
      choose(pair, LEVEL_KEYS[event.key]);
    } else if (event.key === "ArrowRight") {
      event.preventDefault(); // not the radio group's own arrow handling
      show(current + 1);
    } else if (event.key === "ArrowLeft") {
      event.preventDefault();
      show(current - 1);
    } else if (event.key === "Enter" && enterIsOurs(event.target)) {
      event.preventDefault();
      advance(true);
    }
  },
  true,
);

for (const pair of pairs) {
  pair.addEventListener("change", () => afterChange(pair));
  pair.addEventListener("input", () => afterChange(pair));
}
document.getElementById("prev").addEventListener("click", () => show(current - 1));
document.getElementById("next").addEventListener("click", () => show(current + 1));
submitButton.addEventListener("click", submit);
document.addEventListener("visibilitychange", () => {
  if (document.hidden) stopClock();
  else shownAt = performance.now(); // time away from the page does not count
});

// Inside MTurk (data-mturk-submit-to): once the platform has stored the judgements, post
// the assignment to MTurk's externalSubmit, which ends the HIT for the worker there.
function submitToMTurk(result) {
  const form = document.createElement("form");
  form.method = "post";
  form.action = root.dataset.mturkSubmitTo;
  const fields = {
    assignmentId: root.dataset.mturkAssignmentId,
    platform_assignment: result.assignment,
    judgements: result.judgements,
    status: result.status,
  };
  for (const [name, value] of Object.entries(fields)) {
    const input = document.createElement("input");
    input.type = "hidden";
    input.name = name;
    input.value = String(value);
    form.append(input);
  }
  document.body.append(form);
  statusLine.textContent = "Saved. Sending the HIT to MTurk…";
  form.submit();
}

if (root.dataset.mturkSubmitTo) {
  root.addEventListener("hit:submitted", (event) => submitToMTurk(event.detail));
}
if (preview) {
  for (const input of root.querySelectorAll(".pair input")) input.disabled = true;
}

pairs[0].focus();
refreshProgress();
