"""Graded TREC qrels of a release: `query_id 0 doc_id relevance`, one judged pair a line.

Relevance grades (0 to 3) follow the verdict's graded score (ECCV Caption eq. E.4: the
mean of 1 / 0.5 / 0 / 0 over the answers) and agree with the release's binary positives:
a pair has relevance 1 or more exactly when it is a released positive.

    3  a known positive without a verdict (original or imported set), or score >= 0.75
    2  a released positive with 0.5 <= score < 0.75
    1  a released positive with score < 0.5 (e.g. an original pair the crowd doubted)
    0  judged, and not a released positive

A caption proxy's graded qrels (`proxy_qrels_text`) list each query's most relevant items by
that proxy (`mitl.relevance`), graded 0-100. Pure Python and numpy.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

import numpy as np

TOP_GRADE = 3
GRADE_THRESHOLDS: tuple[tuple[float, int], ...] = ((0.75, 3), (0.5, 2))

PositivesByQuery = Mapping[str, list[int]]
Pair = tuple[int, int]  # (image id, caption id)


def relevance_grade(*, is_positive: bool, score: float | None) -> int:
    """Return the 0-3 grade of a pair: released or not, and its verdict score if judged."""
    if not is_positive:
        return 0
    if score is None:
        return TOP_GRADE
    for threshold, grade in GRADE_THRESHOLDS:
        if score >= threshold:
            return grade
    return 1


def qrels_text(positives: PositivesByQuery, scores: Mapping[Pair, float], *, direction: str) -> str:
    """Return the qrels of one direction ("i2t" or "t2i") as text.

    `positives` is the release's ECCV-format file of that direction; `scores` holds the
    verdict score of every judged pair, keyed (image id, caption id). Each query lists its
    positives and every judged pair it takes part in, sorted by query then document.
    """
    if direction not in ("i2t", "t2i"):
        raise ValueError(f"direction must be i2t or t2i, got {direction!r}")
    judged: dict[int, dict[int, float]] = defaultdict(dict)
    for (image, caption), score in scores.items():
        if direction == "i2t":
            judged[image][caption] = score
        else:
            judged[caption][image] = score
    lines = []
    for query in sorted(positives, key=int):
        query_id = int(query)
        relevant = set(positives[query])
        for doc in sorted(relevant | set(judged.get(query_id, ()))):
            score = judged.get(query_id, {}).get(doc)
            grade = relevance_grade(is_positive=doc in relevant, score=score)
            lines.append(f"{query_id} 0 {doc} {grade}\n")
    return "".join(lines)


PROXY_QRELS_DEPTH = 100  # items listed per query in a proxy's qrels
PROXY_GRADE_SCALE = 100  # a proxy's relevance in [0, 1] as an integer grade 0..100


def proxy_qrels_file(proxy: str, direction: str) -> str:
    """Return the file name of a proxy's graded qrels, e.g. qrels_cider_d_i2t.txt."""
    return f"qrels_{proxy}_{direction}.txt"


def proxy_qrels_text(
    query_ids: Sequence[int],
    target_ids: Sequence[int],
    relevance: np.ndarray,
    *,
    depth: int = PROXY_QRELS_DEPTH,
) -> str:
    """Return graded qrels from a proxy's relevance matrix (queries × targets, in [0, 1]).

    Each query lists its `depth` most relevant targets with a grade above 0 (ties by target
    order), graded round(100 × relevance): integer grades, as trec_eval and ir_measures
    read them, that keep the proxy's resolution. Sorted by query then document.
    """
    targets = np.asarray(target_ids, dtype=np.int64)
    grades = np.rint(np.clip(relevance, 0.0, 1.0) * PROXY_GRADE_SCALE).astype(np.int64)
    depth = min(depth, len(targets))
    lines: list[str] = []
    for row, query in sorted(enumerate(query_ids), key=lambda item: item[1]):
        best = np.argsort(-grades[row], kind="stable")[:depth]
        kept = best[grades[row, best] > 0]
        order = np.argsort(targets[kept], kind="stable")
        lines.extend(f"{query} 0 {targets[t]} {grades[row, t]}\n" for t in kept[order])
    return "".join(lines)
