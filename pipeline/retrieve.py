"""Retrieving stage: sample the queries, then rank targets with every annotator.

Two ways to run it, same results: in one process (`rankings_compute`, used by `batch_run`
without a broker), or fanned out over Celery workers (`retrieval_dispatch` queues one
`mitl.retrieve_chunk` task per annotator and block of queries; the chunk that completes
the stage moves the batch on). Embedding annotators keep their vectors in the shared
embedding cache, so chunks after the first only read them.
"""

from __future__ import annotations

from collections.abc import Iterable

import numpy as np
from django.db import transaction

from annotation.models import (
    Batch,
    BatchState,
    Dataset,
    Direction,
    MachineAnnotator,
    Query,
    Ranking,
)
from mitl.annotators import Annotator, EmbeddingAnnotator, annotator_class, build_annotator
from mitl.config import BatchConfig
from mitl.retrieval.both import retrieve_both
from mitl.retrieval.topk import TopK
from mitl.sampling import CAPTION_STREAM, IMAGE_STREAM, sample_ids

from .bulk import tables_analyze
from .corpus import LoadedCorpus, corpus_load
from .embeddings import DatabaseEmbeddingStore
from .progress import ProgressListener, StageTracker

CHUNK_QUERIES = 512  # queries per fanned-out task: minutes of work at most, even on a CPU


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


def annotator_prepare(
    *,
    row: MachineAnnotator,
    dataset: Dataset,
    loaded: LoadedCorpus,
    listener: ProgressListener | None = None,
) -> Annotator:
    """Build an annotator from its row and prepare it on the corpus, using the cache."""
    annotator = build_annotator(kind=row.kind, name=row.name, config=row.config)
    if isinstance(annotator, EmbeddingAnnotator) and annotator.uses_store:
        annotator.store = DatabaseEmbeddingStore(annotator=row, dataset=dataset)
        if listener is not None:
            annotator.progress = lambda what, done, total: listener(
                f"{row.name}: {what}", done, total
            )
    annotator.prepare(loaded.corpus)
    return annotator


def rankings_compute(
    *,
    batch: Batch,
    config: BatchConfig,
    tracker: StageTracker,
    annotator_ids: Iterable[int] | None = None,
    query_ids: Iterable[int] | None = None,
) -> int:
    """Rank targets for every (annotator, query) pair that has no ranking yet.

    `annotator_ids` and `query_ids` restrict the work (a fanned-out chunk). Rankings are
    kept `golden_negative_depth` deep (at least k) so golden negatives can avoid every
    annotator's top ranks. Returns the number of rankings written.
    """
    loaded = corpus_load(dataset=batch.dataset)
    queries = queries_sample(batch=batch, config=config, loaded=loaded)
    if query_ids is not None:
        wanted = set(query_ids)
        queries = [q for q in queries if q.pk in wanted]
    annotators = _batch_annotators(batch, config)
    if annotator_ids is not None:
        allowed = set(annotator_ids)
        annotators = [a for a in annotators if a.pk in allowed]
    done_pairs = _ranked_pairs(batch)
    total_pairs = len(config.annotators) * batch.queries.count()
    if query_ids is None:
        tracker.start(total_pairs)
    else:  # a chunk: the stage's total was set when the chunks were dispatched
        tracker.total = total_pairs
    tracker.update(len(done_pairs))
    written = 0
    depth = config.depth
    for row in annotators:
        missing = [q for q in queries if (row.pk, q.pk) not in done_pairs]
        if not missing:
            continue
        annotator = annotator_prepare(
            row=row, dataset=batch.dataset, loaded=loaded, listener=tracker.listener
        )
        written += _rank_queries(row, annotator, loaded, missing, depth, tracker)
    if query_ids is None:
        tracker.finish()
    return written


