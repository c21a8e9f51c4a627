"""Retrieving stage: sample the queries, then rank targets with every annotator."""

from __future__ import annotations

import numpy as np
from django.db import transaction

from annotation.models import Batch, Direction, MachineAnnotator, Query, Ranking
from mitl.annotators import build_annotator
from mitl.config import BatchConfig
from mitl.retrieval import TopK, retrieve_i2t, retrieve_t2i
from mitl.sampling import CAPTION_STREAM, IMAGE_STREAM, sample_ids

from .corpus import LoadedCorpus, corpus_load
from .progress import StageTracker


def queries_sample(*, batch: Batch, config: BatchConfig, loaded: LoadedCorpus) -> list[Query]:
    """Draw the batch's image and caption queries once; later calls return the same ones."""
    existing = list(batch.queries.order_by("pk"))
    if existing:
        return existing
    images = sample_ids(
        loaded.image_pks, config.n_image_queries, seed=config.seed, stream=IMAGE_STREAM
    )
    captions = sample_ids(
        loaded.caption_pks, config.n_caption_queries, seed=config.seed, stream=CAPTION_STREAM
    )
    rows = [Query(batch=batch, direction=Direction.I2T, image_id=int(pk)) for pk in images]
    rows += [Query(batch=batch, direction=Direction.T2I, caption_id=int(pk)) for pk in captions]
    with transaction.atomic():
        Query.objects.bulk_create(rows, batch_size=2000)
    return list(batch.queries.order_by("pk"))


def rankings_compute(*, batch: Batch, config: BatchConfig, tracker: StageTracker) -> int:
    """Rank targets for every (annotator, query) pair that has no ranking yet.

    Rankings are kept `golden_negative_depth` deep (at least k) so golden negatives can
    avoid every annotator's top ranks. Returns the number of rankings written.
    """
    loaded = corpus_load(dataset=batch.dataset)
    queries = queries_sample(batch=batch, config=config, loaded=loaded)
    annotators = list(MachineAnnotator.objects.filter(name__in=config.annotators).order_by("name"))
    done_pairs = set(
        Ranking.objects.filter(query__batch=batch).values_list("annotator_id", "query_id")
    )
    tracker.start(len(annotators) * len(queries))
    tracker.update(len(done_pairs))
    written = 0
    depth = max(config.k, config.golden_negative_depth)
    for annotator_row in annotators:
        missing = [q for q in queries if (annotator_row.pk, q.pk) not in done_pairs]
        if not missing:
            continue
        annotator = build_annotator(
            kind=annotator_row.kind, name=annotator_row.name, config=annotator_row.config
        )
        annotator.prepare(loaded.corpus)
        written += _rank_direction(
            annotator_row, annotator, loaded, missing, Direction.I2T, depth, tracker
        )
        written += _rank_direction(
            annotator_row, annotator, loaded, missing, Direction.T2I, depth, tracker
        )
    tracker.finish()
    return written


def _rank_direction(
    annotator_row: MachineAnnotator,
    annotator: object,
    loaded: LoadedCorpus,
    queries: list[Query],
    direction: str,
    depth: int,
    tracker: StageTracker,
) -> int:
    queries = [q for q in queries if q.direction == direction]
    if not queries:
        return 0
    start = tracker.done

    def on_chunk(done: int, _total: int) -> None:
        tracker.update(start + done)

    if direction == Direction.I2T:
        rows = loaded.image_rows([q.image_id for q in queries])
        top = retrieve_i2t(
            annotator, rows, depth, n_captions=loaded.corpus.n_captions, progress=on_chunk
        )
        target_pks = loaded.caption_pks
    else:
        rows = loaded.caption_rows([q.caption_id for q in queries])
        top = retrieve_t2i(
            annotator, rows, depth, n_images=loaded.corpus.n_images, progress=on_chunk
        )
        target_pks = loaded.image_pks
    _store_rankings(annotator_row, queries, top, target_pks)
    return len(queries)


def _store_rankings(
    annotator_row: MachineAnnotator, queries: list[Query], top: TopK, target_pks: np.ndarray
) -> None:
    targets = target_pks[top.indices].tolist()
    scores = np.round(top.scores.astype(np.float64), 6).tolist()
    with transaction.atomic():
        Ranking.objects.bulk_create(
            [
                Ranking(query=query, annotator=annotator_row, targets=targets[i], scores=scores[i])
                for i, query in enumerate(queries)
            ],
            batch_size=1000,
            ignore_conflicts=True,  # a concurrent retry may have written the same ranking
        )
