"""Graded retrieval metrics: hand-worked nDCG, NCS, semantic recall and Recall@K limits,
nDCG against ir_measures, and the rank ordering under a caption proxy."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mitl.graded_metrics import (
    ncs,
    ndcg,
    query_mean,
    recall_limits,
    semantic_recall,
)
from mitl.relevance.images import CaptionCorpus, image_to_captions
from mitl.relevance.proxies import proxy_build


def _rows(*rows: list[float]) -> np.ndarray:
    return np.array(rows, dtype=np.float64)


def _ranks(*rows: list[int]) -> np.ndarray:
    return np.array(rows, dtype=np.int64)


def _plain_recall(ranked: np.ndarray, truth: np.ndarray, k: int) -> np.ndarray:
    """Return 1/0 per query: a ground-truth item is among the first k (the hit rate)."""
    return np.array(
        [float(any(c >= 0 and t[c] for c in row[:k])) for row, t in zip(ranked, truth, strict=True)]
    )


# --- nDCG ----------------------------------------------------------------------------------


def test_ndcg_at_k_with_linear_gains_by_hand() -> None:
    relevance = _rows([0.2, 1.0, 0.0, 0.5, 0.8])
    ranked = _ranks([3, 0, 1, 4, 2])
    # ranked top 3: 0.5, 0.2, 1.0; the ideal top 3: 1.0, 0.8, 0.5
    dcg = 0.5 / math.log2(2) + 0.2 / math.log2(3) + 1.0 / math.log2(4)
    ideal = 1.0 / math.log2(2) + 0.8 / math.log2(3) + 0.5 / math.log2(4)
    assert ndcg(relevance, ranked, 3) == pytest.approx([dcg / ideal])
    # k=1: 0.5 against 1.0
    assert ndcg(relevance, ranked, 1) == pytest.approx([0.5])
    # the relevance order itself is perfect
    assert ndcg(relevance, _ranks([1, 4, 3, 0, 2]), 3) == pytest.approx([1.0])


def test_ndcg_with_exponential_gains_over_the_whole_ranking() -> None:
    relevance = _rows([1.0, 0.0, 0.5])
    ranked = _ranks([2, 1, 0])
    # gains 2^rel - 1: item 2 -> sqrt(2) - 1, item 1 -> 0, item 0 -> 1
    dcg = (math.sqrt(2) - 1) / math.log2(2) + 0.0 / math.log2(3) + 1.0 / math.log2(4)
    ideal = 1.0 / math.log2(2) + (math.sqrt(2) - 1) / math.log2(3) + 0.0
    assert ndcg(relevance, ranked, gain="exponential") == pytest.approx([dcg / ideal])
    # linear gains give a different value on the same ranking
    linear = (0.5 + 1.0 / math.log2(4)) / (1.0 + 0.5 / math.log2(3))
    assert ndcg(relevance, ranked) == pytest.approx([linear])
    with pytest.raises(ValueError, match="gain"):
        ndcg(relevance, ranked, gain="quadratic")


def test_padding_and_unranked_items_gain_nothing() -> None:
    relevance = _rows([0.0, 1.0, 0.5, 0.25])
    ranked = _ranks([2, -1, -1, -1])  # only item 2 ranked; items 1 and 3 unranked
    ideal = 1.0 + 0.5 / math.log2(3) + 0.25 / math.log2(4)
    assert ndcg(relevance, ranked, 3) == pytest.approx([0.5 / ideal])
    # a ranking narrower than k is the same as one padded with -1
    assert ndcg(relevance, _ranks([2]), 3) == pytest.approx([0.5 / ideal])


def test_a_query_without_relevance_is_nan_and_left_out_of_the_mean() -> None:
    relevance = _rows([0.0, 1.0, 0.0], [0.0, 0.0, 0.0])
    ranked = _ranks([1, 0, 2], [1, 0, 2])
    values = ndcg(relevance, ranked, 2)
    assert values[0] == pytest.approx(1.0)
    assert math.isnan(values[1])
    assert query_mean(values) == pytest.approx(1.0)
    assert query_mean(np.array([np.nan])) is None


def test_ndcg_matches_ir_measures() -> None:
    # ir_measures' nDCG (through pytrec_eval) uses linear gains rel and the discount
    # 1 / log2(rank + 1), with the ideal ranking built from all the query's qrels: the same
    # as ours with gain="linear" when the relevance matrix holds the grades themselves.
    import ir_measures

    rng = np.random.default_rng(42)
    n_queries, n_docs, k = 4, 9, 5
    grades = rng.integers(0, 4, size=(n_queries, n_docs))
    grades[:, 0] = np.maximum(grades[:, 0], 1)  # every query has a relevant document
    ranked = np.stack([rng.permutation(n_docs) for _ in range(n_queries)])
    qrels = [
        ir_measures.Qrel(f"q{q}", f"d{d}", int(grades[q, d]))
        for q in range(n_queries)
        for d in range(n_docs)
    ]
    # distinct scores, falling with the rank, so that no tie-breaking rule comes into play
    run = [
        ir_measures.ScoredDoc(f"q{q}", f"d{d}", float(n_docs - position))
        for q in range(n_queries)
        for position, d in enumerate(ranked[q])
    ]
    ours = ndcg(grades.astype(np.float64), ranked, k)
    theirs = {
        m.query_id: m.value for m in ir_measures.iter_calc([ir_measures.nDCG @ k], qrels, run)
    }
    assert ours == pytest.approx([theirs[f"q{q}"] for q in range(n_queries)], abs=1e-9)
    aggregate = ir_measures.calc_aggregate([ir_measures.nDCG @ k], qrels, run)
    assert query_mean(ours) == pytest.approx(aggregate[ir_measures.nDCG @ k], abs=1e-9)


def test_a_near_duplicate_first_scores_higher_than_an_unrelated_caption_first() -> None:
    # relevance of every caption to image A from the bow proxy (mean over A's captions)
    texts = [
        "a man riding a horse on the beach",  # image A
        "a brown horse standing on the sand",  # image A
        "a man riding a brown horse on the beach",  # image B: a near-duplicate of A's
        "a dog catching a frisbee in a park",  # image B
        "a plate of pasta on a wooden table",  # image C: unrelated
        "a bowl of soup next to some bread",  # image C
    ]
    corpus = CaptionCorpus.of(range(6), [1, 1, 2, 2, 3, 3], texts)
    proxy = proxy_build("bow", texts)
    relevance = image_to_captions(proxy, corpus, np.array([0]))
    assert relevance[0, 2] > relevance[0, 4]
    near_first = _ranks([2, 4, 3, 5, 0, 1])
    unrelated_first = _ranks([4, 2, 3, 5, 0, 1])
    for k in (1, 3, None):
        assert ndcg(relevance, near_first, k)[0] > ndcg(relevance, unrelated_first, k)[0]


# --- NCS (Biten et al., eq. 5) -------------------------------------------------------------


def test_ncs_by_hand() -> None:
    relevance = _rows([0.9, 0.1, 0.6, 0.3, 0.0])
    ranked = _ranks([2, 3, 0, 1, 4])
    # m = k = 2: G = {0 (0.9), 2 (0.6)}; the top 2 {2, 3} holds item 2 -> 0.6 / 1.5
    assert ncs(relevance, ranked, 2) == pytest.approx([0.6 / 1.5])
    # m = 3: G = {0, 2, 3 (0.3)}; the top 2 holds 2 and 3 -> 0.9 / 1.8
    assert ncs(relevance, ranked, 2, m=3) == pytest.approx([0.9 / 1.8])
    # k = 3 with m = k: G = {0, 2, 3}, all in the top 3 -> 1
    assert ncs(relevance, ranked, 3) == pytest.approx([1.0])
    # m = 1: G = {0}, not in the top 2 -> 0
    assert ncs(relevance, ranked, 2, m=1) == pytest.approx([0.0])


def test_ncs_ties_go_to_the_lower_column_and_nothing_relevant_is_nan() -> None:
    relevance = _rows([0.5, 0.5, 0.2], [0.0, 0.0, 0.0])
    ranked = _ranks([1, 0, 2], [0, 1, 2])
    values = ncs(relevance, ranked, 1)
    assert values[0] == pytest.approx(0.0)  # G = {0} (the tie's lower column), ranked 2nd
    assert math.isnan(values[1])
    assert ncs(relevance, _ranks([-1, -1, -1], [0, 1, 2]), 2)[0] == pytest.approx(0.0)


# --- semantic recall -----------------------------------------------------------------------


def test_semantic_recall_is_a_hit_rate_at_a_threshold() -> None:
    relevance = _rows([0.2, 0.9, 0.5], [0.1, 0.2, 0.3], [0.8, 0.0, 0.85])
    ranked = _ranks([0, 1, 2], [0, 1, 2], [2, 0, 1])
    at_1 = semantic_recall(relevance, ranked, 1, threshold=0.8)
    assert at_1[0] == 0.0  # item 1 (0.9) is second
    assert math.isnan(at_1[1])  # nothing reaches 0.8
    assert at_1[2] == 1.0  # item 2 (0.85) is first
    assert semantic_recall(relevance, ranked, 2, threshold=0.8)[0] == 1.0
    # the threshold is inclusive: 0.8 counts
    assert semantic_recall(relevance, _ranks([0], [0], [0]), 1, threshold=0.8)[2] == 1.0
    assert query_mean(at_1) == pytest.approx(0.5)


# --- Recall@K limits (Wray et al., section 5) ----------------------------------------------


def test_recall_limits_bracket_recall_with_near_duplicates() -> None:
    threshold = 0.8
    relevance = _rows(
        [1.0, 0.9, 0.85, 0.1, 0.2, 0.0],  # truth {0}, near-duplicates 1 and 2
        [1.0, 1.0, 0.95, 0.1, 0.2, 0.0],  # truth {0, 1}, near-duplicate 2
    )
    truth = np.zeros(relevance.shape, dtype=bool)
    truth[0, 0] = truth[1, 0] = truth[1, 1] = True
    ranked = _ranks([3, 1, 4, 0, 2, 5], [2, 5, 0, 3, 1, 4])
    # query 0: near-duplicates ranked 1 (item 1), 3 (item 0, the truth), 4 (item 2);
    #   upper: the best (rank 1); lower: the (3 - 1 + 1)-th, rank 4; plain: rank 3
    # query 1: near-duplicates ranked 0 (item 2), 2 (item 0), 4 (item 1);
    #   upper: rank 0; lower: the (3 - 2 + 1)-th, rank 2; plain: the best truth, rank 2
    expected = {  # k: (lower, plain, upper) per query
        1: ([0, 0, 0], [0, 1]),
        2: ([0, 0, 1], [0, 1]),
        3: ([0, 0, 1], [1, 1]),
        4: ([0, 1, 1], [1, 1]),
        5: ([1, 1, 1], [1, 1]),
    }
    for k in range(1, 7):
        lower, upper = recall_limits(relevance, ranked, truth, k, threshold=threshold)
        plain = _plain_recall(ranked, truth, k)
        assert np.all(lower <= plain) and np.all(plain <= upper)
        if k in expected:
            (low0, plain0, up0), (low1, up1) = expected[k]
            assert (lower[0], plain[0], upper[0]) == (low0, plain0, up0)
            assert (lower[1], upper[1]) == (low1, up1)


def test_recall_limits_equal_recall_without_near_duplicates() -> None:
    rng = np.random.default_rng(7)
    n_queries, n_items = 6, 10
    relevance = rng.uniform(0.0, 0.7, size=(n_queries, n_items))  # all below the threshold
    truth = np.zeros(relevance.shape, dtype=bool)
    for q in range(n_queries):
        truth[q, rng.choice(n_items, size=1 + q % 3, replace=False)] = True
    relevance[truth] = 1.0
    ranked = np.stack([rng.permutation(n_items) for _ in range(n_queries)])
    ranked[:, 7:] = -1  # the last three unranked
    for k in (1, 3, 5, 10):
        lower, upper = recall_limits(relevance, ranked, truth, k, threshold=0.8)
        plain = _plain_recall(ranked, truth, k)
        assert lower.tolist() == plain.tolist()
        assert upper.tolist() == plain.tolist()


def test_recall_limits_are_nan_without_ground_truth() -> None:
    relevance = _rows([0.9, 0.1])
    truth = np.zeros((1, 2), dtype=bool)
    lower, upper = recall_limits(relevance, _ranks([0, 1]), truth, 1, threshold=0.8)
    assert math.isnan(lower[0]) and math.isnan(upper[0])
