from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.instructions import instructions_current, instructions_save
from annotation.models import Batch
from mitl.instructions import ExamplesError, parse_examples


class Command(BaseCommand):
    help = (
        "Save a new version of a batch's instructions from a JSON file of worked examples, or "
        'print the current version. The file is a list of {"level": "yes" | "weak_yes" | '
        '"weak_no" | "no", "image": ID, "caption": ID, "note": "…", "shortcomings": [...], '
        '"wrong_concepts": [...]} with the dataset\'s own ids, at most one per level. Work '
        "handed out from then on carries the new version; earlier work keeps its own "
        "(docs/workers.md)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument(
            "--examples", type=Path, help="JSON file of examples: saved as the next version"
        )
        parser.add_argument(
            "--show", action="store_true", help="print the current version as JSON (the default)"
        )

    def handle(self, *args: object, **options: Any) -> None:
        batch = Batch.objects.select_related("dataset").filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch with id {options['batch']}")
        path: Path | None = options["examples"]
        if path is not None:
            try:
                saved = instructions_save(batch=batch, examples=parse_examples(_json_file(path)))
            except (ExamplesError, ServiceError) as exc:
                raise CommandError(f"{path}: {exc}") from exc
            count = len(saved.content["examples"])
            # With --show, stdout is the JSON alone (for jq and files).
            out = self.stderr if options["show"] else self.stdout
            out.write(
                f"Batch {batch.pk}: instructions version {saved.version} saved "
                f"({count} example{'s' if count != 1 else ''})."
            )
        if path is None or options["show"]:
            self._show(batch)

    def _show(self, batch: Batch) -> None:
        current = instructions_current(batch=batch)
        if current is None:
            raise CommandError(
                f"batch {batch.pk} has no instructions yet: save some with --examples FILE.json"
            )
        body = {"batch": batch.pk, "version": current.version, **current.content}
        self.stdout.write(json.dumps(body, indent=2, ensure_ascii=False))


def _json_file(path: Path) -> Any:
    try:  # bytes: JSON's own encodings (UTF-8, with or without a BOM), whatever the locale
        return json.loads(path.read_bytes())
    except OSError as exc:
        raise CommandError(f"{path}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc
    except UnicodeDecodeError as exc:
        raise CommandError(f"{path}: not UTF-8 text ({exc.reason} at byte {exc.start})") from exc
