from __future__ import annotations

import json

from django.core.management.base import BaseCommand, CommandError, CommandParser

from annotation.models import Batch
from annotation.mturk.errors import MTurkError
from annotation.mturk.hit_settings import batch_hit_settings, mturk_batch_cost, mturk_settings_save
from annotation.mturk.publish import mturk_publish
from annotation.mturk.sandbox import mturk_sandbox_reset
from annotation.mturk.wages import wage_warnings

CONFIRMATION = "publish"


def batch_or_error(batch_id: int) -> Batch:
    batch = Batch.objects.filter(pk=batch_id).first()
    if batch is None:
        raise CommandError(f"no batch {batch_id}")
    return batch


class Command(BaseCommand):
    help = (
        "Publish a batch's HITs on Amazon Mechanical Turk as ExternalQuestions that open "
        "this platform's HIT page (MTURK_EXTERNAL_BASE_URL). The sandbox unless --production. "
        "Prints the cost estimate first; publishing again resumes and never creates a HIT "
        "twice. AWS credentials come from the environment or an instance role."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("batch", type=int, help="batch id (in the annotating state)")
        parser.add_argument(
            "--production",
            action="store_true",
            help="publish on production, paying real workers (asks for confirmation)",
        )
        parser.add_argument(
            "--hit-settings",
            help='HIT type settings as JSON, stored before publishing, e.g. \'{"reward": '
            '"0.60", "locales": ["US", "GB"]}\' (keys: title, description, keywords, reward, '
            "assignment_minutes, lifetime_hours, auto_approval_hours, min_approval_rate, "
            "min_approved_hits, locales, min_hourly_wage, qualification_mode, "
            "qualification_retry_minutes)",
        )
        parser.add_argument(
            "--base-url", help="public base URL of the platform (default MTURK_EXTERNAL_BASE_URL)"
        )
        parser.add_argument(
            "--estimate-only", action="store_true", help="print the cost estimate and stop"
        )
        parser.add_argument(
            "--reset-sandbox",
            action="store_true",
            help="expire the batch's sandbox HITs and delete their test assignments, then stop",
        )
        parser.add_argument(
            "--no-input", action="store_false", dest="interactive", help="do not ask to confirm"
        )

    def handle(self, *args: object, **options: object) -> None:
        batch = batch_or_error(options["batch"])
        try:
            if options["reset_sandbox"]:
                deleted = mturk_sandbox_reset(batch=batch)
                self.stdout.write(
                    f"batch {batch.pk}: sandbox publication reset, {deleted} test assignments "
                    "deleted"
                )
                return
            if options["hit_settings"]:
                try:
                    raw = json.loads(options["hit_settings"])
                except json.JSONDecodeError as exc:
                    raise CommandError(f"--hit-settings is not JSON: {exc}") from None
                if not isinstance(raw, dict):
                    raise CommandError("--hit-settings must be a JSON object")
                mturk_settings_save(batch=batch, raw=raw)
                batch.refresh_from_db()
            hit_settings = batch_hit_settings(batch)
            cost = mturk_batch_cost(batch=batch, hit_settings=hit_settings)
        except MTurkError as exc:
            raise CommandError(str(exc)) from None
        where = "PRODUCTION" if options["production"] else "the sandbox"
        self.stdout.write(
            f"batch {batch.pk}: {cost.hits} HITs × {cost.assignments_per_hit} assignments at "
            f"${cost.reward_per_assignment} = ${cost.rewards} + MTurk commission "
            f"${cost.commission} ({cost.commission_rate * 100:.0f}%) = ${cost.total}"
        )
        pay_warnings = wage_warnings(batch=batch)  # before any confirmation (docs/workers.md)
        for warning in pay_warnings:
            self.stderr.write(f"warning: {warning}")
        if options["estimate_only"]:
            return
        if options["production"] and options["interactive"]:
            answer = input(
                f"Publish on PRODUCTION, paying real workers about ${cost.total}? "
                f"Type '{CONFIRMATION}' to go ahead: "
            )
            if answer.strip() != CONFIRMATION:
                raise CommandError("not published")

        def progress(done: int, total: int) -> None:
            if done == total or done % 50 == 0:
                self.stdout.write(f"  {done}/{total} HITs created")

        try:
            result = mturk_publish(
                batch=batch,
                production=options["production"],
                base_url=options["base_url"],
                progress=progress,
            )
        except MTurkError as exc:
            raise CommandError(str(exc)) from None
        for warning in result.warnings:
            if warning not in pay_warnings:
                self.stderr.write(f"warning: {warning}")
        self.stdout.write(
            f"published on {where}: {result.created} HITs now, {result.already} before, "
            f"{result.recovered} found again; HIT type {result.hit_type_id}"
        )
        if result.qualification_type_id:  # the batch's qualification round (docs/mturk.md)
            self.stdout.write(f"qualification type {result.qualification_type_id}")
        if result.preview_url:
            self.stdout.write(f"workers see them at {result.preview_url}")
