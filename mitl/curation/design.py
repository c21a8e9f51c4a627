"""The model-assisted sample: ranked pairs stratified by their predicted chance of a positive.

The rank strata (`estimate.stratum_of`) cut a direction's unjudged ranked pairs at rank
10, whatever the query and whatever the other annotators say. Here they are cut by what the
logistic fusion (`learned.group_model`, refit on every judged pair, the `learned`
policy's model) predicts for them: `top` holds the pairs it rates most likely, `ranked`
the rest, and `tail` every pair no annotator ranks, as before. The cut gives both ranked
strata the same predicted Σ√(p(1−p)), the Neyman weight a stratum would have if the
predictions were right. Before the fusion can be fit (fewer than 5 positives or
negatives judged in the direction), pairs are rated by the policies' prior yield of their
best rank band.

The sample is split over the strata by Neyman's rule on each stratum's *anticipated*
yield: for the ranked strata their mean prediction times the direction's calibration so
far (positives found in earlier random samples of ranked pairs over what their strata's
predictions expected, smoothed toward 1: a fusion fit on the pairs the policy chose is not
calibrated on the rest); for the tail its yield in earlier samples, held near
`TAIL_PRIOR` by `TAIL_STRENGTH` pseudo-judgements so that a tail whose first sampled
pairs were all negative is not starved. Within a stratum every pair has the same chance,
so the estimate stays the design's Horvitz–Thompson sum (`estimate.remaining_estimate`),
unbiased whatever the predictions: a poor model costs width, never coverage.

The strata keep the rank strata's names, so a round's record (each stratum's population)
and a sampled candidate's `sample_stratum` read as before; the round record adds each
ranked stratum's population sum of predictions and anticipated yield
(`PredictedSample.design`, the record's `sample_design`), which the next rounds'
calibration reads back (`with_predictions`).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

import numpy as np

from .estimate import (
    QueryUniverse,
    RoundSample,
    neyman_allocation,
    tail_draw,
    tail_size,
)
from .learned import GroupModel
from .policies import prior_yield, rank_band
from .rankings import Pair

RANKED_STRATA = ("ranked", "top")  # ranked pairs, least likely first
TAIL_PRIOR = 0.02  # an unranked pair's chance before any sample (as `estimate.PRIOR_RATES`)
TAIL_STRENGTH = 10.0  # pseudo-judgements of TAIL_PRIOR in the tail's anticipated yield
CALIBRATION_STRENGTH = 2.0  # pseudo-positives that hold the ranked calibration near 1
RATE_RANGE = (1e-3, 0.999)

SampledPair = tuple[int, Pair, str]  # (query id, pair, stratum)


@dataclass(frozen=True)
class RankedStratum:
    """The unjudged ranked pairs of one predicted band, each with its prediction."""

    name: str
    pairs: tuple[tuple[int, Pair], ...]  # (query id, pair)
    predicted: float  # Σ prediction over the pairs

    @property
    def population(self) -> int:
        return len(self.pairs)


def _spread(p: np.ndarray) -> np.ndarray:
    clipped = np.clip(p, *RATE_RANGE)
    return np.sqrt(clipped * (1 - clipped))


def ranked_strata(
    universes: Sequence[QueryUniverse], model: GroupModel | None
) -> list[RankedStratum]:
    """The unjudged ranked pairs cut into `RANKED_STRATA` by their predicted probability.

    `model` is the direction's fusion (`group_model`); its rows may cover more pairs than
    the universes leave untaken. Without a fit, a pair's prediction is the prior yield of
    its best rank band.
    """
    predicted: dict[tuple[int, Pair], float] = {}
    if model is not None and model.probabilities is not None:
        predicted = dict(zip(model.rows, model.probabilities.tolist(), strict=True))
    listed: list[tuple[int, Pair]] = []
    rates: list[float] = []
    for universe in universes:
        query_id = universe.query_id
        for pair, rank in universe.ranked.items():
            if pair not in universe.taken:
                listed.append((query_id, pair))
                p = predicted.get((query_id, pair))
                rates.append(prior_yield(rank_band(rank)) if p is None else p)
    if not listed:
        return [RankedStratum(name, (), 0.0) for name in RANKED_STRATA]
    keys = np.array([(q, i, c) for q, (i, c) in listed], dtype=np.int64)
    p = np.array(rates, dtype=float)
    order = np.lexsort((keys[:, 2], keys[:, 1], keys[:, 0], p))  # by prediction, then pair
    weights = _spread(p[order])
    # Equal shares of Σ√(p(1−p)): a pair joins the band that the weight below it reaches.
    below = (np.cumsum(weights) - weights) / float(weights.sum())
    bands = np.minimum((below * len(RANKED_STRATA)).astype(int), len(RANKED_STRATA) - 1)
    edges = np.searchsorted(bands, np.arange(len(RANKED_STRATA) + 1))  # bands ascend
    ordered = [listed[i] for i in order.tolist()]
    return [
        RankedStratum(
            name,
            tuple(ordered[edges[k] : edges[k + 1]]),
            float(p[order[edges[k] : edges[k + 1]]].sum()),
        )
        for k, name in enumerate(RANKED_STRATA)
    ]


def with_predictions(
    samples: Sequence[RoundSample], designs: Mapping[int, Mapping[str, Mapping[str, float]]]
) -> list[RoundSample]:
    """The samples with each stratum's recorded population sum of predictions filled in.

    `designs` maps a round to its record's `sample_design` for the direction; rounds drawn
    with the rank strata have none and stay as they are.
    """
    filled = []
    for sample in samples:
        design = designs.get(sample.round, {})
        strata = {
            h: replace(s, predicted=design[h]["predicted"], rate=design[h]["rate"])
            if h in design
            else s
            for h, s in sample.strata.items()
        }
        filled.append(replace(sample, strata=strata))
    return filled


def ranked_calibration(samples: Sequence[RoundSample]) -> float:
    """Positives in earlier random samples of ranked pairs ÷ what their predictions expected.

    A sampled stratum expects n_h times its mean prediction; smoothed toward 1 by
    `CALIBRATION_STRENGTH` pseudo-positives. Strata without a recorded prediction (rounds
    drawn with the rank strata) are left out.
    """
    found = expected = 0.0
    for sample in samples:
        for name in RANKED_STRATA:
            stratum = sample.strata.get(name)
            if stratum is None or stratum.predicted is None or not stratum.population:
                continue
            found += stratum.positives
            expected += stratum.judged * stratum.predicted / stratum.population
    return (found + CALIBRATION_STRENGTH) / (expected + CALIBRATION_STRENGTH)


def tail_rate(samples: Sequence[RoundSample]) -> float:
    """The tail's yield in earlier samples, held near `TAIL_PRIOR`."""
    judged = sum(s.strata["tail"].judged for s in samples if "tail" in s.strata)
    positives = sum(s.strata["tail"].positives for s in samples if "tail" in s.strata)
    return (positives + TAIL_STRENGTH * TAIL_PRIOR) / (judged + TAIL_STRENGTH)


