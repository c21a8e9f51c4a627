"""Model bias (ECCV Caption, Appendix E), on hand-made inputs.

Table E.1a of the paper could not be found in the stored copies reachable here (only the
paper's first page is indexed), so its numbers are not typed in; the formulas are checked on
examples worked out by hand below instead.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from mitl import bias
from mitl.bias import (
    bias_rows,
    direction_bias,
    json_safe,
    mean_by_size,
    model_bias,
    release_positives,
    subset_masks,
    subset_names,
    subset_recall,
    topk_hits,
)
from mitl.metrics import recall_at_k

A, B, C = 1, 2, 4  # proposer bits of annotators A, B, C
NAMES = ["A", "B", "C"]

# Four queries, one original positive each, and the verified positives with their proposers.
ORIGINAL = {1: {10}, 2: {20}, 3: {30}, 4: {40}}
VERIFIED = {1: {11: A}, 2: {21: B | C}, 3: {31: C}}
RANKINGS = [
    {1: [11, 10], 2: [20, 21], 3: [31, 30], 4: [99, 40]},  # A
    {1: [10, 11], 2: [21, 20], 3: [99, 31], 4: [40, 99]},  # B
    {1: [11, 99], 2: [99, 21], 3: [31, 99], 4: [99, 98]},  # C
]
# R@1 (%) per subset (rows, in subset_masks order) and annotator (columns), by hand.
EXPECTED_R1 = {
    ("A",): [50, 50, 25],
    ("B",): [25, 75, 0],
    ("C",): [50, 75, 25],
    ("A", "B"): [50, 75, 25],
    ("A", "C"): [75, 75, 50],
    ("B", "C"): [50, 75, 25],
    ("A", "B", "C"): [75, 75, 50],
}


def test_subsets_come_by_size_then_members_and_end_with_all():
    masks = subset_masks(3)
    assert [subset_names(int(m), NAMES) for m in masks] == [list(s) for s in EXPECTED_R1]
    assert masks[-1] == 0b111
    assert len(subset_masks(bias.MAX_ANNOTATORS)) == 2**bias.MAX_ANNOTATORS - 1


@pytest.mark.parametrize("n", [0, bias.MAX_ANNOTATORS + 1])
def test_subsets_refuse_no_annotator_or_too_many(n):
    with pytest.raises(ValueError, match=f"1 to {bias.MAX_ANNOTATORS}"):
        subset_masks(n)


def test_recall_of_each_annotator_on_each_subsets_release_matches_the_hand_computed_table():
    hits = topk_hits(RANKINGS, [1, 2, 3, 4], original=ORIGINAL, verified=VERIFIED)
    recall = subset_recall(hits, subset_masks(3))
    np.testing.assert_allclose(recall, np.array(list(EXPECTED_R1.values()), dtype=float))


@pytest.mark.parametrize("k", [1, 3])
def test_fast_subset_recall_equals_recall_at_k_on_each_release(k):
    rng = np.random.default_rng(3)
    n, queries, targets = 4, list(range(60)), 30
    original = {q: set(rng.choice(targets, 1).tolist()) for q in queries}
    verified = {
        q: {int(t): int(rng.integers(1, 2**n)) for t in rng.choice(targets, 3, replace=False)}
        for q in queries
        if q % 5
    }
    rankings = [{q: rng.permutation(targets)[:10].tolist() for q in queries} for _ in range(n)]
    hits = topk_hits(rankings, queries, original=original, verified=verified, k=k)
    masks = subset_masks(n)
    recall = subset_recall(hits, masks)
    for s, mask in enumerate(masks):
        positives = release_positives(original=original, verified=verified, subset=int(mask))
        for a in range(n):
            expected = 100 * recall_at_k(rankings[a], {q: positives[q] for q in queries}, k)
            assert recall[s, a] == pytest.approx(expected)


def test_subset_recall_reports_progress_per_block_and_gives_the_same_numbers(monkeypatch):
    hits = topk_hits(RANKINGS, [1, 2, 3, 4], original=ORIGINAL, verified=VERIFIED)
    whole = subset_recall(hits, subset_masks(3))
    monkeypatch.setattr(bias, "SUBSET_CHUNK", 3)
    calls = []
    blocks = subset_recall(hits, subset_masks(3), progress=lambda d, t: calls.append((d, t)))
    assert calls == [(3, 7), (6, 7), (7, 7)]
    np.testing.assert_array_equal(blocks, whole)


def test_a_query_without_a_ranking_is_an_error_not_a_miss():
    with pytest.raises(ValueError, match="no ranking of query 5"):
        topk_hits(RANKINGS, [1, 5], original=ORIGINAL, verified=VERIFIED)


def test_no_queries_gives_nan_scores():
    hits = topk_hits(RANKINGS, [], original=ORIGINAL, verified=VERIFIED)
    assert np.isnan(subset_recall(hits, subset_masks(3))).all()


def test_model_bias_self_and_non_self_bias_of_one_subset():
    # s_All = 50, 40, 30; on Θ = {first}'s release 52, 35, 27: gaps 2, 5, 3.
    split = model_bias([52, 35, 27], [50, 40, 30], [True, False, False])
    assert split.bias == pytest.approx(10 / 3)
    assert split.self_bias == pytest.approx(2)
    assert split.non_self_bias == pytest.approx(4)


def test_model_bias_is_the_size_weighted_mean_of_self_and_non_self_bias():
    # The paper's summary for Θ = {PVSE} among five models: self-bias 0.1, non-self-bias
    # 11.8, B 9.5 = (1 × 0.1 + 4 × 11.8) / 5. Only the means enter B, so gaps with those
    # means reproduce it.
    split = model_bias([60.1, 41.8, 21.8, 58.2, 48.2], [60, 30, 10, 70, 60], [1, 0, 0, 0, 0])
    assert (split.self_bias, split.non_self_bias) == pytest.approx((0.1, 11.8))
    assert split.bias == pytest.approx(9.46)
    assert round(split.bias, 1) == 9.5


def test_all_has_no_non_self_bias_and_no_bias_against_itself():
    split = model_bias([75, 75, 50], [75, 75, 50], [True, True, True])
    assert (split.bias, split.self_bias) == (0, 0)
    assert math.isnan(split.non_self_bias)


def test_bias_rows_refuse_shapes_that_do_not_match():
    with pytest.raises(ValueError, match="do not describe the same"):
        bias_rows(np.zeros((2, 3)), np.zeros(2), np.zeros((2, 3), dtype=bool))


def test_direction_bias_splits_and_averages_the_bias_per_subset_size():
    report = direction_bias(
        RANKINGS,
        [1, 2, 3, 4],
        annotators=NAMES,
        original=ORIGINAL,
        verified=VERIFIED,
        precision_k=2,
    )
    subsets = {tuple(s["members"]): s for s in report["subsets"]}
    assert {m: list(s["recall_at_1"].values()) for m, s in subsets.items()} == EXPECTED_R1
    expected = {  # (B, self, non-self) from the table above, by hand
        ("A",): (25, 25, 25),
        ("B",): (100 / 3, 0, 50),
        ("C",): (50 / 3, 25, 12.5),
        ("A", "B"): (50 / 3, 12.5, 25),
        ("A", "C"): (0, 0, 0),
        ("B", "C"): (50 / 3, 12.5, 25),
    }
    for members, (b, own, others) in expected.items():
        got = subsets[members]
        assert (got["bias"], got["self_bias"], got["non_self_bias"]) == pytest.approx(
            (b, own, others)
        )
    assert math.isnan(subsets[("A", "B", "C")]["non_self_bias"])
    by_size = {row["size"]: row for row in report["by_size"]}
    assert by_size[1]["subsets"] == 3 and by_size[3]["subsets"] == 1
    assert (by_size[1]["bias"], by_size[1]["self_bias"], by_size[1]["non_self_bias"]) == (
        pytest.approx((25, 50 / 3, 87.5 / 3))
    )
    assert (by_size[2]["bias"], by_size[2]["self_bias"], by_size[2]["non_self_bias"]) == (
        pytest.approx((100 / 9, 25 / 3, 50 / 3))
    )
    assert by_size[3]["bias"] == 0 and math.isnan(by_size[3]["non_self_bias"])
    # The anchors come from mitl.metrics: original positives only, and the full release.
    assert report["recall_at_1_original"] == {"A": 25, "B": 50, "C": 0}
    assert report["recall_at_1_release"] == {"A": 75, "B": 75, "C": 50}
    # Precision@2 on the full release: A's top 2 hold 2, 2, 2, 1 positives of 2.
    assert report["precision_at_k"]["A"] == pytest.approx(100 * 7 / 8)
    assert report["queries"] == 4


def test_mean_by_size_leaves_out_undefined_values():
    assert mean_by_size(np.array([1, 1, 2]), np.array([1.0, 3.0, np.nan]))[1] == 2
    assert math.isnan(mean_by_size(np.array([1, 1, 2]), np.array([1.0, 3.0, np.nan]))[2])


def test_json_safe_turns_nan_into_none_everywhere():
    value = json_safe({"a": [1.0, math.nan, {"b": math.inf}], 2: (3, "x")})
    assert value == {"a": [1.0, None, {"b": None}], "2": [3, "x"]}
