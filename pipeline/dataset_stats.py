"""Read a dataset's positive sets and queries for `mitl.dataset_stats` (ECCV Caption Tables 2, 3).

Captions marked invalid are left out, as queries and as positives, the way releases and
evaluations leave them out.
"""

from __future__ import annotations

from collections import defaultdict

from annotation.errors import ServiceError
from annotation.models import (
    Batch,
    Caption,
    Dataset,
    Direction,
    Image,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Query,
)
from mitl.dataset_stats import DatasetStats, QuerySubset, SetPairs, dataset_stats

from .aggregate import human_set_name

# Rows in source order: the original first, then imported sets, then human-verified ones.
SOURCE_ORDER = [PositiveSource.ORIGINAL, PositiveSource.IMPORTED, PositiveSource.HUMAN]


def dataset_stats_compute(*, dataset: Dataset, queries_from: str | None = None) -> DatasetStats:
    """Compute the statistics of every positive set of `dataset`.

    The query subset is the `queries` of the set named `queries_from`, or every image and
    every valid caption when it is None or the set records no queries.
    """
    rows = list(PositiveSet.objects.filter(dataset=dataset).order_by("pk"))
    if not rows:
        raise ServiceError(f"dataset {dataset.name!r} has no positive set")
    by_name = {s.name: s for s in rows}
    if queries_from is not None and queries_from not in by_name:
        raise ServiceError(
            f"dataset {dataset.name!r} has no positive set {queries_from!r} "
            f"(it has: {', '.join(sorted(by_name))})"
        )
    rows.sort(key=lambda s: SOURCE_ORDER.index(s.source))
    valid_captions = frozenset(
        Caption.objects.filter(dataset=dataset, is_invalid=False).values_list("ext_id", flat=True)
    )
    every = QuerySubset(
        frozenset(Image.objects.filter(dataset=dataset).values_list("ext_id", flat=True)),
        valid_captions,
    )
    queries = every
    if queries_from is not None:
        declared = _declared_queries(by_name[queries_from])
        queries = declared & every if declared is not None else every
    human = [s for s in rows if s.source == PositiveSource.HUMAN]
    covered = [_human_queries(s) for s in human]
    human_queries = (
        None
        if any(c is None for c in covered)
        else QuerySubset(
            frozenset().union(*(c.images for c in covered)),
            frozenset().union(*(c.captions for c in covered)),
        )
    )
    original = next((s.name for s in rows if s.source == PositiveSource.ORIGINAL), None)
    return dataset_stats(
        [SetPairs(s.name, s.source, pairs) for s, pairs in zip(rows, _pairs(rows), strict=True)],
        queries,
        original=original,
        human=[s.name for s in human],
        human_queries=human_queries,
    )


def _pairs(sets: list[PositiveSet]) -> list[frozenset[tuple[int, int]]]:
    by_set: dict[int, set[tuple[int, int]]] = defaultdict(set)
    for set_id, image, caption in PositivePair.objects.filter(
        positive_set__in=sets, caption__is_invalid=False
    ).values_list("positive_set_id", "image__ext_id", "caption__ext_id"):
        by_set[set_id].add((image, caption))
    return [frozenset(by_set[s.pk]) for s in sets]


def _declared_queries(positive_set: PositiveSet) -> QuerySubset | None:
    """The queries an imported set names; None when it names none (it covers everything)."""
    images, captions = positive_set.queries.get("i2t"), positive_set.queries.get("t2i")
    if not images and not captions:
        return None
    return QuerySubset(frozenset(images or ()), frozenset(captions or ()))


def _human_queries(positive_set: PositiveSet) -> QuerySubset | None:
    """The queries a human-verified set was judged over: its own, else its batch's."""
    declared = _declared_queries(positive_set)
    if declared is not None:
        return declared
    batch = next(
        (
            b
            for b in Batch.objects.filter(dataset_id=positive_set.dataset_id)
            if human_set_name(b) == positive_set.name
        ),
        None,
    )
    if batch is None:
        return None
    queries = Query.objects.filter(batch=batch)
    return QuerySubset(
        frozenset(queries.filter(direction=Direction.I2T).values_list("image__ext_id", flat=True)),
        frozenset(
            queries.filter(direction=Direction.T2I).values_list("caption__ext_id", flat=True)
        ),
    )
