"""Pack candidate pairs into HITs with golden pairs at random positions (see `hits.md`)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum

import numpy as np

# Draws before giving up on one query when looking for a golden negative; a query whose
# every target is excluded is rare, and the packer then tries another query of the HIT.
_NEGATIVE_DRAWS_PER_QUERY = 64


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
        items = [
            ItemSpec(Role.TASK, *candidate_pairs[i], candidate_index=int(i)) for i in chunk
        ]
        on_page = {(item.image_id, item.caption_id) for item in items}
        items += _golden_positives(rng, golden_tp_pairs, plan.golden_tp, on_page)
        queries = [candidate_queries[i] for i in chunk]
        items += [
            _golden_negative(rng, queries, negatives, image_ids, caption_ids)
            for _ in range(plan.golden_tn)
        ]
        hits.append([items[i] for i in rng.permutation(len(items))])
    return hits


def _golden_positives(
    rng: np.random.Generator,
    pairs: Sequence[tuple[int, int]],
    count: int,
    on_page: set[tuple[int, int]],
) -> list[ItemSpec]:
    chosen: list[ItemSpec] = []
    for _ in range(count * 8):
        if len(chosen) == count:
            break
        pair = pairs[int(rng.integers(len(pairs)))]
        if pair not in on_page:
            on_page.add(pair)
            chosen.append(ItemSpec(Role.GOLDEN_TP, *pair))
    if len(chosen) < count:
        raise PackingError(f"could not find {count} distinct golden true positives for a HIT")
    return chosen


def _golden_negative(
    rng: np.random.Generator,
    queries: Sequence[int],
    negatives: Mapping[int, NegativeSource],
    image_ids: np.ndarray,
    caption_ids: np.ndarray,
) -> ItemSpec:
    for query in rng.permutation(np.asarray(queries)):
        source = negatives[int(query)]
        universe = caption_ids if source.direction == "i2t" else image_ids
        for _ in range(_NEGATIVE_DRAWS_PER_QUERY):
            target = int(universe[int(rng.integers(len(universe)))])
            if target in source.excluded:
                continue
            if source.direction == "i2t":
                return ItemSpec(Role.GOLDEN_TN, source.item_id, target)
            return ItemSpec(Role.GOLDEN_TN, target, source.item_id)
    raise PackingError(
        "no golden true negative found: every target of this HIT's queries is in some "
        "annotator's top ranks (raise the dataset size or lower golden_negative_depth)"
    )
