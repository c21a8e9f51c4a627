from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from mitl.evaluation import CaptionSplit, evaluate, format_table
from mitl.evaluation_inputs import (
    EvaluationError,
    RankingsByDirection,
    ReleaseTruth,
    release_load,
)
from mitl.formats.captions import CaptionRow, parse_captions_tsv
from mitl.formats.common import ImportFileError
from mitl.graded_evaluation import (
    CROWD,
    GradedOptions,
    format_graded,
    graded_evaluate,
    relevance_matrices,
)
from mitl.ranking_limits import UNLIMITED, rankings_file_limited
from mitl.relevance.calibrated import CALIBRATED, CalibratedModel
from mitl.relevance.images import AGGREGATIONS
from mitl.relevance.proxies import PROXIES
from pipeline.calibrated_relevance import release_calibrated_model, release_manifest_read
from pipeline.evaluation_jobs import evaluation_limits
from pipeline.relevance import captions_corpus


class Command(BaseCommand):
    help = (
        "Evaluate a model's rankings on a release directory: Recall@1/5/10 (hit rate), "
        "R-Precision, mAP@R, PMRP-style R-Precision (R capped at 50) and nDCG@10 (graded "
        "by verdicts.csv when the release has it), per direction. The rankings file is "
        '{"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>": '
        "[image ids, best first]}} and must rank every query of the release. With --captions "
        "(the dataset's captions TSV; its images in split order, a caption anywhere) and "
        "rankings of every image and caption in it, COCO 5K and 1K (5 folds of whole "
        "images) recalls are added, and --relevance PROXY adds graded metrics (nDCG@25, "
        "nDCG over the whole ranking, NCS@K, semantic recall@K, Recall@K limits) with the "
        "relevance of a caption proxy or of the crowd's verdicts (docs/relevance.md). The "
        "file is held to the leaderboard's limits (size, ranking depth, queries: docs/api.md) "
        "unless --no-limits. Example: "
        "evaluate --release var/releases/coco5k/1 --rankings model.json --json"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--release", required=True, help="release directory")
        parser.add_argument("--rankings", required=True, help="rankings JSON file")
        parser.add_argument(
            "--captions",
            help="captions TSV of the dataset (caption_id image_id file_name caption), for the "
            "COCO 1K/5K recalls; the 1K folds take the images in order of first appearance",
        )
        parser.add_argument(
            "--relevance",
            action="append",
            choices=[*PROXIES, CALIBRATED, CROWD],
            help="graded relevance source (repeatable): a caption proxy, calibrated (the "
            "dataset's stored calibrated model: relevance_calibrate --save), or crowd (the "
            "release's verdicts.csv scores); needs --captions. meteor scores pair by pair "
            "(hours for a corpus of COCO's size)",
        )
        parser.add_argument(
            "--calibration-dataset",
            help="the dataset whose newest calibrated model --relevance calibrated applies "
            "(default: the model version the release's manifest records, of its dataset)",
        )
        parser.add_argument(
            "--aggregation",
            choices=AGGREGATIONS,
            default="mean",
            help="how a proxy scores an image from its captions (default mean)",
        )
        parser.add_argument(
            "--threshold",
            type=float,
            default=0.5,
            help="semantic recall counts items of relevance >= this (default 0.5)",
        )
        parser.add_argument(
            "--near-duplicate",
            type=float,
            default=0.8,
            help="Recall@K limits treat items of relevance >= this as near-duplicates (0.8)",
        )
        parser.add_argument("--json", action="store_true", help="print JSON only")
        parser.add_argument(
            "--no-limits",
            action="store_true",
            help="score rankings over the leaderboard's limits (EVALUATION_MAX_BODY_MB, "
            "EVALUATION_MAX_RANKING_LENGTH, and with --captions the split's images and captions)",
        )

    def handle(self, *args: object, **options: Any) -> None:
        split, rows = None, []
        if options["captions"]:
            try:
                rows = parse_captions_tsv(Path(str(options["captions"])))
            except ImportFileError as exc:
                raise CommandError(str(exc)) from None
            split = CaptionSplit(
                caption_ids=[row.caption_id for row in rows],
                image_ids=[row.image_id for row in rows],
            )
        try:
            release = release_load(str(options["release"]))
            # The queries there are to rank are the split's items; without a split, a query
            # that is not the release's is refused anyway (`evaluate`).
            counts = (
                {"i2t": len(set(split.image_ids)), "t2i": len(split.caption_ids)}
                if split is not None
                else None
            )
            limits = UNLIMITED if options["no_limits"] else evaluation_limits(max_queries=counts)
            rankings = rankings_file_limited(str(options["rankings"]), limits)
        except EvaluationError as exc:
            raise CommandError(str(exc)) from None
        try:
            result = evaluate(release, rankings, split=split)
        except EvaluationError as exc:
            raise CommandError(f"{options['rankings']}: {exc}") from None
        graded = self._graded(options, release, rankings, rows or None)
        if graded:
            result["graded"] = graded
        if options["json"]:
            self.stdout.write(json.dumps(result))
            return
        self.stdout.write(f"{options['rankings']} on {options['release']}")
        self.stdout.write(format_table(result))
        for table in graded:
            self.stdout.write("")
            self.stdout.write(format_graded(table))

    def _graded(
        self,
        options: dict[str, Any],
        release: ReleaseTruth,
        rankings: RankingsByDirection,
        rows: list[CaptionRow] | None,
    ) -> list[dict[str, Any]]:
        """Return one graded table per --relevance source (none without the option)."""
        sources = options["relevance"] or []
        if not sources:
            return []
        if rows is None:
            raise CommandError("--relevance needs --captions (the dataset's captions TSV)")
        for name in ("threshold", "near_duplicate"):
            if not 0.0 <= options[name] <= 1.0:
                raise CommandError(f"--{name.replace('_', '-')} must lie in [0, 1]")
        corpus = captions_corpus(rows)
        calibrated = self._calibrated(options) if CALIBRATED in sources else None
        tables = []
        for source in sources:
            graded_options = GradedOptions(
                source=source,
                aggregation=options["aggregation"],
                threshold=options["threshold"],
                near_duplicate=options["near_duplicate"],
                calibrated=calibrated,
            )
            try:
                relevance = relevance_matrices(
                    corpus, release, graded_options, cache_dir=settings.RELEVANCE_CACHE_DIR
                )
                tables.append(graded_evaluate(release, rankings, corpus, relevance, graded_options))
            except (EvaluationError, RuntimeError, OSError, ValueError) as exc:
                raise CommandError(f"--relevance {source}: {exc}") from None
        return tables

    def _calibrated(self, options: dict[str, Any]) -> CalibratedModel:
        """Return the stored model --relevance calibrated applies, or say why there is none."""
        manifest = release_manifest_read(Path(str(options["release"])))
        try:
            return release_calibrated_model(manifest, options["calibration_dataset"])
        except RuntimeError as exc:
            raise CommandError(f"--relevance {CALIBRATED}: {exc}") from None
