from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Batch, BatchState
from mitl.config import batch_config
from mitl.formats.common import ImportFileError
from pipeline.management.progress_bars import StageBars
from pipeline.progress import StageTracker
from pipeline.simulate import crowd_simulate


class Command(BaseCommand):
    help = (
        "Fill every open assignment of a batch in the annotating stage with a simulated crowd. "
        "Workers answer from the synthetic truth of a generated dataset, or with --oracle DIR "
        "from a reference positive set in the ECCV format (in the set: 100% YES, otherwise "
        "100% NO), with an error rate."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument("--workers", type=int, default=12, help="number of simulated workers")
        parser.add_argument(
            "--careless-share", type=float, default=0.1, help="share answering at random"
        )
        parser.add_argument("--error-rate", type=float, help="fixed error rate of careful workers")
        parser.add_argument(
            "--learning-share",
            type=float,
            default=0.0,
            help="share of the careful workers who misread the scale until they practise "
            "(a batch's qualification round trains them)",
        )
        parser.add_argument(
            "--oracle", type=Path, help="folder with ECCV-format reference positives"
        )
        parser.add_argument("--seed", type=int, default=0)
        parser.add_argument("--no-progress", action="store_true")

    def handle(self, *args: object, **options: object) -> None:
        batch = Batch.objects.select_related("dataset").filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch {options['batch']}")
        if batch.state != BatchState.ANNOTATING:
            raise CommandError(
                f"batch {batch.pk} is {batch.state}; HITs are judged in the annotating stage"
            )
        if not 0 <= options["careless_share"] <= 1:
            raise CommandError("--careless-share must be between 0 and 1")
        if not 0 <= options["learning_share"] <= 1:
            raise CommandError("--learning-share must be between 0 and 1")
        if options["error_rate"] is not None and not 0 <= options["error_rate"] <= 1:
            raise CommandError("--error-rate must be between 0 and 1")
        bars = StageBars(enabled=not options["no_progress"])
        try:
            summary = crowd_simulate(
                batch=batch,
                config=batch_config(batch),
                tracker=StageTracker(batch=batch, stage=BatchState.ANNOTATING, listener=bars),
                n_workers=options["workers"],
                careless_share=options["careless_share"],
                error_rate=options["error_rate"],
                oracle_dir=options["oracle"],
                seed=options["seed"],
                learning_share=options["learning_share"],
            )
        except (ServiceError, ImportFileError) as exc:
            raise CommandError(str(exc)) from exc
        finally:
            bars.close_all()
        self.stdout.write(
            f"batch {batch.pk}: {summary.assignments} assignments submitted, "
            f"{summary.approved} approved, {summary.flagged} flagged for review"
        )
        if summary.qualified or summary.not_qualified:
            self.stdout.write(
                f"qualification round: {summary.qualified} simulated workers passed, "
                f"{summary.not_qualified} did not (they got no HIT)"
            )
