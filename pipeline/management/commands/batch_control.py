from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from pipeline.round_controls import ROUND_CONTROLS


class Command(BaseCommand):
    help = (
        "Run one of the batch page's round controls on a batch: close_round (close the round "
        "being judged now), finish_after_round / keep_rounds (an adaptive batch releases "
        "after this round, or not), pause / unpause (stop or restart handing out its HITs), "
        "cancel (for good), resume (queue a failed or lost stage again). Refused, saying "
        "why, when the batch's state does not allow it."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument("control", choices=sorted(ROUND_CONTROLS), help="what to do")

    def handle(self, *args: object, **options: object) -> None:
        try:
            said = ROUND_CONTROLS[options["control"]](batch_id=options["batch"])
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(said)
