"""Model bias of a curated benchmark, and how the crowd answered each machine annotator.

ECCV Caption (Chun et al., 2022) builds its positives from the candidates of a few retrieval
models, so a model whose candidates were judged can look better on the result than one whose
were not. Its Appendix E measures that bias; its Appendix B describes the crowd's answers.
This module computes both from plain ids, the way the platform stores a batch.

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

Crowd answers (Tables B.2, B.3)
    The share of each of the four answers among the approved judgements of the candidates an
    annotator proposed, per annotator and per rank; and, for the two middle answers, the share
    that gave each shortcoming and, among those that said "described in a wrong way", each
    wrong concept. A candidate proposed by several annotators counts for each of them.

Every non-empty subset is scored, 2^n − 1 of them, so at most `MAX_ANNOTATORS` annotators.
Pure Python and numpy: no Django import.
"""

from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import combinations
from typing import Any

import numpy as np

from mitl.judgements import (
    MIDDLE_LEVELS,
    SHORTCOMINGS,
    WRONG_CONCEPTS,
    Level,
)
from mitl.metrics import precision_at_k, recall_at_k

Rankings = Mapping[int, Sequence[int]]  # query -> targets, best first
Positives = Mapping[int, Collection[int]]  # query -> positive targets
# query -> target -> bit mask of the annotators that proposed that verified positive pair
VerifiedProposers = Mapping[int, Mapping[int, int]]
Progress = Callable[[int, int], None]  # (subsets done, subsets in all)

# 2^12 − 1 = 4,095 subsets is still instant; past that the table stops being readable.
MAX_ANNOTATORS = 12
SUBSET_CHUNK = 512  # subsets scored per block (and per progress report)
LEVELS: tuple[Level, ...] = (Level.YES, Level.WEAK_YES, Level.WEAK_NO, Level.NO)
_WRONG_DESCRIPTION = 1 << SHORTCOMINGS.index("wrong_description")


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


# --- crowd answers ------------------------------------------------------------------------


@dataclass(frozen=True)
class JudgedAnswer:
    """One approved judgement of a candidate, with every (annotator index, rank) proposing it."""

    level: Level
    shortcomings: int  # bit mask over SHORTCOMINGS
    wrong_concepts: int  # bit mask over WRONG_CONCEPTS
    proposals: tuple[tuple[int, int], ...]


def level_shares(counts: Mapping[Level, int]) -> dict[str, Any]:
    """Return the number of judgements and the share of each level (None when there are none)."""
    total = sum(counts.get(level, 0) for level in LEVELS)
    return {
        "judgements": total,
        "shares": {
            level.value: (counts.get(level, 0) / total if total else None) for level in LEVELS
        },
    }


def answer_shares(answers: Iterable[JudgedAnswer], annotators: Sequence[str]) -> dict[str, Any]:
    """Share of each answer per annotator, per rank, and per annotator and rank (Table B.2).

    A judgement counts once for each annotator that proposed its candidate, and once for each
    distinct rank the candidate was proposed at.
    """
    by_annotator: list[Counter[Level]] = [Counter() for _ in annotators]
    by_rank: dict[int, Counter[Level]] = defaultdict(Counter)
    by_annotator_rank: list[dict[int, Counter[Level]]] = [defaultdict(Counter) for _ in annotators]
    for answer in answers:
        for a in {a for a, _ in answer.proposals}:
            by_annotator[a][answer.level] += 1
        for rank in {rank for _, rank in answer.proposals}:
            by_rank[rank][answer.level] += 1
        for a, rank in set(answer.proposals):
            by_annotator_rank[a][rank][answer.level] += 1
    return {
        "by_annotator": {name: level_shares(by_annotator[a]) for a, name in enumerate(annotators)},
        "by_rank": {str(rank): level_shares(by_rank[rank]) for rank in sorted(by_rank)},
        "by_annotator_rank": {
            name: {
                str(rank): level_shares(by_annotator_rank[a][rank])
                for rank in sorted(by_annotator_rank[a])
            }
            for a, name in enumerate(annotators)
        },
    }


def rationale_shares(
    answers: Iterable[JudgedAnswer], annotators: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Shares of each shortcoming and wrong concept in the middle answers, per annotator (B.3).

    Per annotator and middle level: the share of judgements that chose each shortcoming (a
    judgement may choose several), and among those that chose "wrong_description", the share
    that named each wrong concept.
    """
    middle = [level for level in LEVELS if level in MIDDLE_LEVELS]
    judgements = {(a, level): 0 for a in range(len(annotators)) for level in middle}
    shortcomings: dict[tuple[int, Level], Counter[str]] = defaultdict(Counter)
    concepts: dict[tuple[int, Level], Counter[str]] = defaultdict(Counter)
    wrong: Counter[tuple[int, Level]] = Counter()
    for answer in answers:
        if answer.level not in MIDDLE_LEVELS:
            continue
        for a in {a for a, _ in answer.proposals}:
            key = (a, answer.level)
            judgements[key] += 1
            for bit, name in enumerate(SHORTCOMINGS):
                shortcomings[key][name] += bool(answer.shortcomings >> bit & 1)
            if answer.shortcomings & _WRONG_DESCRIPTION:
                wrong[key] += 1
                for bit, name in enumerate(WRONG_CONCEPTS):
                    concepts[key][name] += bool(answer.wrong_concepts >> bit & 1)

    def share(count: int, total: int) -> float | None:
        return count / total if total else None

    return {
        name: {
            level.value: {
                "judgements": judgements[(a, level)],
                "shortcomings": {
                    s: share(shortcomings[(a, level)][s], judgements[(a, level)])
                    for s in SHORTCOMINGS
                },
                "wrong_description": wrong[(a, level)],
                "wrong_concepts": {
                    c: share(concepts[(a, level)][c], wrong[(a, level)]) for c in WRONG_CONCEPTS
                },
            }
            for level in middle
        }
        for a, name in enumerate(annotators)
    }


def positives_by_annotator(
    candidates: Iterable[tuple[int, bool | None]], annotators: Sequence[str]
) -> dict[str, Any]:
    """Count each annotator's candidates, verified positives and positives no one else found.

    `candidates` gives each candidate's proposer mask and its verdict (None: never judged).
    """
    proposed = [0] * len(annotators)
    judged = [0] * len(annotators)
    verified = [0] * len(annotators)
    only = [0] * len(annotators)
    total = 0
    for mask, positive in candidates:
        total += bool(positive)
        for a in range(len(annotators)):
            if not mask >> a & 1:
                continue
            proposed[a] += 1
            judged[a] += positive is not None
            verified[a] += bool(positive)
            only[a] += bool(positive) and mask == 1 << a
    return {
        "verified_positives": total,
        "by_annotator": {
            name: {
                "candidates": proposed[a],
                "judged": judged[a],
                "verified": verified[a],
                "verified_share": verified[a] / judged[a] if judged[a] else None,
                "only_this": only[a],
                "only_this_share": only[a] / verified[a] if verified[a] else None,
            }
            for a, name in enumerate(annotators)
        },
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
