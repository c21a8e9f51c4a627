"""Retrieval metrics over id rankings and positive sets, vectorised with numpy. Pure Python.

A ranking is a query's targets, best first; positives are each query's set of positive
targets (R = their number). The definitions follow ECCV Caption (Chun et al., 2022) and its
`eccv-caption` package, whose values these equal to 1e-9 (tests/mitl/test_metrics_conformance.py):

- Recall@K: 1 when any positive is among the first K targets, else 0 (a hit rate, as COCO
  reports it), averaged over queries.
- R-Precision: the share of positives among the first R targets.
- mAP@R (Musgrave et al., 2020): (1/R) * sum over i <= R of P@i * [target i is positive].
- PMRP-style R-Precision (`pmrp`): R-Precision with R capped at min(R, 50), in the style of
  the plausible-match R-Precision of PCME / ECCV Caption, so that queries with very many
  positives ask for at most the first 50 targets.
- nDCG@K: sum over i <= K of g_i / log2(i + 1), divided by the same sum over the query's
  gains sorted best first (the ideal ranking). Gains default to 1 per positive; graded
  gains (e.g. the crowd's score) may also give a non-positive pair a gain.
- COCO 5K / 1K Recall@K over a whole split: `mitl.coco_recalls`.

No wrong numbers: a value that the given rankings cannot determine is a `MetricError` that
names the query, never a silent 0. A query without a ranking is an error; a ranking must
hold R targets for R-Precision and mAP@R (min(R, 50) for PMRP) and K for nDCG@K; Recall@K
needs K targets or a positive among fewer. A positive ranked twice is an error too (it
would count twice). Queries without any positive have no R-Precision or mAP@R: `prepare`
leaves them out of every metric; nDCG@K also leaves out queries whose gains are all 0.

`recall_at_k` and `precision_at_k` are the older dict-in, float-out helpers, kept with their
lenient reading (a query without positives, or a short list without a hit, is a miss) for
annotator checks and bias reports, which rank every target they need.

The positives are prepared once per direction by `mitl.metric_truth.prepare`; every metric
then reads the hits that `mitl.metric_hits` finds in the rankings.
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np

from mitl.metric_hits import RankedHits, check_ks, query_mean, ranked_hits, refuse_short
from mitl.metric_truth import Gains, Positives, Rankings, Truth, prepare

DEFAULT_KS: tuple[int, ...] = (1, 5, 10)
NDCG_KS: tuple[int, ...] = (10,)
PMRP_CAP = 50


def retrieval_metrics(
    truth: Truth,
    rankings: Rankings,
    *,
    ks: Iterable[int] = DEFAULT_KS,
    ndcg_ks: Iterable[int] = NDCG_KS,
    r_based: bool = True,
    pmrp_cap: int = PMRP_CAP,
) -> dict[str, float]:
    """Return every metric of the rankings against `truth` (NaN where no query counts).

    Keys: `recall@K` for each of `ks`, then (with `r_based`) `r_precision`, `map_at_r`,
    `pmrp`, then `ndcg@K` for each of `ndcg_ks`.
    """
    ks, ndcg_ks = check_ks(ks), check_ks(ndcg_ks)
    counts = truth.counts
    capped = np.minimum(counts, pmrp_cap)
    depth = max([*ks, *ndcg_ks, 0])
    if r_based:
        depth = np.maximum(counts, depth)
    ranked = ranked_hits(truth, rankings, depth)
    length = ranked.length
    if r_based:
        refuse_short(truth, length < counts, length, counts, "R-Precision and mAP@R")
    for k in ndcg_ks:
        refuse_short(truth, length < k, length, k, f"ndcg@{k}")
    result: dict[str, float] = {}
    for k in ks:
        found = ranked.found_within(k)
        refuse_short(truth, ~found & (length < k), length, k, f"recall@{k}", " and no positive")
        result[f"recall@{k}"] = query_mean(found)
    if r_based:
        result["r_precision"] = query_mean(ranked.hits_within(counts) / counts)
        result["map_at_r"] = query_mean(_average_precision_at_r(ranked))
        result["pmrp"] = query_mean(ranked.hits_within(capped) / capped)
    for k in ndcg_ks:
        result[f"ndcg@{k}"] = _ndcg(ranked, k)
    return result


def _average_precision_at_r(ranked: RankedHits) -> np.ndarray:
    counts = ranked.truth.counts
    rows, ranks = ranked.hit_rows, ranked.hit_ranks
    # P@i at each positive: positives up to and including it (its place among the hits of
    # its row, counted from the hits before the row), over its 1-based rank.
    before = ranked.cumulative[ranked.starts]
    found = np.arange(1, len(rows) + 1) - before[rows]
    precision = np.where(ranks < counts[rows], found / (ranks + 1), 0.0)
    return np.bincount(rows, weights=precision, minlength=len(counts)) / counts


def _ndcg(ranked: RankedHits, k: int) -> float:
    truth = ranked.truth
    n = len(truth.queries)
    discount = 1.0 / np.log2(np.arange(k) + 2.0)  # rank i (0-based) weighs 1 / log2(i + 2)
    if truth.graded:
        # Any ranked pair may gain, positive or not: look at every target in the top k.
        rows = np.repeat(np.arange(n), ranked.take)
        ranks = np.arange(len(rows)) - ranked.starts[rows]
        top = ranks < k
        weights = _gain_of(truth, ranked.keys[top]) * discount[ranks[top]]
        dcg = np.bincount(rows[top], weights=weights, minlength=n)
    else:
        top = ranked.hit_ranks < k  # binary gains: only the positives count
        weights = discount[ranked.hit_ranks[top]]
        dcg = np.bincount(ranked.hit_rows[top], weights=weights, minlength=n)
    ideal = truth.ideal_dcg.get(k)
    if ideal is None:
        best = truth.ideal_ranks < k
        ideal = truth.ideal_dcg[k] = np.bincount(
            truth.ideal_rows[best],
            weights=truth.ideal_gains[best] * discount[truth.ideal_ranks[best]],
            minlength=n,
        )
    counted = ideal > 0
    return query_mean(dcg[counted] / ideal[counted])


def _gain_of(truth: Truth, keys: np.ndarray) -> np.ndarray:
    if not len(truth.gain_keys):
        return np.zeros(len(keys))
    at = np.minimum(np.searchsorted(truth.gain_keys, keys), len(truth.gain_keys) - 1)
    return np.where(truth.gain_keys[at] == keys, truth.gain_values[at], 0.0)


def r_precision(rankings: Rankings, positives: Positives) -> float:
    """Return the mean R-Precision over the queries with positives."""
    return retrieval_metrics(prepare(positives), rankings, ks=(), ndcg_ks=())["r_precision"]


def map_at_r(rankings: Rankings, positives: Positives) -> float:
    """Return the mean mAP@R over the queries with positives."""
    return retrieval_metrics(prepare(positives), rankings, ks=(), ndcg_ks=())["map_at_r"]


def ndcg_at_k(
    rankings: Rankings, positives: Positives, k: int, gains: Gains | None = None
) -> float:
    """Return the mean nDCG@k over the queries with positives (binary gains by default)."""
    truth = prepare(positives, gains)
    metrics = retrieval_metrics(truth, rankings, ks=(), ndcg_ks=(k,), r_based=False)
    return metrics[f"ndcg@{k}"]


def recall_at_k(rankings: Rankings, positives: Positives, k: int) -> float:
    """Return the share of queries with at least one positive in their top `k`.

    Every query of `positives` counts: one without positives, or a short ranking without a
    positive, is a miss.
    """
    return _lenient(rankings, positives, k, precision=False)


def precision_at_k(rankings: Rankings, positives: Positives, k: int) -> float:
    """Return the mean share of positives among each query's top `k` (short lists count k)."""
    return _lenient(rankings, positives, k, precision=True)


def _lenient(rankings: Rankings, positives: Positives, k: int, *, precision: bool) -> float:
    check_ks([k])
    missing = [q for q in positives if q not in rankings]
    if missing:
        raise ValueError(f"{len(missing)} queries have no ranking (first: {missing[0]})")
    if not positives:
        return math.nan
    truth = prepare(positives)
    ranked = ranked_hits(truth, rankings, k)
    if precision:
        found = ranked.hits_within(np.minimum(ranked.length, k)).sum() / k
    else:
        found = np.count_nonzero(ranked.found_within(k))
    return float(found / len(positives))
