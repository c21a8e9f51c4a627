"""Seeded query sampling: reproducible, distinct, sorted, and one stream per direction."""

from __future__ import annotations

import numpy as np
import pytest

from mitl.sampling import CAPTION_STREAM, IMAGE_STREAM, sample_ids

# Database-like ids: not 0..n-1, not contiguous.
IDS = np.arange(1000, 3000, 3, dtype=np.int64)


def test_the_same_seed_and_stream_give_the_same_sample():
    first = sample_ids(IDS, 50, seed=11, stream=IMAGE_STREAM)
    second = sample_ids(IDS.copy(), 50, seed=11, stream=IMAGE_STREAM)
    np.testing.assert_array_equal(first, second)


def test_different_seeds_give_different_samples():
    samples = {tuple(sample_ids(IDS, 50, seed=seed, stream=IMAGE_STREAM)) for seed in range(5)}
    assert len(samples) == 5


@pytest.mark.parametrize("n", [0, 1, 17, len(IDS)])
def test_the_sample_holds_n_distinct_sorted_ids_from_the_input(n):
    sample = sample_ids(IDS, n, seed=3, stream=CAPTION_STREAM)
    assert len(sample) == n
    assert len(set(sample.tolist())) == n
    assert np.all(np.diff(sample) > 0)
    assert set(sample.tolist()) <= set(IDS.tolist())


def test_asking_for_every_id_returns_all_of_them_sorted():
    shuffled = np.random.default_rng(0).permutation(IDS)
    np.testing.assert_array_equal(sample_ids(shuffled, len(IDS), seed=0, stream=1), IDS)


def test_image_and_caption_streams_draw_differently_from_the_same_seed():
    images = sample_ids(IDS, 50, seed=4, stream=IMAGE_STREAM)
    captions = sample_ids(IDS, 50, seed=4, stream=CAPTION_STREAM)
    assert not np.array_equal(images, captions)


def test_changing_the_caption_count_never_changes_the_image_sample():
    image_ids = np.arange(500, dtype=np.int64)
    caption_ids = np.arange(10_000, 12_500, dtype=np.int64)
    before = sample_ids(image_ids, 30, seed=8, stream=IMAGE_STREAM)
    sample_ids(caption_ids, 10, seed=8, stream=CAPTION_STREAM)
    sample_ids(caption_ids, 400, seed=8, stream=CAPTION_STREAM)
    after = sample_ids(image_ids, 30, seed=8, stream=IMAGE_STREAM)
    np.testing.assert_array_equal(before, after)


def test_the_sample_is_not_simply_the_first_ids():
    sample = sample_ids(IDS, 20, seed=0, stream=IMAGE_STREAM)
    assert not np.array_equal(sample, IDS[:20])


def test_ids_given_as_a_list_are_accepted_and_returned_as_int64():
    sample = sample_ids([5, 9, 2, 7], 2, seed=1, stream=IMAGE_STREAM)
    assert sample.dtype == np.int64
    assert set(sample.tolist()) <= {5, 9, 2, 7}


def test_asking_for_more_ids_than_exist_raises_with_both_numbers():
    with pytest.raises(ValueError) as caught:
        sample_ids(np.arange(7), 8, seed=0, stream=IMAGE_STREAM)
    message = str(caught.value)
    assert "8" in message
    assert "7" in message


def test_the_two_streams_are_different_numbers():
    assert IMAGE_STREAM != CAPTION_STREAM
