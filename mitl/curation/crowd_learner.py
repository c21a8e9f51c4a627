"""A machine annotator that learns from the crowd: refit between adaptive rounds.

The batch's annotators stay frozen; the learner reads what they say of a pair (each one's
similarity, z-scored, and for an annotator with vectors a low-rank bilinear view: the outer
product of the image's and the caption's coordinates on the vectors' top principal
components) and fits one L2-penalised logistic model on the verdicts so far: judged pairs,
known positives other than a caption with its own image (text annotators build an image
from its captions, so that pair's views hold its own caption), and random pairs of the
queries presumed negative, as many as the labelled ones (positives are rare; Cormack and
Grossman's BMI adds random documents as non-relevant for the same reason). It then ranks
every target of every query, as an annotator would, under the pseudo id `LEARNER_ID`.

Cross-fitted: images fall into `FOLDS` folds and a pair is scored by the model fitted
without its image's fold, so the learner's ranks of judged pairs are as honest as those of
unjudged ones (the learned policy trains on them). Rows, not database ids: the platform
maps them (`pipeline.curation_learner`). Pure numpy; no Django.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .learned import logistic_fit

LEARNER_ID = 0  # the learner's annotator id in QueryRankings (database ids start at 1)
FOLDS = 4  # cross-fitting folds, by image
BILINEAR_RANK = 8  # principal components per side of a vector annotator's bilinear view
L2 = 1.0  # ridge penalty on standardised features
MIN_CLASS = 5  # judged positives and negatives each fold's fit needs
PRESUMED_NEGATIVES = 1.0  # random query pairs presumed negative, per labelled pair
STATS_SAMPLE = (64, 256)  # images × captions sampled to z-score each similarity

SimilarityFn = Callable[[np.ndarray, np.ndarray], np.ndarray]


@dataclass(frozen=True)
class FrozenView:
    """One frozen annotator as the learner reads it (rows in corpus order)."""

    similarity: SimilarityFn  # (image rows, caption rows) -> scores block
    image_vectors: np.ndarray | None = None  # for the bilinear view, when it has vectors
    caption_vectors: np.ndarray | None = None


@dataclass(frozen=True)
class LearnerQuery:
    query_id: int
    is_image_query: bool
    row: int  # the query's image row (image query) or caption row


@dataclass(frozen=True)
class LearnerRanking:
    targets: np.ndarray  # target rows, best first
    scores: np.ndarray  # the model's log-odds, aligned


class PairFeatures:
    """The feature rows of (image row, caption row) pairs from the frozen views."""

    def __init__(
        self, views: Sequence[FrozenView], n_images: int, n_captions: int, seed: int = 0
    ) -> None:
        rng = np.random.default_rng(seed)
        self.views = list(views)
        self.n_images, self.n_captions = n_images, n_captions
        self.stats = [self._similarity_stats(view, rng) for view in self.views]
        self.bilinear = [
            _principal_coordinates(v.image_vectors, v.caption_vectors)
            for v in self.views
            if v.image_vectors is not None and v.caption_vectors is not None
        ]

    def _similarity_stats(self, view: FrozenView, rng: np.random.Generator) -> tuple[float, float]:
        images = rng.choice(self.n_images, min(STATS_SAMPLE[0], self.n_images), replace=False)
        captions = rng.choice(self.n_captions, min(STATS_SAMPLE[1], self.n_captions), replace=False)
        block = np.asarray(view.similarity(np.sort(images), np.sort(captions)), dtype=float)
        return float(block.mean()), float(block.std()) or 1.0

    def rows(self, images: np.ndarray, captions: np.ndarray) -> np.ndarray:
        """Features of the aligned pairs (images[k], captions[k])."""
        columns = [
            (_pair_similarities(view.similarity, images, captions) - mean) / std
            for view, (mean, std) in zip(self.views, self.stats, strict=True)
        ]
        blocks = [np.stack(columns, axis=1)] if columns else []
        for image_coords, caption_coords in self.bilinear:
            outer = image_coords[images][:, :, None] * caption_coords[captions][:, None, :]
            blocks.append(outer.reshape(len(images), -1))
        return np.hstack(blocks) if blocks else np.zeros((len(images), 0))


def _principal_coordinates(
    image_vectors: np.ndarray, caption_vectors: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Both sides' coordinates on the top `BILINEAR_RANK` components of their vectors."""
    stacked = np.vstack([image_vectors, caption_vectors]).astype(float)
    centre = stacked.mean(axis=0)
    _, _, basis = np.linalg.svd(stacked - centre, full_matrices=False)
    top = basis[:BILINEAR_RANK].T
    return (image_vectors - centre) @ top, (caption_vectors - centre) @ top


def _pair_similarities(
    similarity: SimilarityFn, images: np.ndarray, captions: np.ndarray
) -> np.ndarray:
    """One annotator's score of each aligned pair, one block per image (or per caption)."""
    out = np.empty(len(images))
    by_image = len(np.unique(images)) <= len(np.unique(captions))
    keys, others = (images, captions) if by_image else (captions, images)
    order = np.argsort(keys, kind="stable")
    starts = np.flatnonzero(np.r_[True, np.diff(keys[order]) != 0])
    for start, end in zip(starts, np.r_[starts[1:], len(order)], strict=True):
        members = order[start:end]
        key = keys[members[:1]]
        block = similarity(key, others[members]) if by_image else similarity(others[members], key)
        out[members] = np.asarray(block, dtype=float).reshape(-1)
    return out


