"""COCO 5K / 1K recalls: folds of whole images, restricted rankings, the leftover images."""

from __future__ import annotations

import numpy as np
import pytest

from mitl.coco_recalls import coco_recalls
from mitl.metric_truth import MetricError


def test_coco_recalls_restrict_each_fold_to_its_own_targets():
    # two folds: captions 10, 11 of image 1, then 20, 21 of image 2
    captions, images = [10, 11, 20, 21], [1, 1, 2, 2]
    t2i = {10: [2, 1], 11: [1, 2], 20: [2, 1], 21: [1, 2]}
    i2t = {1: [20, 10, 21, 11], 2: [21, 10, 11, 20]}
    result = coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(1,), folds=2)
    assert result["t2i"]["coco_5k_recall@1"] == pytest.approx(2 / 4)
    assert result["t2i"]["coco_1k_recall@1"] == 1.0  # one image per fold: always right
    assert result["i2t"]["coco_5k_recall@1"] == pytest.approx(1 / 2)
    assert result["i2t"]["coco_1k_recall@1"] == 1.0  # image 1 sees 10, 11; image 2 sees 20, 21


def test_a_fold_that_leaves_fewer_than_k_targets_and_no_hit_is_an_error():
    captions, images = [10, 11, 20, 21], [1, 1, 2, 2]
    t2i = {10: [2, 1], 11: [1, 2], 20: [2, 1], 21: [1, 2]}
    i2t = {1: [20, 21], 2: [21, 10, 11, 20]}  # image 1 ranks no caption of its fold
    with pytest.raises(MetricError, match=r"fold 1 of 2: .*query 1 ranks 0 targets of the fold"):
        coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(2,), folds=2)


def test_coco_1k_folds_hold_whole_images_whatever_the_caption_order():
    # captions interleaved as a COCO annotations file may list them: 10, 20 of images 1, 2,
    # then 11, 21; the two folds are image 1 (10, 11) and image 2 (20, 21), not 10, 20 | 11, 21
    captions, images = [10, 20, 11, 21], [1, 2, 1, 2]
    t2i = {10: [2, 1], 11: [1, 2], 20: [2, 1], 21: [2, 1]}
    i2t = {1: [20, 10, 21, 11], 2: [11, 21, 10, 20]}
    result = coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(1,), folds=2)
    assert result["t2i"]["coco_5k_recall@1"] == pytest.approx(3 / 4)
    assert result["t2i"]["coco_1k_recall@1"] == 1.0  # one image per fold: always right
    assert result["i2t"]["coco_5k_recall@1"] == 0.0
    assert result["i2t"]["coco_1k_recall@1"] == 1.0  # image 1 sees 10, 11; image 2 sees 20, 21


def full_split(rng, n_images: int, per_image: int):
    """Return (captions, images) grouped by image and random full rankings of every item."""
    images = np.repeat(np.arange(1, n_images + 1), per_image)
    captions = np.arange(100, 100 + len(images))
    t2i, i2t = {}, {}
    for caption, image in zip(captions.tolist(), images.tolist(), strict=True):
        ranking = rng.permutation(np.arange(1, n_images + 1)).tolist()
        if rng.random() < 0.5:  # the own image in the top 3 for about half
            ranking.remove(image)
            ranking.insert(int(rng.integers(0, 3)), image)
        t2i[caption] = ranking
    for image in range(1, n_images + 1):
        ranking = rng.permutation(captions).tolist()
        if rng.random() < 0.5:
            own = int(captions[images == image][0])
            ranking.remove(own)
            ranking.insert(int(rng.integers(0, 5)), own)
        i2t[image] = ranking
    return captions, images, i2t, t2i


def test_shuffled_captions_give_the_recalls_of_their_images_grouped_in_order():
    rng = np.random.default_rng(7)
    captions, images, i2t, t2i = full_split(rng, n_images=20, per_image=5)
    order = rng.permutation(len(captions))
    shuffled_captions, shuffled_images = captions[order], images[order]
    # the same images in the same order (their first appearance), each one's captions together
    image_order = list(dict.fromkeys(shuffled_images.tolist()))
    grouped = np.concatenate([np.flatnonzero(shuffled_images == i) for i in image_order])

    shuffled = coco_recalls(i2t, t2i, caption_ids=shuffled_captions, caption_images=shuffled_images)
    in_groups = coco_recalls(
        i2t, t2i, caption_ids=shuffled_captions[grouped], caption_images=shuffled_images[grouped]
    )

    assert shuffled == in_groups
    for direction in ("i2t", "t2i"):
        assert 0 < shuffled[direction]["coco_1k_recall@1"] < 1  # the folds can tell orders apart


def test_leftover_images_join_the_first_folds_so_1k_scores_every_image():
    # 6 images in 5 folds: images 1 and 2 share fold 1, images 3 to 6 have a fold each
    captions = [10, 11, 20, 21, 30, 40, 50, 60]
    images = [1, 1, 2, 2, 3, 4, 5, 6]
    first = {c: 2 if c // 10 == 1 else c // 10 for c in captions}  # image 1's rank 2 first
    t2i = {c: [first[c]] + [i for i in range(1, 7) if i != first[c]] for c in captions}
    i2t = {i: sorted(captions, key=lambda c, i=i: c // 10 != i) for i in range(1, 7)}
    result = coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images, ks=(1,))
    # fold 1: captions 10, 11 rank image 2 first (misses), 20, 21 rank image 2 first (hits)
    assert result["t2i"]["coco_1k_recall@1"] == pytest.approx((2 / 4 + 1 + 1 + 1 + 1) / 5)
    assert result["t2i"]["coco_5k_recall@1"] == pytest.approx(6 / 8)


def test_a_split_with_fewer_images_than_folds_has_no_coco_1k():
    with pytest.raises(MetricError, match=r"needs at least 5 images \(this split has 2\)"):
        coco_recalls({}, {}, caption_ids=[10, 11, 20], caption_images=[1, 1, 2])
    with pytest.raises(ValueError, match="one image per caption"):
        coco_recalls({}, {}, caption_ids=[10, 11], caption_images=[1])
