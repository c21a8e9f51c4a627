"""Re-rank a release's caption queries, perturbed, with the dataset's machine annotators.

Every annotator that can score free text (`Annotator.can_score_text`) scores each image for
the original and the perturbed text of each caption query; `mitl.explain.reranking`
compares the rank of the query's best positive before and after.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from mitl.annotators import Annotator
from mitl.evaluation_inputs import ReleaseTruth
from mitl.explain.adversarial import (
    PERTURBATION_KINDS,
    Perturbation,
    colors_in_texts,
    perturb_all,
)
from mitl.explain.failures import first_positive_rank
from mitl.explain.reranking import movement, positive_ranks
from mitl.relevance.wordnet import wordnet_available
from pipeline.corpus import LoadedCorpus
from pipeline.progress import ProgressListener

SCORE_BLOCK = 512  # texts scored at once: a block is SCORE_BLOCK × images float32


def available_kinds(kinds: Sequence[str] | None = None) -> list[str]:
    """Return the requested kinds (default all) that can run here; antonyms need WordNet."""
    chosen = list(kinds or PERTURBATION_KINDS)
    return [k for k in chosen if k != "antonym" or wordnet_available()]


def _block_ranks(
    annotator: Annotator,
    texts: Sequence[str],
    rows: np.ndarray,
    positives: np.ndarray,
) -> np.ndarray:
    ranks = np.empty(len(texts), dtype=np.int64)
    for start in range(0, len(texts), SCORE_BLOCK):
        block = slice(start, start + SCORE_BLOCK)
        scores = annotator.text_similarity(list(texts[block]), rows[block])
        ranks[block] = positive_ranks(scores, positives[block])
    return ranks


def _query_rows(
    truth: ReleaseTruth, loaded: LoadedCorpus
) -> tuple[list[int], np.ndarray, np.ndarray]:
    """Return the caption queries in the corpus with a positive in it, their rows and masks."""
    corpus = loaded.corpus
    caption_row = {int(c): r for r, c in enumerate(corpus.caption_ids.tolist())}
    image_row = {int(i): r for r, i in enumerate(corpus.image_ids.tolist())}
    queries, rows, masks = [], [], []
    for query, targets in sorted(truth.positives["t2i"].items()):
        positive_rows = [image_row[t] for t in targets if t in image_row]
        if query not in caption_row or not positive_rows:
            continue
        mask = np.zeros(corpus.n_images, dtype=bool)
        mask[positive_rows] = True
        queries.append(query)
        rows.append(caption_row[query])
        masks.append(mask)
    if not queries:
        return [], np.zeros(0, dtype=np.int64), np.zeros((0, corpus.n_images), dtype=bool)
    return queries, np.array(rows, dtype=np.int64), np.stack(masks)


def adversarial_rerank(
    *,
    name: str,
    prepared: Annotator,
    loaded: LoadedCorpus,
    truth: ReleaseTruth,
    kinds: Sequence[str] | None = None,
    seed: int = 0,
    listener: ProgressListener | None = None,
) -> dict[str, Any]:
    """Return {'kinds': {kind: movement summary}} or {'skipped': why} for one annotator.

    Each query's original text is scored once, whatever the number of kinds.
    """
    if not prepared.can_score_text:
        return {"skipped": f"a {prepared.kind} annotator cannot score free text"}
    queries, rows, masks = _query_rows(truth, loaded)
    texts = {q: loaded.corpus.caption_texts[r] for q, r in zip(queries, rows.tolist(), strict=True)}
    perturbed = _perturbations(texts, loaded.corpus.caption_texts, kinds=kinds, seed=seed)
    changed_queries = sorted({q for found in perturbed.values() for q in found})
    position = {q: k for k, q in enumerate(queries)}
    picks = np.array([position[q] for q in changed_queries], dtype=np.int64)
    _say(listener, f"{name}: scoring the original queries", 0, len(changed_queries))
    original_rank = dict(
        zip(
            changed_queries,
            _block_ranks(
                prepared, [texts[q] for q in changed_queries], rows[picks], masks[picks]
            ).tolist(),
            strict=True,
        )
    )
    report: dict[str, Any] = {"queries": len(queries), "kinds": {}}
    for kind, found in perturbed.items():
        chosen = sorted(found)
        kind_picks = np.array([position[q] for q in chosen], dtype=np.int64)
        changed = [found[q].text for q in chosen]
        _say(listener, f"{name}: re-ranking {kind}", 0, len(chosen))
        after = _block_ranks(prepared, changed, rows[kind_picks], masks[kind_picks])
        _say(listener, f"{name}: re-ranking {kind}", len(chosen), len(chosen))
        report["kinds"][kind] = movement(
            kind,
            np.array([original_rank[q] for q in chosen], dtype=np.int64),
            after,
            queries=chosen,
            originals=[texts[q] for q in chosen],
            texts=changed,
            total_queries=len(queries),
        )
    return report


def _perturbations(
    texts: Mapping[int, str],
    dataset_texts: Iterable[str],
    *,
    kinds: Sequence[str] | None,
    seed: int,
) -> dict[str, dict[int, Perturbation]]:
    """Return {kind: {query: perturbation}}; `color_in` draws from the dataset's colours."""
    dataset_colors = colors_in_texts(dataset_texts)
    return {
        kind: perturb_all(
            texts, kind, seed=seed, colors=dataset_colors if kind == "color_in" else None
        )
        for kind in available_kinds(kinds)
    }


