"""Model bias of a curated benchmark: how much a release favours the models that built it.

ECCV Caption (Chun et al., 2022) builds its positives from the candidates of a few retrieval
models, so a model whose candidates were judged can look better on the result than one whose
were not. Its Appendix E measures that bias; this module computes it from plain ids, the way
the platform stores a batch (how the crowd answered each annotator: `mitl.crowd_answers`).

Releases built from a subset
    Θ is a non-empty subset of the batch's annotators. The release "built from Θ" holds the
    original positives plus the human-verified positives among the candidates that at least
    one annotator of Θ proposed (for any query, in either direction: positives are pairs, so
    a pair verified from a caption query also counts for the image query, as in a release).
    s_Θ(φ) is annotator φ's R@1 (%) on the batch's queries against those positives; Θ = All
    gives the batch's real release.

Bias (Table E.1, Fig. E.2)
    model bias    B_Θ = mean over every annotator φ of |s_Θ(φ) − s_All(φ)|
    self-bias         = the same mean over φ ∈ Θ
    non-self-bias     = the same mean over φ ∉ Θ (undefined, NaN, for Θ = All)
    Each is then averaged over all subsets of each size. Here the rankings scored are the
    ones that proposed the candidates, so an annotator's top 1 is always among its own
    candidates: self-bias at R@1 is 0 by construction, and B_Θ = (n − |Θ|) / n times the
    non-self-bias. (The paper's self-bias of 0.1 for PVSE comes from evaluation runs that
    differ slightly from the annotation runs.)

Every non-empty subset is scored, 2^n − 1 of them, so at most `MAX_ANNOTATORS` annotators.
Pure Python and numpy: no Django import.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from mitl.metrics import precision_at_k, recall_at_k

Rankings = Mapping[int, Sequence[int]]  # query -> targets, best first
Positives = Mapping[int, Collection[int]]  # query -> positive targets
# query -> target -> bit mask of the annotators that proposed that verified positive pair
VerifiedProposers = Mapping[int, Mapping[int, int]]
Progress = Callable[[int, int], None]  # (subsets done, subsets in all)

# 2^12 − 1 = 4,095 subsets is still instant; past that the table stops being readable.
MAX_ANNOTATORS = 12
SUBSET_CHUNK = 512  # subsets scored per block (and per progress report)


# --- subsets -----------------------------------------------------------------------------


def subset_masks(n: int) -> np.ndarray:
    """Return every non-empty subset of `n` annotators as a bit mask, by size, then members.

    Bit i stands for annotator i; the last mask is All.
    """
    if not 1 <= n <= MAX_ANNOTATORS:
        raise ValueError(
            f"the bias report scores every subset of annotators, so it takes 1 to "
            f"{MAX_ANNOTATORS} of them (got {n})"
        )
    return np.array(
        [
            sum(1 << i for i in members)
            for size in range(1, n + 1)
            for members in combinations(range(n), size)
        ],
        dtype=np.int64,
    )


def mask_members(masks: np.ndarray, n: int) -> np.ndarray:
    """Return a (subsets, n) boolean matrix: row s says which annotators subset s holds."""
    return ((np.asarray(masks, dtype=np.int64)[:, None] >> np.arange(n)) & 1).astype(bool)


def subset_names(mask: int, annotators: Sequence[str]) -> list[str]:
    """Return the names of the annotators in a subset mask, in annotator order."""
    return [name for i, name in enumerate(annotators) if mask >> i & 1]


# --- R@k of every annotator against every subset's release -------------------------------


@dataclass(frozen=True)
class TopKHits:
    """What each annotator's top k holds, per query (rows: annotators, columns: queries)."""

    original: np.ndarray  # bool: an original positive
    proposers: np.ndarray  # int64: OR of the proposer masks of the verified positives


def release_positives(
    *, original: Positives, verified: VerifiedProposers, subset: int
) -> dict[int, set[int]]:
    """Return the positives of the release built from `subset`, for every query of either map."""
    queries = set(original) | set(verified)
    return {
        q: set(original.get(q, ()))
        | {t for t, proposers in verified.get(q, {}).items() if proposers & subset}
        for q in queries
    }