@dataclass(frozen=True)
class FoldModels:
    """One model per fold of images: the fold's pairs are scored by the model without them."""

    fold_of_image: np.ndarray
    mean: np.ndarray
    scale: np.ndarray
    weights: list[np.ndarray]  # per fold, intercept first

    def scores(self, features: np.ndarray, images: np.ndarray) -> np.ndarray:
        standard = (features - self.mean) / self.scale
        folds = self.fold_of_image[images]
        out = np.empty(len(images))
        for fold, weights in enumerate(self.weights):
            chosen = folds == fold
            out[chosen] = weights[0] + standard[chosen] @ weights[1:]
        return out


def presumed_negatives(
    queries: Sequence[LearnerQuery],
    labelled: set[tuple[int, int]],
    count: int,
    n_targets: tuple[int, int],
    rng: np.random.Generator,
) -> list[tuple[int, int]]:
    """`count` random (image row, caption row) pairs of the queries, none of them labelled."""
    n_images, n_captions = n_targets
    drawn: list[tuple[int, int]] = []
    seen = set(labelled)
    for _ in range(count * 4):  # refusals are rare; the bound only guards tiny corpora
        if len(drawn) >= count or not queries:
            break
        query = queries[int(rng.integers(len(queries)))]
        if query.is_image_query:
            pair = (query.row, int(rng.integers(n_captions)))
        else:
            pair = (int(rng.integers(n_images)), query.row)
        if pair not in seen:
            seen.add(pair)
            drawn.append(pair)
    return drawn


def fold_models_fit(
    features: PairFeatures, pairs: np.ndarray, labels: np.ndarray, seed: int = 0
) -> FoldModels | None:
    """Fit one model per fold of images on the other folds' pairs; None when one is too thin.

    `pairs` are (image row, caption row) rows and `labels` 1/0; a fold's training pairs
    need `MIN_CLASS` of each label.
    """
    rng = np.random.default_rng(seed)
    fold_of_image = rng.permutation(features.n_images) % FOLDS
    matrix = features.rows(pairs[:, 0], pairs[:, 1])
    mean = matrix.mean(axis=0)
    scale = matrix.std(axis=0)
    scale[scale == 0] = 1.0
    standard = (matrix - mean) / scale
    weights = []
    for fold in range(FOLDS):
        train = fold_of_image[pairs[:, 0]] != fold
        y = labels[train]
        if y.sum() < MIN_CLASS or (1 - y).sum() < MIN_CLASS:
            return None
        weights.append(logistic_fit(standard[train], y, L2))
    return FoldModels(fold_of_image, mean, scale, weights)


def enough_verdicts(judged: Mapping[tuple[int, int], bool]) -> bool:
    """Whether the crowd has judged `MIN_CLASS` positives and negatives (else no fit)."""
    positives = sum(judged.values())
    return positives >= MIN_CLASS and len(judged) - positives >= MIN_CLASS


def learner_rankings(
    features: PairFeatures,
    queries: Sequence[LearnerQuery],
    judged: dict[tuple[int, int], bool],
    known: set[tuple[int, int]],
    depth: int,
    seed: int = 0,
) -> dict[int, LearnerRanking] | None:
    """Each query's `depth` best targets by the learner; None before it can be fit.

    `judged`: (image row, caption row) → the crowd's verdict; `known`: positive pairs known
    without judging (a caption with its own image left out by the caller). It needs
    `MIN_CLASS` judged positives and negatives.
    """
    if not enough_verdicts(judged):
        return None
    labelled = dict(judged)
    labelled.update(dict.fromkeys(known - set(judged), True))
    rng = np.random.default_rng(seed)
    negatives = presumed_negatives(
        queries,
        set(labelled),
        round(len(labelled) * PRESUMED_NEGATIVES),
        (features.n_images, features.n_captions),
        rng,
    )
    pairs = np.array([*labelled, *negatives], dtype=np.int64).reshape(-1, 2)
    labels = np.array([*map(float, labelled.values()), *[0.0] * len(negatives)])
    models = fold_models_fit(features, pairs, labels, seed)
    if models is None:
        return None
    return {query.query_id: _query_ranking(features, models, query, depth) for query in queries}


def _query_ranking(
    features: PairFeatures, models: FoldModels, query: LearnerQuery, depth: int
) -> LearnerRanking:
    """Score every target of one query and keep the `depth` best."""
    if query.is_image_query:
        targets = np.arange(features.n_captions)
        images, captions = np.full(len(targets), query.row), targets
    else:
        targets = np.arange(features.n_images)
        images, captions = targets, np.full(len(targets), query.row)
    scores = models.scores(features.rows(images, captions), images)
    best = np.argsort(-scores, kind="stable")[:depth]
    return LearnerRanking(targets=targets[best], scores=scores[best])
