"""The golden check and the golden policy: does a submitted HIT get its known pairs right,
and what happens to it then?

One place decides both, so the platform's submit, MTurk's sync and MTurk's results import
cannot drift apart.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from .hits import Role
from .judgements import POSITIVE_LEVELS, Level

K = TypeVar("K", bound=Hashable)

# Feedback of work the golden policy rejected (a person's own words never start with it).
AUTOMATIC_REJECTION_PREFIX = "Rejected automatically: "


@dataclass(frozen=True)
class GoldenMiss:
    """A golden pair answered wrongly: its 1-based page position, whether it matches, the answer."""

    position: int
    is_match: bool
    answered: Level

    def describe(self) -> str:
        known = "a known match" if self.is_match else "a known mismatch"
        return f"pair {self.position} is {known} but was answered {self.answered.value}"


@dataclass(frozen=True)
class GoldenResult:
    passed: bool
    failures: tuple[str, ...]  # human-readable, one per failed golden pair


def golden_misses(answers: Iterable[tuple[str, int, Level]]) -> list[GoldenMiss]:
    """Return the golden pairs among (role, 0-based position, level) answers answered wrongly.

    A golden TP needs a YES, a golden TN a NO: "100% YES" and "Partially YES" count as YES,
    "Mostly NO" and "100% NO" as NO. Misses come in the order of the answers.
    """
    return [
        GoldenMiss(position + 1, role == Role.GOLDEN_TP, level)
        for role, position, level in answers
        if role in (Role.GOLDEN_TP, Role.GOLDEN_TN) and not golden_answered_right(role, level)
    ]


def golden_answered_right(role: str, level: Level) -> bool:
    """Say whether a golden pair's answer is right: YES for a golden TP, NO for a golden TN."""
    return (level in POSITIVE_LEVELS) == (role == Role.GOLDEN_TP)


def golden_misses_summary(misses: Sequence[GoldenMiss]) -> str:
    """Tell a worker how many pairs with a known answer were answered wrongly, not which.

    The HIT goes back to other workers: naming a pair (its place, its content or the right
    answer) would tell them where the golden pairs are. Staff see the pairs in review.
    """
    count = len(misses)
    noun = "pair with a known answer was" if count == 1 else "pairs with a known answer were"
    return f"{count} {noun} answered wrongly."


def golden_check(answers: Iterable[tuple[str, int, Level]]) -> GoldenResult:
    """Check (role, 0-based position, level) answers against their golden pairs."""
    misses = golden_misses(answers)
    return GoldenResult(passed=not misses, failures=tuple(miss.describe() for miss in misses))


class GoldenDecision(StrEnum):
    """What the golden policy does with submitted work."""

    APPROVE = "approve"
    REJECT = "reject"
    HOLD = "hold"  # wait for a person (flagged when the check failed)


def golden_decision(*, passed: bool, policy: str) -> GoldenDecision:
    """Decide submitted work from its golden check under a batch's `golden_policy`.

    `approve_or_flag`: pass → approve, fail → a person decides; `approve_or_reject`: pass →
    approve, fail → reject at once; `review_all`: a person decides every submission.
    """
    if passed and policy != "review_all":
        return GoldenDecision.APPROVE
    if not passed and policy == "approve_or_reject":
        return GoldenDecision.REJECT
    return GoldenDecision.HOLD


def golden_suspect(*, lone_failures: int, threshold: int) -> bool:
    """Say whether a golden pair is likely wrong itself and should be suspended.

    `lone_failures` counts the distinct workers who failed this pair while passing every
    other golden of their HIT: honest workers, by the rest of the check. `threshold` is the
    batch's `golden_suspend_after`; 0 never suspends.
    """
    return threshold > 0 and lone_failures >= threshold


def goldens_to_suspend(
    sheets: Mapping[Hashable, Iterable[tuple[K, str, Level]]], *, threshold: int
) -> list[K]:
    """Return the golden pairs to suspend, from each worker's (pair, role, level) answers.

    `sheets` maps a worker to its answers on the golden pairs of one HIT that are still in
    force. A pair counts a worker only when it is that worker's one and only miss (a worker
    who misses two goldens says nothing about either). Pairs come in first-seen order.
    """
    lone: dict[K, int] = {}
    for answers in sheets.values():
        misses = [key for key, role, level in answers if not golden_answered_right(role, level)]
        for key in misses:
            lone.setdefault(key, 0)
        if len(misses) == 1:
            lone[misses[0]] += 1
    return [
        key
        for key, count in lone.items()
        if golden_suspect(lone_failures=count, threshold=threshold)
    ]
