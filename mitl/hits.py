"""Pack candidate pairs into HITs with golden pairs at random positions (see `hits.md`)."""

from __future__ import annotations

import random
from collections.abc import Iterator, Mapping, Sequence, Set
from dataclasses import dataclass, replace
from enum import StrEnum

import numpy as np

# Random draws before listing the allowed choices exactly: nearly every draw is allowed in
# a real dataset, so listing (linear in the dataset) is the rare fallback.
_DRAWS_BEFORE_LISTING = 64


class Role(StrEnum):
    TASK = "task"
    GOLDEN_TP = "golden_tp"
    GOLDEN_TN = "golden_tn"


@dataclass(frozen=True)
class ItemSpec:
    role: Role
    image_id: int
    caption_id: int
    candidate_index: int | None = None  # index into the candidate list, for tasks


@dataclass(frozen=True)
class NegativeSource:
    """What a golden negative for one query must avoid.

    `excluded` holds every target in any annotator's top-N for the query and the query's
    known positives, so a drawn pair is far from what any model or the dataset links.
    """

    direction: str  # "i2t": query is an image, targets are captions; "t2i" the reverse
    item_id: int
    excluded: frozenset[int]


@dataclass(frozen=True)
class PackingPlan:
    hit_size: int
    golden_tp: int
    golden_tn: int
    seed: int


class PackingError(ValueError):
    """HITs cannot be built as configured (e.g. no pair left for a golden negative)."""


def pack_hits(
    *,
    candidate_pairs: Sequence[tuple[int, int]],
    candidate_queries: Sequence[int],
    plan: PackingPlan,
    golden_tp_pairs: Sequence[tuple[int, int]],
    negatives: Mapping[int, NegativeSource],
    image_ids: np.ndarray,
    caption_ids: np.ndarray,
) -> list[list[ItemSpec]]:
    """Pack candidates into HITs of `hit_size` tasks plus goldens, all shuffled by the seed.

    Candidates are shuffled first so one HIT mixes queries (no page of five near-identical
    captions); the last HIT may hold fewer tasks. Returns one item list per HIT, in page order.
    """
    if plan.golden_tp and not golden_tp_pairs:
        raise PackingError("no original pair is available for golden true positives")
    rng = np.random.default_rng([plan.seed, 3])
    order = rng.permutation(len(candidate_pairs))
    hits: list[list[ItemSpec]] = []
    for start in range(0, len(order), plan.hit_size):
        chunk = order[start : start + plan.hit_size]
        items = [ItemSpec(Role.TASK, *candidate_pairs[i], candidate_index=int(i)) for i in chunk]
        on_page = {(item.image_id, item.caption_id) for item in items}
        items += _golden_positives(rng, golden_tp_pairs, plan.golden_tp, on_page)
        queries = [candidate_queries[i] for i in chunk]
        items += [
            _golden_negative(rng, queries, negatives, image_ids, caption_ids, on_page)
            for _ in range(plan.golden_tn)
        ]
        hits.append([items[i] for i in rng.permutation(len(items))])
    return hits


@dataclass(frozen=True)
class GoldenPool:
    """Where golden pairs are drawn from: original pairs, and what negatives must avoid."""

    golden_tp_pairs: Sequence[tuple[int, int]]
    negatives: Mapping[int, NegativeSource]
    image_ids: np.ndarray
    caption_ids: np.ndarray

    def without(self, pairs: Set[tuple[int, int]]) -> GoldenPool:
        """Return the pool less `pairs` (image id, caption id): no golden of either kind is
        drawn from them (a batch's qualification pairs, whose answers its workers saw)."""
        if not pairs:
            return self
        negatives = {}
        for query, source in self.negatives.items():
            targets = {
                caption if source.direction == "i2t" else image
                for image, caption in pairs
                if (image if source.direction == "i2t" else caption) == source.item_id
            }
            negatives[query] = (
                replace(source, excluded=source.excluded | targets) if targets else source
            )
        return replace(
            self,
            golden_tp_pairs=[pair for pair in self.golden_tp_pairs if pair not in pairs],
            negatives=negatives,
        )


