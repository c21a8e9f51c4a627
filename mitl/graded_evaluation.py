"""Graded evaluation of one model's rankings on a release: nDCG, NCS, semantic recall and
the Recall@K limits of `mitl.graded_metrics`, from a relevance source. Pure Python.

Relevance sources: a caption proxy of `mitl.relevance.proxies` (between each query and the
whole corpus of the dataset, `mitl.relevance.images`), `calibrated`: a stored calibrated
model (`mitl.relevance.calibrated`), or `crowd`: the release's graded verdicts
(`verdicts.csv` scores; a released positive without a verdict counts 1, every other pair
0). Matrices of a proxy are cached in `cache_dir` under a key of the proxy, its version
(the model's for `calibrated`), the aggregation, the direction, the corpus and the
queries, so a second evaluation of the same release reads them back.

Output: {"source", "aggregation" (None for `calibrated`, with its "version"), "i2t": {...},
"t2i": {...}, "mean": {...}} with per direction `ndcg@25` (linear gains), `ndcg` (whole
ranking, 2^rel - 1 gains), `ncs@K`, `semantic_recall@K` (threshold `threshold`) with
`semantic_queries` (the queries it counts: those with an item at the threshold) and
`recall@K_lower` / `recall@K_upper` (near-duplicates at `near_duplicate`), and in `mean`
every metric averaged over the two directions as Wray et al. (eq. 3) average nDCG
(`semantic_queries`: their sum).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from mitl.evaluation_inputs import DIRECTIONS, EvaluationError, RankingsByDirection, ReleaseTruth
from mitl.graded_metrics import ncs, ndcg, query_mean, recall_limits, semantic_recall
from mitl.relevance.cache import array_write
from mitl.relevance.calibrated import (
    CALIBRATED,
    CalibratedModel,
    CalibratedScorer,
    calibrated_scorer,
)
from mitl.relevance.images import (
    CaptionCorpus,
    Progress,
    caption_to_images,
    image_to_captions,
)
from mitl.relevance.proxies import CaptionProxy, proxy_build, proxy_spec

CROWD = "crowd"
COUNT_KEY = "semantic_queries"
NDCG_K = 25
KS: tuple[int, ...] = (1, 5, 10)


@dataclass(frozen=True)
class GradedOptions:
    source: str  # a proxy name, "calibrated" or "crowd"
    aggregation: str = "mean"  # not read by "calibrated" (its model reads both)
    threshold: float = 0.5  # semantic recall: relevant from this relevance on
    near_duplicate: float = 0.8  # Recall@K limits: near-duplicates from this relevance on
    ks: tuple[int, ...] = KS
    ndcg_k: int = NDCG_K
    calibrated: CalibratedModel | None = None  # the model "calibrated" applies


def query_indexes(corpus: CaptionCorpus, release: ReleaseTruth) -> dict[str, np.ndarray]:
    """Return each direction's release queries as corpus indexes (images, captions)."""
    return queries_as_indexes(
        corpus, list(release.positives["i2t"]), list(release.positives["t2i"])
    )


def queries_as_indexes(
    corpus: CaptionCorpus, image_ids: Sequence[int], caption_ids: Sequence[int]
) -> dict[str, np.ndarray]:
    """Return image queries (i2t) and caption queries (t2i) as corpus indexes."""
    return {
        "i2t": _lookup(_index_of(corpus.image_ids), image_ids, "image", "i2t"),
        "t2i": _lookup(_index_of(corpus.caption_ids), caption_ids, "caption", "t2i"),
    }


def _index_of(ids: np.ndarray) -> dict[int, int]:
    return {int(value): i for i, value in enumerate(ids)}


def _lookup(index: Mapping[int, int], ids: Sequence[int], kind: str, direction: str) -> np.ndarray:
    missing = [i for i in ids if i not in index]
    if missing:
        raise EvaluationError(
            f"{direction}: {len(missing)} {kind} ids are not in the captions file "
            f"(first: {missing[0]}); give the captions TSV of the release's dataset"
        )
    return np.fromiter((index[i] for i in ids), dtype=np.int64, count=len(ids))


def ranked_indexes(
    corpus: CaptionCorpus, release: ReleaseTruth, rankings: RankingsByDirection
) -> dict[str, np.ndarray]:
    """Return each direction's rankings of the release queries as corpus indexes, padded
    with -1 (also the index of a ranked id that is not in the dataset)."""
    result = {}
    for direction in DIRECTIONS:
        lists = [rankings[direction][q] for q in release.positives[direction]]
        width = max(map(len, lists), default=0)
        table = np.full((len(lists), max(width, 1)), -1, dtype=np.int64)
        index = _targets_of(corpus, direction)
        for row, ranking in enumerate(lists):
            # An id outside the dataset holds its rank and gains nothing.
            table[row, : len(ranking)] = [index.get(target, -1) for target in ranking]
        result[direction] = table
    return result


