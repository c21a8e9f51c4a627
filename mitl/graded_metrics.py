"""Retrieval metrics over graded relevance: a dense (queries × corpus) matrix of relevance in
[0, 1] from any source (a caption proxy, `mitl.relevance`, or the crowd's graded verdicts).
Pure numpy.

A ranking is a row of corpus column indexes, best first, padded with -1; items it does
not rank count as ranked below every ranked one (they gain nothing). Each function returns
one value per query, NaN where the metric is undefined for that query (no relevant item);
`query_mean` averages the defined ones.

- nDCG@K (Messina et al., 2021): sum over ranks i <= K of rel_i / log2(i + 1), over the
  same sum for the corpus sorted by relevance (the ideal). `k=None` scores the whole
  ranking against the whole corpus and, with `gain="exponential"`, uses 2^rel - 1 as Wray
  et al. (2021, eq. 2) do; their model score averages the two directions (eq. 3).
- NCS@K (Biten et al., 2022, eq. 5): G̃ = the m items of highest relevance (m = K unless
  given; ties by column order); NCS@K = sum of rel over G̃ ∩ top K / sum of rel over G̃.
  With m = K a perfect ranking scores 1.
- Semantic recall@K at threshold T: 1 when an item of relevance >= T is among the first K,
  as Recall@K is a hit rate here; a query without such an item is undefined.
- Recall@K limits (Wray et al., 2021, section 5): near-duplicates of a query are its ground
  truth plus every item of relevance >= T (they used 0.8 on the synset proxy). Relabelling
  the ground truth as the best-ranked near-duplicates gives the upper limit (a hit when any
  near-duplicate is in the top K); relabelling it as the worst-ranked ones gives the lower
  limit (a hit when the (n - g + 1)-th ranked of the n near-duplicates is in the top K, g
  the number of ground-truth items). Without near-duplicates both equal Recall@K.
"""

from __future__ import annotations

import numpy as np

GAINS: tuple[str, ...] = ("linear", "exponential")


def _gain(values: np.ndarray, gain: str) -> np.ndarray:
    if gain not in GAINS:
        raise ValueError(f"gain must be one of {', '.join(GAINS)}, got {gain!r}")
    values = values.astype(np.float64)
    return np.exp2(values) - 1.0 if gain == "exponential" else values


def _ranked_relevance(relevance: np.ndarray, ranked: np.ndarray, depth: int) -> np.ndarray:
    """Return the relevance of each query's first `depth` ranked items (0 for padding)."""
    top = ranked[:, :depth]
    rows = np.arange(len(ranked))[:, None]
    values = relevance[rows, np.maximum(top, 0)]
    return np.where(top >= 0, values, 0.0)


def _discount(depth: int) -> np.ndarray:
    return 1.0 / np.log2(np.arange(depth) + 2.0)


def ndcg(
    relevance: np.ndarray, ranked: np.ndarray, k: int | None = None, *, gain: str = "linear"
) -> np.ndarray:
    """Return nDCG@k per query (k=None: the whole corpus); NaN where nothing is relevant."""
    depth = relevance.shape[1] if k is None else min(k, relevance.shape[1])
    gains = _gain(_ranked_relevance(relevance, ranked, depth), gain)
    dcg = gains @ _discount(gains.shape[1])
    if depth < relevance.shape[1]:
        best = -np.partition(-relevance, depth - 1, axis=1)[:, :depth]
    else:
        best = relevance
    ideal_gains = -np.sort(-_gain(best, gain), axis=1)
    ideal = ideal_gains @ _discount(depth)
    return np.divide(dcg, ideal, out=np.full(len(dcg), np.nan), where=ideal > 0)


def _best_mask(relevance: np.ndarray, m: int) -> np.ndarray:
    """Mark each row's m columns of highest relevance (ties: lower column first).

    A partition finds the m-th highest value; every column above it is in, and columns equal
    to it fill the rest in column order. No full sort of the corpus.
    """
    m = min(m, relevance.shape[1])
    kth = -np.partition(-relevance, m - 1, axis=1)[:, m - 1 : m]
    above = relevance > kth
    level = relevance == kth
    room = m - above.sum(axis=1, keepdims=True)
    return above | (level & (np.cumsum(level, axis=1, dtype=np.int32) <= room))


def ncs(relevance: np.ndarray, ranked: np.ndarray, k: int, *, m: int | None = None) -> np.ndarray:
    """Return NCS@k per query with G̃ the top `m` (default k) items; NaN where G̃ gains 0."""
    best = _best_mask(relevance, m or k)
    retrieved = np.zeros(relevance.shape, dtype=bool)
    top = ranked[:, :k]
    retrieved[np.nonzero(top >= 0)[0], top[top >= 0]] = True
    found = np.where(best & retrieved, relevance, 0).sum(axis=1, dtype=np.float64)
    total = np.where(best, relevance, 0).sum(axis=1, dtype=np.float64)
    return np.divide(found, total, out=np.full(len(total), np.nan), where=total > 0)


def semantic_recall(
    relevance: np.ndarray, ranked: np.ndarray, k: int, *, threshold: float
) -> np.ndarray:
    """Return 1/0 per query: an item of relevance >= threshold is in the top k (NaN: none)."""
    hit = (_ranked_relevance(relevance, ranked, k) >= threshold).any(axis=1)
    exists = (relevance >= threshold).any(axis=1)
    return np.where(exists, hit.astype(np.float64), np.nan)


def recall_limits(
    relevance: np.ndarray,
    ranked: np.ndarray,
    truth: np.ndarray,
    k: int,
    *,
    threshold: float,
) -> tuple[np.ndarray, np.ndarray]:
    """Return (lower, upper) Recall@k per query; `truth` marks each query's ground truth."""
    n_queries, n_items = relevance.shape
    unranked = ranked.shape[1] + n_items  # below every ranked item
    rank = np.full((n_queries, n_items), unranked, dtype=np.int64)
    rows, cols = np.nonzero(ranked >= 0)
    rank[rows, ranked[rows, cols]] = cols
    near = truth | (relevance >= threshold)
    near_ranks = np.sort(np.where(near, rank, np.iinfo(np.int64).max), axis=1)
    n_near = near.sum(axis=1)
    n_truth = truth.sum(axis=1)
    defined = n_truth > 0
    best = near_ranks[:, 0]
    worst_at = np.clip(n_near - n_truth, 0, n_items - 1)
    worst = near_ranks[np.arange(n_queries), worst_at]
    upper = np.where(defined, (best < k).astype(np.float64), np.nan)
    lower = np.where(defined, (worst < k).astype(np.float64), np.nan)
    return lower, upper


def query_mean(values: np.ndarray) -> float | None:
    """Return the mean of the defined (non-NaN) values, None when there are none."""
    defined = values[~np.isnan(values)]
    return float(defined.mean()) if len(defined) else None
