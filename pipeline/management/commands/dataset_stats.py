from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Dataset
from mitl.dataset_stats import stats_as_json, stats_table
from pipeline.dataset_stats import dataset_stats_compute


class Command(BaseCommand):
    help = (
        "Print, for every positive set of a dataset, the number of positive images (summed "
        "over the caption queries) and positive captions (summed over the image queries) with "
        "the factor over the original set (ECCV Caption Table 3), and the precision and recall "
        "of each set against the human-verified positive sets (Table 2; n/a without one). "
        "--queries-from SET takes the query subset from an imported set's queries (e.g. eccv: "
        "1,261 images and 1,332 captions); by default every image and caption is a query."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="dataset name")
        parser.add_argument(
            "--queries-from",
            metavar="SOURCE",
            help="positive set whose queries define the query subset (default: all)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON only")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["name"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['name']!r}")
        try:
            stats = dataset_stats_compute(dataset=dataset, queries_from=options["queries_from"])
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        if options["json"]:
            payload = {
                "dataset": dataset.name,
                "queries_from": options["queries_from"],
                **stats_as_json(stats),
            }
            self.stdout.write(json.dumps(payload, sort_keys=True))
            return
        label = (
            f"the queries of {options['queries_from']!r}"
            if options["queries_from"]
            else "every image and caption"
        )
        self.stdout.write(f"dataset {dataset.name!r}: " + stats_table(stats, queries_label=label))
