from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.imports.positives import CXC_MIN_SCORE, positives_import
from mitl.formats.common import ImportFileError


class Command(BaseCommand):
    help = (
        "Import a set of positive pairs, either in the ECCV Caption format (--i2t "
        'image_to_caption.json = {"<image id>": [caption ids]} and --t2i '
        'caption_to_image.json = {"<caption id>": [image ids]}; the set is the union of both) '
        "or from a Crisscrossed Captions SITS file (--cxc sits_test.csv, header "
        "caption,image,agg_score,sampling_method; pairs rated --min-score or more)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name")
        parser.add_argument(
            "--source", required=True, help="name of the new positive set, e.g. cxc"
        )
        parser.add_argument("--i2t", type=Path, help="ECCV format: image_to_caption.json")
        parser.add_argument("--t2i", type=Path, help="ECCV format: caption_to_image.json")
        parser.add_argument("--cxc", type=Path, help="CxC SITS CSV, e.g. sits_test.csv")
        parser.add_argument(
            "--min-score",
            type=float,
            help=(
                f"with --cxc: the lowest rating (0-5) that counts as a positive "
                f"(default {CXC_MIN_SCORE:g})"
            ),
        )
        parser.add_argument(
            "--ignore-unknown",
            action="store_true",
            help="drop pairs whose ids the dataset does not hold (reported) instead of refusing",
        )

    def handle(self, *args: object, **options: object) -> None:
        try:
            positive_set, dropped = positives_import(
                dataset_name=options["name"],
                label=options["source"],
                i2t_path=options["i2t"],
                t2i_path=options["t2i"],
                cxc_path=options["cxc"],
                min_score=options["min_score"],
                ignore_unknown=options["ignore_unknown"],
            )
        except (ImportFileError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"imported positive set {positive_set.name!r}: {positive_set.pairs.count()} pairs, "
            f"{len(positive_set.queries['i2t'])} image and {len(positive_set.queries['t2i'])} "
            "caption queries"
        )
        if dropped:
            self.stdout.write(f"dropped {dropped} pairs with ids unknown to {options['name']!r}")
