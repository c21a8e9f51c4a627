"""Score one annotator's retrieval on a dataset against its positive sets.

Used to check an annotator on real data before it proposes candidates, e.g. the COCO 5K
captions with the original and ECCV Caption positives.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from annotation.errors import ServiceError
from annotation.models import Dataset, Direction, MachineAnnotator, PositivePair, PositiveSet
from mitl.metrics import precision_at_k, recall_at_k
from mitl.retrieval.topk import retrieve_i2t, retrieve_t2i

from .corpus import NotInCorpus, corpus_load, rows_of
from .progress import ProgressListener
from .retrieve import annotator_prepare


@dataclass(frozen=True)
class AnnotatorScores:
    annotator: str
    direction: str
    queries: int
    scores: dict[str, dict[str, float]]  # positive set → {"recall@1": …, "precision@5": …}


def positives_by_query(*, positive_set: PositiveSet, direction: str) -> dict[int, set[int]]:
    """Return {query ext id: positive target ext ids} of a positive set in one direction."""
    by_query: dict[int, set[int]] = defaultdict(set)
    for image, caption in PositivePair.objects.filter(
        positive_set=positive_set, caption__is_invalid=False
    ).values_list("image__ext_id", "caption__ext_id"):
        if direction == Direction.I2T:
            by_query[image].add(caption)
        else:
            by_query[caption].add(image)
    return by_query


def annotator_evaluate(
    *,
    dataset: Dataset,
    annotator: MachineAnnotator,
    direction: str,
    queries_from: str,
    against: list[str],
    ks: list[int],
    listener: ProgressListener | None = None,
) -> AnnotatorScores:
    """Rank the queries of `queries_from` and score the rankings against each set."""
    sets = {s.name: s for s in PositiveSet.objects.filter(dataset=dataset)}
    unknown = [name for name in [queries_from, *against] if name not in sets]
    if unknown:
        raise ServiceError(
            f"dataset {dataset.name!r} has no positive set {unknown[0]!r} "
            f"(it has: {', '.join(sorted(sets))})"
        )
    source = sets[queries_from]
    query_ids = source.queries.get(direction) or sorted(
        positives_by_query(positive_set=source, direction=direction)
    )
    loaded = corpus_load(dataset=dataset)
    prepared = annotator_prepare(row=annotator, dataset=dataset, loaded=loaded, listener=listener)
    depth = max(ks)
    query_side = (
        loaded.corpus.image_ids if direction == Direction.I2T else loaded.corpus.caption_ids
    )
    try:
        rows = rows_of(query_side, query_ids)
    except NotInCorpus as exc:
        raise ServiceError(
            f"{len(exc.missing)} queries are not in the dataset (first: {exc.missing[0]})"
        ) from None
    if direction == Direction.I2T:
        top = retrieve_i2t(prepared, rows, depth, n_captions=loaded.corpus.n_captions)
        targets = loaded.corpus.caption_ids
    else:
        top = retrieve_t2i(prepared, rows, depth, n_images=loaded.corpus.n_images)
        targets = loaded.corpus.image_ids
    rankings = {q: targets[top.indices[i]].tolist() for i, q in enumerate(query_ids)}
    scores: dict[str, dict[str, float]] = {}
    for name in against:
        truth = positives_by_query(positive_set=sets[name], direction=direction)
        truth = {q: truth.get(q, set()) for q in query_ids}
        scores[name] = {}
        for k in ks:
            scores[name][f"recall@{k}"] = recall_at_k(rankings, truth, k)
            scores[name][f"precision@{k}"] = precision_at_k(rankings, truth, k)
    return AnnotatorScores(annotator.name, direction, len(query_ids), scores)
