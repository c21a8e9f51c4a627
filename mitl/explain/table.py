"""The explanation report as a few lines of text, for the command line and the demo."""

from __future__ import annotations

from typing import Any


def _cell(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def summary_table(report: dict[str, Any]) -> str:
    """Return one line per model and direction, then the adversarial verdicts."""
    lines = [
        f"{'model':<20} {'dir':<4} {'fail':>6} {'CA':>6} {'NCS':>6} {'CE':>6} {'SD':>6} "
        f"{'SD>T':>6} {'AA':>6} | query-informed CA"
    ]
    for model in report["models"]:
        for direction, result in model["explanation"].items():
            means = result["agnostic"]["means"]
            informed = (result["informed"] or {}).get("means", {})
            lines.append(
                f"{model['name'][:20]:<20} {direction:<4} {result['failures']:>6} "
                f"{_cell(means['ca']):>6} {_cell(means['ncs']):>6} {_cell(means['ce'], 2):>6} "
                f"{_cell(means['sd'], 2):>6} {_cell(means['sd_rate']):>6} "
                f"{_cell(means.get('aa')):>6} | "
                f"{_cell(informed.get('ca'))}"
            )
        adversarial = model.get("adversarial") or {}
        if "skipped" in adversarial:
            lines.append(f"  no re-ranking: {adversarial['skipped']}")
        for kind, moved in (adversarial.get("kinds") or {}).items():
            lines.append(f"  {kind:<10} {moved['verdict']}")
    for skipped in report.get("skipped_annotators") or []:
        lines.append(f"{skipped['name']}: not explained ({skipped['reason']})")
    return "\n".join(lines)
