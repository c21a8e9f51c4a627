from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.mturk.errors import MTurkError
from annotation.mturk.offline import mturk_export

from .mturk_publish import batch_or_error


class Command(BaseCommand):
    help = (
        "Export a batch for MTurk's web UI (the offline path): batch-<id>-input.csv, one row "
        "per HIT (batch_id, hit_id, item_N, image_url_N, caption_N), and batch-<id>-layout.html, "
        "the crowd-form layout to paste into the project's Design Layout. Image URLs are signed "
        "links to this platform (MTURK_EXTERNAL_BASE_URL or --base-url). HITs already published "
        "through the API are left out. Bring the results back with mturk_import_results."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id (in the annotating state)")
        parser.add_argument("--out", type=Path, required=True, help="folder for the two files")
        parser.add_argument(
            "--base-url", help="public HTTPS base URL for the images (default: the setting)"
        )

    def handle(self, *args: object, **options: object) -> None:
        batch = batch_or_error(options["batch"])
        try:
            files = mturk_export(batch=batch, base_url=options["base_url"])
        except MTurkError as exc:
            raise CommandError(str(exc)) from None
        out: Path = options["out"]
        out.mkdir(parents=True, exist_ok=True)
        csv_path = out / f"batch-{batch.pk}-input.csv"
        html_path = out / f"batch-{batch.pk}-layout.html"
        csv_path.write_text(files.input_csv, encoding="utf-8")
        html_path.write_text(files.layout_html, encoding="utf-8")
        self.stdout.write(f"{files.hits} HITs → {csv_path}")
        self.stdout.write(f"layout → {html_path}")
        if files.skipped:
            self.stdout.write(f"{files.skipped} HITs left out: already published through the API")
        if files.replaced:
            self.stdout.write(
                f"{files.replaced} HITs left out: a golden of theirs was replaced, and the "
                "layout's item ids would point at it (publish them through the API instead)"
            )
