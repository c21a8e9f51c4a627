"""How complete a set of queries' positives is: every batch's random samples, combined.

Each adaptive round of a batch drew a random sample of the pairs still unjudged on that
batch's queries (`pipeline.curation_select`). Later rounds, and later batches on the same
queries, only judge pairs that were unjudged when an earlier sample was drawn, so every
sample keeps estimating the positives never found, as long as what was judged after it is
subtracted (`mitl.curation.estimate`). Here those samples are read for any set of batches
and any queries (a batch's own, or a release's union), against one truth: the dataset's
cumulative verdicts (`pipeline.truth`), so what is "found" is what a release ships.

Queries that different sets of batches sampled are estimated apart, in blocks: a block's
queries were covered by exactly the same batches, and each of those batches' samples tells
about the block by counting only the block's positives in it (a domain of the stratified
sample: every pair of a stratum still had the same chance). The blocks' estimates and
variances add up. A block that no sample covers has no estimate, and then neither has the
whole (nothing says how much it misses).
"""

from __future__ import annotations

from bisect import bisect_right
from collections import defaultdict
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from annotation.models import Batch, Candidate, Direction, Query
from mitl.curation.estimate import (
    RemainingEstimate,
    RoundSample,
    StratumSample,
    estimates_sum,
    remaining_estimate,
)
from mitl.curation.rankings import Pair

from .truth import PairVerdict, Stage

REPORT_KEY = "curation"  # in Batch.reports: each round's design, and the estimate
SIDE = {Direction.I2T: 0, Direction.T2I: 1}  # which side of a pair holds the query item


@dataclass(frozen=True)
class _SampledPair:
    stage: Stage
    stratum: str
    pair: Pair


@dataclass(frozen=True)
class SampleDesigns:
    """What every covered batch sampled: its rounds' strata sizes and its sampled pairs."""

    populations: Mapping[tuple[Stage, str], Mapping[str, int]]  # (stage, direction) -> N_h
    query_items: Mapping[tuple[int, str], frozenset[int]]  # (batch, direction) -> items
    sampled: Mapping[str, Sequence[_SampledPair]]  # direction -> sampled pairs


def sample_designs(batch_ids: Sequence[int]) -> SampleDesigns:
    """Read the recorded sample designs, queries and sampled pairs of the batches."""
    populations: dict[tuple[Stage, str], Mapping[str, int]] = {}
    for pk, reports in Batch.objects.filter(pk__in=list(batch_ids)).values_list("pk", "reports"):
        for entry in (reports or {}).get(REPORT_KEY, {}).get("rounds", []):
            for direction, sizes in entry.get("sample_population", {}).items():
                populations[((pk, entry["round"]), direction)] = sizes
    items: dict[tuple[int, str], set[int]] = defaultdict(set)
    for batch_id, direction, image_id, caption_id in Query.objects.filter(
        batch_id__in=list(batch_ids)
    ).values_list("batch_id", "direction", "image_id", "caption_id"):
        items[(batch_id, direction)].add(image_id if direction == Direction.I2T else caption_id)
    sampled: dict[str, list[_SampledPair]] = defaultdict(list)
    for batch_id, round_index, direction, stratum, image_id, caption_id in (
        Candidate.objects.filter(batch_id__in=list(batch_ids))
        .exclude(sample_stratum="")
        .values_list("batch_id", "round", "direction", "sample_stratum", "image_id", "caption_id")
    ):
        sampled[direction].append(
            _SampledPair((batch_id, round_index), stratum, (image_id, caption_id))
        )
    return SampleDesigns(
        populations=populations,
        query_items={key: frozenset(value) for key, value in items.items()},
        sampled=sampled,
    )


def recall_estimate(
    *,
    designs: SampleDesigns,
    direction: str,
    query_items: frozenset[int],
    verdicts: Mapping[Pair, PairVerdict],
    found: int,
    known: frozenset[Pair] = frozenset(),
) -> RemainingEstimate | None:
    """Estimate the positives `query_items` still miss in one direction; None if unsampled.

    `verdicts` is the cumulative truth of the batches the designs come from; `found` the
    positives counted as found on these queries; `known` the known positives (never judged,
    so never "judged later").
    """
    side = SIDE[direction]
    sampling = sorted({stage[0] for stage, d in designs.populations if d == direction})
    blocks: dict[frozenset[int], set[int]] = defaultdict(set)
    for item in query_items:
        covering = frozenset(
            b for b in sampling if item in designs.query_items.get((b, direction), ())
        )
        blocks[covering].add(item)
    estimates = []
    for covering, block in blocks.items():
        if not covering:
            return None
        samples = _block_samples(designs, direction, covering, block, verdicts, side, known)
        estimate = remaining_estimate(0, samples)
        if estimate is None:
            return None
        estimates.append(estimate)
    return estimates_sum(found, estimates)


def _block_samples(
    designs: SampleDesigns,
    direction: str,
    covering: frozenset[int],
    block: set[int],
    verdicts: Mapping[Pair, PairVerdict],
    side: int,
    known: frozenset[Pair],
) -> list[RoundSample]:
    """Every covering batch's round samples, each counting only the block's positives."""
    judged: dict[tuple[Stage, str], int] = defaultdict(int)
    positives: dict[tuple[Stage, str], int] = defaultdict(int)
    for sampled in designs.sampled.get(direction, ()):
        verdict = verdicts.get(sampled.pair)
        if sampled.stage[0] not in covering or verdict is None:
            continue  # a pair whose HIT never got counted work is missing at random
        judged[(sampled.stage, sampled.stratum)] += 1
        if verdict.spec.is_positive and sampled.pair[side] in block:
            positives[(sampled.stage, sampled.stratum)] += 1
    found_at = sorted(
        verdict.first_stage
        for pair, verdict in verdicts.items()
        if verdict.spec.is_positive and pair[side] in block and pair not in known
    )
    samples = []
    for (stage, d), sizes in sorted(designs.populations.items()):
        if d != direction or stage[0] not in covering:
            continue
        strata = {
            h: StratumSample(sizes.get(h, 0), judged[(stage, h)], positives[(stage, h)])
            for h in sizes  # the strata the round recorded
        }
        later = len(found_at) - bisect_right(found_at, stage)
        samples.append(RoundSample(round=stage[1], strata=strata, positives_judged_later=later))
    return samples
