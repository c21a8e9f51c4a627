"""The calibrated relevance's matrices agree with its per-pair features and predictions."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest

from mitl.relevance.calibrated import (
    CalibratedModel,
    CalibratedModelError,
    CalibratedScorer,
    calibrated_fit,
    calibrated_unavailable,
    feature_columns,
)
from mitl.relevance.calibration import image_ratings, proxy_features
from mitl.relevance.context import Context, grid_context, pair_context
from mitl.relevance.coverage import COVERAGE_VERSION, Coverage
from mitl.relevance.images import (
    CaptionCorpus,
    caption_image_grid,
    caption_to_images,
    image_to_captions,
)
from mitl.relevance.proxies import PROXIES, proxy_build
from mitl.relevance.wordnet import wordnet_available

WORDS = ["a", "dog", "cat", "man", "woman", "red", "blue", "ball", "runs", "sits", "on", "the"]


def corpus_of(images: int = 9, seed: int = 1) -> CaptionCorpus:
    """A corpus of random captions, 2 to 5 per image, images listed out of order."""
    rng = np.random.default_rng(seed)
    ids, image_ids, texts = [], [], []
    for image in rng.permutation(images):
        for _ in range(int(rng.integers(2, 6))):
            ids.append(len(ids) + 100)
            image_ids.append(int(image) * 7 + 3)
            texts.append(" ".join(rng.choice(WORDS, size=int(rng.integers(3, 8)))))
    order = rng.permutation(len(ids))  # captions of an image need not sit together
    return CaptionCorpus.of(
        [ids[i] for i in order], [image_ids[i] for i in order], [texts[i] for i in order]
    )


def unit_vectors(count: int, seed: int = 2) -> np.ndarray:
    vectors = np.random.default_rng(seed).normal(size=(count, 8)).astype(np.float32)
    return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)


def every_pair(corpus: CaptionCorpus) -> tuple[np.ndarray, np.ndarray]:
    captions, images = np.meshgrid(
        np.arange(len(corpus.texts)), np.arange(len(corpus.image_ids)), indexing="ij"
    )
    return captions.ravel(), images.ravel()


def test_a_proxy_grid_is_the_proxy_s_relevance_in_both_directions():
    corpus = corpus_of()
    proxy = proxy_build("rouge_l", corpus.texts)
    captions = np.arange(len(corpus.texts))
    images = np.arange(len(corpus.image_ids))
    grid = caption_image_grid(proxy, corpus, captions, images)
    for aggregation in ("mean", "max"):
        t2i = caption_to_images(proxy, corpus, captions, aggregation=aggregation)
        i2t = image_to_captions(proxy, corpus, images, aggregation=aggregation)
        np.testing.assert_allclose(grid[aggregation], t2i, atol=1e-6)
        np.testing.assert_allclose(grid[aggregation], i2t.T, atol=1e-6)


def test_grid_context_agrees_with_pair_context_and_ranks_from_both_sides():
    corpus = corpus_of()
    context = Context.of(corpus, unit_vectors(len(corpus.texts)))
    captions, images = every_pair(corpus)
    grid = grid_context(context, np.arange(len(corpus.texts)), np.arange(len(corpus.image_ids)))
    pairs = pair_context(context, captions, images)
    for name, values in pairs.items():
        np.testing.assert_allclose(grid[name].ravel(), values, atol=1e-5, err_msg=name)
    # From the caption's side: the best image beats every other image and has no gap.
    best = grid["context/centroid"].argmax(axis=1)
    rows = np.arange(len(best))
    assert np.allclose(grid["context/gap_to_best"][rows, best], 0.0)
    assert np.allclose(grid["context/rank_share"][rows, best], 1 - 1 / len(corpus.image_ids))
    # From the image's side: the share of captions below follows the cosine per image.
    column = grid["context/centroid"][:, 0]
    share = grid["context/caption_share"][:, 0]
    assert np.array_equal(np.argsort(column, kind="stable"), np.argsort(share, kind="stable"))


def test_word_coverage_agrees_pair_by_pair_and_counts_the_image_s_words_together():
    corpus = CaptionCorpus.of(
        [1, 2, 3, 4], [10, 10, 20, 20], ["a red ball", "a dog sits", "red dogs", "a cat"]
    )
    coverage = Coverage.of(corpus)
    captions, images = every_pair(corpus)
    grid = coverage.grid(np.arange(4), np.arange(2))
    for name, values in coverage.pairs(captions, images).items():
        np.testing.assert_allclose(grid[name].ravel(), values, err_msg=name)
    # "red dogs": no single caption of image 10 has both words, the two together do (once
    # the plural is dropped).
    assert grid["coverage/stems"][2, 0] == 1.0 and grid["coverage/words"][2, 0] == 0.5
    assert grid["coverage/stems"][1, 1] == 0.5  # "a dog sits" on image 20: "dog(s)" only
    assert grid["coverage/words"][1, 1] == 0.0
    assert grid["coverage/image_words"][2, 0] == pytest.approx(1 / 4)  # red of red ball dog sits
    assert grid["coverage/bigrams"][1, 0] == 1.0 and grid["coverage/bigrams"][0, 1] == 0.0
    # "a red ball" on image 20: "red" matches but is on every image (idf 0), "ball" does not.
    assert grid["coverage/words"][0, 1] == 0.5 and grid["coverage/idf_words"][0, 1] == 0.0
    assert grid["coverage/idf_words"][3, 1] == 1.0  # "a cat" on its own image


def fitted(corpus: CaptionCorpus) -> tuple[CalibratedModel, Context, dict]:
    """A model fitted on random ratings of every pair, from bow and rouge_l and the context."""
    built = {name: proxy_build(name, corpus.texts) for name in ("bow", "rouge_l")}
    context = Context.of(corpus, unit_vectors(len(corpus.texts)))
    captions, images = every_pair(corpus)
    pairs = [
        (0, int(corpus.caption_ids[c]), int(corpus.image_ids[i]), 0.0)
        for c, i in zip(captions, images, strict=True)
    ]
    ratings = image_ratings("sits", pairs, corpus, where="test")
    features = proxy_features(ratings, corpus, built)
    features.update(pair_context(context, captions, images))
    features.update(Coverage.of(corpus).pairs(captions, images))
    rng = np.random.default_rng(3)
    scores = 5 * rng.random(len(captions)) * (0.3 + features["bow/max"])
    model = calibrated_fit(
        features, scores, ratings.ground_truth, proxies=list(built), context=True, scale=5.0
    )
    return model, context, {"built": built, "features": features, "pairs": (captions, images)}


def test_matrices_are_the_per_pair_prediction_in_both_directions():
    corpus = corpus_of()
    model, context, parts = fitted(corpus)
    regressor = model.regressor()
    scorer = CalibratedScorer(
        model, regressor, parts["built"], context, Coverage.of(corpus), corpus
    )
    x = feature_columns(parts["features"], model.features)
    expected = np.clip(regressor.predict(x) / 5.0, 0, 1).reshape(len(corpus.texts), -1)
    assert expected.std() > 0.01  # the model does not predict a constant

    image_queries = np.array([4, 0, 7])
    caption_queries = np.array([11, 2, 5, 30])
    i2t = scorer.matrix("i2t", image_queries)
    t2i = scorer.matrix("t2i", caption_queries)
    assert i2t.shape == (3, len(corpus.texts)) and t2i.shape == (4, len(corpus.image_ids))
    np.testing.assert_allclose(i2t, expected[:, image_queries].T, atol=1e-5)
    np.testing.assert_allclose(t2i, expected[caption_queries], atol=1e-5)


def test_blocks_and_progress_do_not_change_the_matrix(monkeypatch):
    corpus = corpus_of()
    model, context, parts = fitted(corpus)
    scorer = CalibratedScorer(
        model, model.regressor(), parts["built"], context, Coverage.of(corpus), corpus
    )
    whole = scorer.matrix("i2t", np.arange(len(corpus.image_ids)))
    monkeypatch.setattr("mitl.relevance.calibrated.GRID_PAIRS", 7)
    seen: list[tuple[int, int]] = []
    blocked = scorer.matrix(
        "i2t", np.arange(len(corpus.image_ids)), lambda d, t: seen.append((d, t))
    )
    np.testing.assert_array_equal(whole, blocked)
    assert len(seen) > 1 and seen[-1] == (len(corpus.texts), len(corpus.texts))


def test_the_model_round_trips_and_its_version_follows_what_decides_its_values():
    corpus = corpus_of()
    model, _, _ = fitted(corpus)
    again = CalibratedModel.from_spec(model.spec(), model.model)
    assert again == model and again.version == model.version
    assert dataclasses.replace(model, scale=3.0).version != model.version
    assert dataclasses.replace(model, proxies=("bow",)).version != model.version
    assert model.coverage == COVERAGE_VERSION
    assert "word coverage version" in (
        calibrated_unavailable(dataclasses.replace(model, coverage=COVERAGE_VERSION + 1)) or ""
    )
    tampered = dataclasses.replace(model, model=model.model[:-1] + b"\0")
    with pytest.raises(CalibratedModelError, match="sha256"):
        tampered.regressor()


def test_a_model_of_a_changed_proxy_says_so():
    corpus = corpus_of()
    model, _, _ = fitted(corpus)
    assert calibrated_unavailable(model) is None or "minilm" in calibrated_unavailable(model)
    stale = dataclasses.replace(
        model, context=False, proxy_versions={"bow": PROXIES["bow"].version + 1, "rouge_l": 1}
    )
    assert "bow version" in (calibrated_unavailable(stale) or "")
    other = dataclasses.replace(model, context=False, library="scikit-learn 0.1")
    assert "fitted with scikit-learn 0.1, this machine has" in (calibrated_unavailable(other) or "")
    gone = dataclasses.replace(model, context=False, proxies=("bow", "nonsense"))
    assert "nonsense" in (calibrated_unavailable(gone) or "")


def test_a_model_reading_wordnet_coverage_says_when_wordnet_is_missing(monkeypatch):
    corpus = corpus_of()
    model, _, _ = fitted(corpus)
    reads = dataclasses.replace(
        model, context=False, features=(*model.features, "coverage/synset_n")
    )
    monkeypatch.setattr("mitl.relevance.calibrated.wordnet_available", lambda: False)
    assert "word coverage needs WordNet" in (calibrated_unavailable(reads) or "")
    assert calibrated_unavailable(dataclasses.replace(model, context=False)) is None


@pytest.mark.skipif(not wordnet_available(), reason="needs WordNet (wordnet-base)")
def test_wordnet_coverage_matches_synonyms_and_agrees_pair_by_pair():
    corpus = CaptionCorpus.of(
        [1, 2, 3], [10, 10, 20], ["a cat on a couch", "a sleeping cat", "a sofa by a window"]
    )
    coverage = Coverage.of(corpus, wordnet=True)
    captions, images = every_pair(corpus)
    grid = coverage.grid(np.arange(3), np.arange(2))
    for name, values in coverage.pairs(captions, images).items():
        np.testing.assert_allclose(grid[name].ravel(), values, err_msg=name)
    # "sofa" (image 20's) against image 10: the lemma is not there, its synset ("couch") is.
    assert grid["coverage/synset_n"][2, 0] > grid["coverage/pos_n"][2, 0]
