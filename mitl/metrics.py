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
- COCO 5K / 1K Recall@K (`coco_recalls`): Recall@K over every caption and image of a split
  against the original links (each caption's own image). 1K cuts the split by image: the
  images in order of first appearance among the captions (the split order of a Karpathy
  file, whose captions come grouped by image), into 5 folds of n_images // 5 images, and
  each fold holds the captions of its images, in whatever order the captions came. The
  n_images % 5 images left over go one each to the first folds, so every image and caption
  that 5K scores is in exactly one fold (a 5,000-image split has none left over). Each
  query's ranking is restricted to the targets of its fold (the fold's images, or the
  fold's captions) and the 5 fold recalls are averaged, each fold weighing the same.

No wrong numbers: a value that the given rankings cannot determine is a `MetricError` that
names the query, never a silent 0. A query without a ranking is an error; a ranking must
hold R targets for R-Precision and mAP@R (min(R, 50) for PMRP) and K for nDCG@K; Recall@K
needs K targets or a positive among fewer. A positive ranked twice is an error too (it
would count twice). Queries without any positive have no R-Precision or mAP@R: `prepare`
leaves them out of every metric; nDCG@K also leaves out queries whose gains are all 0.

`recall_at_k` and `precision_at_k` are the older dict-in, float-out helpers, kept with their
lenient reading (a query without positives, or a short list without a hit, is a miss) for
annotator checks and bias reports, which rank every target they need.

Speed (benchmarks/bench_metrics.py): only the targets a metric can look at, the first
max(K, R) of each ranking, are copied into one flat int64 array; ids become target codes
through a dense table and (query, code) pairs are looked up in a bit set of the positives
(binary searches stand in when ids or the bit set would be too large); every metric is
then a few array operations on the running count of hits.
"""

from __future__ import annotations

import math
import struct
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

Rankings = Mapping[int, Sequence[int]]
Positives = Mapping[int, Collection[int]]
Gains = Mapping[int, Mapping[int, float]]  # query -> target -> graded relevance

DEFAULT_KS: tuple[int, ...] = (1, 5, 10)
NDCG_KS: tuple[int, ...] = (10,)
PMRP_CAP = 50
COCO_FOLDS = 5
# Ranked ids become target codes through a dense table when the ids are small (COCO ids
# are below a million), else through a binary search; (query, code) pairs are then looked
# up in a bit set of the positives when it is small, else by binary search in sorted keys.
DENSE_TABLE_MAX_ID = 1 << 22  # int32 entries: 16 MiB at most
BITSET_MAX_BYTES = 64 << 20


class MetricError(ValueError):
    """Rankings from which a metric cannot be computed (missing, too short, repeated)."""


@dataclass(frozen=True, eq=False)
class Truth:
    """The positives (and gains) of one direction, prepared once for any number of rankings.

    Build it with `prepare`. Row i of every per-query array is `queries[i]`.
    """

    queries: list[int]  # queries with at least one positive, in the given order
    counts: np.ndarray  # R per query (int64)
    targets: np.ndarray  # sorted unique targets that are positive or have a gain
    # A target's code is 1 + its index in `targets`; 0 stands for every other id, so a
    # (row, target) pair is the key row * stride + code with stride = len(targets) + 1.
    stride: int
    code_table: np.ndarray | None  # at id + 1: the code of id (0 at both ends and gaps)
    positive_keys: np.ndarray  # sorted keys of the positives
    positive_bits: np.ndarray | None  # bit `key` is set for a positive (little-endian)
    gain_keys: np.ndarray  # sorted keys of the pairs with a gain > 0
    gain_values: np.ndarray  # gain of each of `gain_keys`
    ideal_rows: np.ndarray  # gains of each query, best first: row of each
    ideal_ranks: np.ndarray  # 0-based rank within its row
    ideal_gains: np.ndarray
    graded: bool  # gains other than 1 per positive were given
    ideal_dcg: dict[int, np.ndarray] = field(default_factory=dict, repr=False)  # K -> IDCG@K


def prepare(positives: Positives, gains: Gains | None = None) -> Truth:
    """Prepare one direction's positives and optional graded gains for the metric functions.

    `gains[q][t]` is the relevance of target t for query q (finite, >= 0); a positive
    without a gain counts 1. Queries without positives are left out.
    """
    queries = [q for q, targets in positives.items() if len(targets)]
    sets = [set(positives[q]) for q in queries]
    counts = np.fromiter(map(len, sets), dtype=np.int64, count=len(sets))
    pos_rows = np.repeat(np.arange(len(queries), dtype=np.int64), counts)
    pos_targets = _flatten(sets, None)
    graded_rows, graded_targets, graded_values = _graded_pairs(queries, gains)
    targets = np.unique(np.concatenate([pos_targets, graded_targets]))
    stride = len(targets) + 1
    positive_keys = np.sort(pos_rows * stride + np.searchsorted(targets, pos_targets) + 1)
    # Gains: the graded pairs, then 1 for each positive without one (np.unique keeps the
    # first of equal keys); pairs that gain nothing are dropped.
    graded_keys = graded_rows * stride + np.searchsorted(targets, graded_targets) + 1
    all_keys = np.concatenate([graded_keys, positive_keys])
    all_values = np.concatenate([graded_values, np.ones(len(positive_keys))])
    gain_keys, first = np.unique(all_keys, return_index=True)
    gain_values = all_values[first]
    gain_keys, gain_values = gain_keys[gain_values > 0], gain_values[gain_values > 0]
    gain_rows = gain_keys // stride
    ideal = np.lexsort((-gain_values, gain_rows))
    ideal_rows = gain_rows[ideal]
    row_starts = np.searchsorted(ideal_rows, np.arange(len(queries)))
    return Truth(
        queries=queries,
        counts=counts,
        targets=targets,
        stride=stride,
        code_table=_code_table(targets),
        positive_keys=positive_keys,
        positive_bits=_bit_set(positive_keys, len(queries) * stride),
        gain_keys=gain_keys,
        gain_values=gain_values,
        ideal_rows=ideal_rows,
        ideal_ranks=np.arange(len(ideal)) - row_starts[ideal_rows],
        ideal_gains=gain_values[ideal],
        graded=gains is not None,
    )


def _graded_pairs(
    queries: list[int], gains: Gains | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Return (row, target, gain) of every graded pair of the given queries."""
    rows: list[int] = []
    targets: list[int] = []
    values: list[float] = []
    for row, query in enumerate(queries):
        for target, gain in (gains or {}).get(query, {}).items():
            if not (math.isfinite(gain) and gain >= 0):
                raise MetricError(f"the gain of query {query}, target {target} is {gain!r}")
            rows.append(row)
            targets.append(target)
            values.append(float(gain))
    return (
        np.array(rows, dtype=np.int64),
        np.array(targets, dtype=np.int64),
        np.array(values, dtype=np.float64),
    )


def _code_table(targets: np.ndarray) -> np.ndarray | None:
    if not len(targets) or targets[0] < 0 or targets[-1] >= DENSE_TABLE_MAX_ID:
        return None
    # Shifted by one, with a 0 at each end: clipping an id outside the table lands on a 0.
    # The narrowest type that holds every code: the table is read at random, so its size
    # decides how much of it stays in the cache.
    dtype = np.int16 if len(targets) < np.iinfo(np.int16).max else np.int32
    table = np.zeros(int(targets[-1]) + 3, dtype=dtype)
    table[targets + 1] = np.arange(1, len(targets) + 1)
    return table


def _bit_set(keys: np.ndarray, n_keys: int) -> np.ndarray | None:
    if (n_keys + 7) // 8 > BITSET_MAX_BYTES:
        return None
    bits = np.zeros((n_keys + 7) // 8, dtype=np.uint8)
    np.bitwise_or.at(bits, keys >> 3, (1 << (keys & 7)).astype(np.uint8))
    return bits


@dataclass(frozen=True, eq=False)
class _Ranked:
    """The first targets of each ranking, flat, and where the positives among them are."""

    truth: Truth
    length: np.ndarray  # per query: targets its ranking holds (after any restriction)
    take: np.ndarray  # per query: how many of them are in the flat arrays
    starts: np.ndarray  # per query: where its targets begin in the flat arrays
    keys: np.ndarray  # flat: (row, target code) key of each ranked target
    cumulative: np.ndarray  # [0, cumsum(is positive)]: positives before flat index i
    hit_rows: np.ndarray  # per positive found, in flat order: its query row
    hit_ranks: np.ndarray  # ... and its 0-based rank in that query's ranking

    def hits_within(self, depth: np.ndarray) -> np.ndarray:
        """Return each query's number of positives among its first `depth` targets."""
        return self.cumulative[self.starts + depth] - self.cumulative[self.starts]

    def found_within(self, k: int) -> np.ndarray:
        """Return whether each query has a positive among its first k targets."""
        return self.hits_within(np.minimum(self.take, k)) > 0


def _rank(
    truth: Truth,
    rankings: Rankings,
    depth: np.ndarray | int | None,
    allowed: np.ndarray | None = None,
) -> _Ranked:
    """Flatten the first `depth` targets of each query's ranking (all when None).

    With `allowed` (sorted ids), each ranking is first restricted to those targets.
    """
    rows_in = _rows_of(truth.queries, rankings)
    length = np.fromiter(map(len, rows_in), dtype=np.int64, count=len(rows_in))
    if allowed is None and depth is not None:
        take = np.minimum(length, depth)
        flat = _flatten(rows_in, take.tolist())
    else:
        flat = _flatten(rows_in, None)
        take = length
        if allowed is not None:
            kept = _is_in(flat, allowed)
            owner = np.repeat(np.arange(len(rows_in)), length)
            take = length = np.bincount(owner[kept], minlength=len(rows_in))
            flat = flat[kept]
    starts = np.zeros(len(take), dtype=np.int64)
    np.cumsum(take[:-1], out=starts[1:])
    row_keys = np.arange(len(take), dtype=np.int64) * truth.stride
    keys = np.add(np.repeat(row_keys, take), _codes(truth, flat), dtype=np.int64)
    if truth.positive_bits is not None:
        hits = ((truth.positive_bits[keys >> 3] >> (keys & 7).astype(np.uint8)) & 1).view(bool)
    else:
        hits = _is_in(keys, truth.positive_keys)
    hit_at = np.flatnonzero(hits)
    hit_keys = keys[hit_at]
    _refuse_repeated_positives(truth, hit_keys)
    hit_rows = hit_keys // truth.stride
    cumulative = np.zeros(len(flat) + 1, dtype=np.int64)
    np.cumsum(hits, out=cumulative[1:])
    hit_ranks = hit_at - starts[hit_rows]
    return _Ranked(truth, length, take, starts, keys, cumulative, hit_rows, hit_ranks)


def _rows_of(queries: list[int], rankings: Rankings) -> list[Sequence[int]]:
    try:
        return [rankings[q] for q in queries]
    except KeyError:
        missing = [q for q in queries if q not in rankings]
        raise MetricError(f"{len(missing)} queries have no ranking (first: {missing[0]})") from None


def _flatten(rows: Sequence[Iterable[int]], take: list[int] | None) -> np.ndarray:
    flat: list[int] = []
    extend = flat.extend  # any sequence: lists, tuples, numpy arrays
    if take is None:
        for row in rows:
            extend(row)
    else:
        for row, n in zip(rows, take, strict=True):
            extend(row[:n])
    try:
        # struct converts a list of Python ints about twice as fast as numpy or array do.
        return np.frombuffer(struct.pack(f"{len(flat)}q", *flat), dtype=np.int64)
    except struct.error as exc:
        raise MetricError(f"ids must be integers of at most 64 bits ({exc})") from None


def _codes(truth: Truth, ids: np.ndarray) -> np.ndarray:
    """Return the code of each id: 1 + its index in `truth.targets`, 0 when absent."""
    if truth.code_table is not None:
        # An id past either end (or so large that id + 1 wraps) is clipped onto a 0.
        return np.take(truth.code_table, ids + 1, mode="clip")
    at = np.minimum(np.searchsorted(truth.targets, ids), max(len(truth.targets) - 1, 0))
    if not len(truth.targets):
        return np.zeros(len(ids), dtype=np.int64)
    return np.where(truth.targets[at] == ids, at + 1, 0)


def _is_in(values: np.ndarray, sorted_pool: np.ndarray) -> np.ndarray:
    if not len(sorted_pool):
        return np.zeros(len(values), dtype=bool)
    at = np.minimum(np.searchsorted(sorted_pool, values), len(sorted_pool) - 1)
    return sorted_pool[at] == values


def _refuse_repeated_positives(truth: Truth, keys: np.ndarray) -> None:
    # Sorting int32 is about twice as fast; keys fit whenever rows * stride does.
    narrow = len(truth.queries) * truth.stride < np.iinfo(np.int32).max
    ordered = np.sort(keys.astype(np.int32) if narrow else keys)
    repeated = np.flatnonzero(ordered[1:] == ordered[:-1])
    if len(repeated):
        row, code = divmod(int(ordered[repeated[0]]), truth.stride)
        raise MetricError(
            f"the ranking of query {truth.queries[row]} lists positive "
            f"{int(truth.targets[code - 1])} twice"
        )


def _refuse_short(
    truth: Truth,
    short: np.ndarray,
    length: np.ndarray,
    need: np.ndarray | int,
    metric: str,
    note: str = "",
) -> None:
    """Raise when any ranking is too short for a metric; name the first one."""
    if short.any():
        bad = np.flatnonzero(short)
        row = int(bad[0])
        needed = int(need[row]) if isinstance(need, np.ndarray) else int(need)
        raise MetricError(
            f"{len(bad)} rankings are too short for {metric} (first: query "
            f"{truth.queries[row]} ranks {int(length[row])} targets{note}; {metric} needs "
            f"{needed})"
        )


def _check_ks(ks: Iterable[int]) -> list[int]:
    ks = sorted(set(ks))
    if ks and ks[0] < 1:
        raise ValueError(f"k must be at least 1 (got {ks[0]})")
    return ks


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
    ks, ndcg_ks = _check_ks(ks), _check_ks(ndcg_ks)
    counts = truth.counts
    capped = np.minimum(counts, pmrp_cap)
    depth = max([*ks, *ndcg_ks, 0])
    if r_based:
        depth = np.maximum(counts, depth)
    ranked = _rank(truth, rankings, depth)
    length = ranked.length
    if r_based:
        _refuse_short(truth, length < counts, length, counts, "R-Precision and mAP@R")
    for k in ndcg_ks:
        _refuse_short(truth, length < k, length, k, f"ndcg@{k}")
    result: dict[str, float] = {}
    for k in ks:
        found = ranked.found_within(k)
        _refuse_short(truth, ~found & (length < k), length, k, f"recall@{k}", " and no positive")
        result[f"recall@{k}"] = _mean(found)
    if r_based:
        result["r_precision"] = _mean(ranked.hits_within(counts) / counts)
        result["map_at_r"] = _mean(_average_precision_at_r(ranked))
        result["pmrp"] = _mean(ranked.hits_within(capped) / capped)
    for k in ndcg_ks:
        result[f"ndcg@{k}"] = _ndcg(ranked, k)
    return result


def _mean(values: np.ndarray) -> float:
    return float(values.sum() / len(values)) if len(values) else math.nan


def _average_precision_at_r(ranked: _Ranked) -> np.ndarray:
    counts = ranked.truth.counts
    rows, ranks = ranked.hit_rows, ranked.hit_ranks
    # P@i at each positive: positives up to and including it (its place among the hits of
    # its row, counted from the hits before the row), over its 1-based rank.
    before = ranked.cumulative[ranked.starts]
    found = np.arange(1, len(rows) + 1) - before[rows]
    precision = np.where(ranks < counts[rows], found / (ranks + 1), 0.0)
    return np.bincount(rows, weights=precision, minlength=len(counts)) / counts


def _ndcg(ranked: _Ranked, k: int) -> float:
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
    return _mean(dcg[counted] / ideal[counted])


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


def restricted_recalls(
    truth: Truth, rankings: Rankings, allowed: np.ndarray, ks: Iterable[int] = DEFAULT_KS
) -> dict[int, float]:
    """Return {K: Recall@K} with every ranking restricted to the `allowed` targets first."""
    ks = _check_ks(ks)
    ranked = _rank(truth, rankings, None, allowed=np.unique(allowed))
    result = {}
    for k in ks:
        found = ranked.found_within(k)
        short = ~found & (ranked.length < k)
        _refuse_short(truth, short, ranked.length, k, f"recall@{k}", " of the fold and no positive")
        result[k] = _mean(found)
    return result


def coco_recalls(
    i2t: Rankings,
    t2i: Rankings,
    *,
    caption_ids: Sequence[int],
    caption_images: Sequence[int],
    ks: Iterable[int] = DEFAULT_KS,
    folds: int = COCO_FOLDS,
) -> dict[str, dict[str, float]]:
    """Return COCO 5K and 1K Recall@K per direction over a whole split (see the module doc).

    `caption_ids` lists the split's captions, `caption_images[i]` the image caption i was
    written for; the captions may come in any order, the images' order is their first
    appearance. Keys: `coco_5k_recall@K` and `coco_1k_recall@K`.
    """
    ks = _check_ks(ks)
    captions = np.asarray(caption_ids, dtype=np.int64)
    images = np.asarray(caption_images, dtype=np.int64)
    if len(captions) != len(images):
        raise ValueError(
            f"a split needs one image per caption (got {len(captions)} captions and "
            f"{len(images)} images)"
        )
    captions_of: dict[int, list[int]] = {}  # in order of the images' first appearance
    for caption, image in zip(captions.tolist(), images.tolist(), strict=True):
        captions_of.setdefault(image, []).append(caption)
    if len(captions_of) < folds:
        raise MetricError(
            f"COCO 1K cuts a split into {folds} folds of images, so it needs at least {folds} "
            f"images (this split has {len(captions_of)})"
        )
    image_of = {c: [i] for c, i in zip(captions.tolist(), images.tolist(), strict=True)}
    result: dict[str, dict[str, float]] = {"i2t": {}, "t2i": {}}
    for direction, rankings, truth in (
        ("i2t", i2t, prepare(captions_of)),
        ("t2i", t2i, prepare(image_of)),
    ):
        full = retrieval_metrics(truth, rankings, ks=ks, ndcg_ks=(), r_based=False)
        for k in ks:
            result[direction][f"coco_5k_recall@{k}"] = full[f"recall@{k}"]
    per_fold: dict[str, list[dict[int, float]]] = {"i2t": [], "t2i": []}
    for fold, fold_images in enumerate(_image_folds(list(captions_of), folds)):
        fold_captions = [c for image in fold_images for c in captions_of[image]]
        i2t_truth = prepare({image: captions_of[image] for image in fold_images})
        t2i_truth = prepare({caption: image_of[caption] for caption in fold_captions})
        try:
            per_fold["i2t"].append(
                restricted_recalls(i2t_truth, i2t, np.array(fold_captions, dtype=np.int64), ks)
            )
            per_fold["t2i"].append(
                restricted_recalls(t2i_truth, t2i, np.array(fold_images, dtype=np.int64), ks)
            )
        except MetricError as exc:
            raise MetricError(f"COCO 1K fold {fold + 1} of {folds}: {exc}") from None
    for direction, recalls in per_fold.items():
        for k in ks:
            result[direction][f"coco_1k_recall@{k}"] = float(np.mean([r[k] for r in recalls]))
    return result


def _image_folds(images: list[int], folds: int) -> list[list[int]]:
    """Cut the images, in order, into `folds` runs of n // folds, the first n % folds one longer.

    The leftover images join folds rather than being dropped, so 1K scores every query 5K
    does; an even split (COCO's 5,000 images) has no leftover and equals the reference.
    """
    size, extra = divmod(len(images), folds)
    bounds = [fold * size + min(fold, extra) for fold in range(folds + 1)]
    return [images[bounds[fold] : bounds[fold + 1]] for fold in range(folds)]


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
    _check_ks([k])
    missing = [q for q in positives if q not in rankings]
    if missing:
        raise ValueError(f"{len(missing)} queries have no ranking (first: {missing[0]})")
    if not positives:
        return math.nan
    truth = prepare(positives)
    ranked = _rank(truth, rankings, k)
    if precision:
        found = ranked.hits_within(np.minimum(ranked.length, k)).sum() / k
    else:
        found = np.count_nonzero(ranked.found_within(k))
    return float(found / len(positives))
