from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.mturk.errors import MTurkError
from annotation.mturk.offline import mturk_results_import
from annotation.mturk.offline_csv import decisions_csv

from .mturk_publish import batch_or_error


class Command(BaseCommand):
    help = (
        "Import MTurk's batch-results CSV (downloaded from the web UI for a batch made with "
        "mturk_export): each row becomes an assignment with its judgements, through the same "
        "submit service as the HIT page (the golden check applies). Rows already imported are "
        "skipped; problems are reported as file:line. --decisions writes the CSV back with "
        "Approve/Reject filled in, for MTurk's 'Upload CSV'."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id (in the annotating state)")
        parser.add_argument("results", type=Path, help="the Batch_…_batch_results.csv file")
        parser.add_argument(
            "--decisions", type=Path, help="write the results CSV with Approve/Reject filled in"
        )

    def handle(self, *args: object, **options: object) -> None:
        batch = batch_or_error(options["batch"])
        path: Path = options["results"]
        try:
            text = path.read_text(encoding="utf-8-sig")
        except (OSError, UnicodeDecodeError) as exc:
            raise CommandError(f"cannot read {path}: {exc}") from None
        try:
            report = mturk_results_import(batch=batch, text=text, source=str(path))
        except MTurkError as exc:
            raise CommandError(str(exc)) from None
        self.stdout.write(
            f"{report.imported} assignments imported, {report.already} already imported; "
            + ", ".join(f"{n} {status}" for status, n in sorted(report.statuses.items()))
        )
        for line in report.disagreements:
            self.stderr.write(f"disagreement: {line}")
        if options["decisions"] and report.decisions:
            options["decisions"].write_text(decisions_csv(text, report.decisions))
            waiting = sum(1 for decision in report.decisions.values() if decision is None)
            self.stdout.write(
                f"decisions → {options['decisions']} ({waiting} wait for a review here)"
            )
        if report.errors:
            raise CommandError(
                f"{len(report.errors)} rows not imported:\n" + "\n".join(report.errors)
            )
