"""How many positives remain: a stratified random sample of unjudged pairs, extrapolated.

The population of a direction is every (query, target) pair of its queries: for an image
query every caption of the dataset, for a caption query every image. A pair is *found*
when it is a known positive (the original pairs, imported sets) or judged positive.

Each round, after the policy has chosen its pairs, a small random sample is drawn from the
pairs still unjudged, U_r, in three strata per direction: `top` (some annotator ranks it
within its first TOP_RANK for the query), `ranked` (within some annotator's
kept ranking of the query) and `tail` (every other pair of the query), allocated as
Neyman's rule suggests (n_h ∝ N_h·√(p_h(1−p_h)), p_h from earlier rounds or a prior).
Within a stratum every unjudged pair has the same chance n_h/N_h, so

    positives in U_r ≈ Σ_h N_h · y_h / n_h                      (Horvitz–Thompson)

and the positives never found, U_final, follow exactly from what was judged since:

    unfound ≈ Σ_h N_h · y_h / n_h − (positives in the sample) − (positives judged later)

Every round gives one such estimate; they are averaged with weights fixed by the design
(n_r / N_r², never by the outcomes, so the average stays unbiased) and the 95% interval
comes from the stratified variance (finite-population corrected; p smoothed by half a
positive so a stratum with no positive in its sample still has a width).

Assumptions, said in docs/curation.md: the crowd's verdicts are the truth (its false
positives inflate the estimate as they inflate the release); sampled pairs whose HIT was
never completed are left out of n_h (missing at random).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .rankings import Pair

STRATA = ("top", "ranked", "tail")
TOP_RANK = 10  # best rank (over annotators) of the `top` stratum: positives crowd there
# Before any sample: a guess, used only to split the first sample over the strata.
PRIOR_RATES = {"top": 0.3, "ranked": 0.1, "tail": 0.02}
Z_95 = 1.959964
# What every page says the estimated recall counts (the estimate's own assumption).
RECALL_TRUTH = (
    "measured against the crowd's verdicts and the known positives on the batch's queries "
    "(found ÷ found and estimated still missing)"
)
# A 95% recall interval wider than this cannot tell a near-complete release from a poor one.
RECALL_TOO_WIDE = 0.5


@dataclass(frozen=True)
class QueryUniverse:
    """One query's pairs: how many targets it has, which are ranked, which are taken."""

    query_id: int
    is_image_query: bool  # i2t: the query is an image, targets are captions
    item_id: int  # the query's image (i2t) or caption (t2i) pk
    n_targets: int
    ranked: Mapping[Pair, int]  # pairs within some annotator's kept ranking → best rank
    taken: frozenset[Pair]  # judged, chosen, or known positive pairs of this query


def pair_of(universe: QueryUniverse, target: int) -> Pair:
    return (universe.item_id, target) if universe.is_image_query else (target, universe.item_id)


def stratum_of(universe: QueryUniverse, pair: Pair) -> str:
    """The stratum of an unjudged pair of this query."""
    rank = universe.ranked.get(pair)
    if rank is None:
        return "tail"
    return "top" if rank <= TOP_RANK else "ranked"


def strata_sizes(universes: Iterable[QueryUniverse]) -> dict[str, int]:
    """How many unjudged pairs each stratum holds."""
    sizes = dict.fromkeys(STRATA, 0)
    for universe in universes:
        for pair in universe.ranked:
            if pair not in universe.taken:
                sizes[stratum_of(universe, pair)] += 1
        sizes["tail"] += universe.n_targets - _ranked_or_taken(universe)
    return sizes


def _ranked_or_taken(universe: QueryUniverse) -> int:
    return len(universe.ranked) + sum(1 for pair in universe.taken if pair not in universe.ranked)


def query_strata_sizes(universe: QueryUniverse) -> dict[str, int]:
    return strata_sizes([universe])