def topk_hits(
    rankings: Sequence[Rankings],
    queries: Sequence[int],
    *,
    original: Positives,
    verified: VerifiedProposers,
    k: int = 1,
) -> TopKHits:
    """Look at each annotator's top `k` of each query once (rankings: one map per annotator)."""
    if k < 1:
        raise ValueError(f"k must be at least 1 (got {k})")
    hit = np.zeros((len(rankings), len(queries)), dtype=bool)
    proposers = np.zeros((len(rankings), len(queries)), dtype=np.int64)
    for a, ranking in enumerate(rankings):
        for j, query in enumerate(queries):
            if query not in ranking:
                raise ValueError(f"annotator {a} has no ranking of query {query}")
            top = ranking[query][:k]
            positives = original.get(query, ())
            hit[a, j] = any(target in positives for target in top)
            found = verified.get(query, {})
            mask = 0
            for target in top:
                mask |= found.get(target, 0)
            proposers[a, j] = mask
    return TopKHits(original=hit, proposers=proposers)


def subset_recall(
    hits: TopKHits, masks: np.ndarray, *, progress: Progress | None = None
) -> np.ndarray:
    """Return R@k (%) of every annotator (columns) on every subset's release (rows).

    A query counts for subset Θ when the top k holds an original positive, or a verified
    positive that an annotator of Θ proposed: `original or proposers & Θ != 0`. Queries
    share few distinct proposer masks, so each annotator's queries are counted once per
    distinct mask and a block of subsets is scored with one matrix product, never one pass
    over the queries per subset. NaN everywhere when there are no queries.
    """
    masks = np.asarray(masks, dtype=np.int64)
    n_annotators, n_queries = hits.original.shape
    if n_queries == 0:
        return np.full((len(masks), n_annotators), np.nan)
    # A query with an original hit counts for every subset; give it no proposers.
    gains = np.where(hits.original, 0, hits.proposers).ravel()
    distinct, inverse = np.unique(gains, return_inverse=True)
    counts = np.zeros((n_annotators, len(distinct)))
    np.add.at(counts, (np.repeat(np.arange(n_annotators), n_queries), inverse), 1.0)
    base = hits.original.sum(axis=1).astype(float)
    scores = np.empty((len(masks), n_annotators))
    for start in range(0, len(masks), SUBSET_CHUNK):
        block = masks[start : start + SUBSET_CHUNK]
        reached = ((block[:, None] & distinct[None, :]) != 0).astype(float)
        scores[start : start + len(block)] = base[None, :] + reached @ counts.T
        if progress is not None:
            progress(start + len(block), len(masks))
    return 100.0 * scores / n_queries


# --- bias ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class BiasSplit:
    """B_Θ, self-bias and non-self-bias of one subset (NaN where undefined)."""

    bias: float
    self_bias: float
    non_self_bias: float


