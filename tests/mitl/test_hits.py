"""Packing candidates into HITs with golden pairs (see `mitl/hits.md`)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np
import pytest

from mitl.hits import (
    ItemSpec,
    NegativeSource,
    PackingError,
    PackingPlan,
    Role,
    pack_hits,
    page_order,
)

# Image and caption ids come from disjoint ranges, so a pair built the wrong way round is caught.
IMAGE_IDS = np.arange(100, 120, dtype=np.int64)  # 20 images
CAPTION_IDS = np.arange(1000, 1100, dtype=np.int64)  # 5 captions per image
ORIGINAL_PAIRS = [(100 + (c - 1000) // 5, int(c)) for c in CAPTION_IDS]


@dataclass
class World:
    """What `pack_hits` is given: candidates, their queries and each query's negative source."""

    candidate_pairs: list[tuple[int, int]]
    candidate_queries: list[int]
    negatives: dict[int, NegativeSource]
    golden_tp_pairs: list[tuple[int, int]]
    image_ids: np.ndarray = field(default_factory=IMAGE_IDS.copy)
    caption_ids: np.ndarray = field(default_factory=CAPTION_IDS.copy)

    def pack(self, **plan) -> list[list[ItemSpec]]:
        settings = {"hit_size": 16, "golden_tp": 1, "golden_tn": 1, "seed": 0, **plan}
        return pack_hits(
            candidate_pairs=self.candidate_pairs,
            candidate_queries=self.candidate_queries,
            plan=PackingPlan(**settings),
            golden_tp_pairs=self.golden_tp_pairs,
            negatives=self.negatives,
            image_ids=self.image_ids,
            caption_ids=self.caption_ids,
        )


def make_world(*, image_queries: int = 5, caption_queries: int = 5, k: int = 5) -> World:
    """Image queries get ids 1.., caption queries 51..; each proposes `k` distinct targets.

    A query's excluded set holds its candidates, ten more "top-N" targets and its own
    original partners, like `annotation.goldens.negative_sources` builds it.
    """
    pairs: list[tuple[int, int]] = []
    queries: list[int] = []
    negatives: dict[int, NegativeSource] = {}
    for q in range(image_queries):
        image = int(IMAGE_IDS[q])
        ranked = [int(CAPTION_IDS[(q * 7 + 3 * j) % len(CAPTION_IDS)]) for j in range(k + 10)]
        own = [c for i, c in ORIGINAL_PAIRS if i == image]
        for caption in ranked[:k]:
            pairs.append((image, caption))
            queries.append(q + 1)
        negatives[q + 1] = NegativeSource("i2t", image, frozenset(ranked + own))
    for q in range(caption_queries):
        caption = int(CAPTION_IDS[50 + q * 9])
        ranked = [int(IMAGE_IDS[(q * 3 + j) % len(IMAGE_IDS)]) for j in range(k + 10)]
        own = [i for i, c in ORIGINAL_PAIRS if c == caption]
        for image in ranked[:k]:
            if (image, caption) in pairs:
                continue
            pairs.append((image, caption))
            queries.append(q + 51)
        negatives[q + 51] = NegativeSource("t2i", caption, frozenset(ranked + own))
    assert len(set(pairs)) == len(pairs)
    return World(pairs, queries, negatives, list(ORIGINAL_PAIRS))


WORLD = make_world()  # 50 candidates from 10 queries


def roles(hit: list[ItemSpec]) -> Counter:
    return Counter(item.role for item in hit)


def tasks(hit: list[ItemSpec]) -> list[ItemSpec]:
    return [item for item in hit if item.role is Role.TASK]


def goldens(hit: list[ItemSpec], role: Role) -> list[ItemSpec]:
    return [item for item in hit if item.role is role]


def layout(hits: list[list[ItemSpec]]) -> list[list[tuple]]:
    return [[(i.role, i.image_id, i.caption_id, i.candidate_index) for i in hit] for hit in hits]


# --- shape of the HITs -------------------------------------------------------------------------


def test_the_world_has_fifty_candidates():
    assert len(WORLD.candidate_pairs) == 50


def test_fifty_candidates_in_hits_of_sixteen_make_four_hits_the_last_smaller():
    hits = WORLD.pack(hit_size=16)
    assert [len(tasks(hit)) for hit in hits] == [16, 16, 16, 2]
    assert [len(hit) for hit in hits] == [18, 18, 18, 4]


def test_every_hit_has_one_golden_tp_and_one_golden_tn():
    for hit in WORLD.pack():
        counts = roles(hit)
        assert counts[Role.GOLDEN_TP] == 1
        assert counts[Role.GOLDEN_TN] == 1


