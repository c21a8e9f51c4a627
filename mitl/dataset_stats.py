"""Dataset statistics: the positives of each set over a query subset (ECCV Caption Table 3),
and each set's precision and recall against the human-verified positives (Table 2).

Pure Python over (image id, caption id) pairs. "# positive images" sums, over the caption
queries, the images each caption is paired with; "# positive captions" sums, over the image
queries, the captions each image is paired with. A set's pairs count in both directions,
as the ECCV-format import stores the union of its two files.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from .positive_sets import SetAgreement, pairs_agreement

Pair = tuple[int, int]  # (image id, caption id)
NOT_AVAILABLE = "n/a"


@dataclass(frozen=True)
class QuerySubset:
    images: frozenset[int]  # image queries (image → caption)
    captions: frozenset[int]  # caption queries (caption → image)

    def __and__(self, other: QuerySubset) -> QuerySubset:
        return QuerySubset(self.images & other.images, self.captions & other.captions)


@dataclass(frozen=True)
class SetPairs:
    name: str
    source: str
    pairs: frozenset[Pair]


@dataclass(frozen=True)
class SetRow:
    name: str
    source: str
    positive_images: int  # over the caption queries
    positive_captions: int  # over the image queries
    image_factor: float | None  # over the original set; None without one
    caption_factor: float | None
    i2t: SetAgreement | None  # against the human-verified positives; None: n/a
    t2i: SetAgreement | None


@dataclass(frozen=True)
class DatasetStats:
    image_queries: int
    caption_queries: int
    original: str | None  # the set the factors divide by
    human: tuple[str, ...]  # the human-verified sets, whose union is the truth
    human_image_queries: int  # queries that precision and recall are computed over
    human_caption_queries: int
    rows: tuple[SetRow, ...]


def count_positives(pairs: Iterable[Pair], queries: QuerySubset) -> tuple[int, int]:
    """Return (# positive images over the caption queries, # positive captions over the
    image queries)."""
    images = captions = 0
    for image, caption in pairs:
        images += caption in queries.captions
        captions += image in queries.images
    return images, captions


def _factor(count: int, original: int | None) -> float | None:
    return count / original if original else None


def _agreement(
    pairs: frozenset[Pair], truth: frozenset[Pair], queries: frozenset[int], side: int
) -> SetAgreement | None:
    # `side` picks the query of a pair: 0 for image queries, 1 for caption queries.
    if not queries:
        return None
    return pairs_agreement(
        {p for p in pairs if p[side] in queries}, {p for p in truth if p[side] in queries}
    )


def dataset_stats(
    sets: Sequence[SetPairs],
    queries: QuerySubset,
    *,
    original: str | None,
    human: Sequence[str] = (),
    human_queries: QuerySubset | None = None,
) -> DatasetStats:
    """Count each set's positives over `queries` and compare it with the human sets.

    `original` names the set the factors divide by (None: no factors). The truth for
    precision and recall is the union of the `human` sets, over the queries they cover
    (`human_queries`; None: all of `queries`); without human sets both are n/a (None).
    """
    by_name = {s.name: s for s in sets}
    missing = [name for name in [*([original] if original else []), *human] if name not in by_name]
    if missing:
        raise ValueError(f"no positive set named {missing[0]!r} among {sorted(by_name)}")
    base = count_positives(by_name[original].pairs, queries) if original else (None, None)
    judged = queries & human_queries if human_queries is not None else queries
    truth = frozenset().union(*(by_name[name].pairs for name in human))
    rows = []
    for s in sets:
        images, captions = count_positives(s.pairs, queries)
        rows.append(
            SetRow(
                name=s.name,
                source=s.source,
                positive_images=images,
                positive_captions=captions,
                image_factor=_factor(images, base[0]),
                caption_factor=_factor(captions, base[1]),
                i2t=_agreement(s.pairs, truth, judged.images, 0) if human else None,
                t2i=_agreement(s.pairs, truth, judged.captions, 1) if human else None,
            )
        )
    return DatasetStats(
        image_queries=len(queries.images),
        caption_queries=len(queries.captions),
        original=original,
        human=tuple(human),
        human_image_queries=len(judged.images) if human else 0,
        human_caption_queries=len(judged.captions) if human else 0,
        rows=tuple(rows),
    )


def stats_as_json(stats: DatasetStats) -> dict[str, Any]:
    """Return the statistics as plain JSON data (n/a becomes null)."""
    return asdict(stats)


def _count(value: int, factor: float | None) -> str:
    return f"{value:,} (×{factor:.2f})" if factor is not None else f"{value:,}"


def _pr(agreement: SetAgreement | None) -> str:
    if agreement is None:
        return NOT_AVAILABLE
    return f"{100 * agreement.precision:.1f} / {100 * agreement.recall:.1f}"


def stats_table(stats: DatasetStats, *, queries_label: str) -> str:
    """Render the statistics as a readable plain-text table."""
    header = (
        "positive set",
        "source",
        "# positive images",
        "# positive captions",
        "i2t P / R (%)",
        "t2i P / R (%)",
    )
    body = [
        (
            row.name,
            row.source,
            _count(row.positive_images, row.image_factor),
            _count(row.positive_captions, row.caption_factor),
            _pr(row.i2t),
            _pr(row.t2i),
        )
        for row in stats.rows
    ]
    widths = [max(len(cells[i]) for cells in [header, *body]) for i in range(len(header))]
    lines = [
        f"{stats.image_queries:,} image queries and {stats.caption_queries:,} caption queries "
        f"({queries_label})",
        "",
        *(
            "  ".join(c.ljust(w) for c, w in zip(cells, widths, strict=True)).rstrip()
            for cells in [header, *body]
        ),
        "",
        "# positive images: summed over the caption queries.",
        "# positive captions: summed over the image queries.",
    ]
    if stats.original:
        lines.append(f"×: the factor over {stats.original!r} on the same queries.")
    if stats.human:
        lines.append(
            f"P / R: precision and recall against the human-verified positives of "
            f"{', '.join(repr(h) for h in stats.human)},"
        )
        lines.append(
            f"       over the {stats.human_image_queries:,} image and "
            f"{stats.human_caption_queries:,} caption queries they judged."
        )
    else:
        lines.append("P / R: n/a, the dataset has no human-verified positive set.")
    return "\n".join(lines)
