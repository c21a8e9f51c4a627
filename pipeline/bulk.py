"""Write tens of thousands of model rows quickly: the stages' bulk inserts, then fresh statistics.

An ECCV-sized batch writes about 165,000 rows in pooling and building (candidates,
proposals, HIT items), and tens of thousands more when it aggregates (verdicts, the human
positive pairs). On PostgreSQL they are streamed with COPY, several times faster than the
multi-row INSERTs of `bulk_create`; where ids are needed back, they are taken from the
table's sequence first, in one query. Elsewhere (SQLite) `bulk_create` writes them, from
instances built from positional values (about twice as fast as from keywords). Rows are
tuples in the model's field order, which both paths check once.
"""

from __future__ import annotations

import io
import json
import logging
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any

from django.db import DatabaseError, connection, models, transaction

logger = logging.getLogger(__name__)

BULK_BATCH = 5000
# Every column of a candidate and of a proposal, in model order (rows_insert checks it).
CANDIDATE_FIELDS = (
    "batch_id",
    "query_id",
    "direction",
    "image_id",
    "caption_id",
    "round",
    "sample_stratum",
)
PROPOSAL_FIELDS = ("candidate_id", "annotator_id", "query_id", "rank", "score")
POSITIVE_PAIR_FIELDS = ("positive_set_id", "image_id", "caption_id")


def rows_insert(
    model: type[models.Model],
    attnames: tuple[str, ...],
    rows: Sequence[tuple],
    *,
    with_ids: bool = False,
) -> list[int]:
    """Insert `rows` (values in `attnames` order, the model's fields less the primary key).

    Returns the new rows' ids in row order when `with_ids`, else an empty list. Call it
    inside the caller's transaction: a failure leaves nothing behind.
    """
    _check_field_order(model, attnames)
    if not rows:
        return []
    if connection.vendor != "postgresql":
        made = model.objects.bulk_create([model(None, *row) for row in rows], batch_size=BULK_BATCH)
        return [row.pk for row in made] if with_ids else []
    table = model._meta.db_table
    columns = attnames
    rows = _json_encoded(model, attnames, rows)
    ids: list[int] = []
    with connection.cursor() as cursor:
        if with_ids:
            # Fresh sequence values are unique and increase: sorted, they follow row order
            # as bulk_create's would.
            cursor.execute(
                "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)",
                [table, len(rows)],
            )
            ids = sorted(value for (value,) in cursor.fetchall())
            columns = ("id", *attnames)
            rows = [(pk, *row) for pk, row in zip(ids, rows, strict=True)]
        quoted = ", ".join(connection.ops.quote_name(column) for column in columns)
        cursor.copy_expert(
            f"COPY {connection.ops.quote_name(table)} ({quoted}) FROM STDIN",
            io.StringIO(copy_text(rows)),
        )
    return ids


def tables_analyze(*model_classes: type[models.Model]) -> None:
    """Refresh PostgreSQL's planner statistics of these tables (elsewhere: nothing to do).

    A stage that has just written tens of thousands of rows leaves statistics that describe
    the tables before it: the planner then guesses thousands of rows where an index finds
    18, and joins whole tables per HIT (measured before this existed: reading a HIT's pairs
    with their captions took 2.4 ms with 25,000 captions and 5.0 ms with 75,000, a cost per
    HIT that grew with the corpus). Autovacuum catches up within minutes; the next stage
    starts at once. ANALYZE reads a fixed sample (30,000 rows at the default statistics
    target), so its cost does not grow with the table. It only helps: a failure (a lock
    or statement timeout) is logged and the stage goes on.
    """
    if connection.vendor != "postgresql" or not model_classes:
        return
    tables = ", ".join(connection.ops.quote_name(m._meta.db_table) for m in model_classes)
    try:
        with transaction.atomic(), connection.cursor() as cursor:
            cursor.execute(f"ANALYZE {tables}")
    except DatabaseError:
        logger.warning(
            "ANALYZE %s failed; the planner keeps older statistics", tables, exc_info=True
        )


def _json_encoded(
    model: type[models.Model], attnames: tuple[str, ...], rows: Sequence[tuple]
) -> Sequence[tuple]:
    """Rows with every JSONField value as its JSON text, as Django would store it."""
    fields = {field.attname: field for field in model._meta.concrete_fields}
    encoders = {
        index: fields[name].encoder
        for index, name in enumerate(attnames)
        if isinstance(fields[name], models.JSONField)
    }
    if not encoders:
        return rows
    return [
        tuple(
            json.dumps(value, cls=encoders[index], allow_nan=False) if index in encoders else value
            for index, value in enumerate(row)
        )
        for row in rows
    ]


def _check_field_order(model: type[models.Model], attnames: tuple[str, ...]) -> None:
    actual = tuple(field.attname for field in model._meta.concrete_fields)
    if actual != ("id", *attnames):
        raise RuntimeError(f"{model.__name__} fields are {actual}, not id + {attnames}")


_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def copy_text(rows: Iterable[tuple]) -> str:
    """Rows in COPY's text format: tab-separated values, \\N for NULL, backslash escapes."""
    return "".join("\t".join(_copy_value(value) for value in row) + "\n" for row in rows)


def _copy_value(value: Any) -> str:
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):
        return repr(float(value))  # numpy's float64 is a float whose repr names the type
    if isinstance(value, datetime):
        return value.isoformat()
    return str(value).translate(_ESCAPES)
