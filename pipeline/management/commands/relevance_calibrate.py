from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Dataset
from mitl.formats.captions import parse_captions_tsv
from mitl.formats.common import ImportFileError
from pipeline.calibrated_relevance import calibrated_save, calibrated_train
from pipeline.relevance import DatasetCorpus, captions_corpus, dataset_corpus
from pipeline.relevance_calibration import (
    CALIBRATION_ERRORS,
    calibration_report,
    calibration_save,
    default_proxies,
    format_report,
)


class Command(BaseCommand):
    help = (
        "Report how well every relevance proxy agrees with people: Pearson, Spearman and "
        "Kendall correlation against the crowd's answers on the platform (when DATASET is a "
        "dataset with judged pairs), Crisscrossed Captions' image–caption ratings (--sits) and "
        "caption–caption ratings (--sts), over all pairs and over non-ground-truth pairs, plus "
        "a calibrated combination of the proxies scored out of fold (folds split by image). "
        "DATASET is a dataset name (the report is then kept for the dataset's relevance page) "
        "or a captions TSV (caption_id image_id file_name caption). "
        "Example: relevance_calibrate ../shared/data/coco5k/captions.tsv "
        "--sits ../shared/data/cxc/sits_test.csv --sts ../shared/data/cxc/sts_test.csv"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", help="dataset name, or a captions TSV file")
        parser.add_argument("--sits", help="CxC image–caption ratings CSV (sits_test.csv)")
        parser.add_argument("--sts", help="CxC caption–caption ratings CSV (sts_test.csv)")
        parser.add_argument(
            "--proxies",
            help="comma-separated proxies (default: every proxy that runs here: METEOR needs "
            "Java, pos and synset need WordNet)",
        )
        parser.add_argument(
            "--no-combination", action="store_true", help="skip the calibrated combination"
        )
        parser.add_argument(
            "--save",
            action="store_true",
            help="also fit the combination on every --sits pair (vectorised proxies only, no "
            "METEOR) and store it as the dataset's calibrated relevance (`evaluate --relevance "
            "calibrated`, releases, leaderboard); needs a dataset name and --sits",
        )
        parser.add_argument("--out", help="also write the report as JSON to this file")
        parser.add_argument("--json", action="store_true", help="print JSON only")

    def handle(self, *args: object, **options: object) -> None:
        data = self._corpus(str(options["dataset"]))
        proxies = (
            [p.strip() for p in str(options["proxies"]).split(",") if p.strip()]
            if options["proxies"]
            else default_proxies()
        )
        if not proxies:
            raise CommandError("--proxies names no proxy")
        out = Path(str(options["out"])) if options["out"] else None
        if out is not None and not out.parent.is_dir():
            raise CommandError(f"--out: the folder {out.parent} does not exist")
        paths = {}
        for name in ("sits", "sts"):
            value = options[name]
            if value and not Path(str(value)).is_file():
                raise CommandError(f"--{name}: {value} is not a file")
            paths[name] = Path(str(value)) if value else None
        quiet = bool(options["json"])
        if options["save"] and (data.dataset is None or paths["sits"] is None):
            raise CommandError("--save needs a dataset name (not a captions file) and --sits")
        try:
            report = calibration_report(
                data,
                sits=paths["sits"],
                sts=paths["sts"],
                proxies=proxies,
                combination=not options["no_combination"],
                say=None if quiet else lambda line: self.stderr.write(line),
            )
        except CALIBRATION_ERRORS as exc:
            raise CommandError(str(exc)) from None
        if not report:
            raise CommandError(
                "no ratings to calibrate against: the dataset has no judged pairs; give --sits "
                "and/or --sts"
            )
        if data.dataset is not None:
            calibration_save(data.dataset, report)
        if options["save"]:
            self._save(data, paths["sits"], proxies, quiet)
        if out is not None:
            try:
                out.write_text(json.dumps(report, indent=2) + "\n")
            except OSError as exc:
                raise CommandError(f"--out {out}: {exc.strerror or exc}") from None
        if quiet:
            self.stdout.write(json.dumps(report))
        else:
            self.stdout.write(format_report(report))

    def _save(self, data: DatasetCorpus, sits: Path, proxies: list[str], quiet: bool) -> None:
        """Fit and store the calibrated model; say its version and figures on stderr."""
        assert data.dataset is not None
        try:
            model, figures = calibrated_train(
                data,
                sits=sits,
                proxies=proxies,
                say=None if quiet else lambda line: self.stderr.write(line),
            )
        except CALIBRATION_ERRORS as exc:
            raise CommandError(str(exc)) from None
        calibrated_save(data.dataset, model, figures)
        oof = (figures["out_of_fold"] or {}).get("non_gt", {}).get("pearson")
        best = figures["best_single"]
        self.stderr.write(
            f"stored calibrated relevance {model.version} of {data.dataset.name} "
            f"({', '.join(model.proxies)}{' + context' if model.context else ''}): non-GT "
            f"SITS Pearson {_figure(oof)} out of fold, best single {best['proxy']} "
            f"{_figure(best['non_gt']['pearson'])}"
        )

    def _corpus(self, name: str) -> DatasetCorpus:
        path = Path(name)
        if not path.is_file():  # dataset names are slugs: never the name of a file
            dataset = Dataset.objects.filter(name=name).first()
            if dataset is None:
                raise CommandError(f"{name} is neither a dataset name nor a captions TSV file")
            return dataset_corpus(dataset)
        try:
            rows = parse_captions_tsv(path)
        except ImportFileError as exc:
            raise CommandError(str(exc)) from None
        return DatasetCorpus(corpus=captions_corpus(rows), dataset=None)


def _figure(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}"
