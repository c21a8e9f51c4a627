"""Fair pay: how long an assignment took, what that makes per hour, and what tops it up.

Pure Python, no Django. Money is Decimal in whole cents; time is Decimal seconds (the HIT
page measures milliseconds, so no float ever rounds a cent).

Time of one assignment
    The sum of its judgements' `elapsed_ms`: the time the HIT page measured on each pair,
    capped at the HIT's assignment duration (nobody is paid for more than the time MTurk
    allowed). Not the wall time from accepted to submitted: that includes tabs left open
    while the worker did something else (workers often accept several HITs at once and
    work through them one by one), and simulated work, stored in one go, has none.

Median and quartiles
    Numpy's default `linear` method (Hyndman & Fan type 7), the same as
    `statistics.quantiles(data, n=4, method="inclusive")`: for n sorted times x[0..n-1],
    the p-quantile sits at h = (n - 1)·p and is x[⌊h⌋] + (h - ⌊h⌋)·(x[⌊h⌋+1] - x[⌊h⌋]).
    So 90, 120 and 150 s give q1 = 105 s, median = 120 s and q3 = 135 s; one time is its
    own median and quartiles.

Effective hourly wage
    reward ÷ hours at the median time, rounded half up to cents. A batch (or a worker) is
    below the minimum when reward × 3600 < minimum × median seconds, compared exactly.

Top-up
    For one assignment: minimum × its hours − reward, rounded UP to whole cents (the worker
    never ends a cent short), or nothing when the reward already pays the minimum.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from decimal import Decimal
from fractions import Fraction
from typing import Any

CENT = Decimal("0.01")
MILLISECOND = Decimal("0.001")
ZERO = Decimal("0.00")
SECONDS_PER_HOUR = 3600

Number = Decimal | int | float


def assignment_seconds(elapsed_ms: Iterable[int], *, limit_seconds: int) -> Decimal:
    """Return an assignment's measured time: its pairs' times, at most `limit_seconds`."""
    total = sum(int(ms) for ms in elapsed_ms)
    if total < 0:
        raise ValueError(f"times on pairs must not be negative (got {total} ms in all)")
    return Decimal(min(total, limit_seconds * 1000)) / 1000


def quantile(values: Sequence[Number], p: float | Fraction) -> Decimal:
    """Return the p-quantile of `values` by numpy's linear method (see the module's docstring)."""
    if not values:
        raise ValueError("no values: a quantile needs at least one")
    if not 0 <= p <= 1:
        raise ValueError(f"p must be between 0 and 1 (got {p})")
    ordered = sorted(_exact(value) for value in values)
    h = (len(ordered) - 1) * Fraction(p)
    low = math.floor(h)
    high = min(low + 1, len(ordered) - 1)
    value = ordered[low] + (h - low) * (ordered[high] - ordered[low])
    return _decimal(value)


def hourly_wage(reward: Number, seconds: Number) -> Decimal:
    """Return what `reward` for `seconds` of work makes per hour, rounded half up to cents."""
    time = _exact(seconds)
    if time <= 0:
        raise ValueError(f"an hourly wage needs a positive time (got {seconds} s)")
    per_hour = _exact(reward) * SECONDS_PER_HOUR / time
    return (Decimal(math.floor(per_hour * 100 + Fraction(1, 2))) / 100).quantize(CENT)


def below_minimum(*, reward: Number, seconds: Number, minimum_hourly: Number | None) -> bool:
    """Say whether `reward` for `seconds` pays less than `minimum_hourly` (None: no minimum)."""
    if minimum_hourly is None:
        return False
    return _exact(reward) * SECONDS_PER_HOUR < _exact(minimum_hourly) * _exact(seconds)


def pay_needed(*, seconds: Number, minimum_hourly: Number) -> Decimal:
    """Return the least pay, in whole cents (rounded up), that makes the minimum for `seconds`."""
    owed = _exact(minimum_hourly) * _exact(seconds) / SECONDS_PER_HOUR
    return (Decimal(math.ceil(owed * 100)) / 100).quantize(CENT)


def top_up(*, reward: Number, seconds: Number, minimum_hourly: Number) -> Decimal:
    """Return the bonus that brings `reward` to `minimum_hourly` for `seconds`, rounded up
    to whole cents; 0.00 when the reward already pays at least that.

    $0.50 for 150 s at $15/h: 15 × 150 / 3600 = $0.625 is owed, so $0.125 → $0.13.
    """
    missing = _exact(minimum_hourly) * _exact(seconds) / SECONDS_PER_HOUR - _exact(reward)
    if missing <= 0:
        return ZERO
    return (Decimal(math.ceil(missing * 100)) / 100).quantize(CENT)


@dataclass(frozen=True)
class WageStats:
    """Measured times of some assignments and what the reward makes per hour at their median.

    `q1_seconds` and `q3_seconds` (the quartiles) are the spread; `hourly` is None when the
    median time is zero (nothing measured).
    """

    assignments: int
    median_seconds: Decimal
    q1_seconds: Decimal
    q3_seconds: Decimal
    reward: Decimal
    hourly: Decimal | None
    minimum_hourly: Decimal | None = None
    below_minimum: bool = False

    def to_json(self) -> dict[str, Any]:
        """Return JSON-safe values (money and seconds as strings, so nothing is lost)."""
        return {
            "assignments": self.assignments,
            "median_seconds": str(self.median_seconds),
            "q1_seconds": str(self.q1_seconds),
            "q3_seconds": str(self.q3_seconds),
            "reward": str(self.reward),
            "hourly": _text(self.hourly),
            "minimum_hourly": _text(self.minimum_hourly),
            "below_minimum": self.below_minimum,
        }


def wage_stats(
    seconds: Sequence[Number], *, reward: Number, minimum_hourly: Number | None = None
) -> WageStats | None:
    """Return the median, quartiles and hourly wage of assignments' times; None for none."""
    if not seconds:
        return None
    median = quantile(seconds, Fraction(1, 2))
    money = Decimal(str(reward)).quantize(CENT)
    minimum = _money(minimum_hourly)
    return WageStats(
        assignments=len(seconds),
        median_seconds=median,
        q1_seconds=quantile(seconds, Fraction(1, 4)),
        q3_seconds=quantile(seconds, Fraction(3, 4)),
        reward=money,
        hourly=hourly_wage(money, median) if median > 0 else None,
        minimum_hourly=minimum,
        below_minimum=below_minimum(reward=money, seconds=median, minimum_hourly=minimum),
    )


