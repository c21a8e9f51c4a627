"""Adjudication policies: which unjudged pairs of which queries to judge in the next round.

Both policies see the same inputs: each query's rankings by every annotator (pairs, best
first, as deep as the batch keeps them) and the outcomes known so far (pair → judged
positive). Both value every arm by the chance that its next pair is a positive and draw
greedily, one pair at a time, from the arm that looks best, re-valuing it after each draw,
so a round's pairs go where positives keep being found.

- `bandit_arms`: an arm is one annotator's ranking for one query (Losada, Parapar and
  Barreiro, "Feeling Lucky? Multi-armed bandits for ordering judgements in pooling-based
  evaluation", SAC 2016; IP&M 53(5), 2017: MaxMean, the greedy choice by posterior mean).
  Its next pair's value is the annotator's pooled yield at that rank band in the query's
  direction (empirical Bayes over every query; before any judgement a prior that falls
  with rank) times the query's own richness: (s + positives) / (s + expected positives)
  over the arm's judged pairs. So an annotator whose proposals keep being positive for a
  query is drawn deeper, and one that keeps failing falls below `drop_below` and is
  dropped.
- `depth_arms`: one arm per query on the reciprocal-rank fusion of every annotator's
  ranking; its value is the yield of its last `window` judged pairs in fused order. A
  query keeps going deeper, `step` pairs at a time, while that recent yield stays at or
  above `drop_below`.

The third policy, `learned`, orders pairs by a logistic fusion refit every round
(`mitl.curation.learned`). The rankings and their fusion are `mitl.curation.rankings`.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

from .learned import learned_order
from .rankings import Pair, QueryRankings, fused_ranking

# Upper rank of each band (1-based, inclusive); deeper ranks share the last band.
RANK_BANDS = (1, 2, 3, 5, 7, 10, 15, 25, 35, 50, 75, 100, 150, 250, 500, 1000)


@dataclass(frozen=True)
class PolicySettings:
    step: int = 5  # depth: pairs per draw from one query before the next query's turn
    drop_below: float = 0.1  # an arm whose value falls below this is not drawn any more
    min_evidence: int = 3  # ... once it has at least this many judged pairs
    band_strength: float = 5.0  # bandit: pseudo-judgements of the prior per rank band
    query_strength: float = 2.0  # bandit: pseudo-positives of a query's richness factor
    window: int = 5  # depth: recent judged pairs that make a query's yield


@dataclass(frozen=True)
class Pick:
    """A pair chosen for judgement: the query that drew it and every arm that ranks it."""

    query_id: int
    pair: Pair
    # (annotator id, 1-based rank) for every annotator that ranks the pair for this query
    ranked_by: tuple[tuple[int, int], ...]


@dataclass
class Arm:
    """Where a policy can draw next: an ordered list of pairs and how to value its next one.

    A bandit arm's value is `factor × yields[band of the next rank]`; a depth arm's is
    `factor` (its recent yield), halved after every `step` pairs drawn in this round.
    """

    query_id: int
    key: int  # annotator id (bandit) or 0 (depth: the fused list)
    pairs: Sequence[Pair]
    factor: float
    evidence: int  # judged pairs the value rests on
    yields: Sequence[float] | None = None  # bandit: yield per rank band
    position: int = 0  # next index of `pairs` to look at
    drawn: list[Pair] = field(default_factory=list)

    def value(self, step: int) -> float:
        if self.yields is None:
            return self.factor * 0.5 ** (len(self.drawn) // max(step, 1))
        return min(1.0, self.factor * self.yields[rank_band(self.position + 1)])

    def dropped(self, settings: PolicySettings) -> bool:
        return self.evidence >= settings.min_evidence and self.value(settings.step) < (
            settings.drop_below
        )


def rank_band(rank: int) -> int:
    """The index of the band holding a 1-based rank."""
    return min(bisect.bisect_left(RANK_BANDS, rank), len(RANK_BANDS) - 1)


def prior_yield(band: int) -> float:
    """Before any judgement: a yield that falls with rank (½ at rank 1, ~0.05 at 100)."""
    return 0.5 / RANK_BANDS[band] ** 0.5


def band_yields(
    rankings: Sequence[QueryRankings],
    outcomes: Mapping[Pair, bool],
    strength: float,
) -> dict[tuple[str, int], list[float]]:
    """Each (group, annotator)'s yield per rank band over every query's judged pairs.

    Smoothed toward `prior_yield` with `strength` pseudo-judgements, so a band nobody
    judged yet keeps the prior, and a yield never rises with depth (each band is capped
    by the band above: rankings are best first).
    """
    hits: dict[tuple[str, int], list[float]] = {}
    judged: dict[tuple[str, int], list[float]] = {}
    for query in rankings:
        for annotator, pairs in query.lists.items():
            key = (query.group, annotator)
            if key not in hits:
                hits[key] = [0.0] * len(RANK_BANDS)
                judged[key] = [0.0] * len(RANK_BANDS)
            for rank, pair in enumerate(pairs, start=1):
                if pair in outcomes:
                    band = rank_band(rank)
                    judged[key][band] += 1
                    hits[key][band] += outcomes[pair]
    curves = {}
    for key in hits:
        curve = []
        for band in range(len(RANK_BANDS)):
            prior = prior_yield(band)
            value = (hits[key][band] + strength * prior) / (judged[key][band] + strength)
            curve.append(min(value, curve[-1]) if curve else value)
        curves[key] = curve
    return curves


def bandit_arms(
    rankings: Sequence[QueryRankings],
    outcomes: Mapping[Pair, bool],
    settings: PolicySettings,
) -> list[Arm]:
    """One arm per (query, annotator), valued by pooled yield × the query's richness."""
    curves = band_yields(rankings, outcomes, settings.band_strength)
    arms = []
    for query in rankings:
        for annotator in sorted(query.lists):
            pairs = query.lists[annotator]
            curve = curves[(query.group, annotator)]
            positives = expected = 0.0
            evidence = 0
            for rank, pair in enumerate(pairs, start=1):
                if pair in outcomes:
                    evidence += 1
                    positives += outcomes[pair]
                    expected += curve[rank_band(rank)]
            strength = settings.query_strength
            factor = (strength + positives) / (strength + expected)
            arms.append(Arm(query.query_id, annotator, pairs, factor, evidence, yields=curve))
    return arms


