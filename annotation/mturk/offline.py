"""The offline path, for requesters who use MTurk's web UI instead of its API: export a
batch's HITs (the batch-input CSV and the crowd-form layout), and import the results CSV.

Each results row goes through the submit service, so the golden policy applies as for any
submission; the file comes from MTurk's own results page, so its rows are confirmed work.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime

from django.db import IntegrityError, transaction
from django.utils import timezone

from annotation.errors import ServiceError
from annotation.handout import assignment_create
from annotation.models import (
    HIT,
    Assignment,
    AssignmentStatus,
    Batch,
    BatchState,
    HITItem,
    Worker,
    WorkerSource,
    items_shown_to,
)
from annotation.review import assignment_decide_confirmed, assignment_golden_misses
from annotation.submissions import answers_from_rows, assignment_submit
from mitl.config import BatchConfig, batch_config

from .confirmation import MTURK_STATUS, assignment_by_external_id, assignment_mark_confirmed
from .errors import MTurkError
from .feedback import rejection_feedback
from .layout import layout_html
from .links import image_path, public_base_url
from .offline_csv import InputHit, InputItem, ResultRow, batch_input_csv, parse_results_csv


@dataclass(frozen=True)
class ExportFiles:
    input_csv: str
    layout_html: str
    hits: int
    skipped: int  # published through the API already
    # With a golden put in place of a suspended one: its newer item id, and its place last
    # on the page, would point workers at the check (the layout shows ids, in HIT order).
    replaced: int = 0


def mturk_export(*, batch: Batch, base_url: str | None = None) -> ExportFiles:
    """Return a batch's MTurk batch-input CSV and crowd-form layout (HITs not yet published)."""
    if batch.state != BatchState.ANNOTATING:
        raise MTurkError(f"batch {batch.pk} is {batch.state}: export a batch in annotating state")
    # The images are signed links that MTurk's workers open: always HTTPS.
    base = public_base_url(base_url, production=True)
    replaced = set(
        HITItem.objects.filter(
            hit__batch=batch, hit__external_id__isnull=True, added_after__isnull=False
        ).values_list("hit_id", flat=True)
    )
    rows, skipped = _input_hits(batch, _input_items(batch, base=base), leave_out=replaced)
    if not rows:
        raise MTurkError(f"batch {batch.pk} has no HIT left to export")
    width = max(len(row.items) for row in rows)
    layout = layout_html(pairs=width, followups=batch_config(batch).followups)
    return ExportFiles(
        input_csv=batch_input_csv(rows),
        layout_html=layout,
        hits=len(rows),
        skipped=skipped,
        replaced=len(replaced),
    )


def _input_items(batch: Batch, *, base: str) -> dict[int, list[InputItem]]:
    """Return each HIT's pairs in page order (by HIT pk), with signed image links."""
    items_of: dict[int, list[InputItem]] = {}
    for item in (
        HITItem.objects.filter(items_shown_to(None), hit__batch=batch)
        .select_related("image", "caption")
        .order_by("hit__index", "position")
    ):
        url = base + image_path(item.pk) if item.image.file else ""
        items_of.setdefault(item.hit_id, []).append(
            InputItem(item_id=item.pk, image_url=url, caption=item.caption.text)
        )
    return items_of


def _input_hits(
    batch: Batch, items_of: dict[int, list[InputItem]], *, leave_out: set[int]
) -> tuple[list[InputHit], int]:
    """Return the rows of the HITs not on MTurk yet, less `leave_out`, and how many were
    left out as on MTurk already."""
    rows, skipped = [], 0
    for hit in batch.hits.order_by("index"):
        if hit.external_id:
            skipped += 1
            continue
        if hit.pk in leave_out:
            continue
        rows.append(InputHit(batch_id=batch.pk, hit_id=hit.pk, items=items_of.get(hit.pk, [])))
    return rows, skipped


@dataclass
class ImportReport:
    imported: int = 0
    already: int = 0
    errors: list[str] = field(default_factory=list)
    disagreements: list[str] = field(default_factory=list)
    # AssignmentId → (approve, feedback), or None while the work waits for a person
    decisions: dict[str, tuple[bool, str] | None] = field(default_factory=dict)
    statuses: Counter = field(default_factory=Counter)


