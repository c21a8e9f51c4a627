from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.mturk.errors import MTurkError
from annotation.mturk.topups import mturk_topups_pay
from annotation.mturk.wages import BatchWages, batch_wage_overview
from mitl.wages import WageStats, seconds_text

from .mturk_publish import batch_or_error


class Command(BaseCommand):
    help = (
        "Show a batch's fair pay: the measured time per HIT of its approved work (median and "
        "quartiles, overall and per worker), the effective hourly wage next to the reward and "
        "the batch's minimum (`min_hourly_wage`), the estimate before publication, and the "
        "top-ups owed to MTurk work paid below the minimum. --pay-topups pays them through "
        "MTurk's SendBonus, once each (docs/workers.md, 'Fair pay')."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument("--json", action="store_true", help="print one JSON object")
        parser.add_argument(
            "--pay-topups",
            action="store_true",
            help="pay every proposed top-up not paid yet (a published batch; sends each once)",
        )

    def handle(self, *args: object, **options: Any) -> None:
        batch = batch_or_error(options["batch"])
        paid = None
        if options["pay_topups"]:
            try:
                paid = mturk_topups_pay(batch=batch)
            except MTurkError as exc:
                raise CommandError(str(exc)) from None
        overview = batch_wage_overview(batch=batch)
        if options["json"]:
            self.stdout.write(json.dumps(_as_json(overview, paid), indent=2))
            return
        for line in _lines(overview):
            self.stdout.write(line)
        if paid is not None:
            self.stdout.write(
                f"top-ups paid now: {paid.paid}, ${paid.total} in all; "
                f"{paid.already} paid before, not sent again"
            )


def _stats_text(stats: WageStats) -> str:
    hourly = f"${stats.hourly}/h" if stats.hourly is not None else "no time measured"
    return (
        f"median {seconds_text(stats.median_seconds)} s (quartiles "
        f"{seconds_text(stats.q1_seconds)}–{seconds_text(stats.q3_seconds)} s), "
        f"{hourly} at the median"
    )


def _lines(overview: dict[str, Any]) -> list[str]:
    wages: BatchWages = overview["wages"]
    minimum = f"${wages.minimum_hourly}/h" if wages.minimum_hourly is not None else "none"
    lines = [
        f"batch {wages.batch_id}: reward ${wages.reward} per assignment, minimum {minimum}, "
        f"time counted up to {wages.limit_seconds} s per assignment"
    ]
    if wages.overall is None:
        lines.append("no approved work yet")
    else:
        below = " (below the minimum)" if wages.overall.below_minimum else ""
        lines.append(
            f"approved: {wages.overall.assignments} assignments, "
            f"{_stats_text(wages.overall)}{below}"
        )
        lines.append(
            f"{'worker':<24} {'source':<10} {'assignments':>11} {'median s':>9} "
            f"{'quartiles s':>15} {'$/h':>8}  below"
        )
        for row in wages.workers:
            stats = row.stats
            spread = f"{seconds_text(stats.q1_seconds)}–{seconds_text(stats.q3_seconds)}"
            hourly = str(stats.hourly) if stats.hourly is not None else "–"
            lines.append(
                f"{row.worker.external_id:<24} {row.worker.source:<10} {stats.assignments:>11} "
                f"{seconds_text(stats.median_seconds):>9} {spread:>15} {hourly:>8}  "
                f"{'BELOW' if stats.below_minimum else '-'}"
            )
    estimate = overview["estimate"]
    if estimate is None:
        lines.append(f"estimate: {overview['no_estimate']}")
    else:
        hourly = f"${estimate.hourly}/h" if estimate.hourly is not None else "–"
        lines.append(
            f"estimate: {hourly} at {seconds_text(estimate.seconds_per_hit)} s per HIT "
            f"({estimate.basis_text()})"
        )
    if overview["warning"]:
        lines.append(f"warning: {overview['warning']}")
    topups = overview["topups"]
    lines.append(
        f"top-ups proposed: {overview['topups_due']} due, ${overview['topups_due_total']} in "
        f"all; {len(topups) - overview['topups_due']} paid before "
        f"(${overview['topups_paid_total']})"
    )
    for topup in topups:
        hourly = f"${topup.hourly}/h" if topup.hourly is not None else "–"
        lines.append(
            f"  {topup.assignment.external_id} {topup.assignment.worker.external_id}: "
            f"{seconds_text(topup.seconds)} s, {hourly} → top-up ${topup.amount} "
            f"{'paid' if topup.paid else 'due'}"
        )
    return lines


def _as_json(overview: dict[str, Any], paid: Any) -> dict[str, Any]:
    estimate = overview["estimate"]
    return {
        "wages": overview["wages"].to_json(),
        "estimate": estimate.to_json() if estimate else None,
        "no_estimate": overview["no_estimate"] or None,
        "topups": [topup.to_json() for topup in overview["topups"]],
        "topups_due": overview["topups_due"],
        "topups_due_total": str(overview["topups_due_total"]),
        "topups_paid_total": str(overview["topups_paid_total"]),
        "paid_now": None
        if paid is None
        else {"paid": paid.paid, "already": paid.already, "total": str(paid.total)},
    }
