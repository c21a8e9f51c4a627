"""How the crowd answered the candidates of each machine annotator (ECCV Caption, App. B).

Crowd answers (Tables B.2, B.3)
    The share of each of the four answers among the approved judgements of the candidates an
    annotator proposed, per annotator and per rank; and, for the two middle answers, the share
    that gave each shortcoming and, among those that said "described in a wrong way", each
    wrong concept. A candidate proposed by several annotators counts for each of them.

The answers come as `JudgedAnswer`s: one approved judgement of a candidate with every
(annotator, rank) that proposed it. Pure Python: no Django import.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from mitl.judgements import MIDDLE_LEVELS, SHORTCOMINGS, WRONG_CONCEPTS, Level

LEVELS: tuple[Level, ...] = (Level.YES, Level.WEAK_YES, Level.WEAK_NO, Level.NO)
_WRONG_DESCRIPTION = 1 << SHORTCOMINGS.index("wrong_description")


@dataclass(frozen=True)
class JudgedAnswer:
    """One approved judgement of a candidate, with every (annotator index, rank) proposing it."""

    level: Level
    shortcomings: int  # bit mask over SHORTCOMINGS
    wrong_concepts: int  # bit mask over WRONG_CONCEPTS
    proposals: tuple[tuple[int, int], ...]


def level_shares(counts: Mapping[Level, int]) -> dict[str, Any]:
    """Return the number of judgements and the share of each level (None when there are none)."""
    total = sum(counts.get(level, 0) for level in LEVELS)
    return {
        "judgements": total,
        "shares": {
            level.value: (counts.get(level, 0) / total if total else None) for level in LEVELS
        },
    }


def answer_shares(answers: Iterable[JudgedAnswer], annotators: Sequence[str]) -> dict[str, Any]:
    """Share of each answer per annotator, per rank, and per annotator and rank (Table B.2).

    A judgement counts once for each annotator that proposed its candidate, and once for each
    distinct rank the candidate was proposed at.
    """
    by_annotator: list[Counter[Level]] = [Counter() for _ in annotators]
    by_rank: dict[int, Counter[Level]] = defaultdict(Counter)
    by_annotator_rank: list[dict[int, Counter[Level]]] = [defaultdict(Counter) for _ in annotators]
    for answer in answers:
        for a in {a for a, _ in answer.proposals}:
            by_annotator[a][answer.level] += 1
        for rank in {rank for _, rank in answer.proposals}:
            by_rank[rank][answer.level] += 1
        for a, rank in set(answer.proposals):
            by_annotator_rank[a][rank][answer.level] += 1
    return {
        "by_annotator": {name: level_shares(by_annotator[a]) for a, name in enumerate(annotators)},
        "by_rank": {str(rank): level_shares(by_rank[rank]) for rank in sorted(by_rank)},
        "by_annotator_rank": {
            name: {
                str(rank): level_shares(by_annotator_rank[a][rank])
                for rank in sorted(by_annotator_rank[a])
            }
            for a, name in enumerate(annotators)
        },
    }


def rationale_shares(
    answers: Iterable[JudgedAnswer], annotators: Sequence[str]
) -> dict[str, dict[str, Any]]:
    """Shares of each shortcoming and wrong concept in the middle answers, per annotator (B.3).

    Per annotator and middle level: the share of judgements that chose each shortcoming (a
    judgement may choose several), and among those that chose "wrong_description", the share
    that named each wrong concept.
    """
    middle = [level for level in LEVELS if level in MIDDLE_LEVELS]
    judgements = {(a, level): 0 for a in range(len(annotators)) for level in middle}
    shortcomings: dict[tuple[int, Level], Counter[str]] = defaultdict(Counter)
    concepts: dict[tuple[int, Level], Counter[str]] = defaultdict(Counter)
    wrong: Counter[tuple[int, Level]] = Counter()
    for answer in answers:
        if answer.level not in MIDDLE_LEVELS:
            continue
        for a in {a for a, _ in answer.proposals}:
            key = (a, answer.level)
            judgements[key] += 1
            for bit, name in enumerate(SHORTCOMINGS):
                shortcomings[key][name] += bool(answer.shortcomings >> bit & 1)
            if answer.shortcomings & _WRONG_DESCRIPTION:
                wrong[key] += 1
                for bit, name in enumerate(WRONG_CONCEPTS):
                    concepts[key][name] += bool(answer.wrong_concepts >> bit & 1)

    def share(count: int, total: int) -> float | None:
        return count / total if total else None

    return {
        name: {
            level.value: {
                "judgements": judgements[(a, level)],
                "shortcomings": {
                    s: share(shortcomings[(a, level)][s], judgements[(a, level)])
                    for s in SHORTCOMINGS
                },
                "wrong_description": wrong[(a, level)],
                "wrong_concepts": {
                    c: share(concepts[(a, level)][c], wrong[(a, level)]) for c in WRONG_CONCEPTS
                },
            }
            for level in middle
        }
        for a, name in enumerate(annotators)
    }


def positives_by_annotator(
    candidates: Iterable[tuple[int, bool | None]], annotators: Sequence[str]
) -> dict[str, Any]:
    """Count each annotator's candidates, verified positives and positives no one else found.

    `candidates` gives each candidate's proposer mask and its verdict (None: never judged).
    """
    proposed = [0] * len(annotators)
    judged = [0] * len(annotators)
    verified = [0] * len(annotators)
    only = [0] * len(annotators)
    total = 0
    for mask, positive in candidates:
        total += bool(positive)
        for a in range(len(annotators)):
            if not mask >> a & 1:
                continue
            proposed[a] += 1
            judged[a] += positive is not None
            verified[a] += bool(positive)
            only[a] += bool(positive) and mask == 1 << a
    return {
        "verified_positives": total,
        "by_annotator": {
            name: {
                "candidates": proposed[a],
                "judged": judged[a],
                "verified": verified[a],
                "verified_share": verified[a] / judged[a] if judged[a] else None,
                "only_this": only[a],
                "only_this_share": only[a] / verified[a] if verified[a] else None,
            }
            for a, name in enumerate(annotators)
        },
    }
