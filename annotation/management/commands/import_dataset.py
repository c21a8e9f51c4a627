from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.importers import ImportFileError
from annotation.services import ServiceError, dataset_import_tsv


class Command(BaseCommand):
    help = (
        "Import a dataset of captions (and optionally image files and object labels). "
        "The TSV has the header caption_id, image_id, file_name, caption; each caption's "
        "link to its image becomes the `original` positive set. Without --images the "
        "dataset is text-only."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="unique dataset name (a slug, e.g. coco5k)")
        parser.add_argument("--captions", required=True, type=Path, help="captions file")
        parser.add_argument("--format", default="tsv", choices=["tsv"], help="captions format")
        parser.add_argument("--images", type=Path, help="folder holding the image files")
        parser.add_argument("--labels", type=Path, help='JSON {"<image id>": ["label", ...]}')
        parser.add_argument("--description", default="", help="free text shown with the dataset")
        parser.add_argument(
            "--synthetic-meta",
            type=Path,
            help="synthetic.json written by the synthetic generator (records how to regenerate it)",
        )

    def handle(self, *args: object, **options: object) -> None:
        meta = {}
        if options["synthetic_meta"]:
            meta["synthetic"] = json.loads(Path(options["synthetic_meta"]).read_text())
        try:
            dataset = dataset_import_tsv(
                name=options["name"],
                captions_path=options["captions"],
                images_dir=options["images"],
                labels_path=options["labels"],
                description=options["description"],
                meta=meta,
            )
        except (ImportFileError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"imported dataset {dataset.name!r}: {dataset.images.count()} images, "
            f"{dataset.captions.count()} captions"
        )