@pytest.mark.parametrize(("golden_tp", "golden_tn"), [(0, 0), (2, 2), (0, 2), (2, 0), (1, 0)])
def test_the_numbers_of_goldens_per_hit_follow_the_plan(golden_tp, golden_tn):
    hits = WORLD.pack(golden_tp=golden_tp, golden_tn=golden_tn)
    assert len(hits) == 4
    for hit in hits:
        counts = roles(hit)
        assert counts[Role.GOLDEN_TP] == golden_tp
        assert counts[Role.GOLDEN_TN] == golden_tn
        assert len(hit) == len(tasks(hit)) + golden_tp + golden_tn


@pytest.mark.parametrize(("hit_size", "expected"), [(50, 1), (49, 2), (10, 5), (1, 50), (64, 1)])
def test_the_number_of_hits_is_the_candidates_over_hit_size_rounded_up(hit_size, expected):
    hits = WORLD.pack(hit_size=hit_size)
    assert len(hits) == expected
    assert all(1 <= len(tasks(hit)) <= hit_size for hit in hits)


def test_no_candidates_give_no_hits():
    empty = World([], [], WORLD.negatives, WORLD.golden_tp_pairs)
    assert empty.pack() == []


@pytest.mark.parametrize("seed", range(5))
def test_every_candidate_appears_exactly_once_over_all_hits(seed):
    hits = WORLD.pack(seed=seed)
    indices = [item.candidate_index for hit in hits for item in tasks(hit)]
    assert sorted(indices) == list(range(len(WORLD.candidate_pairs)))


def test_a_task_carries_the_pair_of_its_candidate():
    for hit in WORLD.pack(seed=3):
        for item in tasks(hit):
            assert (item.image_id, item.caption_id) == WORLD.candidate_pairs[item.candidate_index]


def test_goldens_carry_no_candidate_index():
    for hit in WORLD.pack(golden_tp=2, golden_tn=2):
        for item in hit:
            assert (item.candidate_index is None) == (item.role is not Role.TASK)


def test_candidates_are_shuffled_so_a_hit_mixes_queries():
    # In input order the first 16 candidates come from 4 queries; shuffled, a HIT mixes more.
    for seed in range(10):
        for hit in WORLD.pack(seed=seed)[:3]:
            queries = {WORLD.candidate_queries[item.candidate_index] for item in tasks(hit)}
            assert len(queries) >= 5


# --- golden true negatives ---------------------------------------------------------------------


def negative_owner(item: ItemSpec, hit: list[ItemSpec], world: World) -> list[int]:
    """The queries of this HIT's tasks for which `item` is a valid golden negative."""
    owners = []
    for query in {world.candidate_queries[t.candidate_index] for t in tasks(hit)}:
        source = world.negatives[query]
        if source.direction == "i2t":
            ok = item.image_id == source.item_id and item.caption_id in world.caption_ids
            target = item.caption_id
        else:
            ok = item.caption_id == source.item_id and item.image_id in world.image_ids
            target = item.image_id
        if ok and target not in source.excluded:
            owners.append(query)
    return owners


@pytest.mark.parametrize("seed", range(10))
def test_a_golden_tn_belongs_to_a_query_of_its_hit_and_avoids_its_excluded_targets(seed):
    world = WORLD
    for hit in world.pack(seed=seed, golden_tn=2):
        for item in goldens(hit, Role.GOLDEN_TN):
            assert negative_owner(item, hit, world), item


@pytest.mark.parametrize("seed", range(10))
def test_a_golden_tn_of_an_image_query_pairs_the_query_image_with_a_caption(seed):
    world = make_world(image_queries=6, caption_queries=0)
    image_queries = {source.item_id for source in world.negatives.values()}
    for hit in world.pack(seed=seed):
        (negative,) = goldens(hit, Role.GOLDEN_TN)
        assert negative.image_id in image_queries
        assert negative.caption_id in CAPTION_IDS
        assert negative_owner(negative, hit, world)


@pytest.mark.parametrize("seed", range(10))
def test_a_golden_tn_of_a_caption_query_pairs_an_image_with_the_query_caption(seed):
    world = make_world(image_queries=0, caption_queries=6)
    caption_queries = {source.item_id for source in world.negatives.values()}
    for hit in world.pack(seed=seed):
        (negative,) = goldens(hit, Role.GOLDEN_TN)
        assert negative.caption_id in caption_queries
        assert negative.image_id in IMAGE_IDS
        assert negative_owner(negative, hit, world)


SMALL_CAPTION_IDS = CAPTION_IDS[:20]  # the packer gives up after 64 draws per query