def retrieval_plan(
    *, batch: Batch, config: BatchConfig, loaded: LoadedCorpus
) -> list[tuple[int, list[int]]]:
    """Split the missing (annotator, query) work into chunks for parallel workers."""
    queries = queries_sample(batch=batch, config=config, loaded=loaded)
    done_pairs = _ranked_pairs(batch)
    plan = []
    for row in _batch_annotators(batch, config):
        missing = [q.pk for q in queries if (row.pk, q.pk) not in done_pairs]
        for start in range(0, len(missing), CHUNK_QUERIES):
            plan.append((row.pk, missing[start : start + CHUNK_QUERIES]))
    return plan


def embeddings_warm(*, batch: Batch, config: BatchConfig, loaded: LoadedCorpus) -> None:
    """Fill the embedding cache once, so parallel chunks only read it."""
    for row in _batch_annotators(batch, config):
        cls = annotator_class(row.kind)
        if issubclass(cls, EmbeddingAnnotator) and cls.uses_store:
            annotator_prepare(row=row, dataset=batch.dataset, loaded=loaded)


def retrieval_complete(*, batch: Batch, config: BatchConfig) -> bool:
    """Say whether every (annotator, query) pair of the batch has its ranking."""
    expected = len(config.annotators) * batch.queries.count()
    return expected > 0 and Ranking.objects.filter(query__batch=batch).count() >= expected


def retrieval_finish(*, batch: Batch, config: BatchConfig) -> bool:
    """Move a fully ranked batch from retrieving to pooling; True for the one caller that did."""
    if not retrieval_complete(batch=batch, config=config):
        return False
    tracker = StageTracker(batch=batch, stage=BatchState.RETRIEVING)
    tracker.total = len(config.annotators) * batch.queries.count()
    tracker.finish()
    tables_analyze(Ranking)  # as stage_advance does after the other stages
    moved = Batch.objects.filter(pk=batch.pk, state=BatchState.RETRIEVING).update(
        state=BatchState.POOLING, error=""
    )
    return bool(moved)


def _ranked_pairs(batch: Batch) -> set[tuple[int, int]]:
    """Return the (annotator id, query id) pairs that already have a ranking."""
    return set(Ranking.objects.filter(query__batch=batch).values_list("annotator_id", "query_id"))


def _batch_annotators(batch: Batch, config: BatchConfig) -> list[MachineAnnotator]:
    return list(MachineAnnotator.objects.filter(name__in=config.annotators).order_by("name"))


def _rank_queries(
    row: MachineAnnotator,
    annotator: Annotator,
    loaded: LoadedCorpus,
    queries: list[Query],
    depth: int,
    tracker: StageTracker,
) -> int:
    """Rank image and caption queries from one pass over the similarity matrix."""
    image_queries = [q for q in queries if q.direction == Direction.I2T]
    caption_queries = [q for q in queries if q.direction == Direction.T2I]
    start = tracker.done

    def on_block(scanned: int, total: int) -> None:  # progress in queries, as the stage counts
        tracker.update(start + round(len(queries) * scanned / max(total, 1)))

    i2t, t2i = retrieve_both(
        annotator,
        loaded.image_rows([q.image_id for q in image_queries]),
        loaded.caption_rows([q.caption_id for q in caption_queries]),
        depth,
        n_images=loaded.corpus.n_images,
        n_captions=loaded.corpus.n_captions,
        progress=on_block,
    )
    _store_rankings(row, image_queries, i2t, loaded.caption_pks)
    _store_rankings(row, caption_queries, t2i, loaded.image_pks)
    tracker.update(start + len(queries))
    return len(queries)


def _store_rankings(
    row: MachineAnnotator, queries: list[Query], top: TopK, target_pks: np.ndarray
) -> None:
    targets = target_pks[top.indices].tolist()
    scores = np.round(top.scores.astype(np.float64), 6).tolist()
    with transaction.atomic():
        Ranking.objects.bulk_create(
            [
                Ranking(query=query, annotator=row, targets=targets[i], scores=scores[i])
                for i, query in enumerate(queries)
            ],
            batch_size=1000,
            ignore_conflicts=True,  # a concurrent retry may have written the same ranking
        )