def depth_arms(
    rankings: Sequence[QueryRankings],
    outcomes: Mapping[Pair, bool],
    settings: PolicySettings,
) -> list[Arm]:
    """One arm per query on its fused ranking, valued by its recent yield."""
    arms = []
    for query in rankings:
        fused = fused_ranking(query.lists)
        judged = [outcomes[p] for p in fused if p in outcomes]
        recent = judged[-settings.window :]
        value = (1 + sum(recent)) / (2 + len(recent))
        arms.append(Arm(query.query_id, 0, fused, value, len(recent)))
    return arms


def _skip_taken(arm: Arm, taken: set[Pair]) -> bool:
    """Move the arm to its next pair nobody took; False when its list is exhausted."""
    while arm.position < len(arm.pairs) and arm.pairs[arm.position] in taken:
        arm.position += 1
    return arm.position < len(arm.pairs)


def arms_draw(
    arms: Sequence[Arm],
    *,
    quota: int,
    settings: PolicySettings,
    taken: set[Pair],
) -> list[tuple[Arm, Pair]]:
    """Draw up to `quota` pairs nobody took, one at a time from the best-valued live arm.

    `taken` holds the pairs that are judged or already chosen; drawn pairs join it. After
    each draw the arm is valued again at its next pair (values are re-checked when an arm
    comes up, since another arm may have taken its next pair). Ties go to the arm drawn
    less, then to a fixed shuffle, so equal arms spread over queries. Dropped arms are
    never drawn. Deterministic for the same inputs.
    """
    heap: list[tuple[float, int, int, int]] = []
    for index, arm in enumerate(arms):
        if _skip_taken(arm, taken) and not arm.dropped(settings):
            spread = _spread(arm.query_id, arm.key)
            heapq.heappush(heap, (-arm.value(settings.step), arm.position, spread, index))
    chosen: list[tuple[Arm, Pair]] = []
    while heap and len(chosen) < quota:
        _, position, spread, index = heapq.heappop(heap)
        arm = arms[index]
        if not _skip_taken(arm, taken):
            continue
        if arm.position != position:  # its next pair went to another arm: value it again
            heapq.heappush(heap, (-arm.value(settings.step), arm.position, spread, index))
            continue
        pair = arm.pairs[arm.position]
        taken.add(pair)
        arm.drawn.append(pair)
        arm.position += 1
        chosen.append((arm, pair))
        if _skip_taken(arm, taken) and not arm.dropped(settings):
            heapq.heappush(heap, (-arm.value(settings.step), arm.position, spread, index))
    return chosen


def _spread(query_id: int, key: int) -> int:
    """A fixed pseudo-random order of arms (Knuth's multiplicative hash)."""
    return ((query_id * 1_000_003 + key) * 2_654_435_761) % 2**32


def picks_from(chosen: Sequence[tuple[int, Pair]], rankings: Sequence[QueryRankings]) -> list[Pick]:
    """Attach to each chosen (query id, pair) every annotator that ranks it for that query."""
    by_query = {q.query_id: q for q in rankings}
    wanted: dict[int, set[Pair]] = {}
    for query_id, pair in chosen:
        wanted.setdefault(query_id, set()).add(pair)
    rank_of: dict[tuple[int, Pair], list[tuple[int, int]]] = {}
    for query_id, pairs in wanted.items():
        lists = by_query[query_id].lists
        for annotator in sorted(lists):
            for rank, ranked in enumerate(lists[annotator], start=1):
                if ranked in pairs:
                    rank_of.setdefault((query_id, ranked), []).append((annotator, rank))
    return [Pick(q, pair, tuple(rank_of.get((q, pair), ()))) for q, pair in chosen]


ARM_POLICIES = {"bandit": bandit_arms, "depth": depth_arms}


def policy_select(
    name: str,
    rankings: Sequence[QueryRankings],
    outcomes: Mapping[Pair, bool],
    *,
    quota: int,
    settings: PolicySettings,
    excluded: Iterable[Pair] = (),
) -> list[Pick]:
    """Choose up to `quota` pairs for the next round with the named policy.

    `outcomes` are the judged pairs; `excluded` other pairs never to choose (pairs already
    candidates but not yet judged, known positives).
    """
    taken = set(outcomes) | set(excluded)
    if name == "learned":
        return picks_from(learned_order(rankings, outcomes, taken)[:quota], rankings)
    arms = ARM_POLICIES[name](rankings, outcomes, settings)
    drawn = arms_draw(arms, quota=quota, settings=settings, taken=taken)
    return picks_from([(arm.query_id, pair) for arm, pair in drawn], rankings)
