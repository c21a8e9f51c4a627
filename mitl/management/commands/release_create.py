from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Batch, BatchState
from mitl.services.pipeline import batch_config
from mitl.services.release import release_create


class Command(BaseCommand):
    help = (
        "Write a new version of a release for an aggregated (released) batch: "
        "RELEASES_DIR/NAME/VERSION/ with image_to_caption.json, caption_to_image.json "
        "(ECCV Caption format), judgements.jsonl, stats.json and manifest.json."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument("--name", help="release name (default: the dataset name)")

    def handle(self, *args: object, **options: object) -> None:
        batch = Batch.objects.select_related("dataset").filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch {options['batch']}")
        if batch.state != BatchState.RELEASED:
            raise CommandError(
                f"batch {batch.pk} is {batch.state}; its verdicts are not aggregated yet "
                f"(python manage.py batch_run {batch.pk})"
            )
        release = release_create(batch=batch, config=batch_config(batch), name=options["name"])
        self.stdout.write(f"release {release.name} v{release.version}: {release.path}")
