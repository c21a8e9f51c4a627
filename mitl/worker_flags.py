"""A worker's figures that need a second look: agreement with co-workers, speed and pay.

Pure Python, no Django: `annotation.worker_selectors` reads the answers and times, this
module does the arithmetic and says which figures are suspicious.

Agreement with co-workers
    For each task pair the worker judged, the other workers' yes/no answers (ECCV: "100%
    YES" and "Partially YES" are yes) give a majority; a tie gives none and the pair is left
    out. Agreement is the share of the worker's answers on pairs with a majority that equal
    it; None when no co-worker judged the same pairs.

Flags
    `fast`: a median under `FAST_SECONDS_PER_PAIR` seconds per pair is too fast to have
    looked at the image. `pay`: a measured hourly pay above `PLAUSIBLE_HOURLY_USD` (or pay
    for no measured time at all) means the measured time is probably wrong.
"""

from __future__ import annotations

from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from decimal import Decimal
from enum import StrEnum
from statistics import median
from typing import TypeVar

from mitl.wages import hourly_wage

K = TypeVar("K", bound=Hashable)

FAST_SECONDS_PER_PAIR = 2.0
PLAUSIBLE_HOURLY_USD = Decimal(60)


class WorkerFlag(StrEnum):
    """Why a worker's figures need a second look (the value is the `?flag=` filter)."""

    FAST = "fast"
    PAY = "pay"


FLAG_TEXT: dict[WorkerFlag, str] = {
    WorkerFlag.FAST: f"too fast to have looked (under {FAST_SECONDS_PER_PAIR:g} s per pair)",
    WorkerFlag.PAY: (
        f"measured pay above ${PLAUSIBLE_HOURLY_USD}/h: the measured time is probably wrong"
    ),
}


@dataclass(frozen=True)
class Agreement:
    """How many of a worker's answers could be compared, and how many equal the majority."""

    compared: int
    agreed: int

    @property
    def share(self) -> float | None:
        return self.agreed / self.compared if self.compared else None


def majority(answers: Sequence[bool]) -> bool | None:
    """Return the majority of yes/no answers; None for none or a tie."""
    yes = sum(answers)
    no = len(answers) - yes
    return None if yes == no else yes > no


def coworker_agreement(
    own: Iterable[tuple[K, bool]], others: Mapping[K, Sequence[bool]]
) -> Agreement:
    """Compare a worker's (pair, yes) answers with the majority of others' answers per pair.

    `others` maps a pair to the other workers' yes/no answers on it (the worker's own left
    out); pairs without a majority there do not count.
    """
    compared = agreed = 0
    for key, yes in own:
        verdict = majority(others.get(key, ()))
        if verdict is None:
            continue
        compared += 1
        agreed += verdict == yes
    return Agreement(compared=compared, agreed=agreed)


def median_seconds_per_pair(elapsed_ms: Sequence[int]) -> float | None:
    """Return the median time on one pair in seconds; None when nothing was judged."""
    return median(elapsed_ms) / 1000 if elapsed_ms else None


def measured_hourly(*, reward: Decimal, seconds: Decimal) -> Decimal | None:
    """Return what `reward` for `seconds` of measured work makes per hour, to the cent.

    None when there is nothing to say (no reward); a reward for no measured time has no
    finite rate and is returned as None too: `worker_flags` flags it through `paid_untimed`.
    """
    if reward <= 0 or seconds <= 0:
        return None
    return hourly_wage(reward, seconds)  # fair pay's rate, rounded as fair pay rounds it


def worker_flags(
    *,
    median_pair_seconds: float | None,
    hourly: Decimal | None,
    paid_untimed: bool = False,
) -> tuple[WorkerFlag, ...]:
    """Return the flags a worker's speed and measured pay raise, in a fixed order."""
    flags = []
    if median_pair_seconds is not None and median_pair_seconds < FAST_SECONDS_PER_PAIR:
        flags.append(WorkerFlag.FAST)
    if paid_untimed or (hourly is not None and hourly > PLAUSIBLE_HOURLY_USD):
        flags.append(WorkerFlag.PAY)
    return tuple(flags)
