"""The learner annotator's ORM edge: its ranking of every query, refit before each round.

With `crowd_learner` on, an adaptive round's selection (`pipeline.curation_select`) first
adds the learner's ranking (`mitl.curation.crowd_learner`) to the round's inputs, under the
pseudo annotator id `LEARNER_ID`, so the policy, the random sample's strata and the
learned fusion read it like any annotator's. It lives for the round only (no `Ranking`
row, no `Proposal`): the next round refits it on more verdicts.
"""

from __future__ import annotations

import time
from typing import Any

from annotation.models import Batch, Direction, MachineAnnotator
from mitl.annotators import EmbeddingAnnotator
from mitl.config import BatchConfig
from mitl.curation.crowd_learner import (
    LEARNER_ID,
    FrozenView,
    LearnerQuery,
    LearnerRanking,
    PairFeatures,
    enough_verdicts,
    learner_rankings,
)
from mitl.curation.rankings import Pair, QueryRankings

from .corpus import LoadedCorpus, corpus_load
from .curation import CurationInputs
from .retrieve import annotator_prepare


def learner_rankings_add(
    *, batch: Batch, config: BatchConfig, inputs: CurationInputs
) -> dict[str, Any] | None:
    """Refit the learner and add its ranking to every query of `inputs`; say what it did.

    Returns None when the batch does not use it, else what the round record keeps: the
    pairs it learnt from and the seconds it took (`ranked` false before the crowd has
    judged enough of both kinds).
    """
    if not config.crowd_learner:
        return None
    started = time.monotonic()
    loaded = corpus_load(dataset=batch.dataset)
    image_row = {pk: row for row, pk in enumerate(loaded.image_pks.tolist())}
    caption_row = {pk: row for row, pk in enumerate(loaded.caption_pks.tolist())}
    judged = {
        (image_row[i], caption_row[c]): verdict
        for (i, c), verdict in inputs.outcomes.items()
        if i in image_row and c in caption_row
    }
    own_image = loaded.corpus.caption_image
    known = {
        (image_row[i], caption_row[c])
        for i, c in inputs.known
        if i in image_row and c in caption_row and own_image[caption_row[c]] != image_row[i]
    }
    queries = [
        LearnerQuery(
            q.pk,
            q.direction == Direction.I2T,
            image_row[q.item_id] if q.direction == Direction.I2T else caption_row[q.item_id],
        )
        for q in inputs.queries
    ]
    if not enough_verdicts(judged):  # round 0: no need to prepare the annotators
        return {"ranked": False, "judged_pairs": len(judged), "seconds": 0.0}
    features = PairFeatures(
        _frozen_views(batch, config, loaded),
        loaded.corpus.n_images,
        loaded.corpus.n_captions,
        seed=config.seed,
    )
    ranked = learner_rankings(
        features, queries, judged, known, config.depth, seed=config.seed + batch.round
    )
    if ranked is not None:
        items = {q.pk: q.item_id for q in inputs.queries}
        inputs.rankings = [
            _with_learner(q, items[q.query_id], ranked[q.query_id], loaded) for q in inputs.rankings
        ]
    return {
        "ranked": ranked is not None,
        "judged_pairs": len(judged),
        "seconds": round(time.monotonic() - started, 1),
    }


def _frozen_views(batch: Batch, config: BatchConfig, loaded: LoadedCorpus) -> list[FrozenView]:
    """The batch's annotators, prepared on the corpus (embeddings come from the cache)."""
    views = []
    rows = MachineAnnotator.objects.filter(name__in=config.annotators).order_by("name")
    for row in rows:
        annotator = annotator_prepare(row=row, dataset=batch.dataset, loaded=loaded)
        vectors = isinstance(annotator, EmbeddingAnnotator)
        views.append(
            FrozenView(
                annotator.similarity,
                annotator.image_vectors if vectors else None,
                annotator.caption_vectors if vectors else None,
            )
        )
    return views


def _with_learner(
    query: QueryRankings, item_id: int, ranking: LearnerRanking, loaded: LoadedCorpus
) -> QueryRankings:
    """The query's rankings with the learner's added (targets as database ids)."""
    pairs: list[Pair]
    if query.group == Direction.I2T:
        pairs = [(item_id, int(loaded.caption_pks[t])) for t in ranking.targets]
    else:
        pairs = [(int(loaded.image_pks[t]), item_id) for t in ranking.targets]
    return QueryRankings(
        query.query_id,
        {**query.lists, LEARNER_ID: pairs},
        group=query.group,
        scores={**query.scores, LEARNER_ID: ranking.scores.tolist()},
    )
