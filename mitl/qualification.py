"""The qualification round's rules that need no database: who stands where, the pass mark,
the mix of pairs, the pool a round needs and one try's draw from it, and what a worker
reads after each answer.

The round's pairs have known answers, as golden pairs do, and are checked the same way
(`mitl.quality.golden_answered_right`): either YES level is right for a pair that matches,
either NO level for one that does not. The services live in `annotation.qualification`.
"""

from __future__ import annotations

import math
import random
from collections.abc import Sequence
from enum import StrEnum
from fractions import Fraction

from .hits import Role
from .judgements import Level
from .quality import golden_answered_right

# What a worker reads after answering a drawn pair (an admin's pair has the admin's note).
POSITIVE_NOTE = "The description fits the image: it is one of the image's own captions."
NEGATIVE_NOTE = (
    "The description belongs to a different image: it was written for another picture "
    "and does not describe this one."
)
# An admin's pair without a note of its own.
PLAIN_NOTE = {
    True: "The description fits the image.",
    False: "The description does not fit the image.",
}
EXPECTED_ANSWER = {
    True: "100% YES or Partially YES (the description fits the image)",
    False: "Mostly NO or 100% NO (the description does not fit the image)",
}


class QualificationStatus(StrEnum):
    """Where a worker stands with a batch's qualification round."""

    NOT_REQUIRED = "not_required"  # the batch has no round: its HITs are open to everyone
    QUALIFIED = "qualified"  # passed a try: the batch's HITs are open to the worker
    OPEN = "open"  # may take the round, or go on with the try in progress
    FAILED = "failed"  # every try used without passing: the batch stays closed


def qualification_state(
    *, required: bool, passed: bool, in_progress: bool, finished: int, allowed: int
) -> QualificationStatus:
    """Decide where a worker stands from its tries: passed one, has one going, or has tries
    left (`finished` of `allowed` used up)."""
    if not required:
        return QualificationStatus.NOT_REQUIRED
    if passed:
        return QualificationStatus.QUALIFIED
    if in_progress or finished < allowed:
        return QualificationStatus.OPEN
    return QualificationStatus.FAILED


def qualification_passed(correct: int, total: int, pass_share: float | str | Fraction) -> bool:
    """Say whether `correct` right answers of `total` reach the pass mark `pass_share`.

    Exact: the share is read as the decimal it was written as (0.8 is 4/5, not the binary
    float a hair above it), so 4 of 5 passes at 0.8 and 8 of 10 at 0.8 too.
    """
    if not 0 <= correct <= total:
        raise ValueError(f"right answers must be between 0 and {total} (got {correct})")
    return correct >= qualification_pairs_to_pass(total, pass_share)


def qualification_pairs_to_pass(total: int, pass_share: float | str | Fraction) -> int:
    """Return the fewest right answers of `total` that reach `pass_share`, read exactly as
    written (0.8 of 5 → 4; 0.7 of 10 → 7, not 8 for the float a hair above 0.7).

    The one rule for the platform's round and MTurk's test (`annotation.mturk`), so both
    pass the same workers.
    """
    if total <= 0:
        raise ValueError(f"a qualification round needs at least one pair (got {total})")
    return math.ceil(Fraction(str(pass_share)) * total)


def qualification_mix(count: int) -> tuple[int, int]:
    """Split a round of `count` pairs into (matches, mismatches): half each, the odd one a
    match."""
    return count - count // 2, count // 2


def qualification_answer_right(positive: bool, level: Level) -> bool:
    """Say whether `level` is right for a pair whose known answer is YES (`positive`) or NO."""
    return golden_answered_right(Role.GOLDEN_TP if positive else Role.GOLDEN_TN, level)


def qualification_pool_needs(pairs: int, attempts: int) -> tuple[int, int]:
    """Return the (matches, mismatches) a round's pool must hold so that every one of a
    worker's `attempts` tries shows `pairs` pairs, with the round's mix, that no earlier try
    of theirs showed (its feedback told the answers): each try's mix times the tries."""
    matches, mismatches = qualification_mix(pairs)
    return matches * attempts, mismatches * attempts


def qualification_pool_shortfall(
    *, matches: int, mismatches: int, pairs: int, attempts: int
) -> str | None:
    """Say what a pool of `matches` YES and `mismatches` NO pairs lacks for the round's
    tries (`qualification_pool_needs`); None when it holds enough."""
    need_yes, need_no = qualification_pool_needs(pairs, attempts)
    if matches >= need_yes and mismatches >= need_no:
        return None
    per_yes, per_no = qualification_mix(pairs)
    return (
        f"each try shows {pairs} pairs ({per_yes} YES, {per_no} NO) that no earlier try of the "
        f"worker showed, in up to {attempts} tries, so the pool needs at least {need_yes} YES "
        f"and {need_no} NO pairs ({pairs} pairs x {attempts} tries); it has {matches} YES and "
        f"{mismatches} NO"
    )


def qualification_try_draw(
    *, matches: Sequence[int], mismatches: Sequence[int], pairs: int, rng: random.Random
) -> list[int] | None:
    """Draw one try's pairs: the round's mix of `pairs` from the pool's `matches` and
    `mismatches` the worker has not seen, in a random order; None when too few are left."""
    want_yes, want_no = qualification_mix(pairs)
    if len(matches) < want_yes or len(mismatches) < want_no:
        return None
    drawn = rng.sample(list(matches), want_yes) + rng.sample(list(mismatches), want_no)
    rng.shuffle(drawn)
    return drawn
