"""How many HITs an adaptive round may buy without the batch spending past its budget.

A judgement is one answer to one pair, golden pairs included; a HIT costs
`items_per_hit × assignments_per_hit` of them, plus the re-posts that rejected work
brings. Rounds reserve for those re-posts at the rate seen so far (a prior before any
work was reviewed), so the planned spending stays within the budget.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

PRIOR_REPOST_SHARE = 0.15  # before any work was reviewed: a guess (crowds reject 10–30%)
MIN_REPOST_SHARE = 0.05  # never plan as if no work could be rejected
MAX_ROUNDS = 100  # a guard: a round always spends at least one HIT of the budget


@dataclass(frozen=True)
class RoundBudget:
    hits: int  # HITs the round may create
    task_pairs: int  # pairs to judge in them (hits × hit_size)
    judgements_planned: int  # what those HITs cost, re-post reserve included


def repost_share(submitted: int, rejected: int) -> float:
    """The share of submitted work that was rejected (and so re-posted), with a floor."""
    if submitted == 0:
        return PRIOR_REPOST_SHARE
    return max(rejected / submitted, MIN_REPOST_SHARE)


def round_budget(
    *,
    budget: int,
    spent: int,
    round_size: int,
    items_per_hit: int,
    hit_size: int,
    assignments_per_hit: int,
    reposts: float,
) -> RoundBudget:
    """The HITs of the next round: within `round_size` and what the budget has left.

    `spent` counts judgements already made or handed out (every submitted assignment's
    pairs, and the open ones'). Returns zero HITs when not even one fits.
    """
    per_hit = items_per_hit * assignments_per_hit * (1 + reposts)
    left = budget - spent
    allowance = min(round_size, left)
    hits = max(math.floor(allowance / per_hit + 1e-9), 0)
    return RoundBudget(
        hits=hits,
        task_pairs=hits * hit_size,
        judgements_planned=math.ceil(hits * per_hit),
    )
