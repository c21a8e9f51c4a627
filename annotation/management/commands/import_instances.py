from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.imports.instances import instances_import
from annotation.models import Dataset
from mitl.formats.common import ImportFileError


class Command(BaseCommand):
    help = (
        "Store object instances from a COCO instances JSON (instances_val2014.json: images "
        "with width and height, categories, annotations with bbox [x, y, w, h] and optional "
        "attributes) on a dataset's images, for the concept metrics of explainable "
        "evaluation. Each image the file lists gets its instances replaced; images it does "
        "not list keep theirs; crowd annotations (iscrowd 1) are left out. Image ids the "
        "dataset does not hold are refused unless --ignore-unknown. All or nothing."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name")
        parser.add_argument(
            "--instances",
            required=True,
            type=Path,
            help="COCO instances JSON, e.g. instances_val2014.json or a synthetic instances.json",
        )
        parser.add_argument(
            "--ignore-unknown",
            action="store_true",
            help="drop images whose ids the dataset does not hold (reported) instead of refusing",
        )

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["name"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['name']!r}")
        try:
            result = instances_import(
                dataset=dataset,
                path=options["instances"],
                ignore_unknown=options["ignore_unknown"],
            )
        except (ImportFileError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        dropped = (
            f"; dropped {result.unknown_images} images unknown to the dataset "
            f"({result.unknown_instances} instances)"
            if result.unknown_images
            else ""
        )
        unlisted = (
            f"; {result.unlisted_images} images of the dataset are not in the file: they keep "
            "their instances, and count as showing no object if they never had any"
            if result.unlisted_images
            else ""
        )
        self.stdout.write(
            f"imported {result.instances} instances on {result.images} images of "
            f"{dataset.name!r}{dropped}{unlisted}"
        )
