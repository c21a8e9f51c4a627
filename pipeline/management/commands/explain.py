from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Dataset
from mitl.evaluation_inputs import (
    DIRECTIONS,
    EvaluationError,
    RankingsByDirection,
    ReleaseTruth,
    keyed_rankings_read,
    release_load,
)
from mitl.explain.adversarial import PERTURBATION_KINDS
from mitl.explain.metrics import DEFAULT_SIZE_THRESHOLD
from mitl.explain.table import summary_table
from mitl.ranking_limits import UNLIMITED, rankings_file_limited
from pipeline.evaluation_jobs import evaluation_limits
from pipeline.explain import DEFAULT_WORST, release_dataset
from pipeline.explain_adversarial import perturbed_queries
from pipeline.explain_report import ExplainRequest, explain_report, report_write


class Command(BaseCommand):
    help = (
        "Explain a model's retrieval failures on a release, concept by concept (paper 000): "
        "for every query whose first result is not a positive, concept agreement CA, "
        "non-common concept similarity NCS, concept enumeration CE and size disagreement SD, "
        "query-agnostic and query-informed, with the worst failures side by side. The model "
        "is a rankings file (as for `evaluate`) and/or machine annotators of the dataset "
        "(--annotator). --adversarial perturbs the caption queries (antonyms, colours, "
        "sizes) and re-ranks them with every annotator that can score free text. Writes "
        "report.json and report.html under --out. Concepts come from the images' "
        "instances, else their labels, else their captions' nouns (docs/explain.md). "
        "Example: explain --release var/releases/demo/1 --rankings model.json --adversarial"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--release", required=True, type=Path, help="release directory")
        parser.add_argument("--rankings", type=Path, help="rankings JSON file of the model")
        parser.add_argument("--model-name", default=None, help="name of that model in the report")
        parser.add_argument(
            "--annotator",
            action="append",
            default=[],
            help="machine annotator to explain too (repeatable); with --adversarial and none "
            "named, every annotator of the release's batches",
        )
        parser.add_argument(
            "--dataset", help="dataset name (default: the one the release's manifest names)"
        )
        parser.add_argument(
            "--adversarial", action="store_true", help="re-rank perturbed caption queries"
        )
        parser.add_argument(
            "--kind",
            action="append",
            choices=PERTURBATION_KINDS,
            help="perturbation kind (repeatable; default all)",
        )
        parser.add_argument("--seed", type=int, default=0, help="seed of the perturbations")
        parser.add_argument(
            "--adversarial-queries-out",
            type=Path,
            help="write the perturbed caption queries, {kind: {caption id: text}}, for a "
            "model the platform cannot run, and stop",
        )
        parser.add_argument(
            "--adversarial-rankings",
            type=Path,
            help="that model's rankings of those queries, {kind: {caption id: [image ids]}} "
            "(same --seed), to compare with --rankings",
        )
        parser.add_argument(
            "--worst",
            type=int,
            default=DEFAULT_WORST,
            help=f"worst failures shown per direction (default {DEFAULT_WORST})",
        )
        parser.add_argument(
            "--size-threshold",
            type=float,
            default=DEFAULT_SIZE_THRESHOLD,
            help="relative box-area difference that counts as a size disagreement "
            f"(default {DEFAULT_SIZE_THRESHOLD:g}: one box twice the other)",
        )
        parser.add_argument(
            "--out", type=Path, help="output directory (default var/explain/<release>-<time>)"
        )
        parser.add_argument("--json", action="store_true", help="print the JSON report only")
        parser.add_argument(
            "--no-limits",
            action="store_true",
            help="read --rankings over the leaderboard's limits (size, ranking depth, the "
            "dataset's images and captions: docs/api.md)",
        )

    def handle(self, *args: object, **options: Any) -> None:
        if options["worst"] < 0:
            raise CommandError("--worst must be 0 or more")
        if options["size_threshold"] < 0:
            raise CommandError("--size-threshold must be 0 or more")
        release_dir: Path = options["release"]
        quiet = bool(options["json"])
        try:
            truth = release_load(release_dir)
            dataset = release_dataset(release_dir, options["dataset"])
            rankings = None
            if options["rankings"]:
                limits = UNLIMITED
                if not options["no_limits"]:
                    counts = {"i2t": dataset.images.count(), "t2i": dataset.captions.count()}
                    limits = evaluation_limits(max_queries=counts)
                rankings = rankings_file_limited(options["rankings"], limits)
                _check_ranked(truth, rankings)
            if options["adversarial_queries_out"]:
                self._write_queries(truth, dataset, options)
                return
            adversarial_rankings = None
            if options["adversarial_rankings"]:
                if rankings is None:
                    raise CommandError("--adversarial-rankings compares with --rankings: give both")
                adversarial_rankings = keyed_rankings_read(
                    options["adversarial_rankings"], PERTURBATION_KINDS
                )
            model_name = options["model_name"] or (
                options["rankings"].stem if options["rankings"] else "model"
            )
            request = ExplainRequest(
                release_dir=release_dir,
                truth=truth,
                dataset=dataset,
                rankings=rankings,
                model_name=model_name,
                annotators=options["annotator"],
                adversarial=options["adversarial"],
                kinds=options["kind"],
                adversarial_rankings=adversarial_rankings,
                seed=options["seed"],
                worst=options["worst"],
                size_threshold=options["size_threshold"],
            )
            report = explain_report(request, listener=None if quiet else self._progress)
        except (EvaluationError, ServiceError) as exc:
            raise CommandError(str(exc)) from None
        out = options["out"] or Path(settings.BASE_DIR) / "var" / "explain" / (
            f"{release_dir.resolve().name}-{time.strftime('%Y%m%d-%H%M%S')}"
        )
        try:
            html_path, json_path = report_write(report, out)
        except OSError as exc:
            raise CommandError(f"cannot write the report under {out}: {exc.strerror}") from None
        if quiet:
            self.stdout.write(json.dumps(report))
            return
        self.stdout.write(summary_table(report))
        self.stdout.write(f"wrote {html_path} and {json_path}")

    def _write_queries(self, truth: ReleaseTruth, dataset: Dataset, options: Any) -> None:
        """Write the perturbed caption queries of the release for an outside model."""
        # Every caption, as the report's comparison reads them: `color_in` draws from the
        # colours of all of them, so both sides must see the same texts.
        captions = dict(dataset.captions.values_list("ext_id", "text"))
        queries = perturbed_queries(truth, captions, kinds=options["kind"], seed=options["seed"])
        path: Path = options["adversarial_queries_out"]
        data = {kind: {str(q): t for q, t in texts.items()} for kind, texts in queries.items()}
        try:
            path.write_text(json.dumps(data, indent=1) + "\n", encoding="utf-8")
        except OSError as exc:
            raise CommandError(f"cannot write {path}: {exc.strerror}") from None
        counts = ", ".join(f"{len(texts)} {kind}" for kind, texts in queries.items())
        self.stdout.write(f"wrote {counts} perturbed caption queries to {path}")

    def _progress(self, stage: str, done: int, total: int) -> None:
        if total and (done == total or done == 0):
            self.stderr.write(f"{stage}: {done}/{total}")


def _check_ranked(truth: ReleaseTruth, rankings: RankingsByDirection) -> None:
    """Refuse rankings that leave release queries out: the failure rate would not be one."""
    for direction in DIRECTIONS:
        missing = [q for q in truth.positives[direction] if q not in rankings[direction]]
        if missing:
            raise CommandError(
                f"{direction}: {len(missing)} of the release's {len(truth.positives[direction])} "
                f"queries have no ranking (first: {missing[0]})"
            )
