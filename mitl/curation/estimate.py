"""How many positives remain: a stratified random sample of unjudged pairs, extrapolated.

The population of a direction is every (query, target) pair of its queries: for an image
query every caption of the dataset, for a caption query every image. A pair is *found*
when it is a known positive (the original pairs, imported sets) or judged positive.

Each round, after the policy has chosen its pairs, a small random sample is drawn from the
pairs still unjudged, U_r, in three strata per direction (`design.predicted_sample`: `top`
and `ranked` split the ranked pairs by the fusion's prediction, `tail` is the rest; rounds
recorded before drew rank strata, `stratum_of` and `sample_draw`, and read alike here),
allocated by Neyman's rule and uniform within a stratum (each pair's chance n_h/N_h), so

    positives in U_r ≈ Σ_h N_h · y_h / n_h                      (Horvitz–Thompson)

and the positives never found, U_final, follow exactly from what was judged since:

    unfound ≈ Σ_h N_h · y_h / n_h − (positives in the sample) − (positives judged later)

Every round gives one such estimate; they are averaged with weights fixed by the design
(n_r / N_r², never by the outcomes, so the average stays unbiased). Its variance sums the
strata's N_h²(1 − n_h/N_h)·s_h²/n_h, s_h² the sample's own unbiased variance; the 95%
interval is Fay and Kim's mid-p gamma interval for a weighted count of positives
(`interval.midp_gamma_interval`). Assumptions, said in docs/curation.md: the crowd's
verdicts are the truth; sampled pairs whose HIT was never completed are left out of n_h
(missing at random).
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from .interval import (  # noqa: F401  (the estimate's interval, read from here too)
    ALPHA,
    Bounds,
    RemainingEstimate,
    estimates_sum,
    gamma_interval,
    interval_estimate,
    midp_gamma_interval,
)
from .rankings import Pair

STRATA = ("top", "ranked", "tail")
TOP_RANK = 10  # best rank (over annotators) of the `top` stratum: positives crowd there
# Before any sample: a guess, used only to split the first sample over the strata.
PRIOR_RATES = {"top": 0.3, "ranked": 0.1, "tail": 0.02}
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


def tail_size(universe: QueryUniverse) -> int:
    """How many of the query's pairs no annotator ranks and nobody took."""
    return universe.n_targets - _ranked_or_taken(universe)


def _ranked_or_taken(universe: QueryUniverse) -> int:
    return len(universe.ranked) + sum(1 for pair in universe.taken if pair not in universe.ranked)


def query_strata_sizes(universe: QueryUniverse) -> dict[str, int]:
    return strata_sizes([universe])


def sample_allocation(
    sizes: Mapping[str, int], total: int, rates: Mapping[str, float]
) -> dict[str, int]:
    """Split `total` sampled pairs over the rank strata by Neyman's rule (`neyman_allocation`)."""
    allocation = neyman_allocation({h: sizes.get(h, 0) for h in STRATA}, total, rates)
    return {h: allocation[h] for h in STRATA}


