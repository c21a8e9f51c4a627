from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.importers import ImportFileError
from annotation.models import Dataset
from annotation.services import ServiceError, positives_import_eccv


class Command(BaseCommand):
    help = (
        "Import a set of positive pairs in the ECCV Caption format "
        '(image_to_caption.json = {"<image id>": [caption ids]} and '
        'caption_to_image.json = {"<caption id>": [image ids]}); the set is the union of both.'
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name")
        parser.add_argument(
            "--source", required=True, help="name of the new positive set, e.g. cxc"
        )
        parser.add_argument("--i2t", required=True, type=Path, help="image_to_caption.json")
        parser.add_argument("--t2i", required=True, type=Path, help="caption_to_image.json")
        parser.add_argument(
            "--ignore-unknown",
            action="store_true",
            help="drop pairs whose ids the dataset does not hold (reported) instead of refusing",
        )

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["name"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['name']!r}")
        try:
            positive_set, dropped = positives_import_eccv(
                dataset=dataset,
                label=options["source"],
                i2t_path=options["i2t"],
                t2i_path=options["t2i"],
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
            self.stdout.write(f"dropped {dropped} pairs with ids unknown to {dataset.name!r}")
