"""The offline path: the export for MTurk's web UI, and its results imported through the
submit service (once, confirmed, decided by the golden policy)."""

from __future__ import annotations

import csv
import io
from datetime import UTC, datetime

import pytest

from annotation.goldens import goldens_replace
from annotation.models import HIT, Assignment, Judgement
from annotation.mturk.offline import mturk_export, mturk_results_import
from annotation.review import assignment_golden_misses, assignment_review
from annotation.review_selectors import review_queue
from mitl.config import batch_config

from .helpers import (
    BASE,
    accept_and_submit,
    hits_of,
    results_from_export,
    with_row,
)

pytestmark = pytest.mark.django_db


def test_export_writes_one_row_per_hit_with_signed_image_links(annotating_batch):
    files = mturk_export(batch=annotating_batch)
    rows = list(csv.DictReader(io.StringIO(files.input_csv)))
    hits = hits_of(annotating_batch)
    assert (files.hits, files.skipped, len(rows)) == (len(hits), 0, len(hits))
    first = hits[0].items.order_by("position")
    assert [int(rows[0][f"item_{n + 1}"]) for n in range(first.count())] == [
        item.pk for item in first
    ]
    assert rows[0]["image_url_1"].startswith(f"{BASE}/mturk/images/{first[0].pk}/")
    assert rows[0]["caption_1"] == first[0].caption.text
    assert "golden" not in files.input_csv and "golden" not in files.layout_html.lower()


def test_export_leaves_out_a_hit_whose_golden_was_replaced(annotating_batch):
    # The layout shows item ids in HIT order: a replacement's newer id, last on the page,
    # would point at the check pair.
    hits = hits_of(annotating_batch)
    golden = hits[0].items.filter(role="golden_tn").first()
    golden.golden_suspended_at = datetime.now(UTC)  # as goldens_suspend_failed marks it
    golden.save(update_fields=["golden_suspended_at"])
    goldens_replace(hit=hits[0], items=[golden], config=batch_config(annotating_batch))
    assert hits[0].items.filter(added_after__isnull=False).exists()

    files = mturk_export(batch=annotating_batch)

    rows = list(csv.DictReader(io.StringIO(files.input_csv)))
    assert (files.hits, files.replaced) == (len(hits) - 1, 1)
    assert str(hits[0].pk) not in {row["hit_id"] for row in rows}


def test_imported_results_go_through_the_submit_service_once(annotating_batch):
    files = mturk_export(batch=annotating_batch)
    text = results_from_export(
        files.input_csv,
        [("3HITOFF0", "3AOFF0", "A1OFF1", False), ("3HITOFF1", "3AOFF1", "A1OFF2", True)],
    )
    text = with_row(text, {"Input.hit_id": "999999", "AssignmentId": "3AOFFBAD"})
    report = mturk_results_import(batch=annotating_batch, text=text, source="results.csv")
    assert (report.imported, report.already) == (2, 0)
    assert report.statuses == {"approved": 1, "submitted": 1}  # golden pass / flagged
    assert report.errors == [
        f"results.csv:4: HIT 999999 is not a HIT of batch {annotating_batch.pk}"
    ]
    approved = Assignment.objects.get(external_id="3AOFF0")
    assert approved.hit.external_id == "3HITOFF0"
    assert approved.worker.external_id == "A1OFF1"
    assert approved.submitted_at == datetime(2025, 10, 9, 14, 41, 2, tzinfo=UTC)
    assert approved.judgements.count() == approved.hit.items.count()
    assert report.decisions == {"3AOFF0": (True, ""), "3AOFF1": None}

    judgements = Judgement.objects.count()
    again = mturk_results_import(batch=annotating_batch, text=text, source="results.csv")
    assert (again.imported, again.already) == (0, 2)
    assert Judgement.objects.count() == judgements


def test_mturks_results_csv_confirms_work_the_hit_page_stored(annotating_batch):
    files = mturk_export(batch=annotating_batch)
    h0 = hits_of(annotating_batch)[0]
    HIT.objects.filter(pk=h0.pk).update(external_id="3HITOFF0")  # created in MTurk's web UI
    stored = accept_and_submit(h0, "A1OFF1", "3AOFF0")
    assert (stored.status, stored.awaits_mturk) == ("submitted", True)
    plans = [("3HITOFF0", "3AOFF0", "A1OFF1", False), ("3HITOFF1", "3AOFF1", "A1OFF2", True)]
    text = results_from_export(files.input_csv, plans)

    report = mturk_results_import(batch=annotating_batch, text=text, source="results.csv")

    assert (report.imported, report.already, report.errors) == (1, 1, [])
    confirmed = Assignment.objects.get(pk=stored.pk)
    assert confirmed.confirmed_at is not None
    assert confirmed.status == "approved"  # MTurk vouches for it: the batch's policy decides
    assert report.decisions["3AOFF0"] == (True, "")
    flagged = Assignment.objects.get(external_id="3AOFF1")  # imported: confirmed at once
    assert (flagged.status, flagged.awaits_mturk) == ("submitted", False)
    assert [a.pk for a in review_queue()] == [flagged.pk]
    assert assignment_review(assignment=flagged, approve=True).status == "approved"


def test_imported_work_rejected_by_the_golden_policy_gets_feedback(annotating_batch):
    annotating_batch.config = {**annotating_batch.config, "golden_policy": "approve_or_reject"}
    annotating_batch.save(update_fields=["config"])
    files = mturk_export(batch=annotating_batch)
    text = results_from_export(files.input_csv, [("3HITOFF0", "3AOFF0", "A1OFF1", True)])
    report = mturk_results_import(batch=annotating_batch, text=text, source="r.csv")
    approve, feedback = report.decisions["3AOFF0"]
    assignment = Assignment.objects.get(external_id="3AOFF0")
    (miss,) = assignment_golden_misses(assignment_id=assignment.pk)  # one golden failed
    assert not approve
    assert feedback == "1 pair with a known answer was answered wrongly."
    assert f"pair {miss.position}" not in feedback  # the re-posted HIT keeps its goldens
