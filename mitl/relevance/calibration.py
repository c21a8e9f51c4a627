"""How far each relevance proxy agrees with people, and a calibrated combination of them.

Pure Python, numpy, scipy and scikit-learn.

Ratings are pairs with a human score, given by id and turned into corpus indexes by
`image_ratings` / `caption_ratings`: Crisscrossed Captions' image–caption ratings (SITS,
0–5) and caption–caption ratings (STS), as `mitl.formats.positives` reads their files,
or the crowd's answers on the platform (4 levels: 3 = "100% YES" down to 0 = "100% NO",
averaged per pair).
A proxy scores an image–caption pair through `mitl.relevance.images.pair_relevance` (both
aggregations are features) and a caption–caption pair directly (the first caption is the
candidate).

`correlation_table` reports Pearson, Spearman and Kendall (tau-b) for all pairs and for the
pairs that are not ground truth (a caption with an image other than its own; for STS,
captions of different images): a proxy can look good only because ground-truth pairs are
easy. `fit_combination` fits gradient-boosted trees on every proxy feature (and, with the
MiniLM embeddings, the context of `context_features`; for image pairs, the word coverage
of `coverage_features`) and scores each pair out of fold, with
folds that split by the rated image (SITS, crowd) or the first caption's image (STS): every
pair of that image falls in one fold, so no rated image is both fitted and scored. A
caption's own image, or the second caption's, may still sit in the fitted folds.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
from scipy import stats

from mitl.relevance.calibrated import feature_columns, pair_weights, regressor_make
from mitl.relevance.context import Context, pair_context
from mitl.relevance.coverage import Coverage
from mitl.relevance.images import AGGREGATIONS, CaptionCorpus, pair_relevance
from mitl.relevance.proxies import CaptionProxy
from mitl.relevance.wordnet import wordnet_available

FOLDS = 5
COMBINATION = "combination"


class RatingsError(ValueError):
    """Ratings that name an id the corpus lacks; the message says where."""


@dataclass(frozen=True, eq=False)
class Ratings:
    """Human-rated pairs: `left` caption indexes against `right` image (or caption) indexes."""

    source: str
    kind: str  # "image" (image–caption pairs) or "caption" (caption–caption pairs)
    left: np.ndarray
    right: np.ndarray
    score: np.ndarray
    ground_truth: np.ndarray  # bool: the pair is one of the dataset's own links
    groups: np.ndarray  # image index the pair belongs to, for folds that split by image


RatedPair = tuple[int, int, int, float]  # (line, left id, right id, score)


def image_ratings(
    source: str, pairs: Sequence[RatedPair], corpus: CaptionCorpus, *, where: str
) -> Ratings:
    """Return rated (caption id, image id) pairs as corpus indexes; `where` names the file
    in the error about an id the dataset lacks."""
    captions = _indexes(pairs, 1, corpus.caption_ids, "caption", where)
    images = _indexes(pairs, 2, corpus.image_ids, "image", where)
    return Ratings(
        source=source,
        kind="image",
        left=captions,
        right=images,
        score=np.array([pair[3] for pair in pairs], dtype=np.float64),
        ground_truth=corpus.image_of[captions] == images,
        groups=images,
    )


def caption_ratings(
    source: str, pairs: Sequence[RatedPair], corpus: CaptionCorpus, *, where: str
) -> Ratings:
    """Return rated (caption id, caption id) pairs as corpus indexes (see image_ratings)."""
    left = _indexes(pairs, 1, corpus.caption_ids, "caption", where)
    right = _indexes(pairs, 2, corpus.caption_ids, "caption", where)
    return Ratings(
        source=source,
        kind="caption",
        left=left,
        right=right,
        score=np.array([pair[3] for pair in pairs], dtype=np.float64),
        ground_truth=corpus.image_of[left] == corpus.image_of[right],
        groups=corpus.image_of[left],
    )


def _indexes(
    pairs: Sequence[RatedPair], column: int, ids: np.ndarray, kind: str, where: str
) -> np.ndarray:
    index = {int(value): i for i, value in enumerate(ids)}
    found = np.empty(len(pairs), dtype=np.int64)
    for k, pair in enumerate(pairs):
        position = index.get(pair[column])
        if position is None:
            raise RatingsError(f"{where}:{pair[0]}: {kind} {pair[column]} is not in the dataset")
        found[k] = position
    return found


def proxy_features(
    ratings: Ratings, corpus: CaptionCorpus, proxies: Mapping[str, CaptionProxy]
) -> dict[str, np.ndarray]:
    """Return each proxy's score of every rated pair; image pairs get one per aggregation."""
    features: dict[str, np.ndarray] = {}
    for name, proxy in proxies.items():
        if ratings.kind == "caption":
            features[name] = proxy.pairs(ratings.left, ratings.right).astype(np.float64)
            continue
        for aggregation in AGGREGATIONS:
            values = pair_relevance(
                proxy, corpus, ratings.left, ratings.right, aggregation=aggregation
            )
            features[f"{name}/{aggregation}"] = values.astype(np.float64)
    return features


