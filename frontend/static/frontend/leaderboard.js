// Sort the leaderboard by a clicked header; the server's order (by model name) is the default.
// A number column sorts highest first on the first click (every metric is better higher),
// a text column A to Z; a second click reverses. Rows without a value stay last.

function compare(a, b, kind) {
  if (kind === "number") return Number(a) - Number(b);
  return a.localeCompare(b);
}

function sortBy(table, header) {
  const column = Number(header.dataset.column);
  const kind = header.dataset.kind;
  const first = kind === "number" ? "descending" : "ascending";
  const order = header.getAttribute("aria-sort") === first
    ? (first === "descending" ? "ascending" : "descending")
    : first;
  for (const other of table.querySelectorAll("th.sort-header")) other.removeAttribute("aria-sort");
  header.setAttribute("aria-sort", order);
  const body = table.tBodies[0];
  const rows = Array.from(body.rows);
  const sign = order === "ascending" ? 1 : -1;
  rows.sort((ra, rb) => {
    const a = ra.cells[column]?.dataset.value ?? "";
    const b = rb.cells[column]?.dataset.value ?? "";
    if (a === "" || b === "") return (a === "") - (b === "");
    return sign * compare(a, b, kind);
  });
  for (const row of rows) body.appendChild(row);
}

for (const table of document.querySelectorAll("table.sortable")) {
  for (const header of table.querySelectorAll("th.sort-header")) {
    header.tabIndex = 0;
    header.addEventListener("click", () => sortBy(table, header));
    header.addEventListener("keydown", (event) => {
      if (event.key === "Enter" || event.key === " ") {
        event.preventDefault();
        sortBy(table, header);
      }
    });
  }
}