def relevance_matrices(
    corpus: CaptionCorpus,
    release: ReleaseTruth,
    options: GradedOptions,
    *,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
) -> dict[str, np.ndarray]:
    """Return the relevance of every corpus item to each release query, per direction."""
    queries = query_indexes(corpus, release)
    if options.source == CROWD:
        return _crowd_matrices(corpus, release)
    return proxy_matrices(
        corpus,
        queries,
        options.source,
        options.aggregation,
        cache_dir=cache_dir,
        progress=progress,
        calibrated=options.calibrated,
    )


def proxy_matrices(
    corpus: CaptionCorpus,
    queries: Mapping[str, np.ndarray],
    proxy_name: str,
    aggregation: str,
    *,
    cache_dir: Path | None = None,
    progress: Progress | None = None,
    calibrated: CalibratedModel | None = None,
) -> dict[str, np.ndarray]:
    """Return a proxy's relevance of every corpus item to each query (corpus indexes), per
    direction, reading and writing the cache. `calibrated` is the model the source
    "calibrated" applies (keyed by its version; the aggregation does not apply).

    The cache holds the rows of the queries in corpus order, so the same queries given in
    another order (a release written sorted by id, read back sorted as text) share it.
    """
    if proxy_name == CALIBRATED:
        if calibrated is None:
            raise EvaluationError("the calibrated relevance needs a stored calibrated model")
        model = calibrated
        scorer: list[CalibratedScorer] = []

        def compute(direction: str, canonical: np.ndarray) -> np.ndarray:
            if not scorer:
                scorer.append(calibrated_scorer(model, corpus, cache_dir=cache_dir))
            return scorer[0].matrix(direction, canonical, progress)

        return _cached(corpus, queries, CALIBRATED, model.version, CALIBRATED, cache_dir, compute)
    spec = proxy_spec(proxy_name)
    built: list[CaptionProxy] = []

    def compute_proxy(direction: str, canonical: np.ndarray) -> np.ndarray:
        if not built:
            built.append(
                proxy_build(proxy_name, corpus.texts, corpus.caption_images, cache_dir=cache_dir)
            )
        fill = image_to_captions if direction == "i2t" else caption_to_images
        return fill(built[0], corpus, canonical, aggregation=aggregation, progress=progress)

    return _cached(corpus, queries, proxy_name, spec.version, aggregation, cache_dir, compute_proxy)


def _cached(
    corpus: CaptionCorpus,
    queries: Mapping[str, np.ndarray],
    name: str,
    version: int | str,
    aggregation: str,
    cache_dir: Path | None,
    compute: Callable[[str, np.ndarray], np.ndarray],
) -> dict[str, np.ndarray]:
    """Return each direction's matrix from the cache, or `compute`d and cached."""
    result: dict[str, np.ndarray] = {}
    for direction in DIRECTIONS:
        order = np.argsort(queries[direction], kind="stable")
        canonical = np.asarray(queries[direction])[order]
        key = _cache_key(corpus, canonical, aggregation, version, direction)
        path = cache_dir / f"{name}-{key}.npy" if cache_dir else None
        matrix = _cache_read(path, (len(canonical), _targets(corpus, direction)))
        if matrix is None:
            matrix = compute(direction, canonical)
            if path is not None:
                array_write(path, matrix)
        back = np.empty_like(order)
        back[order] = np.arange(len(order))
        result[direction] = matrix[back]
    return result


def _targets(corpus: CaptionCorpus, direction: str) -> int:
    return len(corpus.caption_ids) if direction == "i2t" else len(corpus.image_ids)


def _cache_read(path: Path | None, shape: tuple[int, int]) -> np.ndarray | None:
    """Return a cached matrix, or None when there is none or it cannot be read (a miss)."""
    if path is None or not path.is_file():
        return None
    try:
        matrix = np.load(path)
    except (OSError, ValueError, EOFError):
        return None
    return matrix if matrix.shape == shape else None


def _cache_key(
    corpus: CaptionCorpus,
    queries: np.ndarray,
    aggregation: str,
    version: int | str,
    direction: str,
) -> str:
    digest = hashlib.sha256()
    digest.update(f"{version}|{aggregation}|{direction}|".encode())
    digest.update(corpus.caption_ids.tobytes())
    digest.update(corpus.caption_images.tobytes())
    for text in corpus.texts:
        digest.update(text.encode() + b"\0")
    digest.update(queries.tobytes())
    return digest.hexdigest()[:24]


def _crowd_matrices(corpus: CaptionCorpus, release: ReleaseTruth) -> dict[str, np.ndarray]:
    """Return the release's positives as 1 and its judged pairs as their verdict score."""
    result = {}
    for direction in DIRECTIONS:
        targets = _targets_of(corpus, direction)
        matrix = _truth(release, direction, corpus).astype(np.float32)
        gains = release.gains_by_query(direction) or {}
        for row, query in enumerate(release.positives[direction]):
            for target, score in gains.get(query, {}).items():
                if target in targets:
                    matrix[row, targets[target]] = score
        result[direction] = matrix
    return result


def _targets_of(corpus: CaptionCorpus, direction: str) -> dict[int, int]:
    """Return target id -> corpus index: captions for i2t, images for t2i."""
    return _index_of(corpus.caption_ids if direction == "i2t" else corpus.image_ids)