def sample_allocation(
    sizes: Mapping[str, int], total: int, rates: Mapping[str, float]
) -> dict[str, int]:
    """Split `total` sampled pairs over strata by Neyman's rule, never more than `total`.

    Every stratum with pairs gets at least 2 when `total` allows it (a stratum never sampled
    leaves the estimate undefined), and never more than it holds.
    """
    weights = {
        h: sizes[h] * math.sqrt(max(rates[h], 1e-3) * (1 - min(rates[h], 0.999)))
        for h in STRATA
        if sizes.get(h, 0) > 0
    }
    if not weights or total <= 0:
        return {h: 0 for h in STRATA}
    floor = min(2, total // len(weights))
    weight_sum = sum(weights.values())
    allocation = {
        h: min(sizes[h], max(floor, round(total * w / weight_sum))) for h, w in weights.items()
    }
    while sum(allocation.values()) > total:  # the floor or rounding went over: trim
        largest = max(allocation, key=lambda h: (allocation[h], h))
        allocation[largest] -= 1
    return {h: allocation.get(h, 0) for h in STRATA}


def sample_draw(
    universes: Sequence[QueryUniverse],
    targets: np.ndarray,
    allocation: Mapping[str, int],
    rng: np.random.Generator,
) -> list[tuple[int, Pair, str]]:
    """Draw the round's random sample: (query id, pair, stratum), uniform within a stratum.

    `targets` are the pks every query of these universes ranks (captions for image
    queries, images for caption queries). The ranked strata are listed and drawn without
    replacement; the tail by drawing a query and a target uniformly and refusing pairs that
    are ranked, taken or drawn already, so every tail pair has the same chance.
    """
    drawn: list[tuple[int, Pair, str]] = []
    for stratum in ("top", "ranked"):
        listed = [
            (u.query_id, pair)
            for u in universes
            for pair in sorted(u.ranked)
            if pair not in u.taken and stratum_of(u, pair) == stratum
        ]
        want = min(allocation.get(stratum, 0), len(listed))
        for index in rng.choice(len(listed), size=want, replace=False) if want else ():
            query_id, pair = listed[int(index)]
            drawn.append((query_id, pair, stratum))
    tail_sizes = np.array([u.n_targets - _ranked_or_taken(u) for u in universes], dtype=np.float64)
    want = min(allocation.get("tail", 0), int(tail_sizes.sum()))
    seen: set[Pair] = set()
    while want > 0 and tail_sizes.sum() > 0:
        # Every (query, target) slot equally likely, then refuse what is not tail: each tail
        # pair is kept with the same chance (the queries of a direction share their targets).
        universe = universes[int(rng.integers(len(universes)))]
        pair = pair_of(universe, int(targets[rng.integers(len(targets))]))
        if pair in universe.ranked or pair in universe.taken or pair in seen:
            continue
        seen.add(pair)
        drawn.append((universe.query_id, pair, "tail"))
        want -= 1
    return drawn


@dataclass(frozen=True)
class StratumSample:
    population: int  # N_h: unjudged pairs in the stratum when the sample was drawn
    judged: int  # n_h: sampled pairs that got a verdict
    positives: int  # y_h


@dataclass(frozen=True)
class RoundSample:
    """One round's sample in one direction, and what was found in its population since."""

    round: int
    strata: Mapping[str, StratumSample]
    positives_judged_later: int  # positives judged in later rounds (all were in U_r)


@dataclass(frozen=True)
class RemainingEstimate:
    found: int
    unfound: float
    low: float  # 95% interval of the unfound positives
    high: float
    rounds_used: int
    variance: float = 0.0  # of `unfound`, before it was clipped at zero

    @property
    def recall(self) -> float:
        return _recall(self.found, self.unfound)

    @property
    def recall_low(self) -> float:
        return _recall(self.found, self.high)

    @property
    def recall_high(self) -> float:
        return _recall(self.found, self.low)

    def to_json(self) -> dict[str, float | int]:
        return {
            "found": self.found,
            "unfound": round(self.unfound, 1),
            "unfound_low": round(self.low, 1),
            "unfound_high": round(self.high, 1),
            "recall": round(self.recall, 4),
            "recall_low": round(self.recall_low, 4),
            "recall_high": round(self.recall_high, 4),
            "rounds_used": self.rounds_used,
        }


@dataclass(frozen=True)
class RecallWording:
    """What an estimated recall counts, and why its interval cannot be acted on ("" if it can)."""

    truth: str
    warning: str

    def sentence(self) -> str:
        return f"{self.truth}; {self.warning}" if self.warning else self.truth


def recall_wording(*, recall_low: float, recall_high: float) -> RecallWording:
    """Say against which truth the recall is measured and whether its interval is usable.

    Every page that shows the estimate (batch page, dashboard, datasheet, demo summary)
    takes its words from here, so they all say the same.
    """
    warning = ""
    if recall_high - recall_low > RECALL_TOO_WIDE:
        warning = "interval too wide to act on: judge more random pairs"
    return RecallWording(truth=RECALL_TRUTH, warning=warning)


def _recall(found: int, unfound: float) -> float:
    total = found + max(unfound, 0.0)
    return found / total if total > 0 else 1.0


def round_estimate(sample: RoundSample) -> tuple[float, float] | None:
    """The unfound positives and the variance of that estimate from one round's sample.

    None when a stratum with unjudged pairs has no judged sample (nothing to extrapolate).
    """
    total = variance = 0.0
    for stratum in sample.strata.values():
        if stratum.population == 0:
            continue
        if stratum.judged == 0:
            return None
        rate = stratum.positives / stratum.judged
        total += stratum.population * rate - stratum.positives
        smoothed = (stratum.positives + 0.5) / (stratum.judged + 1)
        correction = max(1 - stratum.judged / stratum.population, 0.0)
        variance += stratum.population**2 * correction * smoothed * (1 - smoothed) / stratum.judged
    return total - sample.positives_judged_later, variance


def remaining_estimate(found: int, samples: Sequence[RoundSample]) -> RemainingEstimate | None:
    """Combine every round's estimate of the positives never found; None without a sample.

    A round whose sample covered every unjudged pair (a census) is exact: it alone decides.
    """
    estimates = []
    exact = []
    for sample in samples:
        single = round_estimate(sample)
        if single is None:
            continue
        census = all(s.judged >= s.population for s in sample.strata.values())
        if census:
            exact.append(single[0])
            continue
        population = sum(s.population for s in sample.strata.values())
        judged = sum(s.judged for s in sample.strata.values())
        estimates.append((single[0], single[1], judged / population**2))
    if exact:
        value = sum(exact) / len(exact)
        return RemainingEstimate(found, max(value, 0.0), max(value, 0.0), max(value, 0.0), 1, 0.0)
    if not estimates:
        return None
    weight_sum = sum(w for *_, w in estimates)
    unfound = sum(value * w for value, _, w in estimates) / weight_sum
    variance = sum(var * w * w for _, var, w in estimates) / weight_sum**2
    half = Z_95 * math.sqrt(variance)
    return RemainingEstimate(
        found=found,
        unfound=max(unfound, 0.0),
        low=max(unfound - half, 0.0),
        high=max(unfound + half, 0.0),
        rounds_used=len(estimates),
        variance=variance,
    )


def estimates_sum(found: int, parts: Sequence[RemainingEstimate]) -> RemainingEstimate | None:
    """Add up estimates of disjoint parts of a population (independent samples).

    The unfound positives and their variances add; the interval is the sum's own. None
    without parts.
    """
    if not parts:
        return None
    if len(parts) == 1:
        part = parts[0]
        return RemainingEstimate(
            found, part.unfound, part.low, part.high, part.rounds_used, part.variance
        )
    unfound = sum(part.unfound for part in parts)
    variance = sum(part.variance for part in parts)
    half = Z_95 * math.sqrt(variance)
    return RemainingEstimate(
        found=found,
        unfound=unfound,
        low=max(unfound - half, 0.0),
        high=unfound + half,
        rounds_used=max(part.rounds_used for part in parts),
        variance=variance,
    )


def pooled_rates(samples: Sequence[RoundSample]) -> dict[str, float]:
    """Each stratum's yield over every round's sample (the prior before any)."""
    rates = {}
    for stratum in STRATA:
        judged = positives = 0
        for sample in samples:
            if stratum in sample.strata:
                judged += sample.strata[stratum].judged
                positives += sample.strata[stratum].positives
        rates[stratum] = (
            (positives + PRIOR_RATES[stratum]) / (judged + 1) if judged else (PRIOR_RATES[stratum])
        )
    return rates
