"""Graded TREC qrels of a release: `query_id 0 doc_id relevance`, one judged pair a line.

Relevance grades (0 to 3) follow the verdict's graded score (ECCV Caption eq. E.4: the
mean of 1 / 0.5 / 0 / 0 over the answers) and agree with the release's binary positives:
a pair has relevance 1 or more exactly when it is a released positive.

    3  a known positive without a verdict (original or imported set), or score >= 0.75
    2  a released positive with 0.5 <= score < 0.75
    1  a released positive with score < 0.5 (e.g. an original pair the crowd doubted)
    0  judged, and not a released positive

Pure Python.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping

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
