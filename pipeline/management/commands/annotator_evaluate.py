from __future__ import annotations

import json
from dataclasses import asdict

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Dataset, Direction, MachineAnnotator
from mitl.annotators import AnnotatorError
from pipeline.evaluate_annotator import annotator_evaluate
from pipeline.management.progress_bars import StageBars


class Command(BaseCommand):
    help = (
        "Check one annotator's retrieval on a dataset before it proposes candidates: rank the "
        "queries of a positive set (--queries-from, e.g. the imported ECCV set's 1,332 caption "
        "queries) and print Recall@K (any positive in the top K) and Precision@K against each "
        "--against set. Example, on the COCO 5K captions: "
        "annotator_evaluate coco5k minilm --direction t2i --queries-from eccv "
        "--against original --against eccv --k 1 --k 5"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="dataset name")
        parser.add_argument("annotator", help="annotator name (annotator_create)")
        parser.add_argument("--direction", choices=list(Direction.values), default="t2i")
        parser.add_argument(
            "--queries-from", required=True, help="positive set whose queries to rank"
        )
        parser.add_argument(
            "--against", action="append", required=True, help="positive set to score against"
        )
        parser.add_argument("--k", action="append", type=int, help="cut-offs (default 1, 5, 10)")
        parser.add_argument("--json", action="store_true", help="print JSON only")

    def handle(self, *args: object, **options: object) -> None:
        dataset = Dataset.objects.filter(name=options["dataset"]).first()
        if dataset is None:
            raise CommandError(f"no dataset named {options['dataset']!r}")
        annotator = MachineAnnotator.objects.filter(name=options["annotator"]).first()
        if annotator is None:
            raise CommandError(f"no annotator named {options['annotator']!r}")
        ks = sorted(set(options["k"] or [1, 5, 10]))
        if ks[0] < 1:
            raise CommandError("--k must be at least 1")
        bars = StageBars(enabled=not options["json"])
        try:
            result = annotator_evaluate(
                dataset=dataset,
                annotator=annotator,
                direction=options["direction"],
                queries_from=options["queries_from"],
                against=options["against"],
                ks=ks,
                listener=bars,
            )
        except (ServiceError, AnnotatorError) as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bars.close_all()
        if options["json"]:
            self.stdout.write(json.dumps(asdict(result), sort_keys=True))
            return
        self.stdout.write(
            f"{result.annotator} ({result.direction}, {result.queries} queries from "
            f"{options['queries_from']!r})"
        )
        for name, scores in result.scores.items():
            figures = "  ".join(f"{metric} {value:.4f}" for metric, value in scores.items())
            self.stdout.write(f"  against {name:<12} {figures}")
