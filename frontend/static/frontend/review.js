// Review pages' keyboard and bulk selection. On a submission's page: a approves, r puts
// the focus in the feedback field (Ctrl+Enter there rejects), j or n opens the next
// submission of the queue, k or p the previous one. Keys typed into a field are left
// alone. On the queue: a "select all" box ticks every submission for "Approve selected".
// No build step and no external code.

function typing(target) {
  return target instanceof HTMLElement && target.closest("input, textarea, select, [contenteditable]");
}

function follow(id) {
  const link = document.getElementById(id);
  if (link instanceof HTMLAnchorElement) window.location.assign(link.href);
}

document.addEventListener("keydown", (event) => {
  if (event.altKey || event.metaKey) return;
  const feedback = document.getElementById("feedback");
  if (event.target === feedback && event.key === "Enter" && event.ctrlKey) {
    event.preventDefault();
    document.getElementById("reject")?.click();
    return;
  }
  if (event.ctrlKey || typing(event.target)) return;
  switch (event.key) {
    case "a":
      if (!document.getElementById("approve")) return;
      event.preventDefault();
      document.getElementById("approve").click();
      break;
    case "r":
      if (!feedback) return;
      event.preventDefault();
      feedback.focus();
      break;
    case "j":
    case "n":
      event.preventDefault();
      follow("next");
      break;
    case "k":
    case "p":
      event.preventDefault();
      follow("previous");
      break;
    default:
  }
});

const selectAll = document.getElementById("select-all");
if (selectAll instanceof HTMLInputElement) {
  const boxes = () => document.querySelectorAll('#review-queue input[name="assignment"]');
  selectAll.hidden = boxes().length === 0;
  selectAll.addEventListener("change", () => {
    for (const box of boxes()) box.checked = selectAll.checked;
  });
}