def single_query_world(direction: str, allowed: set[int]) -> World:
    """One query with three candidates; every target but `allowed` is excluded.

    Captions are limited to 20 so that 64 random draws surely meet an allowed target.
    """
    if direction == "i2t":
        pairs = [(100, 1000), (100, 1001), (100, 1002)]
        excluded = frozenset(int(c) for c in SMALL_CAPTION_IDS) - allowed
        source = NegativeSource("i2t", 100, excluded)
    else:
        pairs = [(100, 1000), (101, 1000), (102, 1000)]
        excluded = frozenset(int(i) for i in IMAGE_IDS) - allowed
        source = NegativeSource("t2i", 1000, excluded)
    return World(pairs, [1, 1, 1], {1: source}, ORIGINAL_PAIRS, caption_ids=SMALL_CAPTION_IDS)


@pytest.mark.parametrize(
    ("direction", "allowed", "expected"),
    [("i2t", 1017, (100, 1017)), ("t2i", 113, (113, 1000))],
)
def test_the_only_target_outside_the_excluded_set_is_found_and_oriented(
    direction, allowed, expected
):
    world = single_query_world(direction, {allowed})
    for seed in range(10):
        (hit,) = world.pack(seed=seed)
        (negative,) = goldens(hit, Role.GOLDEN_TN)
        assert (negative.image_id, negative.caption_id) == expected


def test_when_one_query_is_fully_excluded_the_negative_comes_from_another_query_of_the_hit():
    every_caption = frozenset(int(c) for c in SMALL_CAPTION_IDS)
    blocked = NegativeSource("i2t", 100, every_caption)
    allowed = {1013, 1015, 1017}
    open_ = NegativeSource("i2t", 101, every_caption - allowed)
    world = World(
        [(100, 1000), (101, 1005)],
        [1, 2],
        {1: blocked, 2: open_},
        ORIGINAL_PAIRS,
        caption_ids=SMALL_CAPTION_IDS,
    )
    for seed in range(10):
        (hit,) = world.pack(seed=seed)
        (negative,) = goldens(hit, Role.GOLDEN_TN)
        assert negative.image_id == 101
        assert negative.caption_id in allowed


@pytest.mark.parametrize("direction", ["i2t", "t2i"])
def test_packing_fails_when_every_target_of_the_hit_queries_is_excluded(direction):
    world = single_query_world(direction, set())
    with pytest.raises(PackingError, match="golden true negative"):
        world.pack()


def test_a_fully_excluded_query_is_fine_when_no_golden_tn_is_asked():
    world = single_query_world("i2t", set())
    (hit,) = world.pack(golden_tn=0)
    assert roles(hit)[Role.GOLDEN_TN] == 0


def test_two_golden_tns_on_one_page_are_different_pairs():
    world = single_query_world("i2t", {1017, 1018})  # two valid negatives exist
    for seed in range(20):
        (hit,) = world.pack(seed=seed, golden_tn=2)
        negatives = [(n.image_id, n.caption_id) for n in goldens(hit, Role.GOLDEN_TN)]
        assert len(set(negatives)) == 2, f"seed {seed}: {negatives}"


def test_a_golden_tn_is_never_a_task_pair_on_the_same_page():
    # Image query 1 (image 100) may pair with caption 1015 or 1016. Caption query 2 proposes
    # image 100 for caption 1015, so (100, 1015) is a task on the page, ranked high by a model.
    every_caption = frozenset(int(c) for c in SMALL_CAPTION_IDS)
    image_query = NegativeSource("i2t", 100, every_caption - {1015, 1016})
    caption_query = NegativeSource("t2i", 1015, frozenset(int(i) for i in IMAGE_IDS))
    world = World(
        [(100, 1000), (100, 1015)],
        [1, 2],
        {1: image_query, 2: caption_query},
        ORIGINAL_PAIRS,
        caption_ids=SMALL_CAPTION_IDS,
    )
    for seed in range(20):
        (hit,) = world.pack(seed=seed)
        on_page = {(t.image_id, t.caption_id) for t in tasks(hit)}
        (negative,) = goldens(hit, Role.GOLDEN_TN)
        assert (negative.image_id, negative.caption_id) not in on_page, f"seed {seed}"


# --- golden true positives ---------------------------------------------------------------------


