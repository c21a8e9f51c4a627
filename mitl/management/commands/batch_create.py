from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Dataset
from mitl.config import ConfigError
from mitl.services.pipeline import batch_create


class Command(BaseCommand):
    help = (
        "Create a draft batch on a dataset from a JSON config and print its id. Config keys: "
        "annotators (required list of names), n_image_queries, n_caption_queries, k, "
        "golden_negative_depth, hit_size, golden_tp, golden_tn, assignments_per_hit, "
        "followups, aggregation, seed (see docs/architecture.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="dataset name")
        parser.add_argument("--config", required=True, type=Path, help="batch config JSON file")
        parser.add_argument("--name", default="", help="batch name (default: the config file name)")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['dataset']!r}")
        path: Path = options["config"]
        try:
            raw = json.loads(path.read_text())
        except OSError as exc:
            raise CommandError(f"{path}: cannot read ({exc.strerror})") from exc
        except json.JSONDecodeError as exc:
            raise CommandError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
        try:
            batch = batch_create(dataset=dataset, name=options["name"] or path.stem, raw_config=raw)
        except (ConfigError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(batch.pk))
