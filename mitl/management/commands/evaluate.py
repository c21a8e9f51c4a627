from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.parse_common import ImportFileError
from annotation.parsers import parse_captions_tsv
from mitl.evaluation import CaptionSplit, evaluate, format_table
from mitl.evaluation_inputs import EvaluationError, rankings_read, release_load


class Command(BaseCommand):
    help = (
        "Evaluate a model's rankings on a release directory: Recall@1/5/10 (hit rate), "
        "R-Precision, mAP@R, PMRP-style R-Precision (R capped at 50) and nDCG@10 (graded "
        "by verdicts.csv when the release has it), per direction. The rankings file is "
        '{"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>": '
        "[image ids, best first]}} and must rank every query of the release. With --captions "
        "(the dataset's captions TSV; its images in split order, a caption anywhere) and "
        "rankings of every image and caption in it, COCO 5K and 1K (5 folds of whole "
        "images) recalls are added. Example: "
        "evaluate --release var/releases/coco5k/1 --rankings model.json --json"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--release", required=True, help="release directory")
        parser.add_argument("--rankings", required=True, help="rankings JSON file")
        parser.add_argument(
            "--captions",
            help="captions TSV of the dataset (caption_id image_id file_name caption), for the "
            "COCO 1K/5K recalls; the 1K folds take the images in order of first appearance",
        )
        parser.add_argument("--json", action="store_true", help="print JSON only")

    def handle(self, *args: object, **options: object) -> None:
        split = None
        if options["captions"]:
            try:
                rows = parse_captions_tsv(Path(str(options["captions"])))
            except ImportFileError as exc:
                raise CommandError(str(exc)) from None
            split = CaptionSplit(
                caption_ids=[row.caption_id for row in rows],
                image_ids=[row.image_id for row in rows],
            )
        try:
            release = release_load(str(options["release"]))
            rankings = rankings_read(str(options["rankings"]))
        except EvaluationError as exc:
            raise CommandError(str(exc)) from None
        try:
            result = evaluate(release, rankings, split=split)
        except EvaluationError as exc:
            raise CommandError(f"{options['rankings']}: {exc}") from None
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"{options['rankings']} on {options['release']}")
        self.stdout.write(format_table(result))
