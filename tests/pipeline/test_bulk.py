"""`rows_insert`: COPY on PostgreSQL, bulk_create elsewhere, the same rows either way."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from annotation.models import Caption, Dataset, Image
from pipeline.bulk import rows_insert

pytestmark = pytest.mark.django_db

CAPTION_FIELDS = (
    "dataset_id", "ext_id", "image_id", "text", "is_invalid", "invalid_reason", "invalid_marked_at",
)  # fmt: skip
AWKWARD = ["tab\there", "new\nline", "back\\slash \\N", "carriage\rreturn", "émoji 🐈", "\\"]


def test_rows_come_back_as_written_with_their_ids_in_order():
    dataset = Dataset.objects.create(name="bulk")
    image = Image.objects.create(dataset=dataset, ext_id=1)
    marked = datetime(2026, 11, 25, 12, 30, tzinfo=UTC)
    rows = [
        (dataset.pk, 10 + i, image.pk, text, *_invalid(i % 2 == 0, marked))
        for i, text in enumerate(AWKWARD)
    ]

    ids = rows_insert(Caption, CAPTION_FIELDS, rows, with_ids=True)

    assert ids == sorted(ids) and len(set(ids)) == len(rows)
    stored = {c.pk: c for c in Caption.objects.filter(pk__in=ids)}
    for pk, row in zip(ids, rows, strict=True):
        caption = stored[pk]
        assert tuple(getattr(caption, name) for name in CAPTION_FIELDS) == row


def _invalid(invalid: bool, marked: datetime) -> tuple:
    return (True, "meaningless", marked) if invalid else (False, "", None)


def test_without_ids_nothing_is_returned_and_every_row_is_written():
    dataset = Dataset.objects.create(name="bulk")
    image = Image.objects.create(dataset=dataset, ext_id=1)
    rows = [(dataset.pk, i, image.pk, f"caption {i}", False, "", None) for i in range(2500)]

    assert rows_insert(Caption, CAPTION_FIELDS, rows) == []
    assert Caption.objects.filter(dataset=dataset).count() == 2500
    assert rows_insert(Caption, CAPTION_FIELDS, []) == []


def test_a_wrong_field_order_is_refused_before_writing():
    with pytest.raises(RuntimeError, match="fields are"):
        rows_insert(Caption, ("text", "dataset_id"), [("x", 1)])


def test_json_values_come_back_as_written():
    """Verdicts go through COPY: their JSON distribution survives it, awkward keys and all."""
    from annotation.models import Batch, Candidate, Direction, Query, Verdict
    from pipeline.aggregate import VERDICT_FIELDS

    dataset = Dataset.objects.create(name="bulk")
    image = Image.objects.create(dataset=dataset, ext_id=1)
    caption = Caption.objects.create(dataset=dataset, ext_id=1, image=image, text="a cat")
    batch = Batch.objects.create(dataset=dataset, name="b", config={"annotators": []})
    query = Query.objects.create(batch=batch, direction=Direction.I2T, image=image)
    candidate = Candidate.objects.create(
        batch=batch, query=query, direction=Direction.I2T, image=image, caption=caption
    )
    distribution = {"yes": 2, "no\t\\ \\N": [1, None, "é\n"]}
    row = (candidate.pk, "eccv", True, 0.8333333333333334, 0.5, 3, distribution)
    rows_insert(Verdict, VERDICT_FIELDS, [row])

    verdict = Verdict.objects.get(candidate=candidate)
    assert verdict.distribution == distribution and verdict.n_judgements == 3
    assert verdict.score == row[3]


def test_tables_analyze_gives_the_planner_the_rows_a_stage_just_wrote():
    from django.db import connection

    from pipeline.bulk import tables_analyze

    if connection.vendor != "postgresql":
        tables_analyze(Caption)  # nothing to refresh elsewhere, and no error
        pytest.skip("planner statistics are PostgreSQL's")
    dataset = Dataset.objects.create(name="bulk")
    image = Image.objects.create(dataset=dataset, ext_id=1)
    rows = [(dataset.pk, i, image.pk, f"caption {i}", False, "", None) for i in range(700)]
    rows_insert(Caption, CAPTION_FIELDS, rows)

    def estimated_rows() -> float:
        with connection.cursor() as cursor:
            cursor.execute(
                "SELECT reltuples FROM pg_class WHERE relname = %s", [Caption._meta.db_table]
            )
            return cursor.fetchone()[0]

    tables_analyze(Caption)
    assert estimated_rows() == 700  # a small table is read whole: exact


def test_every_runnable_stage_says_which_tables_it_leaves_to_analyse():
    from pipeline.stages import RUNNABLE_STAGES, STAGE_WRITES

    assert set(STAGE_WRITES) == RUNNABLE_STAGES
