from __future__ import annotations

import time
from collections.abc import Mapping

from django.core.management.base import BaseCommand, CommandError, CommandParser

from mitl.curation.estimate import recall_wording
from pipeline.demo import DEMO_BUDGET, DEMO_PASSWORD, DemoSummary, demo_run
from pipeline.demo_check import demo_check
from pipeline.management.progress_bars import StageBars


class Command(BaseCommand):
    help = (
        "Run the whole pipeline on the embedded default: generate a synthetic dataset, import "
        "it, retrieve candidates with the machine annotators, pool them, pack HITs with "
        "goldens, let a simulated crowd judge them (flagged work is rejected and re-posted), "
        "aggregate, and write a release under var/releases/. Prints a summary with the "
        "precision and recall of the positives against the synthetic truth."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--images", type=int, default=300, help="synthetic images")
        parser.add_argument(
            "--queries", type=int, default=100, help="image queries and caption queries each"
        )
        parser.add_argument("--assignments", type=int, default=3, help="workers per HIT")
        parser.add_argument("--workers", type=int, default=15, help="simulated workers")
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument(
            "--strategy",
            choices=("adaptive", "fixed"),
            default="adaptive",
            help="adaptive: rounds until --budget judgements are spent (default); fixed: "
            "every annotator's top 5 judged once (ECCV Caption's protocol)",
        )
        parser.add_argument(
            "--budget", type=int, default=DEMO_BUDGET, help="judgements (adaptive strategy)"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bars")
        parser.add_argument(
            "--check",
            action="store_true",
            help="after the run, check the release and the figures printed (files present and "
            "non-empty, stats.json agreeing with them, recalls and intervals in [0, 1]) and "
            "exit non-zero naming what is off",
        )

    def handle(self, *args: object, **options: object) -> None:
        started = time.monotonic()
        bars = StageBars(enabled=not options["no_progress"])
        try:
            summary = demo_run(
                n_images=options["images"],
                n_queries=options["queries"],
                assignments_per_hit=options["assignments"],
                n_workers=options["workers"],
                seed=options["seed"],
                strategy=options["strategy"],
                budget=options["budget"],
                listener=bars,
            )
        finally:
            bars.close_all()
        self._write_summary(summary, started)
        for sentence in summary.skipped:
            self.stdout.write(sentence)
        if options["check"]:
            self._check(summary)

    def _write_summary(self, summary: DemoSummary, started: float) -> None:
        """Print the counts, positives, agreement, recall, timings and the accounts."""
        out = self.stdout
        out.write("")
        out.write(f"Demo on dataset {summary.dataset!r}, batch {summary.batch_id}")
        for name, value in summary.counts.items():
            out.write(f"  {name:<22} {value:>8}")
        out.write("")
        out.write("Positives over the queries          original   released   factor")
        for direction, stats in summary.positives.items():
            out.write(
                f"  {direction} ({stats['queries']} queries)".ljust(36)
                + f"{stats['positives_original']:>8} {stats['positives_extended']:>10} "
                f"{stats['factor']:>8.2f}x"
            )
        out.write("")
        out.write("Against the synthetic truth          precision  recall   pairs")
        for label, agreement in summary.agreement.items():
            out.write(
                f"  {label:<34}{agreement['precision']:>8.3f} {agreement['recall']:>7.3f} "
                f"{agreement['pairs']:>7}"
            )
        out.write("")
        out.write(f"Strategy {summary.strategy}, {summary.rounds} round(s)")
        for line in recall_lines(summary.estimated_recall, summary.agreement):
            out.write(line)
        out.write("")
        timings = ", ".join(
            f"{name} {seconds:.1f} s" for name, seconds in summary.stage_seconds.items()
        )
        out.write(f"Stage times: {timings}")
        if summary.explain_path:
            out.write("Why the annotators fail (docs/explain.md): CA, NCS ↑; CE, SD ↓")
            out.write(summary.explain_table)
            out.write(f"Explanation report: {summary.explain_path}")
        out.write(
            "The same HITs without and with a qualification round (a crowd with careless "
            "and learning workers; docs/workers.md):"
        )
        out.write(summary.qualification_table)
        out.write(f"Release written to {summary.release_path}")
        out.write(f"Total wall time {time.monotonic() - started:.1f} s")
        out.write("")
        out.write(
            f"Batch {summary.live_batch_id} waits for people. Run `make serve`, open "
            "http://127.0.0.1:8000/accounts/login/ and log in as"
        )
        for username, role in summary.accounts.items():
            out.write(f"  {username:<12} password {DEMO_PASSWORD!r}  ({role})")
        out.write(
            "Annotators press 'Start next HIT'; the admin reviews flagged work at /review/ "
            "(these local accounts exist for the demo only)."
        )

    def _check(self, summary: DemoSummary) -> None:
        """Check the release and the figures printed; raise CommandError naming what is off."""
        problems = demo_check(summary)
        if problems:
            listed = "".join(f"\n  - {problem}" for problem in problems)
            raise CommandError(f"demo --check: {len(problems)} problem(s) found:{listed}")
        self.stdout.write(
            f"Check passed: release {summary.release_path} is complete and agrees with "
            "stats.json; every precision, recall and interval printed is in [0, 1]."
        )


def recall_lines(
    estimated: Mapping[str, Mapping[str, float]], agreement: Mapping[str, Mapping[str, float]]
) -> list[str]:
    """The summary's recall table: the true recall, the estimate, and what each counts."""
    if not estimated:
        return []
    lines = ["Recall of the release                true   estimated (95% interval)"]
    for direction, estimate in estimated.items():
        true_recall = agreement[f"released {direction}"]["recall"]
        wording = recall_wording(
            recall_low=estimate["recall_low"], recall_high=estimate["recall_high"]
        )
        lines.append(
            f"  {direction:<34}{true_recall:>6.3f}   {estimate['recall']:.3f} "
            f"({estimate['recall_low']:.3f}-{estimate['recall_high']:.3f})"
            + (f"  {wording.warning}" if wording.warning else "")
        )
    lines.append(f"  true: against the synthetic truth; estimated: {wording.truth}")
    return lines
