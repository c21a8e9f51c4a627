"""Our metrics equal the `eccv-caption` package's on the same rankings, to 1e-9.

The rankings are seeded over the COCO 5K test ids the package ships: random ones, ones
that put every positive on top, and ones that scatter a few positives in the top ranks.
Where the reference returns a number the rankings cannot determine (or crashes), ours
raises a `MetricError` instead; those cases are pinned here too.
"""

from __future__ import annotations

import contextlib
import io
import json
import warnings
from pathlib import Path

import numpy as np
import pytest

from mitl.coco_recalls import coco_recalls
from mitl.metric_truth import MetricError, prepare
from mitl.metrics import retrieval_metrics

with warnings.catch_warnings():
    warnings.simplefilter("ignore")  # "failed to import ujson"
    import eccv_caption
    from eccv_caption import Metrics
    from eccv_caption._metrics import (
        compute_eccv_metrics,
        compute_r_at_k,
        compute_rprecision,
        rprecision,
    )

DATA = Path(eccv_caption.__file__).parent / "data"
DEPTH = 100
TOL = 1e-9


def quiet(call, *args, **kwargs):
    """Run a reference call without its tqdm progress bars."""
    with contextlib.redirect_stderr(io.StringIO()):
        return call(*args, **kwargs)


@pytest.fixture(scope="module")
def reference() -> Metrics:
    return Metrics()


@pytest.fixture(scope="module")
def coco(reference):
    captions = np.load(DATA / "coco_test_ids.npy").astype(np.int64)
    images = np.array([reference.coco_gts["t2i"][int(c)][0] for c in captions], dtype=np.int64)
    return captions, images


def ranking_for(rng, positives: list[int], pool: np.ndarray, style: int) -> list[int]:
    """Return a top-100 ranking: random (0), positives first (1), or a few scattered (2)."""
    ranking = [int(t) for t in pool[rng.permutation(len(pool))[: DEPTH + len(positives)]]]
    wanted = set(positives)
    others = [t for t in ranking if t not in wanted][:DEPTH]
    if style == 1:
        return (list(rng.permutation(positives).tolist()) + others)[:DEPTH]
    if style == 2:
        chosen = rng.permutation(positives)[: int(rng.integers(1, len(positives) + 1))]
        for target in chosen.tolist():
            others.insert(int(rng.integers(0, 40)), target)
        return others[:DEPTH]
    return others


@pytest.fixture(scope="module")
def eccv_rankings(reference, coco):
    rng = np.random.default_rng(2022)
    captions, images = coco
    pools = {"i2t": captions, "t2i": np.unique(images)}
    return {
        direction: {
            query: ranking_for(rng, positives, pools[direction], i % 3)
            for i, (query, positives) in enumerate(reference.eccv_gts[direction].items())
        }
        for direction in ("i2t", "t2i")
    }


def test_eccv_metrics_equal_the_reference(reference, eccv_rankings):
    expected = quiet(reference.eccv_metrics, eccv_rankings, "all")
    recalls = {k: quiet(reference.eccv_recalls, eccv_rankings, "all", K=k) for k in (1, 5, 10)}
    for direction in ("i2t", "t2i"):
        ours = retrieval_metrics(prepare(reference.eccv_gts[direction]), eccv_rankings[direction])
        assert ours["recall@1"] == pytest.approx(expected["eccv_r1"][direction], abs=TOL)
        assert ours["r_precision"] == pytest.approx(expected["eccv_rprecision"][direction], abs=TOL)
        assert ours["map_at_r"] == pytest.approx(expected["eccv_map_at_r"][direction], abs=TOL)
        for k in (1, 5, 10):
            assert ours[f"recall@{k}"] == pytest.approx(recalls[k][direction], abs=TOL)
        # the rankings mix hits and misses, so these comparisons can tell numbers apart
        assert 0.2 < ours["map_at_r"] < 0.8


def test_r_precision_and_pmrp_equal_the_reference_rprecision(reference, coco):
    # CxC positives, plus queries with more than 50 positives for the cap
    rng = np.random.default_rng(5)
    captions, _ = coco
    positives = {q: v for q, v in list(reference.cxc_gts["i2t"].items())[:300]}
    for query in range(10**7, 10**7 + 40):
        positives[query] = captions[rng.permutation(len(captions))[:70]].tolist()
    rankings = {
        q: ranking_for(rng, p, captions, i % 3) for i, (q, p) in enumerate(positives.items())
    }
    ours = retrieval_metrics(prepare(positives), rankings)
    assert ours["r_precision"] == pytest.approx(compute_rprecision(rankings, positives), abs=TOL)
    capped = np.mean(
        [rprecision(rankings[q], set(p), min(len(p), 50)) for q, p in positives.items()]
    )
    assert ours["pmrp"] == pytest.approx(capped, abs=TOL)
    assert ours["pmrp"] != pytest.approx(ours["r_precision"], abs=1e-3)  # the cap matters here


def test_coco_1k_and_5k_recalls_equal_the_reference(reference, coco):
    captions, images = coco
    rng = np.random.default_rng(11)
    i2t, t2i = full_split_rankings(rng, captions, images)
    ours = coco_recalls(i2t, t2i, caption_ids=captions, caption_images=images)
    rankings = {"i2t": i2t, "t2i": t2i}
    for k in (1, 5, 10):
        one_k = quiet(reference.coco_1k_recalls, rankings, "all", K=k)
        five_k = quiet(reference.coco_5k_recalls, rankings, "all", K=k)
        for direction in ("i2t", "t2i"):
            assert ours[direction][f"coco_1k_recall@{k}"] == pytest.approx(
                one_k[direction], abs=TOL
            )
            assert ours[direction][f"coco_5k_recall@{k}"] == pytest.approx(
                five_k[direction], abs=TOL
            )
    assert 0.1 < ours["t2i"]["coco_1k_recall@1"] < 0.9
    assert ours["t2i"]["coco_1k_recall@1"] > ours["t2i"]["coco_5k_recall@1"]


