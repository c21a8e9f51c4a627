"""The hit-building benchmark's data: a COCO-5K-sized dataset and a batch ready to pool.

5,000 images, 25,000 captions (5 per image) and the `original` positive set; 5 annotators
and a batch in `pooling` with 1,261 image and 1,333 caption queries whose synthetic
rankings pool into exactly 46,424 candidates. Import it after `common.django_setup()`: it
imports the models.
"""

from __future__ import annotations

import random

from common import BULK_BATCH, dataset_create, original_positives_create

from annotation.models import (
    Batch,
    BatchState,
    Caption,
    Dataset,
    Direction,
    Image,
    MachineAnnotator,
    Query,
    Ranking,
)
from pipeline.stages import batch_create

# The ECCV Caption run (Chun et al. 2022) on COCO 5K.
N_IMAGES = 5_000
CAPTIONS_PER_IMAGE = 5
N_ANNOTATORS = 5
N_IMAGE_QUERIES = 1_261
N_CAPTION_QUERIES = 1_333
K = 5
RANKING_DEPTH = 25  # = golden_negative_depth: rankings are stored this deep
HIT_SIZE = 16
EXPECTED_PROPOSALS = (N_IMAGE_QUERIES + N_CAPTION_QUERIES) * N_ANNOTATORS * K  # 64,850
EXPECTED_CANDIDATES = 46_424
SEED = 0


def dataset_with_positives_create() -> Dataset:
    """5,000 images, 25,000 captions (5 per image) and the `original` positive set."""
    dataset, _, _ = dataset_create(
        name="bench-coco5k",
        description="hit-building benchmark",
        n_images=N_IMAGES,
        captions_per_image=CAPTIONS_PER_IMAGE,
        caption_text="caption {j} of image {n}",
    )
    original_positives_create(dataset)
    return dataset


def batch_prepare(dataset: Dataset) -> Batch:
    """Annotators, a batch moved to `pooling`, its queries and synthetic rankings."""
    names = [f"bench-bow-{a}" for a in range(N_ANNOTATORS)]
    MachineAnnotator.objects.bulk_create([MachineAnnotator(name=n, kind="bow") for n in names])
    batch = batch_create(
        dataset=dataset,
        name="bench eccv-size",
        raw_config={
            "annotators": names,
            "n_image_queries": N_IMAGE_QUERIES,
            "n_caption_queries": N_CAPTION_QUERIES,
            "k": K,
            "golden_negative_depth": RANKING_DEPTH,
            "hit_size": HIT_SIZE,
            "seed": SEED,
        },
    )
    Batch.objects.filter(pk=batch.pk).update(state=BatchState.POOLING)
    batch.refresh_from_db()

    rng = random.Random(SEED)
    image_pks = sorted(Image.objects.filter(dataset=dataset).values_list("pk", flat=True))
    caption_pks = sorted(Caption.objects.filter(dataset=dataset).values_list("pk", flat=True))
    query_images = sorted(rng.sample(image_pks, N_IMAGE_QUERIES))
    query_captions = sorted(rng.sample(caption_pks, N_CAPTION_QUERIES))
    Query.objects.bulk_create(
        [Query(batch=batch, direction=Direction.I2T, image_id=pk) for pk in query_images]
        + [Query(batch=batch, direction=Direction.T2I, caption_id=pk) for pk in query_captions],
        batch_size=BULK_BATCH,
    )
    queries = list(Query.objects.filter(batch=batch).order_by("pk").values_list("pk", "direction"))

    # Image queries rank captions, caption queries rank images. Caption queries never rank
    # an image that is itself an image query, so no pair is proposed from both directions:
    # every query's top-5 pairs are its own, and the unique count is exactly sum(u_q).
    query_image_set = set(query_images)
    universe = {
        Direction.I2T: caption_pks,
        Direction.T2I: [pk for pk in image_pks if pk not in query_image_set],
    }
    unique_per_query = _unique_counts(rng, len(queries), EXPECTED_CANDIDATES)
    annotator_pks = list(
        MachineAnnotator.objects.filter(name__in=names)
        .order_by("name")
        .values_list("pk", flat=True)
    )
    rankings = []
    for (query_pk, direction), u in zip(queries, unique_per_query, strict=True):
        pool = universe[direction]
        chosen = rng.sample(pool, u)
        tops = _cover(rng, chosen, N_ANNOTATORS, K)
        for annotator_pk, top in zip(annotator_pks, tops, strict=True):
            deeper = _sample_excluding(rng, pool, RANKING_DEPTH - K, set(chosen))
            scores = sorted(
                (round(rng.uniform(0.05, 0.95), 6) for _ in range(RANKING_DEPTH)), reverse=True
            )
            rankings.append(
                Ranking(
                    query_id=query_pk,
                    annotator_id=annotator_pk,
                    targets=top + deeper,
                    scores=scores,
                )
            )
    Ranking.objects.bulk_create(rankings, batch_size=2000)
    return batch


def _unique_counts(rng: random.Random, n_queries: int, total: int) -> list[int]:
    """How many distinct targets each query's 5 × top-5 slots cover (K..25, summing to total)."""
    low, high = K, N_ANNOTATORS * K
    counts = [rng.randint(11, high) for _ in range(n_queries)]
    diff = total - sum(counts)
    while diff:
        q = rng.randrange(n_queries)
        if diff > 0 and counts[q] < high:
            counts[q] += 1
            diff -= 1
        elif diff < 0 and counts[q] > low:
            counts[q] -= 1
            diff += 1
    return counts


def _cover(rng: random.Random, chosen: list[int], n_lists: int, k: int) -> list[list[int]]:
    """n_lists top-k lists of distinct targets whose union is exactly `chosen`."""
    lists: list[list[int]] = [chosen[a::n_lists] for a in range(n_lists)]  # each at least once
    for top in lists:
        rest = [t for t in chosen if t not in top]
        top += rng.sample(rest, k - len(top))  # repeats of targets other lists hold
        rng.shuffle(top)
    return lists


def _sample_excluding(rng: random.Random, pool: list[int], n: int, excluded: set[int]) -> list[int]:
    picked: list[int] = []
    seen = set(excluded)
    while len(picked) < n:
        t = pool[rng.randrange(len(pool))]
        if t not in seen:
            seen.add(t)
            picked.append(t)
    return picked
