"""The golden check: does a submitted HIT get its known pairs right?"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from .judgements import POSITIVE_LEVELS, Level


@dataclass(frozen=True)
class GoldenResult:
    passed: bool
    failures: tuple[str, ...]  # human-readable, one per failed golden pair


def golden_check(answers: Iterable[tuple[str, int, Level]]) -> GoldenResult:
    """Check (role, position, level) answers: a golden TP needs a YES, a golden TN a NO.

    "100% YES" and "Partially YES" count as YES; "Mostly NO" and "100% NO" as NO.
    """
    failures: list[str] = []
    for role, position, level in answers:
        if role == "golden_tp" and level not in POSITIVE_LEVELS:
            failures.append(f"pair {position + 1} is a known match but was answered {level.value}")
        elif role == "golden_tn" and level in POSITIVE_LEVELS:
            failures.append(
                f"pair {position + 1} is a known mismatch but was answered {level.value}"
            )
    return GoldenResult(passed=not failures, failures=tuple(failures))