def bias_rows(
    scores: np.ndarray, reference: np.ndarray, members: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (B, self-bias, non-self-bias) per row of `scores` (subsets × models).

    `reference` holds s_All per model; `members[s, φ]` says whether φ is in subset s.
    Self-bias is NaN for an empty subset, non-self-bias for a subset holding every model.
    """
    scores = np.asarray(scores, dtype=float)
    members = np.asarray(members, dtype=bool)
    reference = np.asarray(reference, dtype=float)
    if scores.ndim != 2 or scores.shape != members.shape or reference.shape != scores.shape[1:]:
        raise ValueError(
            f"scores {scores.shape}, members {members.shape} and reference "
            f"{reference.shape} do not describe the same subsets and models"
        )
    gap = np.abs(scores - reference[None, :])
    inside = members.sum(axis=1)
    outside = members.shape[1] - inside
    with np.errstate(invalid="ignore", divide="ignore"):
        self_bias = np.where(members, gap, 0.0).sum(axis=1) / inside
        non_self = np.where(members, 0.0, gap).sum(axis=1) / outside
    return (
        gap.mean(axis=1),
        np.where(inside > 0, self_bias, np.nan),
        np.where(outside > 0, non_self, np.nan),
    )


def model_bias(
    scores: Sequence[float], reference: Sequence[float], members: Sequence[bool]
) -> BiasSplit:
    """Compare each model's score on Θ's release with its score on the full release."""
    bias, self_bias, non_self = bias_rows(
        np.asarray([scores], dtype=float),
        np.asarray(reference, dtype=float),
        np.asarray([members], dtype=bool),
    )
    return BiasSplit(float(bias[0]), float(self_bias[0]), float(non_self[0]))


def mean_by_size(sizes: np.ndarray, values: np.ndarray) -> dict[int, float]:
    """Average `values` over the subsets of each size (NaN values left out; NaN if all are)."""
    out = {}
    for size in sorted(set(int(s) for s in sizes)):
        chosen = np.asarray(values, dtype=float)[np.asarray(sizes) == size]
        chosen = chosen[~np.isnan(chosen)]
        out[size] = float(chosen.mean()) if len(chosen) else math.nan
    return out


def direction_bias(
    rankings: Sequence[Rankings],
    queries: Sequence[int],
    *,
    annotators: Sequence[str],
    original: Positives,
    verified: VerifiedProposers,
    precision_k: int,
    progress: Progress | None = None,
) -> dict[str, Any]:
    """Score one direction: R@1 per annotator and subset, B_Θ and its split, per size too.

    `rankings[i]` is annotator `annotators[i]`'s ranking of every query; `precision_k` is
    the batch's k, for each annotator's Precision@k of its own top k on the full release.
    """
    n = len(annotators)
    if len(rankings) != n:
        raise ValueError(f"{len(rankings)} rankings for {n} annotators")
    masks = subset_masks(n)
    members = mask_members(masks, n)
    queries = list(queries)
    full = release_positives(original=original, verified=verified, subset=int(masks[-1]))
    release = {q: full.get(q, set()) for q in queries}
    before = {q: set(original.get(q, ())) for q in queries}
    hits = topk_hits(rankings, queries, original=original, verified=verified, k=1)
    recall = subset_recall(hits, masks, progress=progress)
    bias, self_bias, non_self = bias_rows(recall, recall[-1], members)
    sizes = members.sum(axis=1)
    per_size = {
        "bias": mean_by_size(sizes, bias),
        "self_bias": mean_by_size(sizes, self_bias),
        "non_self_bias": mean_by_size(sizes, non_self),
    }

    def per_annotator(
        metric: Callable[[Rankings, Positives, int], float], positives: Positives, k: int
    ) -> dict[str, float]:
        """Score each annotator's ranking in % with one of `mitl.metrics`."""
        return {
            name: 100.0 * metric({q: ranking[q] for q in queries}, positives, k)
            for name, ranking in zip(annotators, rankings, strict=True)
        }

    return {
        "queries": len(queries),
        "recall_at_1_original": per_annotator(recall_at_k, before, 1),
        "recall_at_1_release": per_annotator(recall_at_k, release, 1),
        "precision_at_k": per_annotator(precision_at_k, release, precision_k),
        "subsets": [
            {
                "members": subset_names(int(mask), annotators),
                "size": int(sizes[s]),
                "recall_at_1": dict(zip(annotators, recall[s].tolist(), strict=True)),
                "bias": float(bias[s]),
                "self_bias": float(self_bias[s]),
                "non_self_bias": float(non_self[s]),
            }
            for s, mask in enumerate(masks)
        ],
        "by_size": [
            {
                "size": size,
                "subsets": int((sizes == size).sum()),
                **{name: per_size[name][size] for name in per_size},
            }
            for size in range(1, n + 1)
        ],
    }


def json_safe(value: Any) -> Any:
    """Return `value` with every NaN or infinite float replaced by None (valid JSON)."""
    if isinstance(value, float):
        return value if math.isfinite(value) else None
    if isinstance(value, Mapping):
        return {str(key): json_safe(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [json_safe(item) for item in value]
    return value
