"""How a worker's HIT page names its pairs: by their number on that page, 1, 2, ….

A worker never sees a HIT item's database id. A golden that replaces a suspended one
(`annotation.goldens`) is a newer row whose id stands far above its page's others, so ids
would point at it. The page, its image links and a submission from it all use the pair's
number in the assignment's own order (`mitl.hits.page_order`, seeded by
`Assignment.page_seed`); the platform maps a number back to its item with the same rule.
An assignment's pairs never change once it is handed out (`models.items_shown_to`), so a
number names the same item on every visit.
"""

from __future__ import annotations

from typing import Any

from django.db.models import OuterRef, QuerySet, Subquery

from mitl.hits import page_order

from .models import Assignment, HITItem, items_shown_to
from .prepared import Prepared


def page_items(
    *, hit_id: int, assignment: Assignment | None, fields: tuple[str, ...] = ()
) -> list[tuple[Any, ...]]:
    """Return the (pk, *fields) rows of the items the assignment shows, in its page order.

    Without an assignment: the items a new one would show, in the HIT's order (a preview).
    Pair number n is the row at index n - 1.
    """
    if assignment is None:
        rows = _items_query(fields, shown_to=False).rows(hit_id)
    else:
        rows = _items_query(fields, shown_to=True).rows(hit_id, assignment.pk)
    seed = assignment.page_seed if assignment is not None else None
    return [rows[index] for index in page_order(len(rows), seed)]


_ITEMS_QUERIES: dict[tuple[tuple[str, ...], bool], Prepared] = {}


def _items_query(fields: tuple[str, ...], *, shown_to: bool) -> Prepared:
    """The page's rows, one statement per set of columns: every hand-out and submission
    reads them, so each is built once (annotation.prepared)."""
    key = (fields, shown_to)
    if key not in _ITEMS_QUERIES:

        def build(hit_id: int, assignment_id: int | None = None) -> QuerySet[HITItem]:
            items = HITItem.objects.filter(items_shown_to(assignment_id), hit_id=hit_id)
            columns = _columns_of_related_rows(fields)
            names = [f"shown_{n}" if f"shown_{n}" in columns else n for n in fields]
            return items.annotate(**columns).order_by("position").values_list("pk", *names)

        _ITEMS_QUERIES[key] = Prepared(build, 2 if shown_to else 1)
    return _ITEMS_QUERIES[key]


def _columns_of_related_rows(fields: tuple[str, ...]) -> dict[str, Subquery]:
    """A related row's column (`image__file`) read by its key, one index probe per pair.

    A join let the planner hash the whole image and caption tables for the page's 18
    pairs whenever they looked small to it (1.3 ms of the database's time per HIT at
    2,500 captions, the submit benchmark's set); a subquery per row reads only those.
    """
    columns = {}
    for name in fields:
        relation, _, column = name.partition("__")
        if column:
            related = HITItem._meta.get_field(relation).related_model
            rows = related.objects.filter(pk=OuterRef(f"{relation}_id")).values(column)
            columns[f"shown_{name}"] = Subquery(rows[:1])
    return columns


def page_numbers(*, assignment: Assignment) -> dict[int, int]:
    """Return each item's number on the assignment's page, by item pk."""
    rows = page_items(hit_id=assignment.hit_id, assignment=assignment)
    return {row[0]: number for number, row in enumerate(rows, start=1)}


def page_item_id(*, hit_id: int, assignment: Assignment | None, number: int) -> int | None:
    """Return the pk of the item shown as pair `number` of the page; None if there is none."""
    rows = page_items(hit_id=hit_id, assignment=assignment)
    return rows[number - 1][0] if 1 <= number <= len(rows) else None