def _truth(release: ReleaseTruth, direction: str, corpus: CaptionCorpus) -> np.ndarray:
    """Mark each release query's positives among the corpus targets."""
    targets = _targets_of(corpus, direction)
    queries = release.positives[direction]
    truth = np.zeros((len(queries), len(targets)), dtype=bool)
    for row, query in enumerate(queries):
        for target in queries[query]:
            if target in targets:
                truth[row, targets[target]] = True
    return truth


def graded_evaluate(
    release: ReleaseTruth,
    rankings: RankingsByDirection,
    corpus: CaptionCorpus,
    relevance: Mapping[str, np.ndarray],
    options: GradedOptions,
) -> dict[str, Any]:
    """Return the graded metrics of the rankings (see the module doc)."""
    ranked = ranked_indexes(corpus, release, rankings)
    result: dict[str, Any] = {"source": options.source, "aggregation": options.aggregation}
    if options.calibrated is not None and options.source == CALIBRATED:
        result["aggregation"] = None  # the model reads both aggregations
        result["version"] = options.calibrated.version
    for direction in DIRECTIONS:
        rel, rows = relevance[direction], ranked[direction]
        values: dict[str, float | None] = {
            f"ndcg@{options.ndcg_k}": query_mean(ndcg(rel, rows, options.ndcg_k)),
            "ndcg": query_mean(ndcg(rel, rows, None, gain="exponential")),
        }
        truth = _truth(release, direction, corpus)
        for k in options.ks:
            values[f"ncs@{k}"] = query_mean(ncs(rel, rows, k))
        for k in options.ks:
            hits = semantic_recall(rel, rows, k, threshold=options.threshold)
            values[f"semantic_recall@{k}"] = query_mean(hits)
        # How many queries semantic recall counts: those with an item at the threshold.
        values["semantic_queries"] = int((rel >= options.threshold).any(axis=1).sum())
        for k in options.ks:
            lower, upper = recall_limits(rel, rows, truth, k, threshold=options.near_duplicate)
            values[f"recall@{k}_lower"] = query_mean(lower)
            values[f"recall@{k}_upper"] = query_mean(upper)
        result[direction] = values
    result["mean"] = {
        key: _mean(result["i2t"][key], result["t2i"][key])
        for key in result["i2t"]
        if key != COUNT_KEY
    }
    result["mean"][COUNT_KEY] = result["i2t"][COUNT_KEY] + result["t2i"][COUNT_KEY]
    return result


def _cell(value: float | None, *, count: bool) -> str:
    if value is None:
        return "-"
    return str(round(value)) if count else f"{value:.4f}"


def _mean(a: float | None, b: float | None) -> float | None:
    present = [v for v in (a, b) if v is not None]
    return sum(present) / len(present) if present else None


def format_graded(result: Mapping[str, Any]) -> str:
    """Return a graded result as a plain-text table: metric × (i2t, t2i, mean)."""
    columns = (*DIRECTIONS, "mean")
    how = result["aggregation"] or f"model {result.get('version')}"
    lines = [f"graded relevance: {result['source']} ({how})"]
    keys = list(result["i2t"])
    width = max(map(len, keys))
    lines.append(f"{'metric':<{width}}  " + "  ".join(f"{c:>8}" for c in columns))
    for key in keys:
        cells = [_cell(result[c][key], count=key == COUNT_KEY) for c in columns]
        lines.append(f"{key:<{width}}  " + "  ".join(f"{cell:>8}" for cell in cells))
    return "\n".join(lines)


LEADERBOARD_METRICS: tuple[str, ...] = ("ndcg@25", "ndcg", "ncs@5", "semantic_recall@5")


def leaderboard_graded(
    release: ReleaseTruth,
    rankings: RankingsByDirection,
    corpus: CaptionCorpus,
    proxies: Sequence[str],
    *,
    aggregation: str = "mean",
    cache_dir: Path | None = None,
    calibrated: CalibratedModel | None = None,
) -> dict[str, dict[str, float | None]]:
    """Return per direction the leaderboard's graded metrics (LEADERBOARD_METRICS) of each
    proxy, keyed "metric:proxy" (e.g. "ndcg@25:cider_d")."""
    result: dict[str, dict[str, float | None]] = {d: {} for d in DIRECTIONS}
    ranked = ranked_indexes(corpus, release, rankings)
    for proxy in proxies:
        options = GradedOptions(source=proxy, aggregation=aggregation, calibrated=calibrated)
        relevance = relevance_matrices(corpus, release, options, cache_dir=cache_dir)
        for direction in DIRECTIONS:
            rel, rows = relevance[direction], ranked[direction]
            values = {
                "ndcg@25": ndcg(rel, rows, NDCG_K),
                "ndcg": ndcg(rel, rows, None, gain="exponential"),
                "ncs@5": ncs(rel, rows, 5),
                "semantic_recall@5": semantic_recall(rel, rows, 5, threshold=options.threshold),
            }
            for metric in LEADERBOARD_METRICS:
                result[direction][f"{metric}:{proxy}"] = query_mean(values[metric])
    return result
