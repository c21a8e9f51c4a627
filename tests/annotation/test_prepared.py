"""Statements compiled once (`annotation.prepared`) read and write what the ORM would.

They run on the configured database (SQLite by default, PostgreSQL in CI), where their SQL
was compiled; the values come back converted as the ORM converts them (JSON, datetimes).
"""

from __future__ import annotations

import pytest
from django.db import DatabaseError, connection
from django.test.utils import CaptureQueriesContext

from annotation.models import HIT, Assignment, Judgement
from annotation.prepared import Prepared, fields_update, objects_insert, update_query

from .crowd_factories import T0, batch_make, hit_make, take, worker_make

pytestmark = pytest.mark.django_db


def _hits_of_batch(batch_id: int):
    return HIT.objects.filter(batch_id=batch_id).order_by("index").values_list("pk", "index")


def test_rows_equal_the_querysets_for_each_set_of_parameters(tiny):
    prepared = Prepared(_hits_of_batch, 1)
    batches = [batch_make(tiny), batch_make(tiny)]
    for batch in batches:
        for index in range(3):
            hit_make(batch, index)

    for batch in batches:
        assert prepared.rows(batch.pk) == list(_hits_of_batch(batch.pk))
    assert prepared.rows(10**6) == []


def test_objects_come_with_their_related_rows_converted_as_the_orm_does(tiny):
    batch = batch_make(tiny, hit_size=4)
    hit_make(batch, 0)
    assignment = take(worker_make("w0"))
    prepared = Prepared(
        lambda pk: (
            Assignment.objects.select_related("hit__batch")
            .defer("hit__batch__reports")
            .filter(pk=pk)
        ),
        1,
    )

    with CaptureQueriesContext(connection) as captured:
        (loaded,) = prepared.objects(assignment.pk)
        # Read from the one row: no query for the HIT or its batch.
        config, deadline = loaded.hit.batch.config, loaded.deadline

    assert len(captured.captured_queries) == 1
    assert config == batch.config and config["hit_size"] == 4  # JSON decoded
    assert deadline == Assignment.objects.get(pk=assignment.pk).deadline  # aware datetime
    assert loaded.hit.batch.get_deferred_fields() == {"reports"}


def test_an_update_counts_the_rows_it_wrote(tiny):
    hit = hit_make(batch_make(tiny), 0)
    hint = Prepared(lambda pk, n: update_query(HIT.objects.filter(pk=pk), active_assignments=n), 2)

    assert hint.execute(hit.pk, 7) == 1
    assert hint.execute(10**6, 7) == 0
    hit.refresh_from_db()
    assert hit.active_assignments == 7


def test_a_parameter_the_sql_lost_is_refused_when_compiling(tiny):
    ignored = Prepared(lambda pk: HIT.objects.values_list("pk"), 1)
    with pytest.raises(ValueError, match="missing"):
        ignored.rows(1)


def test_inserted_objects_get_their_ids_and_read_back_as_given(tiny):
    hit = hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    items = list(hit.items.order_by("position"))
    judgements = [
        Judgement(assignment=assignment, item=item, level="yes", other_text="", elapsed_ms=n)
        for n, item in enumerate(items)
    ]

    objects_insert(judgements)

    assert all(not j._state.adding for j in judgements)
    stored = {j.pk: (j.item_id, j.elapsed_ms) for j in Judgement.objects.all()}
    assert stored == {j.pk: (j.item_id, j.elapsed_ms) for j in judgements}
    assert all(j.created_at is not None for j in Judgement.objects.all())  # auto_now_add


def test_fields_update_writes_only_those_fields_and_refuses_a_missing_row(tiny):
    hit_make(batch_make(tiny), 0)
    assignment = take(worker_make("w0"))
    assignment.status, assignment.submitted_at, assignment.feedback = "submitted", T0, "kept?"
    assignment.golden_passed = False

    fields_update(assignment, ("status", "submitted_at", "golden_passed"))

    stored = Assignment.objects.get(pk=assignment.pk)
    assert (stored.status, stored.submitted_at, stored.golden_passed) == ("submitted", T0, False)
    assert stored.feedback == ""  # not among the fields
    Assignment.objects.filter(pk=assignment.pk).delete()
    with pytest.raises(DatabaseError, match="did not affect any rows"):
        fields_update(assignment, ("status",))