BASIS_BATCH = "batch"  # this batch's approved assignments
BASIS_PAIRS = "pairs"  # seconds per judged pair of approved work elsewhere × pairs per HIT


@dataclass(frozen=True)
class WageEstimate:
    """The effective hourly wage a batch's workers can expect, before (more) publication.

    `basis` says where the time per HIT comes from: BASIS_BATCH (the median of this batch's
    approved assignments) or BASIS_PAIRS (the median seconds per judged pair of approved
    work in other batches × this batch's pairs per HIT); `assignments` how many approved
    assignments that median is taken over.
    """

    basis: str
    seconds_per_hit: Decimal
    reward: Decimal
    minimum_hourly: Decimal | None
    assignments: int
    items_per_hit: int
    seconds_per_pair: Decimal | None = None

    @property
    def hourly(self) -> Decimal | None:
        return hourly_wage(self.reward, self.seconds_per_hit) if self.seconds_per_hit else None

    @property
    def below_minimum(self) -> bool:
        return below_minimum(
            reward=self.reward, seconds=self.seconds_per_hit, minimum_hourly=self.minimum_hourly
        )

    @property
    def reward_needed(self) -> Decimal | None:
        """The least reward that pays the minimum at this time per HIT (None: no minimum)."""
        if self.minimum_hourly is None:
            return None
        return pay_needed(seconds=self.seconds_per_hit, minimum_hourly=self.minimum_hourly)

    def basis_text(self) -> str:
        """Say in words where the time per HIT comes from."""
        if self.basis == BASIS_BATCH:
            return f"median of this batch's {self.assignments} approved assignments"
        return (
            f"{seconds_text(self.seconds_per_pair or ZERO)} s per judged pair (median of "
            f"{self.assignments} approved assignments in other batches) × "
            f"{self.items_per_hit} pairs per HIT"
        )

    def warning(self) -> str | None:
        """Return what to tell the person publishing when the estimate is below the minimum."""
        if not self.below_minimum:
            return None
        return (
            f"estimated ${self.hourly}/h at the median measured time "
            f"({seconds_text(self.seconds_per_hit)} s per HIT) is below the batch's minimum "
            f"${self.minimum_hourly}/h: raise the reward to at least ${self.reward_needed} "
            "or pay top-ups after review"
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "basis": self.basis,
            "basis_text": self.basis_text(),
            "seconds_per_hit": str(self.seconds_per_hit),
            "seconds_per_pair": _text(self.seconds_per_pair),
            "items_per_hit": self.items_per_hit,
            "assignments": self.assignments,
            "reward": str(self.reward),
            "hourly": _text(self.hourly),
            "minimum_hourly": _text(self.minimum_hourly),
            "below_minimum": self.below_minimum,
            "reward_needed": _text(self.reward_needed),
            "warning": self.warning(),
        }


def estimate_from_pairs(
    *,
    seconds_per_pair: Number,
    items_per_hit: int,
    reward: Number,
    minimum_hourly: Number | None,
    assignments: int,
) -> WageEstimate:
    """Estimate a batch's wage before any of its work is approved: seconds per pair × pairs."""
    if items_per_hit < 1:
        raise ValueError(f"a HIT has at least one pair (got {items_per_hit})")
    per_pair = _exact(seconds_per_pair)
    return WageEstimate(
        basis=BASIS_PAIRS,
        seconds_per_hit=_decimal(per_pair * items_per_hit),
        reward=Decimal(str(reward)).quantize(CENT),
        minimum_hourly=_money(minimum_hourly),
        assignments=assignments,
        items_per_hit=items_per_hit,
        seconds_per_pair=_decimal(per_pair),
    )


def estimate_from_stats(stats: WageStats, *, items_per_hit: int) -> WageEstimate:
    """Estimate a batch's wage from its own approved assignments (their median time)."""
    return WageEstimate(
        basis=BASIS_BATCH,
        seconds_per_hit=stats.median_seconds,
        reward=stats.reward,
        minimum_hourly=stats.minimum_hourly,
        assignments=stats.assignments,
        items_per_hit=items_per_hit,
    )


def seconds_text(seconds: Decimal) -> str:
    """Write a time in seconds with at most one decimal: 120, 72.5."""
    rounded = Decimal(seconds).quantize(Decimal("0.1"))
    return f"{rounded:f}".removesuffix(".0")


def _exact(value: Number) -> Fraction:
    """Return a number exactly; a float as the decimal it prints as (0.1 is one tenth)."""
    if isinstance(value, float):
        return Fraction(Decimal(repr(value)))
    return Fraction(value)


def _decimal(value: Fraction) -> Decimal:
    """Return seconds as a Decimal to the millisecond, as the HIT page measures them."""
    return (Decimal(value.numerator) / Decimal(value.denominator)).quantize(MILLISECOND)


def _money(value: Number | None) -> Decimal | None:
    return None if value is None else Decimal(str(value)).quantize(CENT)


def _text(value: Decimal | None) -> str | None:
    return None if value is None else str(value)