def anticipated_rates(
    strata: Sequence[RankedStratum], samples: Sequence[RoundSample]
) -> dict[str, float]:
    """Each stratum's anticipated yield, from the predictions and the earlier samples."""
    calibration = ranked_calibration(samples)
    rates = {
        s.name: calibration * s.predicted / s.population if s.population else RATE_RANGE[0]
        for s in strata
    }
    rates["tail"] = tail_rate(samples)
    return {h: float(np.clip(rate, *RATE_RANGE)) for h, rate in rates.items()}


@dataclass(frozen=True)
class PredictedSample:
    """One direction's random sample for a round and what its record keeps."""

    drawn: list[SampledPair]
    population: dict[str, int]  # the round record's `sample_population[direction]`
    design: dict[str, dict[str, float]]  # stratum → population sum of predictions, rate


def predicted_sample(
    universes: Sequence[QueryUniverse],
    targets: np.ndarray,
    model: GroupModel | None,
    samples: Sequence[RoundSample],
    total: int,
    rng: np.random.Generator,
) -> PredictedSample:
    """Stratify, allocate and draw one direction's share of a round's random sample.

    `samples` are the direction's earlier rounds (`with_predictions` filled in); `targets`
    the pks every query ranks (captions for image queries, images for caption queries).
    """
    strata = ranked_strata(universes, model)
    rates = anticipated_rates(strata, samples)
    sizes = {s.name: s.population for s in strata}
    sizes["tail"] = sum(tail_size(u) for u in universes)
    allocation = neyman_allocation(sizes, total, rates)
    drawn: list[SampledPair] = []
    for stratum in strata:
        want = min(allocation[stratum.name], stratum.population)
        for index in rng.choice(stratum.population, size=want, replace=False) if want else ():
            query_id, pair = stratum.pairs[int(index)]
            drawn.append((query_id, pair, stratum.name))
    tail = tail_draw(universes, targets, allocation["tail"], rng)
    drawn += [(query_id, pair, "tail") for query_id, pair in tail]
    design = {
        s.name: {"predicted": round(s.predicted, 3), "rate": round(rates[s.name], 5)}
        for s in strata
    }
    return PredictedSample(drawn, sizes, design)
