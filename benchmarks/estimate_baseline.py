"""The estimate as it was before the model-assisted sample, for `bench_estimate.py`.

The sample design it went with is still in `mitl.curation.estimate` (`strata_sizes`,
`sample_allocation`, `sample_draw`: rank strata, Neyman's rule on the yields pooled over
both directions). What changed is how the rounds' samples become an interval: here each
stratum's variance uses its rate smoothed by half a positive (`(y + ½)/(n + 1)`) in every
round, and the interval is normal. Kept verbatim (from `mitl/curation/estimate.py` at
commit e291449) so that both are measured in the same run.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from common import REPO_ROOT  # noqa: F401  (puts the project on the path)

from mitl.curation.estimate import RemainingEstimate, RoundSample

Z_95 = 1.959964


def round_estimate(sample: RoundSample) -> tuple[float, float] | None:
    """The unfound positives and the variance of that estimate from one round's sample."""
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
    """Combine every round's estimate of the positives never found; None without a sample."""
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
        return RemainingEstimate(found, max(value, 0.0), max(value, 0.0), max(value, 0.0), 1)
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
    )