def _say(listener: ProgressListener | None, stage: str, done: int, total: int) -> None:
    if listener is not None:
        listener(stage, done, total)


def perturbed_queries(
    truth: ReleaseTruth,
    caption_text: Mapping[int, str],
    *,
    kinds: Sequence[str] | None = None,
    seed: int = 0,
) -> dict[str, dict[int, str]]:
    """Return {kind: {caption query id: perturbed text}} of the release's caption queries.

    The same perturbations `adversarial_rerank` makes for the same seed, for a model the
    platform cannot run: rank these texts with it and hand the rankings back.
    """
    texts = {q: caption_text[q] for q in sorted(truth.positives["t2i"]) if q in caption_text}
    perturbed = _perturbations(texts, caption_text.values(), kinds=kinds, seed=seed)
    return {kind: {q: p.text for q, p in found.items()} for kind, found in perturbed.items()}


def rankings_movement(
    truth: ReleaseTruth,
    rankings: Mapping[int, Sequence[int]],
    perturbed_rankings: Mapping[str, Mapping[int, Sequence[int]]],
    queries: Mapping[str, Mapping[int, str]],
    caption_text: Mapping[int, str],
) -> dict[str, Any]:
    """Compare a model's caption rankings with its rankings of the perturbed queries.

    A query counts when both rankings hold one of its positives; the report says how
    many perturbed queries had no usable ranking.
    """
    report: dict[str, Any] = {"queries": len(truth.positives["t2i"]), "kinds": {}}
    for kind, ranked in perturbed_rankings.items():
        chosen, before, after = [], [], []
        for query, changed in sorted(ranked.items()):
            positives = set(truth.positives["t2i"].get(query, ()))
            first = first_positive_rank(rankings.get(query, ()), positives)
            then = first_positive_rank(changed, positives)
            if query in queries.get(kind, {}) and first is not None and then is not None:
                chosen.append(query)
                before.append(first)
                after.append(then)
        summary = movement(
            kind,
            np.array(before, dtype=np.int64),
            np.array(after, dtype=np.int64),
            queries=chosen,
            originals=[caption_text.get(q, "") for q in chosen],
            texts=[queries[kind][q] for q in chosen],
            total_queries=report["queries"],
        )
        summary["unranked"] = len(queries.get(kind, {})) - len(chosen)
        report["kinds"][kind] = summary
    return report
