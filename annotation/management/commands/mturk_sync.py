from __future__ import annotations

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Assignment, Worker
from annotation.mturk.errors import MTurkError
from annotation.mturk.payments import (
    mturk_bonus_send,
    mturk_hits_expire,
    mturk_hits_extend,
    mturk_worker_block,
)
from annotation.mturk.state import is_production
from annotation.mturk.sync import mturk_sync

from .mturk_publish import batch_or_error


class Command(BaseCommand):
    help = (
        "Sync a published batch with Amazon Mechanical Turk: list its assignments, approve "
        "what passed the golden check (or a reviewer), reject what was rejected (the feedback "
        "names the failed check pairs), re-post rejected work, and report submissions whose "
        "answers never reached the platform. Running it again sends nothing twice. Also pays "
        "bonuses, extends or expires the HITs, and blocks workers."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id (published with mturk_publish)")
        parser.add_argument(
            "--no-replace",
            action="store_false",
            dest="replace",
            help="do not re-post rejected work (CreateAdditionalAssignmentsForHIT)",
        )
        parser.add_argument(
            "--bonus",
            nargs=2,
            action="append",
            default=[],
            metavar=("ASSIGNMENT_ID", "AMOUNT"),
            help="pay a bonus (USD) for an MTurk assignment, once; needs --reason",
        )
        parser.add_argument(
            "--block", action="append", default=[], metavar="WORKER_ID", help="block a worker"
        )
        parser.add_argument("--reason", default="", help="the worker reads it (bonus, block)")
        parser.add_argument("--extend-hours", type=int, help="keep the HITs up N more hours")
        parser.add_argument("--expire", action="store_true", help="take the HITs off now")

    def handle(self, *args: object, **options: object) -> None:
        batch = batch_or_error(options["batch"])
        try:
            report = mturk_sync(batch=batch, replace_rejected=options["replace"])
            for line in report.lines():
                self.stdout.write(line)
            for assignment_id, amount in options["bonus"]:
                assignment = Assignment.objects.filter(
                    external_id=assignment_id, hit__batch=batch
                ).first()
                if assignment is None:
                    raise CommandError(f"no MTurk assignment {assignment_id} in batch {batch.pk}")
                sent = mturk_bonus_send(
                    assignment=assignment, amount=amount, reason=options["reason"]
                )
                state = "sent" if sent else "already paid, not sent again"
                self.stdout.write(f"bonus ${amount} for {assignment_id}: {state}")
            production = is_production(batch.mturk or {})
            for worker_id in options["block"]:
                worker = Worker.objects.filter(source="mturk", external_id=worker_id).first()
                if worker is None:
                    raise CommandError(f"no MTurk worker {worker_id}")
                mturk_worker_block(worker=worker, reason=options["reason"], production=production)
                self.stdout.write(f"worker {worker_id} blocked")
            if options["extend_hours"] is not None:
                changed = mturk_hits_extend(batch=batch, hours=options["extend_hours"])
                self.stdout.write(f"{changed} HITs extended by {options['extend_hours']} hours")
            if options["expire"]:
                self.stdout.write(f"{mturk_hits_expire(batch=batch)} HITs expired")
        except MTurkError as exc:
            raise CommandError(str(exc)) from None