@pytest.mark.parametrize("seed", range(10))
def test_a_golden_tp_is_an_original_pair_and_never_a_task_pair_on_its_page(seed):
    # Offer the candidates themselves as golden TPs too: the packer must avoid the page's own.
    offered = WORLD.candidate_pairs + ORIGINAL_PAIRS[:10]
    world = World(WORLD.candidate_pairs, WORLD.candidate_queries, WORLD.negatives, offered)
    for hit in world.pack(seed=seed, golden_tp=2):
        on_page = {(t.image_id, t.caption_id) for t in tasks(hit)}
        positives = [(p.image_id, p.caption_id) for p in goldens(hit, Role.GOLDEN_TP)]
        assert len(set(positives)) == 2
        for pair in positives:
            assert pair in offered
            assert pair not in on_page


def test_golden_tps_come_from_the_offered_pairs_only():
    offered = [(105, 1025), (106, 1030)]
    world = World(WORLD.candidate_pairs, WORLD.candidate_queries, WORLD.negatives, offered)
    for hit in world.pack(golden_tp=1):
        (positive,) = goldens(hit, Role.GOLDEN_TP)
        assert (positive.image_id, positive.caption_id) in offered


def test_packing_fails_when_no_golden_tp_pair_exists():
    world = World(WORLD.candidate_pairs, WORLD.candidate_queries, WORLD.negatives, [])
    with pytest.raises(PackingError, match="golden true positives"):
        world.pack(golden_tp=1)


def test_no_golden_tp_pairs_are_needed_when_none_are_asked():
    world = World(WORLD.candidate_pairs, WORLD.candidate_queries, WORLD.negatives, [])
    hits = world.pack(golden_tp=0)
    assert all(roles(hit)[Role.GOLDEN_TP] == 0 for hit in hits)


def test_packing_fails_when_every_golden_tp_pair_is_already_on_the_page():
    pairs = WORLD.candidate_pairs[:3]
    world = World(pairs, WORLD.candidate_queries[:3], WORLD.negatives, list(pairs))
    with pytest.raises(PackingError, match="golden true positives"):
        world.pack(golden_tp=1)


# --- reproducibility and positions -------------------------------------------------------------


def test_the_same_seed_gives_the_same_hits():
    assert layout(WORLD.pack(seed=5, golden_tn=2)) == layout(WORLD.pack(seed=5, golden_tn=2))


def test_different_seeds_give_different_hits():
    layouts = [layout(WORLD.pack(seed=seed)) for seed in range(5)]
    assert all(a != b for i, a in enumerate(layouts) for b in layouts[i + 1 :])


def test_different_seeds_put_different_candidates_together():
    def groups(seed):
        return [sorted(t.candidate_index for t in tasks(hit)) for hit in WORLD.pack(seed=seed)]

    assert groups(0) != groups(1)


def test_goldens_are_not_always_at_the_same_positions():
    tp_positions: Counter = Counter()
    tn_positions: Counter = Counter()
    full_hits = 0
    for seed in range(20):
        for hit in WORLD.pack(seed=seed):
            if len(hit) != 18:
                continue
            full_hits += 1
            roles_in_order = [item.role for item in hit]
            tp_positions[roles_in_order.index(Role.GOLDEN_TP)] += 1
            tn_positions[roles_in_order.index(Role.GOLDEN_TN)] += 1
    assert full_hits == 60
    for positions in (tp_positions, tn_positions):
        assert len(positions) >= 12  # of 18 possible positions
        assert max(positions.values()) <= full_hits // 4
        assert any(p < 9 for p in positions)
        assert any(p >= 9 for p in positions)


def test_page_order_is_a_permutation_fixed_by_its_seed_and_the_hit_order_without_one():
    assert page_order(18, None) == list(range(18))
    assert sorted(page_order(18, 7)) == list(range(18))
    assert page_order(18, 7) == page_order(18, 7)  # stored seed: the same order on every visit
    orders = {tuple(page_order(18, seed)) for seed in range(20)}
    assert len(orders) == 20  # 18! orders: distinct seeds practically never repeat one
    assert page_order(0, 3) == []


def test_a_page_whose_queries_have_no_negative_borrows_one_from_another_query():
    every_caption = frozenset(int(c) for c in SMALL_CAPTION_IDS)
    blocked = NegativeSource("i2t", 100, every_caption)
    allowed = {1013, 1015}
    open_ = NegativeSource("i2t", 101, every_caption - allowed)
    # The page holds query 1's pair only; query 2 is another query of the batch.
    world = World(
        [(100, 1000)], [1], {1: blocked, 2: open_}, ORIGINAL_PAIRS, caption_ids=SMALL_CAPTION_IDS
    )
    for seed in range(10):
        (hit,) = world.pack(seed=seed)
        (negative,) = goldens(hit, Role.GOLDEN_TN)
        assert (negative.image_id, negative.caption_id in allowed) == (101, True)