def neyman_allocation(
    sizes: Mapping[str, int], total: int, rates: Mapping[str, float]
) -> dict[str, int]:
    """Split `total` sampled pairs over strata by Neyman's rule, never more than `total`.

    n_h ∝ N_h·√(p_h(1−p_h)) with p_h the stratum's anticipated yield. Every stratum with
    pairs gets at least 2 when `total` allows it (a stratum never sampled leaves the
    estimate undefined), and never more than it holds.
    """
    weights = {
        h: sizes[h] * math.sqrt(max(rates[h], 1e-3) * (1 - min(rates[h], 0.999)))
        for h in sizes
        if sizes[h] > 0
    }
    if not weights or total <= 0:
        return dict.fromkeys(sizes, 0)
    floor = min(2, total // len(weights))
    weight_sum = sum(weights.values())
    allocation = {
        h: min(sizes[h], max(floor, round(total * w / weight_sum))) for h, w in weights.items()
    }
    while sum(allocation.values()) > total:  # the floor or rounding went over: trim
        largest = max(allocation, key=lambda h: (allocation[h], h))
        allocation[largest] -= 1
    return {h: allocation.get(h, 0) for h in sizes}


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
    tail = tail_draw(universes, targets, allocation.get("tail", 0), rng)
    return drawn + [(query_id, pair, "tail") for query_id, pair in tail]


def tail_draw(
    universes: Sequence[QueryUniverse], targets: np.ndarray, want: int, rng: np.random.Generator
) -> list[tuple[int, Pair]]:
    """Draw up to `want` distinct tail pairs (no annotator ranks them, nobody took them).

    Every (query, target) slot is equally likely, then what is not tail is refused: each
    tail pair is kept with the same chance (the queries of a direction share their targets).
    """
    want = min(want, sum(tail_size(u) for u in universes))
    drawn: list[tuple[int, Pair]] = []
    seen: set[Pair] = set()
    while len(drawn) < want:
        universe = universes[int(rng.integers(len(universes)))]
        pair = pair_of(universe, int(targets[rng.integers(len(targets))]))
        if pair in universe.ranked or pair in universe.taken or pair in seen:
            continue
        seen.add(pair)
        drawn.append((universe.query_id, pair))
    return drawn


@dataclass(frozen=True)
class StratumSample:
    population: int  # N_h: unjudged pairs in the stratum when the sample was drawn
    judged: int  # n_h: sampled pairs that got a verdict
    positives: float  # y_h (a whole number; a plan's expected one may not be)
    # Drawn by `design.predicted_sample` only (None for rounds drawn with the rank strata):
    predicted: float | None = None  # Σ of the fusion's predictions over the N_h pairs
    rate: float | None = None  # the yield anticipated when it was drawn (its allocation)


@dataclass(frozen=True)
class RoundSample:
    """One round's sample in one direction, and what was found in its population since."""

    round: int
    strata: Mapping[str, StratumSample]
    positives_judged_later: float  # positives judged in later rounds (all were in U_r)


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


def stratum_variance(stratum: StratumSample) -> float:
    """The variance of N_h·ȳ_h as an estimate of the stratum's positives: N²(1−f)s²/n.

    s² is the sample's own unbiased variance, ȳ(1−ȳ)·n/(n−1); a stratum with one judged
    pair has none, and takes ȳ smoothed by half a positive instead.
    """
    n, size = stratum.judged, stratum.population
    rate = stratum.positives / n
    if n >= 2:
        spread = rate * (1 - rate) * n / (n - 1)
    else:
        smoothed = (stratum.positives + 0.5) / (n + 1)
        spread = smoothed * (1 - smoothed)
    return size**2 * max(1 - n / size, 0.0) * spread / n


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
        total += stratum.population * stratum.positives / stratum.judged - stratum.positives
        variance += stratum_variance(stratum)
    return total - sample.positives_judged_later, variance


def remaining_estimate(
    found: int, samples: Sequence[RoundSample], bounds: Bounds | None = None
) -> RemainingEstimate | None:
    """Combine every round's estimate of the positives never found; None without a sample.

    Rounds are averaged with weights n_r / N_r² fixed by the design. The interval is the
    mid-p gamma interval of the weighted count Σ_r w_r Σ_h N_h·y_h/n_h
    (`interval.interval_estimate`; `bounds`: another one, for comparisons), less what is
    known exactly: each round's sampled and later-judged positives. A round whose sample
    covered every unjudged pair (a census) is exact: it alone decides.
    """
    estimates = []
    exact = []
    for sample in samples:
        single = round_estimate(sample)
        if single is None:
            continue
        if all(s.judged >= s.population for s in sample.strata.values()):  # a census
            exact.append(single[0])
            continue
        population = sum(s.population for s in sample.strata.values())
        judged = sum(s.judged for s in sample.strata.values())
        estimates.append((sample, single, judged / population**2))
    if exact:
        value = max(sum(exact) / len(exact), 0.0)
        return RemainingEstimate(found, value, value, value, 1, 0.0, value, 0.0, 0.0)
    if not estimates:
        return None
    weight_sum = sum(w for *_, w in estimates)
    unfound = sum(value * w for _, (value, _), w in estimates) / weight_sum
    variance = sum(var * w * w for _, (_, var), w in estimates) / weight_sum**2
    counted, heaviest = _weighted_count([(sample, w / weight_sum) for sample, _, w in estimates])
    return interval_estimate(
        found,
        counted=counted,
        known=counted - unfound,  # sampled and later-judged positives, weighted alike
        variance=variance,
        heaviest=heaviest,
        ceiling=sum(  # every unjudged pair positive
            w / weight_sum * sum(s.population for s in sample.strata.values())
            for sample, _, w in estimates
        ),
        rounds_used=len(estimates),
        bounds=bounds,
    )


def _weighted_count(weighted: Sequence[tuple[RoundSample, float]]) -> tuple[float, float]:
    """Σ_r w_r Σ_h N_h·y_h/n_h, and what one more sampled positive would weigh at most.

    A stratum's positive weighs Σ_r w_r·N_h / Σ_r n_h over the rounds (its rounds' samples
    pooled); the heaviest stratum's is the one the interval adds (`midp_gamma_interval`).
    """
    counted = 0.0
    pooled: dict[str, list[float]] = {}  # stratum → [Σ_r w_r·N_h, Σ_r n_h]
    for sample, w in weighted:
        for name, s in sample.strata.items():
            if s.population:
                counted += w * s.population * s.positives / s.judged
                totals = pooled.setdefault(name, [0.0, 0.0])
                totals[0] += w * s.population
                totals[1] += s.judged
    return counted, max(total / judged for total, judged in pooled.values())


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
