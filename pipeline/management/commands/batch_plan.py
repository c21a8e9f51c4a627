from __future__ import annotations

import json
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError, CommandParser, OutputWrapper

from annotation.errors import ServiceError
from annotation.models import Batch, BatchState, Dataset
from mitl.config import (
    BatchConfig,
    ConfigError,
    batch_config,
    budgetless,
    parse_batch_config,
    parse_planning_config,
)
from pipeline.launch import batch_create_with_queries
from pipeline.plan import Plan, batch_plan, config_plan
from pipeline.stages import batch_run_until


class Command(BaseCommand):
    help = (
        "Before anyone is paid: predict the positives (and recall, once an earlier adaptive "
        "batch measured the tail) that each budget buys under the fixed and the adaptive "
        "strategy, from the annotators' rankings and the yields of earlier batches on the "
        "dataset (docs/curation.md). Creates the batch from --config and runs its retrieval "
        "only (machines, no crowd), or plans an existing batch with --batch; the batch then "
        "waits: `batch_run ID` goes on. An adaptive config without `budget_judgements` is "
        "planned before retrieval instead (as the wizard does), and no batch is created."
    )

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("dataset", nargs="?", help="dataset name (with --config)")
        parser.add_argument("--config", type=Path, help="batch config JSON file")
        parser.add_argument("--batch", type=int, help="plan this batch instead (retrieval done)")
        parser.add_argument(
            "--budget",
            default="",
            help="judgements, comma-separated (default: shares of what fixed would spend)",
        )
        parser.add_argument(
            "--target-recall",
            type=float,
            help="predict what reaching this lower recall bound takes (default: the config's "
            "`target_recall`; adaptive only)",
        )
        parser.add_argument("--chart", type=Path, help="write the chart here (SVG)")
        parser.add_argument("--json", action="store_true", help="print the plan as JSON")

    def handle(self, *args: object, **options: object) -> None:
        budgets = _budgets(options["budget"])
        target = options["target_recall"]
        raw = None if options["batch"] is not None else _raw_config(options)
        if budgetless(raw):
            if target is not None:  # checked with the rest of the config
                raw = {**raw, "target_recall": target}
            self._report(_config_plan(options, raw, budgets), None, options)
            return
        batch = _batch(options, raw)
        try:
            config = _with_target(batch_config(batch), target)
            plan = batch_plan(batch=batch, config=config, budgets=budgets)
        except (ConfigError, ServiceError) as exc:
            raise CommandError(str(exc)) from exc
        self._report(plan, batch, options)

    def _report(self, plan: Plan, batch: Batch | None, options: dict) -> None:
        """Write the chart, then the plan as JSON or as a table with what comes next."""
        out = self.stdout
        if options["chart"] and not plan.empty:
            options["chart"].write_text(plan.chart_svg(), encoding="utf-8")
        if options["json"]:
            out.write(json.dumps({"batch": batch and batch.pk, **plan.to_json()}, indent=2))
            return
        source = (
            f"yields of batches {', '.join(map(str, plan.history))}"
            if plan.history
            else "a generic prior (no earlier batch on this dataset has verdicts)"
        )
        if batch is None:
            out.write(
                f"Plan of {options['config']} before retrieval, from each annotator's rank "
                f"slots and {source}: the config names no `budget_judgements`, so no batch "
                "is created, and fixed's figures are upper bounds (overlaps are not known yet)."
            )
        else:
            out.write(f"Plan of batch {batch.pk}, from its rankings and {source}.")
        if plan.fixed_judgements:
            out.write(
                f"Fixed judges every annotator's top k once: {plan.fixed_judgements} judgements."
            )
        if plan.empty:
            out.write(plan.empty)
        else:
            _table(out, plan)
        if plan.tail_rate is None:
            out.write(
                "Recall: no earlier adaptive batch sampled the pairs nobody ranks, so the "
                "positives there are unknown."
            )
        if plan.target is not None:
            out.write(plan.target.sentence)
        if batch is None:
            out.write(
                "Add the budget you choose to the config as `budget_judgements`: then "
                "`batch_plan` plans it from the rankings, and `batch_create` creates it."
            )
        elif batch.state != BatchState.RELEASED:
            out.write(f"Batch {batch.pk} is {batch.state}: `batch_run {batch.pk}` goes on.")


def _table(out: OutputWrapper, plan: Plan) -> None:
    out.write(
        f"{'budget':>8}  {'strategy':<9}{'judgements':>11}{'pairs':>8}{'positives':>11}"
        f"{'recall':>8}"
    )
    for point in plan.points:
        recall = "-" if point.recall is None else f"{point.recall:.3f}"
        out.write(
            f"{point.budget:>8}  {point.strategy:<9}{point.judgements:>11}{point.pairs:>8}"
            f"{point.positives:>11.0f}{recall:>8}"
        )


def _with_target(config: BatchConfig, target: float | None) -> BatchConfig:
    """The batch's config with `--target-recall` instead of its own, checked as a config is."""
    if target is None:
        return config
    return parse_batch_config({**config.to_json(), "target_recall": target})


def _budgets(text: str) -> list[int]:
    try:
        budgets = [int(part) for part in text.split(",") if part.strip()]
    except ValueError:
        raise CommandError(
            f"--budget: write whole numbers separated by commas (got {text!r})"
        ) from None
    if any(b <= 0 for b in budgets):
        raise CommandError("--budget: every budget must be a positive number of judgements")
    return budgets


def _raw_config(options: dict) -> dict | None:
    """The --config file's JSON (None without --config)."""
    path: Path | None = options["config"]
    if path is None:
        return None
    try:
        return json.loads(path.read_text())
    except OSError as exc:
        raise CommandError(f"{path}: cannot read ({exc.strerror})") from exc
    except json.JSONDecodeError as exc:
        raise CommandError(f"{path}:{exc.lineno}: invalid JSON ({exc.msg})") from exc


def _dataset(options: dict) -> Dataset:
    if not options["dataset"] or not options["config"]:
        raise CommandError("name a DATASET with --config FILE, or an existing --batch ID")
    dataset = Dataset.objects.filter(name=options["dataset"]).first()
    if dataset is None:
        raise CommandError(f"no dataset named {options['dataset']!r}")
    return dataset


def _config_plan(options: dict, raw: dict, budgets: list[int]) -> Plan:
    """Plan a config that names no budget before retrieval: nothing is created."""
    dataset = _dataset(options)
    try:
        return config_plan(dataset=dataset, config=parse_planning_config(raw), budgets=budgets)
    except (ConfigError, ServiceError) as exc:
        raise CommandError(str(exc)) from exc


def _batch(options: dict, raw: dict | None) -> Batch:
    """The batch to plan: an existing one, or a new one from --config with its retrieval run."""
    if options["batch"] is not None:
        batch = Batch.objects.select_related("dataset").filter(pk=options["batch"]).first()
        if batch is None:
            raise CommandError(f"no batch {options['batch']}")
        return batch
    dataset = _dataset(options)
    path: Path = options["config"]
    try:
        batch = batch_create_with_queries(dataset=dataset, name=f"plan {path.stem}", raw_config=raw)
        batch_run_until(batch_id=batch.pk, until=BatchState.POOLING)  # retrieval only
    except (ConfigError, ServiceError) as exc:
        raise CommandError(str(exc)) from exc
    return Batch.objects.select_related("dataset").get(pk=batch.pk)
