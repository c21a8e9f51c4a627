from __future__ import annotations

import json
from typing import Any

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Caption, Dataset, InvalidReason
from pipeline.invalid_captions import (
    caption_mark_invalid,
    caption_unmark_invalid,
    invalid_captions_review,
)


class Command(BaseCommand):
    help = (
        "Review invalid captions (ECCV Caption Appendix C.1): `list` the original captions "
        'that people judged "100% NO" for their own image, `mark` one invalid with a reason, '
        "or `unmark` it. Invalid captions leave every later release."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
        listing = actions.add_parser("list", help="show the review list")
        listing.add_argument("--dataset", help="only this dataset")
        listing.add_argument(
            "--min-no", type=int, default=1, help='at least this many "100%% NO" (default 1)'
        )
        listing.add_argument("--json", action="store_true", help="print JSON lines")
        mark = actions.add_parser("mark", help="mark a caption invalid")
        mark.add_argument("dataset", help="dataset name")
        mark.add_argument("caption", type=int, help="the dataset's caption id")
        mark.add_argument("--reason", required=True, choices=InvalidReason.values)
        unmark = actions.add_parser("unmark", help="make a caption valid again")
        unmark.add_argument("dataset", help="dataset name")
        unmark.add_argument("caption", type=int, help="the dataset's caption id")

    def handle(self, *args: object, **options: Any) -> None:
        action = options["action"]
        try:
            if action == "list":
                self._list(options)
                return
            caption = _caption(str(options["dataset"]), int(options["caption"]))
            if action == "mark":
                caption_mark_invalid(caption=caption, reason=str(options["reason"]))
                self.stdout.write(
                    f"caption {caption.ext_id} marked invalid ({caption.invalid_reason})"
                )
            else:
                caption_unmark_invalid(caption=caption)
                self.stdout.write(f"caption {caption.ext_id} is valid again")
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc

    def _list(self, options: dict[str, Any]) -> None:
        dataset = None
        if options.get("dataset"):
            dataset = Dataset.objects.filter(name=options["dataset"]).first()
            if dataset is None:
                raise CommandError(f"no dataset {options['dataset']!r}")
        rows = invalid_captions_review(dataset=dataset, min_no=int(options["min_no"]))
        for row in rows:
            caption = row.caption
            entry = {
                "dataset": caption.dataset.name,
                "caption_id": caption.ext_id,
                "image_id": caption.image.ext_id,
                "no": row.no_answers,
                "answers": row.answers,
                "invalid": caption.invalid_reason or None,
                "text": caption.text,
            }
            if options["json"]:
                self.stdout.write(json.dumps(entry))
            else:
                status = f"invalid: {caption.invalid_reason}" if caption.is_invalid else "valid"
                self.stdout.write(
                    f"{entry['dataset']} caption {entry['caption_id']} (image "
                    f'{entry["image_id"]}): {row.no_answers}/{row.answers} "100% NO", '
                    f"{status}: {caption.text}"
                )
        if not rows and not options["json"]:
            self.stdout.write('no caption was judged "100% NO" for its own image')


def _caption(dataset_name: str, ext_id: int) -> Caption:
    caption = Caption.objects.filter(dataset__name=dataset_name, ext_id=ext_id).first()
    if caption is None:
        if not Dataset.objects.filter(name=dataset_name).exists():
            raise CommandError(f"no dataset {dataset_name!r}")
        raise CommandError(f"dataset {dataset_name!r} has no caption {ext_id}")
    return caption