def golden_replacement(
    role: Role, *, pool: GoldenPool, queries: Sequence[int], on_page: set[tuple[int, int]], seed
) -> ItemSpec:
    """Draw one golden pair of `role` not on the page, as packing draws them.

    For a golden pair that turned out wrong (annotation.goldens): a negative is drawn for one
    of the HIT's `queries`. Raises PackingError when none is left.
    """
    rng = np.random.default_rng(seed)
    if role == Role.GOLDEN_TP:
        if not pool.golden_tp_pairs:
            raise PackingError("no original pair is available for a golden true positive")
        return _golden_positives(rng, pool.golden_tp_pairs, 1, on_page)[0]
    return _golden_negative(rng, queries, pool.negatives, pool.image_ids, pool.caption_ids, on_page)


def _golden_positives(
    rng: np.random.Generator,
    pairs: Sequence[tuple[int, int]],
    count: int,
    on_page: set[tuple[int, int]],
) -> list[ItemSpec]:
    chosen: list[ItemSpec] = []
    for _ in range(count):
        draws = (pairs[int(rng.integers(len(pairs)))] for _ in range(_DRAWS_BEFORE_LISTING))
        pair = next((p for p in draws if p not in on_page), None)
        if pair is None:  # nearly every original pair is on the page: list the others
            allowed = [p for p in pairs if p not in on_page]
            if not allowed:
                raise PackingError(
                    f"could not find {count} distinct golden true positives for a HIT"
                )
            pair = allowed[int(rng.integers(len(allowed)))]
        on_page.add(pair)
        chosen.append(ItemSpec(Role.GOLDEN_TP, *pair))
    return chosen


def _golden_negative(
    rng: np.random.Generator,
    queries: Sequence[int],
    negatives: Mapping[int, NegativeSource],
    image_ids: np.ndarray,
    caption_ids: np.ndarray,
    on_page: set[tuple[int, int]],
) -> ItemSpec:
    """Draw a golden negative for one of `queries` that is not already on the page.

    Rejection sampling is fast when most targets are allowed; when it keeps missing, the
    allowed targets are listed exactly. When none of the page's queries has a negative left
    (a small dataset whose every target some annotator ranks high, or that the batch
    judges), another query of the batch lends one; a HIT fails only when none exists at all.
    """
    for query in _queries_to_try(rng, queries, negatives):
        source = negatives[query]
        universe = caption_ids if source.direction == "i2t" else image_ids
        draws = (
            int(universe[int(rng.integers(len(universe)))]) for _ in range(_DRAWS_BEFORE_LISTING)
        )
        target = next((t for t in draws if _allowed(source, t, on_page)), None)
        if target is None:
            allowed = [int(t) for t in universe if _allowed(source, int(t), on_page)]
            if not allowed:
                continue
            target = allowed[int(rng.integers(len(allowed)))]
        pair = _oriented(source, target)
        on_page.add(pair)
        return ItemSpec(Role.GOLDEN_TN, *pair)
    raise PackingError(
        "no golden true negative found: every target of this HIT's queries is in some "
        "annotator's top ranks, a known positive, or already on the page (raise the dataset "
        "size or lower golden_negative_depth)"
    )


def _queries_to_try(
    rng: np.random.Generator, queries: Sequence[int], negatives: Mapping[int, NegativeSource]
) -> Iterator[int]:
    """The page's queries in a seeded order, then, only if none of them had a negative left,
    every other query of the batch in a seeded order.

    The other queries are listed and shuffled only when they are needed: doing it for every
    page cost time in proportion to the batch's queries per HIT, so building grew with
    HITs × queries (a 10× batch took 40 times as long).
    """
    own = [int(q) for q in rng.permutation(np.asarray(queries))]
    yield from own
    others = np.fromiter(sorted(set(negatives) - set(own)), dtype=np.int64)
    yield from (int(q) for q in rng.permutation(others))


def _oriented(source: NegativeSource, target: int) -> tuple[int, int]:
    """Return the (image id, caption id) pair of a query item and one of its targets."""
    return (source.item_id, target) if source.direction == "i2t" else (target, source.item_id)


def _allowed(source: NegativeSource, target: int, on_page: set[tuple[int, int]]) -> bool:
    return target not in source.excluded and _oriented(source, target) not in on_page


def page_order(n_items: int, seed: int | None) -> list[int]:
    """Return the HIT positions in the order one assignment shows them.

    Each assignment gets its own order, so workers who compare notes cannot tell each other
    where a HIT's golden pairs are; the seed is stored with the assignment, so the order
    is the same on every visit and in review. No seed: the HIT's own order.
    """
    positions = list(range(n_items))
    if seed is not None:
        random.Random(seed).shuffle(positions)
    return positions
