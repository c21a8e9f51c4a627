"""Retrieval metrics over id rankings: hand-worked values, the errors, the lookup paths."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mitl import metrics
from mitl.metrics import (
    MetricError,
    coco_recalls,
    map_at_r,
    ndcg_at_k,
    precision_at_k,
    prepare,
    r_precision,
    recall_at_k,
    retrieval_metrics,
)

RANKINGS = {1: [10, 11, 12, 13], 2: [20, 21, 22, 23], 3: [30, 31]}
POSITIVES = {1: {11}, 2: {99}, 3: {30, 31}}


def test_recall_is_the_share_of_queries_with_a_hit_in_the_top_k():
    assert recall_at_k(RANKINGS, POSITIVES, 1) == pytest.approx(1 / 3)
    assert recall_at_k(RANKINGS, POSITIVES, 2) == pytest.approx(2 / 3)


def test_precision_counts_a_short_ranking_against_the_full_k():
    # query 1: 1 of 4, query 2: 0 of 4, query 3: 2 of 4 (only two ranked)
    assert precision_at_k(RANKINGS, POSITIVES, 4) == pytest.approx((1 / 4 + 0 + 2 / 4) / 3)


def test_a_query_without_a_ranking_is_an_error_not_a_zero():
    with pytest.raises(ValueError, match=r"1 queries have no ranking \(first: 4\)"):
        recall_at_k(RANKINGS, {**POSITIVES, 4: {40}}, 1)


def test_k_below_one_is_refused():
    with pytest.raises(ValueError, match="k must be at least 1"):
        precision_at_k(RANKINGS, POSITIVES, 0)


def test_the_lenient_recall_counts_a_query_without_positives_as_a_miss():
    assert recall_at_k(RANKINGS, {1: {11}, 2: set()}, 2) == pytest.approx(1 / 2)


# ranking 1, 9, 2, 8, 3 against positives {1, 2, 3}: R = 3
HAND_RANKING = {7: [1, 9, 2, 8, 3, 4, 5, 6, 0, 11]}
HAND_POSITIVES = {7: [1, 2, 3]}


def test_r_precision_is_the_share_of_positives_in_the_top_r():
    assert r_precision(HAND_RANKING, HAND_POSITIVES) == pytest.approx(2 / 3)


def test_map_at_r_averages_precision_at_each_positive_rank_within_r():
    # (P@1 * 1 + P@2 * 0 + P@3 * 1) / R = (1 + 2/3) / 3; the positive at rank 5 is past R
    assert map_at_r(HAND_RANKING, HAND_POSITIVES) == pytest.approx((1 + 2 / 3) / 3)


def test_pmrp_caps_r_at_50():
    positives = {1: list(range(100, 160))}  # R = 60
    ranking = {1: list(range(100, 150)) + list(range(1000, 1010)) + list(range(150, 160))}
    truth = prepare(positives)
    values = retrieval_metrics(truth, ranking)
    assert values["pmrp"] == pytest.approx(1.0)  # top 50 all positive
    assert values["r_precision"] == pytest.approx(50 / 60)


def test_ndcg_with_binary_gains_discounts_by_log2_of_the_rank():
    ranking = {1: [9, 1, 2, 8, 7, 6, 5, 4, 3, 0]}
    dcg = 1 / math.log2(3) + 1 / math.log2(4)
    ideal = 1 + 1 / math.log2(3)
    assert ndcg_at_k(ranking, {1: [1, 2]}, 10) == pytest.approx(dcg / ideal)


def test_ndcg_with_graded_gains_uses_them_for_positives_and_other_judged_pairs():
    # 1 gains 0.5, 2 is a positive without a gain (1.0), 7 is no positive but gains 0.25
    ranking = {1: [7, 1, 2, 8, 9, 10, 11, 12, 13, 14]}
    gains = {1: {1: 0.5, 7: 0.25}}
    dcg = 0.25 + 0.5 / math.log2(3) + 1.0 / math.log2(4)
    ideal = 1.0 + 0.5 / math.log2(3) + 0.25 / math.log2(4)
    assert ndcg_at_k(ranking, {1: [1, 2]}, 10, gains) == pytest.approx(dcg / ideal)


def test_ndcg_leaves_out_queries_whose_gains_are_all_zero():
    rankings = {1: [1, *range(20, 29)], 2: [2, *range(30, 39)]}
    # query 2's only positive was judged irrelevant: no ideal gain, no nDCG
    value = ndcg_at_k(rankings, {1: [1], 2: [2]}, 10, gains={2: {2: 0.0}})
    assert value == pytest.approx(1.0)


def test_queries_without_positives_are_left_out_of_every_metric():
    truth = prepare({1: [1], 2: []})
    assert truth.queries == [1]
    values = retrieval_metrics(truth, {1: list(range(1, 11))})  # 2 needs no ranking
    assert values["recall@1"] == values["map_at_r"] == 1.0


def test_a_ranking_shorter_than_r_is_an_error_that_names_the_query():
    with pytest.raises(MetricError, match=r"query 7 ranks 2 targets; R-Precision and mAP@R"):
        r_precision({7: [1, 2]}, HAND_POSITIVES)


def test_recall_needs_k_targets_unless_a_positive_is_among_fewer():
    truth = prepare({1: [5]})
    only_recall = {"ks": (10,), "ndcg_ks": (), "r_based": False}
    assert retrieval_metrics(truth, {1: [4, 5]}, **only_recall)["recall@10"] == 1.0
    with pytest.raises(MetricError, match=r"query 1 ranks 2 targets and no positive; recall@10"):
        retrieval_metrics(truth, {1: [3, 4]}, **only_recall)


def test_ndcg_needs_k_targets():
    with pytest.raises(MetricError, match="ndcg@10"):
        ndcg_at_k({1: [1, 2, 3]}, {1: [1]}, 10)


def test_a_positive_ranked_twice_is_an_error():
    with pytest.raises(MetricError, match="query 7 lists positive 2 twice"):
        r_precision({7: [2, 1, 2, 4, 5]}, HAND_POSITIVES)


def test_a_missing_ranking_is_an_error():
    with pytest.raises(MetricError, match=r"1 queries have no ranking \(first: 8\)"):
        map_at_r(HAND_RANKING, {**HAND_POSITIVES, 8: [1]})


def test_non_integer_ids_are_refused():
    with pytest.raises(MetricError, match="integers"):
        r_precision({7: [1, 2, "3", 4]}, HAND_POSITIVES)


def random_case(seed: int, offset: int = 0):
    rng = np.random.default_rng(seed)
    positives, rankings, gains = {}, {}, {}
    for query in range(60):
        pool = rng.permutation(400)[:80] + offset
        r = int(rng.integers(1, 30))
        positives[query] = pool[rng.permutation(80)[:r]].tolist()
        rankings[query] = pool.tolist()
        gains[query] = {int(t): float(rng.random()) for t in pool[:5]}
    return positives, rankings, gains


@pytest.mark.parametrize("graded", [False, True])
def test_large_ids_and_the_binary_search_fallbacks_give_the_same_values(monkeypatch, graded):
    positives, rankings, gains = random_case(3)
    expected = retrieval_metrics(prepare(positives, gains if graded else None), rankings)
    # ids beyond the dense table's reach are looked up by binary search
    big = 1 << 40
    shifted_gains = {q: {t + big: g for t, g in gs.items()} for q, gs in gains.items()}
    shifted = prepare(
        {q: [t + big for t in ts] for q, ts in positives.items()},
        shifted_gains if graded else None,
    )
    assert shifted.code_table is None
    values = retrieval_metrics(shifted, {q: [t + big for t in r] for q, r in rankings.items()})
    assert values == pytest.approx(expected, abs=1e-12)
    # without the bit set, positives are found in the sorted keys
    monkeypatch.setattr(metrics, "BITSET_MAX_BYTES", 0)
    no_bits = prepare(positives, gains if graded else None)
    assert no_bits.positive_bits is None
    assert retrieval_metrics(no_bits, rankings) == pytest.approx(expected, abs=1e-12)


def test_targets_no_query_cares_about_never_hit_even_at_the_table_edges():
    truth = prepare({1: [5], 2: [6]})
    ranking = [-1, 0, 4, 7, 1 << 62, 6, 8, 9, 10, 11]  # 6 is query 2's positive, not query 1's
    values = retrieval_metrics(truth, {1: ranking, 2: [6, -1, 0, 4, 7, 8, 9, 10, 11, 12]}, ks=(10,))
    assert values["recall@10"] == pytest.approx(1 / 2)


def test_coco_recalls_restrict_each_fold_to_its_own_targets():
    # two folds: captions 10, 11 of image 1, then 20, 21 of image 2
    captions, images = [10, 11, 20, 21], [1, 1, 2, 2]
    t2i = {10: [2, 1], 11: [1, 2], 20: [2, 1], 21: [1, 2]}
    i2t = {1: [20, 10, 21, 11], 2: [21, 10, 11, 20]}
    result = coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(1,), folds=2)
    assert result["t2i"]["coco_5k_recall@1"] == pytest.approx(2 / 4)
    assert result["t2i"]["coco_1k_recall@1"] == 1.0  # one image per fold: always right
    assert result["i2t"]["coco_5k_recall@1"] == pytest.approx(1 / 2)
    assert result["i2t"]["coco_1k_recall@1"] == 1.0  # image 1 sees 10, 11; image 2 sees 20, 21


def test_a_fold_that_leaves_fewer_than_k_targets_and_no_hit_is_an_error():
    captions, images = [10, 11, 20, 21], [1, 1, 2, 2]
    t2i = {10: [2, 1], 11: [1, 2], 20: [2, 1], 21: [1, 2]}
    i2t = {1: [20, 21], 2: [21, 10, 11, 20]}  # image 1 ranks no caption of its fold
    with pytest.raises(MetricError, match=r"fold 1 of 2: .*query 1 ranks 0 targets of the fold"):
        coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(2,), folds=2)


def test_coco_1k_folds_hold_whole_images_whatever_the_caption_order():
    # captions interleaved as a COCO annotations file may list them: 10, 20 of images 1, 2,
    # then 11, 21; the two folds are image 1 (10, 11) and image 2 (20, 21), not 10, 20 | 11, 21
    captions, images = [10, 20, 11, 21], [1, 2, 1, 2]
    t2i = {10: [2, 1], 11: [1, 2], 20: [2, 1], 21: [2, 1]}
    i2t = {1: [20, 10, 21, 11], 2: [11, 21, 10, 20]}
    result = coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(1,), folds=2)
    assert result["t2i"]["coco_5k_recall@1"] == pytest.approx(3 / 4)
    assert result["t2i"]["coco_1k_recall@1"] == 1.0  # one image per fold: always right
    assert result["i2t"]["coco_5k_recall@1"] == 0.0
    assert result["i2t"]["coco_1k_recall@1"] == 1.0  # image 1 sees 10, 11; image 2 sees 20, 21


def full_split(rng, n_images: int, per_image: int):
    """Return (captions, images) grouped by image and random full rankings of every item."""
    images = np.repeat(np.arange(1, n_images + 1), per_image)
    captions = np.arange(100, 100 + len(images))
    t2i, i2t = {}, {}
    for caption, image in zip(captions.tolist(), images.tolist(), strict=True):
        ranking = rng.permutation(np.arange(1, n_images + 1)).tolist()
        if rng.random() < 0.5:  # the own image in the top 3 for about half
            ranking.remove(image)
            ranking.insert(int(rng.integers(0, 3)), image)
        t2i[caption] = ranking
    for image in range(1, n_images + 1):
        ranking = rng.permutation(captions).tolist()
        if rng.random() < 0.5:
            own = int(captions[images == image][0])
            ranking.remove(own)
            ranking.insert(int(rng.integers(0, 5)), own)
        i2t[image] = ranking
    return captions, images, i2t, t2i


def test_shuffled_captions_give_the_recalls_of_their_images_grouped_in_order():
    rng = np.random.default_rng(7)
    captions, images, i2t, t2i = full_split(rng, n_images=20, per_image=5)
    order = rng.permutation(len(captions))
    shuffled_captions, shuffled_images = captions[order], images[order]
    # the same images in the same order (their first appearance), each one's captions together
    image_order = list(dict.fromkeys(shuffled_images.tolist()))
    grouped = np.concatenate([np.flatnonzero(shuffled_images == i) for i in image_order])

    shuffled = coco_recalls(i2t, t2i, caption_ids=shuffled_captions, caption_images=shuffled_images)
    in_groups = coco_recalls(
        i2t, t2i, caption_ids=shuffled_captions[grouped], caption_images=shuffled_images[grouped]
    )

    assert shuffled == in_groups
    for direction in ("i2t", "t2i"):
        assert 0 < shuffled[direction]["coco_1k_recall@1"] < 1  # the folds can tell orders apart


def test_leftover_images_join_the_first_folds_so_1k_scores_every_image():
    # 6 images in 5 folds: images 1 and 2 share fold 1, images 3 to 6 have a fold each
    captions = [10, 11, 20, 21, 30, 40, 50, 60]
    images = [1, 1, 2, 2, 3, 4, 5, 6]
    first = {c: 2 if c // 10 == 1 else c // 10 for c in captions}  # image 1's rank 2 first
    t2i = {c: [first[c]] + [i for i in range(1, 7) if i != first[c]] for c in captions}
    i2t = {i: sorted(captions, key=lambda c, i=i: c // 10 != i) for i in range(1, 7)}
    result = coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(1,))
    # fold 1: captions 10, 11 rank image 2 first (misses), 20, 21 rank image 2 first (hits)
    assert result["t2i"]["coco_1k_recall@1"] == pytest.approx((2 / 4 + 1 + 1 + 1 + 1) / 5)
    assert result["t2i"]["coco_5k_recall@1"] == pytest.approx(6 / 8)


def test_a_split_with_fewer_images_than_folds_has_no_coco_1k():
    with pytest.raises(MetricError, match=r"needs at least 5 images \(this split has 2\)"):
        coco_recalls({}, {}, caption_ids=[10, 11, 20], caption_images=[1, 1, 2])
    with pytest.raises(ValueError, match="one image per caption"):
        coco_recalls({}, {}, caption_ids=[10, 11], caption_images=[1])


def test_rankings_may_be_tuples_or_numpy_arrays():
    positives = {1: [4, 9]}
    for ranking in ([3, 4, 5], (3, 4, 5), np.array([3, 4, 5])):
        assert recall_at_k({1: ranking}, positives, 2) == 1.0
        assert precision_at_k({1: ranking}, positives, 3) == pytest.approx(1 / 3)