def context_features(
    ratings: Ratings, corpus: CaptionCorpus, vectors: np.ndarray
) -> dict[str, np.ndarray]:
    """Return sentence-embedding context of each rated pair (unit-norm caption `vectors`).

    Image pairs: `mitl.relevance.context` (the image centroid, how alike the two images
    read, where the image ranks for the caption and the caption for the image). Caption
    pairs: the two captions' own images against each other, and each caption against the
    other's image.
    """
    if ratings.kind == "image":
        return pair_context(Context.of(corpus, vectors), ratings.left, ratings.right)
    sums = np.zeros((len(corpus.image_ids), vectors.shape[1]))
    np.add.at(sums, corpus.image_of, vectors)
    norms = np.linalg.norm(sums, axis=1, keepdims=True)
    centroids = np.divide(sums, norms, out=np.zeros_like(sums), where=norms > 0)
    own = centroids[corpus.image_of[ratings.left]]
    other = centroids[corpus.image_of[ratings.right]]
    return {
        "context/images": np.einsum("ij,ij->i", own, other),
        "context/left_to_right_image": np.einsum("ij,ij->i", vectors[ratings.left], other),
        "context/right_to_left_image": np.einsum("ij,ij->i", vectors[ratings.right], own),
    }


def coverage_features(ratings: Ratings, corpus: CaptionCorpus) -> dict[str, np.ndarray]:
    """Return the word coverage (`mitl.relevance.coverage`; its WordNet features when
    WordNet is installed) of rated image pairs; none for caption pairs."""
    if ratings.kind != "image":
        return {}
    coverage = Coverage.of(corpus, wordnet=wordnet_available())
    return coverage.pairs(ratings.left, ratings.right)


def correlations(x: np.ndarray, y: np.ndarray) -> dict[str, float | None]:
    """Return Pearson, Spearman and Kendall tau-b of x and y (None when undefined)."""
    if len(x) < 3 or np.ptp(x) == 0 or np.ptp(y) == 0:
        return {"pearson": None, "spearman": None, "kendall": None}
    return {
        "pearson": float(stats.pearsonr(x, y).statistic),
        "spearman": float(stats.spearmanr(x, y).statistic),
        "kendall": float(stats.kendalltau(x, y).statistic),
    }


def correlation_row(name: str, values: np.ndarray, ratings: Ratings) -> dict[str, Any]:
    """Return one feature's correlations over all pairs and over non-ground-truth pairs."""
    other = ~ratings.ground_truth
    return {
        "proxy": name,
        "all": correlations(values, ratings.score),
        "non_gt": correlations(values[other], ratings.score[other]),
        "pairs": len(values),
        "non_gt_pairs": int(other.sum()),
    }


def correlation_table(features: Mapping[str, np.ndarray], ratings: Ratings) -> list[dict[str, Any]]:
    """Return one row per feature (`correlation_row`)."""
    return [correlation_row(name, values, ratings) for name, values in features.items()]


def fit_combination(
    features: Mapping[str, np.ndarray], ratings: Ratings, *, seed: int = 0
) -> np.ndarray | None:
    """Return out-of-fold predictions of the ratings from every feature (folds by image), or
    None when the pairs cover fewer than two images (nothing to hold out)."""
    from sklearn.model_selection import GroupKFold

    if len(np.unique(ratings.groups)) < 2:
        return None
    x = feature_columns(features, sorted(features))
    y = ratings.score
    predictions = np.zeros(len(y))
    folds = GroupKFold(n_splits=min(FOLDS, len(np.unique(ratings.groups))))
    # Image pairs only: on STS the weight lowered the combination (0.739 to 0.736).
    weights = pair_weights(ratings.ground_truth) if ratings.kind == "image" else None
    for fit_rows, score_rows in folds.split(x, y, groups=ratings.groups):
        model = regressor_make(seed)
        model.fit(
            x[fit_rows], y[fit_rows], sample_weight=None if weights is None else weights[fit_rows]
        )
        predictions[score_rows] = model.predict(x[score_rows])
    return predictions


def recommend(table: Sequence[Mapping[str, Any]]) -> str | None:
    """Return the name of the row with the highest Pearson over non-ground-truth pairs, or
    None when no row agrees with people there (no Pearson above 0)."""
    scored = [row for row in table if (row["non_gt"]["pearson"] or 0.0) > 0.0]
    if not scored:
        return None
    return str(max(scored, key=lambda row: float(row["non_gt"]["pearson"]))["proxy"])
