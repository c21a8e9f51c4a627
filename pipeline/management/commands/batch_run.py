from __future__ import annotations

import time

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Batch, BatchStageProgress, BatchState
from pipeline.management.progress_bars import StageBars
from pipeline.round_controls import rounds_finish_after
from pipeline.stages import AUTOMATIC_STAGES, STAGE_ORDER, batch_run_until
from pipeline.tasks import annotation_close_queue, batch_start_queue, next_queue, stage_queue


class Command(BaseCommand):
    help = (
        "Run a batch's stages until STAGE (default: released) or until it waits for people "
        "in the annotating stage. Without a broker the stages run in this process; with "
        "CELERY_BROKER_URL set they run on Celery workers and this command shows their progress. "
        "--force closes annotating early, aggregating whatever approved work exists. A stage "
        "that failed (or whose workers kept being lost) is queued again. "
        "--finish-after-round makes an adaptive batch release after its current round. "
        "The batch page's other controls (pause, cancel, …): `batch_control`."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument("--until", default=BatchState.RELEASED, choices=STAGE_ORDER[1:])
        parser.add_argument("--force", action="store_true", help="close annotating early")
        parser.add_argument(
            "--finish-after-round",
            action="store_true",
            help="adaptive batch: release after the current round instead of looping",
        )
        parser.add_argument(
            "--timeout", type=float, default=3600, help="seconds to wait for workers"
        )
        parser.add_argument("--no-progress", action="store_true", help="no progress bars")

    def handle(self, *args: object, **options: object) -> None:
        batch = Batch.objects.filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch {options['batch']}")
        bars = StageBars(enabled=not options["no_progress"])
        try:
            if options["finish_after_round"]:
                self.stdout.write(rounds_finish_after(batch_id=batch.pk))
            if settings.CELERY_TASK_ALWAYS_EAGER:
                state = batch_run_until(
                    batch_id=batch.pk,
                    until=options["until"],
                    listener=bars,
                    force=options["force"],
                    queue=next_queue,  # a later round's HITs join the MTurk publication
                )
            else:
                state = self._run_on_workers(batch, options, bars)
        except ServiceError as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bars.close_all()
        self.stdout.write(f"batch {batch.pk}: {state}")
        if state == BatchState.ANNOTATING and options["until"] != BatchState.ANNOTATING:
            self.stdout.write(
                "waiting for annotators: run `python manage.py crowd_simulate "
                f"{batch.pk}` or let people work, then run this command again "
                "(--force to close early)"
            )

    def _run_on_workers(self, batch: Batch, options: dict, bars: StageBars) -> str:
        if batch.state == BatchState.DRAFT:
            batch_start_queue(batch=batch)
        elif batch.state == BatchState.ANNOTATING:
            annotation_close_queue(batch_id=batch.pk, force=options["force"])
        elif batch.state in AUTOMATIC_STAGES and batch.error:
            # Resume a stage that failed, or that its workers kept losing: queue it again.
            Batch.objects.filter(pk=batch.pk, state=batch.state).update(error="")
            stage_queue(batch_id=batch.pk, stage=batch.state)
        until_index = STAGE_ORDER.index(options["until"])
        deadline = time.monotonic() + options["timeout"]
        while time.monotonic() < deadline:
            batch.refresh_from_db()
            for row in BatchStageProgress.objects.filter(batch=batch):
                bars(row.stage, row.done, row.total)
            if batch.error:
                raise CommandError(f"batch {batch.pk} failed: {batch.error}")
            if batch.state == BatchState.CANCELLED:
                raise CommandError(f"batch {batch.pk} was cancelled")
            if STAGE_ORDER.index(batch.state) >= until_index or (
                batch.state == BatchState.ANNOTATING and not options["force"]
            ):
                return batch.state
            time.sleep(1.0)
        raise CommandError(f"batch {batch.pk} still {batch.state} after {options['timeout']} s")
