from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from mitl.annotators import ANNOTATOR_KINDS
from pipeline.annotators import annotator_create


class Command(BaseCommand):
    help = "Register a machine annotator (a retrieval model) that batches can name."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("name", help="unique annotator name, e.g. tfidf")
        parser.add_argument("--kind", required=True, choices=sorted(ANNOTATOR_KINDS))
        parser.add_argument("--config", default="{}", help="kind-specific settings as JSON")
        # Not --version: every Django command already has that option (Django's own version).
        parser.add_argument(
            "--annotator-version",
            default="1",
            help="bump when weights or settings change; cached embeddings are keyed on it",
        )

    def handle(self, *args: object, **options: object) -> None:
        try:
            config = json.loads(options["config"])
        except json.JSONDecodeError as exc:
            raise CommandError(f"--config is not valid JSON: {exc.msg}") from exc
        try:
            annotator = annotator_create(
                name=options["name"],
                kind=options["kind"],
                config=config,
                version=options["annotator_version"],
            )
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(f"annotator {annotator}")
