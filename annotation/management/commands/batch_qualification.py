from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.errors import ServiceError
from annotation.models import Batch
from annotation.qualification.pairs import (
    QualificationPairError,
    QualificationPairInput,
    qualification_pairs_draw,
    qualification_pairs_parse,
    qualification_pairs_set,
)
from annotation.qualification.selectors import qualification_summary


class Command(BaseCommand):
    help = (
        "A batch's qualification round (config `qualification_pairs` > 0): draw its pool as "
        "golden pairs are drawn (--draw; done when its HITs are built, so only needed when "
        "that failed or the pool is short), or set a pool an admin chose from a CSV file "
        "(--pairs FILE.csv, columns image_id,caption_id,answer[,note] with answer yes or no; "
        "at least qualification_pairs x qualification_attempts pairs with each try's mix of "
        "yes and no; all or nothing, and only while no worker has started the round), and "
        "print the pairs and tries (--show, the default)."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id")
        parser.add_argument("--draw", action="store_true", help="fill the pool by drawing")
        parser.add_argument(
            "--pairs",
            type=Path,
            metavar="FILE.csv",
            help="use these pairs instead: image_id,caption_id,answer(yes|no)[,note]",
        )
        parser.add_argument("--show", action="store_true", help="print the pairs and the tries")

    def handle(self, *args: object, **options: object) -> None:
        batch = Batch.objects.filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch {options['batch']}")
        if options["draw"] and options["pairs"]:
            raise CommandError("give --draw or --pairs, not both")
        try:
            if options["draw"]:
                drawn = qualification_pairs_draw(batch=batch)
                self.stdout.write(
                    f"batch {batch.pk}: drew {drawn} qualification pairs"
                    if drawn
                    else f"batch {batch.pk}: nothing drawn (its pool is full, or no round)"
                )
            if options["pairs"]:
                path = options["pairs"]
                pairs, lines = _read(path)
                try:
                    stored = qualification_pairs_set(batch=batch, pairs=pairs)
                except QualificationPairError as exc:
                    raise CommandError(f"{path} line {lines[exc.index]}: {exc.reason}") from None
                self.stdout.write(f"batch {batch.pk}: {stored} qualification pairs set")
        except ServiceError as exc:
            raise CommandError(str(exc)) from None
        if options["show"] or not (options["draw"] or options["pairs"]):
            self._show(batch)

    def _show(self, batch: Batch) -> None:
        summary = qualification_summary(batch=batch)
        out = self.stdout
        if summary is None:
            out.write(f"batch {batch.pk} has no qualification round (qualification_pairs is 0)")
            return
        out.write(
            f"batch {batch.pk}: {summary['pairs_configured']} qualification pairs a try, pass "
            f"mark {summary['pass_percent']}%, {summary['attempts_allowed']} tries per worker; "
            f"pool {summary['pool_size']} pairs (needs {summary['pool_needed']}), MTurk's test "
            f"{summary['test_pairs']}"
        )
        for pair in summary["pairs"]:
            answer = "yes" if pair.positive else "no"
            source = "mturk" if pair.mturk_test else pair.source
            out.write(
                f"  {pair.position + 1:>3}  image {pair.image.ext_id}  caption "
                f"{pair.caption.ext_id}  {answer:<3}  {source:<6}  right "
                f"{pair.n_right}/{pair.n_answers}  {pair.caption.text}"
            )
        rate = "-" if summary["pass_rate"] is None else f"{summary['pass_rate']:.2f}"
        out.write(
            f"tries: {summary['attempts']} ({summary['in_progress']} in progress); workers "
            f"passed {summary['passed_workers']}, failed {summary['failed_workers']}; "
            f"pass rate {rate}"
        )


def _read(path: Path) -> tuple[list[QualificationPairInput], list[int]]:
    """Read and check the CSV: the pairs and each one's line; an error names the line."""
    try:
        with path.open(newline="", encoding="utf-8-sig") as handle:
            return qualification_pairs_parse(handle)
    except OSError as exc:
        raise CommandError(f"cannot read {path}: {exc.strerror}") from None
    except UnicodeDecodeError:
        raise CommandError(f"{path} is not UTF-8 text: save it as CSV UTF-8") from None
    except ServiceError as exc:
        raise CommandError(f"{path} {exc}") from None
