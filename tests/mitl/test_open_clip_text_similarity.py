"""Free-text scoring (`text_similarity`) of the open_clip annotator, on a random tiny model."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("torch")
pytest.importorskip("open_clip")

from mitl.annotators.base import Corpus
from mitl.annotators.open_clip import OpenClipAnnotator
from tests.mitl import test_open_clip_annotator as clip_tests

# The tiny random model and the synthetic corpus of the annotator's own tests.
random_weights = clip_tests.random_weights
corpus = clip_tests.corpus


@pytest.fixture(scope="module")
def clip(random_weights, corpus: Corpus) -> OpenClipAnnotator:
    prepared = clip_tests.annotator(random_weights)
    prepared.prepare(corpus)
    return prepared


def test_open_clip_scores_free_text() -> None:
    assert OpenClipAnnotator.can_score_text is True


def test_original_text_scores_like_its_caption(clip: OpenClipAnnotator, corpus: Corpus) -> None:
    # More texts than the batch size, repeated and shuffled.
    rows = np.random.default_rng(0).permutation(np.r_[np.arange(corpus.n_captions), 0, 2])
    scores = clip.text_similarity([corpus.caption_texts[row] for row in rows], rows)
    assert scores.dtype == np.float32
    assert scores.shape == (len(rows), corpus.n_images)
    expected = clip.similarity(np.arange(corpus.n_images), rows).T
    np.testing.assert_allclose(scores, expected, atol=1e-5)


def test_nothing_is_left_out_and_a_changed_word_changes_the_scores(
    clip: OpenClipAnnotator, corpus: Corpus
) -> None:
    text = corpus.caption_texts[0]
    changed = f"zebra {text}"
    replacing, free, perturbed = clip.text_similarity([text, text, changed], np.array([0, -1, 0]))
    # Images are pixels, not captions: standing in for a caption changes nothing.
    np.testing.assert_allclose(replacing, free, atol=1e-6)
    assert not np.allclose(perturbed, free, atol=1e-4)


def test_bad_caption_rows_are_refused(clip: OpenClipAnnotator) -> None:
    with pytest.raises(ValueError, match="or be -1"):
        clip.text_similarity(["a dog"], np.array([-5]))


def test_empty_text_list(clip: OpenClipAnnotator, corpus: Corpus) -> None:
    scores = clip.text_similarity([], np.array([], dtype=np.int64))
    assert scores.shape == (0, corpus.n_images) and scores.dtype == np.float32