def mturk_results_import(
    *, batch: Batch, text: str, source: str, now: datetime | None = None
) -> ImportReport:
    """Store the assignments of MTurk's batch-results CSV through the submit service.

    Each row becomes an assignment of its MTurk worker with its judgements, and the golden
    check applies as for any submission. A row already imported (same AssignmentId) is
    counted, not stored again. A file that does not parse imports nothing; a row the
    service refuses is reported as `file:line: why`, and the others are imported.
    """
    if batch.state != BatchState.ANNOTATING:
        raise MTurkError(
            f"batch {batch.pk} is {batch.state}: import results while it is annotating, "
            "before its verdicts are aggregated"
        )
    rows, errors = parse_results_csv(text, source=source)
    report = ImportReport(errors=errors)
    if errors:
        return report
    config = batch_config(batch)
    hits = batch.hits.in_bulk([row.hit_id for row in rows])
    for row in rows:
        where = f"{source}:{row.line}"
        hit = hits.get(row.hit_id)
        problem = _row_mismatch(batch, hit, row)
        if hit is None or problem:
            report.errors.append(f"{where}: {problem}")
            continue
        try:
            assignment, created = _row_import(hit, row, config, now)
        except (ServiceError, IntegrityError) as exc:
            report.errors.append(f"{where}: {exc}")
            continue
        hit.external_id = row.hit_external_id
        _row_report(report, row, assignment, created=created, where=where)
    return report


def _row_mismatch(batch: Batch, hit: HIT | None, row: ResultRow) -> str:
    """Return why a row's HIT is not the batch's HIT it names ("" if it is)."""
    if hit is None:
        return f"HIT {row.hit_id} is not a HIT of batch {batch.pk}"
    if hit.external_id not in (None, row.hit_external_id):
        return f"HIT {row.hit_id} is MTurk HIT {hit.external_id}, not {row.hit_external_id}"
    return ""


def _row_report(
    report: ImportReport, row: ResultRow, assignment: Assignment, *, created: bool, where: str
) -> None:
    """Count an imported row, keep its decision, and note where MTurk disagrees."""
    if created:
        report.imported += 1
    else:
        report.already += 1
    report.statuses[assignment.status] += 1
    report.decisions[row.assignment_external_id] = _decision(assignment)
    if row.status != "Submitted" and MTURK_STATUS.get(assignment.status) != row.status:
        report.disagreements.append(
            f"{where}: {row.assignment_external_id} is {row.status} on MTurk but "
            f"{assignment.status} here"
        )


def _row_import(
    hit: HIT, row: ResultRow, config: BatchConfig, now: datetime | None
) -> tuple[Assignment, bool]:
    """Store one row's work (True), or confirm what the HIT page stored of it (False)."""
    existing = assignment_by_external_id(row.assignment_external_id)
    if existing is None:
        return _row_create(hit, row, config, now), True
    if existing.hit_id != hit.pk or existing.worker.external_id != row.worker_external_id:
        raise ServiceError(
            f"assignment {row.assignment_external_id} is stored for another HIT or worker"
        )
    if existing.submitted_at is None or existing.confirmed_at is not None:
        return existing, False
    # Stored from the HIT page and now in MTurk's own results: confirmed, so the
    # batch's golden policy decides it, as the sync would.
    confirmed = assignment_mark_confirmed(existing, now or timezone.now())
    return assignment_decide_confirmed(assignment=confirmed, policy=config.golden_policy), False


def _row_create(hit: HIT, row: ResultRow, config: BatchConfig, now: datetime | None) -> Assignment:
    """Store a row as its MTurk worker's confirmed assignment, through the submit service."""
    worker, _ = Worker.objects.get_or_create(
        source=WorkerSource.MTURK, external_id=row.worker_external_id
    )
    submitted = row.submit_time or now or timezone.now()
    answers = answers_from_rows(row.answers)
    with transaction.atomic():  # all of the row, or nothing
        if hit.external_id is None:
            HIT.objects.filter(pk=hit.pk).update(external_id=row.hit_external_id)
        assignment = assignment_create(hit=hit, worker=worker, now=submitted, check_budget=False)
        Assignment.objects.filter(pk=assignment.pk).update(
            external_id=row.assignment_external_id,
            confirmed_at=now or timezone.now(),  # the file comes from MTurk's results page
            **({"accepted_at": row.accept_time} if row.accept_time else {}),
        )
        result = assignment_submit(
            assignment=assignment,
            answers=answers,
            followups_required=config.followups,
            golden_policy=config.golden_policy,
            worker=worker,
            now=submitted,
        )
    return result.assignment


def _decision(assignment: Assignment) -> tuple[bool, str] | None:
    """Return the row's decision for the results CSV; None while a person decides."""
    if assignment.status == AssignmentStatus.APPROVED:
        return True, ""
    if assignment.status == AssignmentStatus.REJECTED:
        feedback = rejection_feedback(
            reviewer_text=assignment.feedback,
            misses=assignment_golden_misses(assignment_id=assignment.pk),
        )
        return False, feedback
    return None
