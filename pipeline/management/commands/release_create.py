from __future__ import annotations

from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Batch, BatchState
from mitl.config import batch_config
from mitl.relevance.calibrated import CALIBRATED
from mitl.relevance.proxies import PROXIES
from pipeline.release import release_create


class Command(BaseCommand):
    help = (
        "Write a new version of a release for an aggregated (released) batch: "
        "RELEASES_DIR/NAME/VERSION/ with image_to_caption.json, caption_to_image.json "
        "(ECCV Caption format), judgements.jsonl, verdicts.csv, graded qrels "
        "(qrels_i2t.txt, qrels_t2i.txt, and per --relevance proxy), stats.json, a README.md "
        "datasheet and manifest.json, plus the same files zipped as RELEASES_DIR/NAME/VERSION.zip. "
        "It covers every released batch of the dataset (--only-batch: this one alone). "
        "Positives: original ∪ the pairs judged positive (one verdict per pair from every "
        "covered batch's approved judgements) ∪ each --include-set, without invalid captions."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument("--name", help="release name (default: the dataset name)")
        parser.add_argument(
            "--include-set",
            action="append",
            default=[],
            dest="include_sets",
            metavar="NAME",
            help="merge an imported positive set of the dataset (repeatable)",
        )
        parser.add_argument(
            "--only-batch",
            action="store_true",
            help="cover this batch alone (for studies); by default a release covers every "
            "released batch of the dataset: the union of their queries and positives",
        )
        parser.add_argument(
            "--extra-file",
            action="append",
            default=[],
            dest="extra_files",
            metavar="PATH",
            help="add a text file (e.g. bias_report.html) to the release (repeatable)",
        )
        parser.add_argument(
            "--relevance",
            action="append",
            choices=[*(name for name, spec in PROXIES.items() if spec.cheap), CALIBRATED],
            metavar="PROXY",
            help="add graded qrels of a caption proxy (qrels_PROXY_i2t.txt, qrels_PROXY_t2i.txt; "
            "repeatable; meteor is too slow for a whole corpus), or of calibrated (the "
            "dataset's stored calibrated model: relevance_calibrate --save); default: the "
            "batch config's `relevance`",
        )

    def handle(self, *args: object, **options: Any) -> None:
        batch = Batch.objects.select_related("dataset").filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch {options['batch']}")
        if batch.state != BatchState.RELEASED:
            raise CommandError(
                f"batch {batch.pk} is {batch.state}; its verdicts are not aggregated yet "
                f"(python manage.py batch_run {batch.pk})"
            )
        extra_files = {}
        for raw in options["extra_files"]:
            path = Path(str(raw))
            try:
                extra_files[path.name] = path.read_text(encoding="utf-8")
            except (OSError, UnicodeDecodeError) as exc:
                raise CommandError(f"--extra-file {path}: cannot read it as text ({exc})") from exc
        try:
            release = release_create(
                batch=batch,
                config=batch_config(batch),
                name=options["name"],
                include_sets=options["include_sets"],
                only_batch=options["only_batch"],
                extra_files=extra_files,
                relevance=list(dict.fromkeys(options["relevance"]))
                if options["relevance"]
                else None,
                progress=self._progress if options["relevance"] else None,
            )
        except (ServiceError, ValueError, RuntimeError) as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"release {release.name} v{release.version}: {release.path}")

    def _progress(self, done: int, total: int) -> None:
        self.stderr.write(f"relevance matrices: {done}/{total} queries", ending="\r")
        if done == total:
            self.stderr.write("")
