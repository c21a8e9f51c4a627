"""The learner annotator learns what the crowd accepts, where the frozen scores mislead."""

from __future__ import annotations

import numpy as np

from mitl.curation.crowd_learner import (
    FrozenView,
    LearnerQuery,
    PairFeatures,
    learner_rankings,
)

N_CLASSES = 4


def _toy_world(seed: int = 0):
    """Images and captions of 4 classes; a pair is positive when the classes are equal.

    Captions sit on the prototype of the *next* class, so the frozen dot product ranks the
    wrong captions first; the bilinear view can learn the shift from verdicts.
    """
    rng = np.random.default_rng(seed)
    prototypes = np.eye(N_CLASSES, 6)
    image_class = np.arange(40) % N_CLASSES
    caption_class = np.arange(120) % N_CLASSES
    images = prototypes[image_class] + 0.1 * rng.normal(size=(40, 6))
    captions = prototypes[(caption_class + 1) % N_CLASSES] + 0.1 * rng.normal(size=(120, 6))
    view = FrozenView(
        similarity=lambda i, c: images[i] @ captions[c].T,
        image_vectors=images,
        caption_vectors=captions,
    )
    truth = image_class[:, None] == caption_class[None, :]
    return PairFeatures([view], 40, 120), truth, view


def _judged(truth: np.ndarray, image_rows: range) -> dict[tuple[int, int], bool]:
    return {(i, c): bool(truth[i, c]) for i in image_rows for c in range(0, 120, 3)}


def _auc(scores: np.ndarray, positive: np.ndarray) -> float:
    """The share of (positive, negative) pairs ordered right."""
    return float((scores[positive][:, None] > scores[~positive][None, :]).mean())


def test_learner_ranks_a_held_out_query_s_positives_above_its_negatives():
    features, truth, view = _toy_world()
    queries = [LearnerQuery(i, True, i) for i in range(40)]
    ranked = learner_rankings(features, queries, _judged(truth, range(30)), set(), depth=120)
    assert ranked is not None
    held_out = 35  # no pair of this image was judged
    ranking = ranked[held_out]
    learnt = np.empty(120)
    learnt[ranking.targets] = ranking.scores
    frozen = view.similarity(np.array([held_out]), np.arange(120))[0]
    assert _auc(frozen, truth[held_out]) < 0.5  # the frozen score ranks them worse than chance
    assert _auc(learnt, truth[held_out]) > 0.95
    # Its best ranks are the held-out image's true captions.
    assert truth[held_out, ranking.targets[:20]].all()


def test_caption_queries_rank_images_the_same_way():
    features, truth, _ = _toy_world(seed=1)
    queries = [LearnerQuery(1000 + c, False, c) for c in range(120)]
    ranked = learner_rankings(features, queries, _judged(truth, range(40)), set(), depth=40)
    assert ranked is not None
    ranking = ranked[1000 + 7]
    scores = np.empty(40)
    scores[ranking.targets] = ranking.scores
    assert _auc(scores, truth[:, 7]) > 0.95


def test_no_ranking_before_the_crowd_has_judged_both_kinds():
    features, truth, _ = _toy_world()
    queries = [LearnerQuery(i, True, i) for i in range(40)]
    negatives_only = {(i, c): False for i in range(30) for c in range(120) if not truth[i, c]}
    assert learner_rankings(features, queries, negatives_only, set(), depth=10) is None
