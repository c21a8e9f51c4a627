from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Batch
from mitl.bias import MAX_ANNOTATORS
from mitl.bias_html import render_bias_html
from pipeline.bias import bias_report_build

HTML_FILE = "bias_report.html"
JSON_FILE = "bias_report.json"


class Command(BaseCommand):
    help = (
        "Write the model-bias report of an aggregated batch (ECCV Caption, Appendices B and "
        f"E) to DIR/{HTML_FILE} (standalone, with inline SVG charts) and DIR/{JSON_FILE} (the "
        "numbers): answer shares per annotator and per rank, the reasons given for the middle "
        "answers, positives found by one annotator only, each annotator's precision of its "
        "own top k, and R@1 of every annotator on the release built from each subset of "
        "annotators, with the model bias B, self- and non-self-bias averaged per subset "
        f"size. Every subset is scored, so a batch may have at most {MAX_ANNOTATORS} "
        "annotators. Example: bias_report 3 --out var/reports/batch-3"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument(
            "--out",
            required=True,
            type=Path,
            metavar="DIR",
            help="folder to write the report to (created)",
        )

    def handle(self, *args: object, **options: object) -> None:
        batch = Batch.objects.select_related("dataset").filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch {options['batch']}")
        try:
            report = bias_report_build(batch=batch, progress=self._progress)
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        out: Path = options["out"]
        try:
            out.mkdir(parents=True, exist_ok=True)
            (out / JSON_FILE).write_text(
                json.dumps(report, indent=2, allow_nan=False) + "\n", encoding="utf-8"
            )
            (out / HTML_FILE).write_text(render_bias_html(report), encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write the report to {out}: {exc}") from exc
        headline = report["bias"].get(report["headline"])
        if headline:
            for subset in headline["subsets"]:
                if subset["size"] == 1:
                    self.stdout.write(
                        f"{report['headline']} R@1 bias of {subset['members'][0]}'s candidates "
                        f"alone: B {_num(subset['bias'])}, self {_num(subset['self_bias'])}, "
                        f"non-self {_num(subset['non_self_bias'])}"
                    )
        self.stdout.write(f"bias report: {out / HTML_FILE}, {out / JSON_FILE}")

    def _progress(self, direction: str, done: int, total: int) -> None:
        # One line per block of subsets (a single line per direction for a few annotators).
        self.stderr.write(f"bias {direction}: {done}/{total} subsets scored")


def _num(value: float | None) -> str:
    return "—" if value is None else f"{value:.1f}"
