"""COCO 5K / 1K Recall@K over every caption and image of a split (`coco_recalls`).

5K is Recall@K (`mitl.metrics`) over every caption and image of a split against the
original links (each caption's own image). 1K cuts the split by image: the images in order
of first appearance among the captions (the split order of a Karpathy file, whose captions
come grouped by image), into 5 folds of n_images // 5 images, and each fold holds the
captions of its images, in whatever order the captions came. The n_images % 5 images left
over go one each to the first folds, so every image and caption that 5K scores is in exactly
one fold (a 5,000-image split has none left over). Each query's ranking is restricted to the
targets of its fold (the fold's images, or the fold's captions) and the 5 fold recalls are
averaged, each fold weighing the same. Like every metric here, these equal eccv-caption's
to 1e-9 (tests/mitl/test_metrics_conformance.py). Pure Python and numpy.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import numpy as np

from mitl.metric_hits import check_ks, query_mean, ranked_hits, refuse_short
from mitl.metric_truth import MetricError, Rankings, Truth, prepare
from mitl.metrics import DEFAULT_KS, retrieval_metrics

COCO_FOLDS = 5


def restricted_recalls(
    truth: Truth, rankings: Rankings, allowed: np.ndarray, ks: Iterable[int] = DEFAULT_KS
) -> dict[int, float]:
    """Return {K: Recall@K} with every ranking restricted to the `allowed` targets first."""
    ks = check_ks(ks)
    ranked = ranked_hits(truth, rankings, None, allowed=np.unique(allowed))
    result = {}
    for k in ks:
        found = ranked.found_within(k)
        short = ~found & (ranked.length < k)
        refuse_short(truth, short, ranked.length, k, f"recall@{k}", " of the fold and no positive")
        result[k] = query_mean(found)
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
    ks = check_ks(ks)
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
