from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.imports.staging import (
    import_staging_clean,
    import_staging_orphans,
    import_staging_root,
)


class Command(BaseCommand):
    help = (
        "Delete import uploads left in VAR_DIR/imports/ that no queued or running import "
        "job needs (a web process killed mid-upload leaves them) once nothing in them has "
        "been written for --older-than-hours. Celery beat runs the same clean-up hourly. "
        "Example: import_staging_clean --older-than-hours 6 --dry-run"
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument(
            "--older-than-hours",
            type=float,
            default=settings.IMPORT_STAGING_MAX_AGE_HOURS,
            help="leave folders written to more recently than this "
            f"(default IMPORT_STAGING_MAX_AGE_HOURS, {settings.IMPORT_STAGING_MAX_AGE_HOURS})",
        )
        parser.add_argument(
            "--dry-run", action="store_true", help="list what would be deleted, delete nothing"
        )

    def handle(self, *args: object, **options: Any) -> None:
        hours = options["older_than_hours"]
        if hours <= 0:
            # 0 would take the uploads of requests that are still running.
            raise CommandError(
                f"--older-than-hours must be more than 0 (got {hours:g}); an upload still "
                "being received is a few minutes old at most, so 1 is safe"
            )
        age = timedelta(hours=hours)
        if options["dry_run"]:
            folders = import_staging_orphans(older_than=age)
            verb = "would delete"
        else:
            folders = import_staging_clean(older_than=age)
            verb = "deleted"
        for folder in folders:
            self.stdout.write(f"{verb} {folder}")
        root = import_staging_root()
        self.stdout.write(f"{verb} {len(folders)} staging folder(s) under {root}")
