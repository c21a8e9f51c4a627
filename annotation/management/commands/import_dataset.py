from __future__ import annotations

import json
from pathlib import Path

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.imports.datasets import dataset_import
from annotation.imports.image_sources import image_source_open
from mitl.formats.captions import CAPTION_FORMATS
from mitl.formats.common import ImportFileError


class Command(BaseCommand):
    help = (
        "Import a dataset of captions (and optionally image files, object labels and "
        "object instances). "
        "Captions come as a TSV with the header caption_id, image_id, file_name, caption "
        "(--format tsv), a COCO captions JSON with images and annotations (--format coco) or "
        "Karpathy's dataset_coco.json (--format karpathy, optionally one --split); each "
        "caption's link to its image becomes the `original` positive set. Images come from "
        "a folder, a zip file or s3://bucket/prefix; without --images the dataset is "
        "text-only. --instances takes a COCO instances JSON (instances_*.json) whose "
        "images must all be among the captions' (import_instances --ignore-unknown takes a "
        "larger file later). The import completes or leaves nothing behind."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="unique dataset name (a slug, e.g. coco5k)")
        parser.add_argument("--captions", required=True, type=Path, help="captions file")
        parser.add_argument(
            "--format", default="tsv", choices=CAPTION_FORMATS, help="captions format (tsv)"
        )
        parser.add_argument(
            "--split",
            help="with --format karpathy: import only the images of this split (e.g. test)",
        )
        parser.add_argument(
            "--images",
            help="the image files: a folder, a .zip file or s3://bucket/prefix (credentials "
            "from AWS_ACCESS_KEY_ID/AWS_SECRET_ACCESS_KEY, endpoint from STORAGE_ENDPOINT_URL)",
        )
        parser.add_argument("--labels", type=Path, help='JSON {"<image id>": ["label", ...]}')
        parser.add_argument(
            "--instances",
            type=Path,
            help="COCO instances JSON (boxes per image, e.g. the synthetic instances.json)",
        )
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
        if options["split"] and options["format"] != "karpathy":
            raise CommandError("--split applies to --format karpathy only")
        images = None
        try:
            if options["images"]:
                images = image_source_open(
                    options["images"],
                    endpoint_url=settings.STORAGE_ENDPOINT_URL,
                    region=settings.STORAGE_REGION,
                )
            dataset = dataset_import(
                name=options["name"],
                captions_path=options["captions"],
                format=options["format"],
                images=images,
                labels_path=options["labels"],
                instances_path=options["instances"],
                split=options["split"],
                description=options["description"],
                meta=meta,
            )
        except (ImportFileError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        finally:
            if images is not None:
                images.close()
        instances = ""
        if options["instances"]:
            rows = dataset.images.values_list("instances", flat=True)
            instances = f", {sum(len(r) for r in rows)} object instances"
        self.stdout.write(
            f"imported dataset {dataset.name!r}: {dataset.images.count()} images, "
            f"{dataset.captions.count()} captions{instances}"
        )