def test_coco_recalls_of_captions_out_of_split_order_still_equal_the_reference(reference, coco):
    # As a COCO annotations file may list them: the images keep their split order (each
    # one's first caption comes in that order), every other caption comes after, shuffled.
    captions, images = coco
    rng = np.random.default_rng(11)
    i2t, t2i = full_split_rankings(rng, captions, images)
    first = np.r_[True, images[1:] != images[:-1]]
    order = np.concatenate([np.flatnonzero(first), rng.permutation(np.flatnonzero(~first))])
    ours = coco_recalls(i2t, t2i, caption_ids=captions[order], caption_images=images[order])
    rankings = {"i2t": i2t, "t2i": t2i}
    for k in (1, 5, 10):
        one_k = quiet(reference.coco_1k_recalls, rankings, "all", K=k)
        for direction in ("i2t", "t2i"):
            assert ours[direction][f"coco_1k_recall@{k}"] == pytest.approx(
                one_k[direction], abs=TOL
            )


def full_split_rankings(rng, captions: np.ndarray, images: np.ndarray):
    """Rank every image and caption of the split: 20 targets of the query's own fold and 80
    of the others, shuffled; the own target(s) placed in the top 10 for about half."""
    fold_size = len(captions) // 5
    fold_of_caption = np.arange(len(captions)) // fold_size
    image_list = list(dict.fromkeys(images.tolist()))
    fold_of_image = {int(images[i]): int(fold_of_caption[i]) for i in range(len(captions))}
    image_folds = [np.array([i for i in image_list if fold_of_image[i] == f]) for f in range(5)]
    caption_folds = [captions[f * fold_size : (f + 1) * fold_size] for f in range(5)]

    def rows(n_rows, own_fold, folds):
        pools = [np.concatenate([folds[g] for g in range(5) if g != f]) for f in range(5)]
        inside = np.stack([pick(rng, folds[f], 20) for f in own_fold])
        outside = np.stack([pick(rng, pools[f], 80) for f in own_fold])
        return rng.permuted(np.concatenate([inside, outside], axis=1), axis=1)

    t2i_rows = rows(len(captions), fold_of_caption, image_folds)
    t2i_rows = place(rng, t2i_rows, images[:, None])
    image_arr = np.array(image_list)
    captions_of = {i: [] for i in image_list}
    for caption, image in zip(captions.tolist(), images.tolist(), strict=True):
        captions_of[image].append(caption)
    i2t_rows = rows(len(image_arr), [fold_of_image[i] for i in image_list], caption_folds)
    i2t_rows = place(rng, i2t_rows, np.array([captions_of[i][:2] for i in image_list]))
    t2i = {int(c): row.tolist() for c, row in zip(captions, t2i_rows, strict=True)}
    i2t = {int(i): row.tolist() for i, row in zip(image_arr, i2t_rows, strict=True)}
    return i2t, t2i


def pick(rng, pool: np.ndarray, k: int) -> np.ndarray:
    """Return k distinct items of `pool`: an arithmetic walk with a step prime to its size."""
    n = len(pool)
    step = int(rng.integers(1, n))
    while np.gcd(step, n) != 1:
        step += 1
    return pool[(int(rng.integers(0, n)) + step * np.arange(k)) % n]


def place(rng, rows: np.ndarray, own: np.ndarray) -> np.ndarray:
    """Put each row's own targets in its top 10 for about half the rows (a swap if present)."""
    rows = rows.copy()
    chosen = np.flatnonzero(rng.random(len(rows)) < 0.5)
    for column in range(own.shape[1]):
        targets = own[chosen, column]
        where = rng.integers(0, 10, len(chosen))
        present = rows[chosen] == targets[:, None]
        has = present.any(axis=1)
        old = present.argmax(axis=1)
        displaced = rows[chosen, where]
        rows[chosen[has], old[has]] = displaced[has]
        rows[chosen, where] = targets
    return rows


def test_where_the_reference_reads_past_a_short_ranking_ours_refuses():
    positives = {1: [5, 6, 7]}
    short = {1: [5, 9]}
    with pytest.raises(IndexError):  # the reference's mAP@R reads rank R - 1
        quiet(compute_eccv_metrics, short, positives)
    with pytest.raises(MetricError, match="query 1 ranks 2 targets"):
        retrieval_metrics(prepare(positives), short)


def test_where_the_reference_counts_an_unseen_rank_as_a_miss_ours_refuses():
    positives = {1: [5]}
    short = {1: [8, 9]}
    assert compute_r_at_k(short, positives, K=5) == 0  # a guess: rank 3-5 are unknown
    with pytest.raises(MetricError, match="recall@5"):
        retrieval_metrics(prepare(positives), short, ks=(5,), ndcg_ks=(), r_based=False)


def test_a_query_without_a_ranking_crashes_the_reference_and_is_named_by_ours():
    with pytest.raises(KeyError):
        compute_r_at_k({}, {1: [5]}, K=1)
    with pytest.raises(MetricError, match=r"1 queries have no ranking \(first: 1\)"):
        retrieval_metrics(prepare({1: [5]}), {})


def test_the_shipped_eccv_files_are_what_the_reference_loads(reference):
    shipped = json.loads((DATA / "eccv_caption_to_image.json").read_text())
    assert len(shipped) == len(reference.eccv_gts["t2i"]) == 1332
