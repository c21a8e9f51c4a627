from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Dataset
from mitl.config import ConfigError
from pipeline.launch import batch_create_with_queries, queries_file_parse


class Command(BaseCommand):
    help = (
        "Create a draft batch on a dataset from a JSON config and print its id. Config keys: "
        "annotators (required list of names), n_image_queries, n_caption_queries, k, "
        "golden_negative_depth, hit_size, golden_tp, golden_tn, assignments_per_hit, "
        "followups, aggregation, seed; strategy (fixed or adaptive), adjudication, "
        "budget_judgements, round_size, ranking_depth, estimate_share, queries_from (see "
        "README.md and docs/curation.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="dataset name")
        parser.add_argument("--config", required=True, type=Path, help="batch config JSON file")
        parser.add_argument("--name", default="", help="batch name (default: the config file name)")
        parser.add_argument(
            "--queries",
            type=Path,
            help='JSON file {"images": [ids], "captions": [ids]}: these queries (the dataset\'s '
            "own ids) instead of a sample",
        )
        parser.add_argument(
            "--skip-finished",
            action="store_true",
            help="leave out queries that released batches on the dataset already finished",
        )

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['dataset']!r}")
        path: Path = options["config"]
        raw = _json_file(path)
        image_ids = caption_ids = None
        try:
            if options["queries"] is not None:
                image_ids, caption_ids = queries_file_parse(_json_file(options["queries"]))
            batch = batch_create_with_queries(
                dataset=dataset,
                name=options["name"] or path.stem,
                raw_config=raw,
                image_ids=image_ids,
                caption_ids=caption_ids,
                skip_finished=options["skip_finished"],
            )
        except (ConfigError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(str(batch.pk))


def _json_file(path: Path) -> Any:
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise CommandError(f"{path}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
