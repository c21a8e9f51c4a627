"""What a batch will cost on Amazon Mechanical Turk, and how much work it holds. Pure Python.

MTurk charges the requester the reward plus a commission: 20% of the reward, 40% for HITs
with 10 or more assignments, and at least $0.01 per assignment. Money is Decimal, never
float, and rounded to cents per assignment as MTurk bills it.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from .config import BatchConfig

CENT = Decimal("0.01")
COMMISSION = Decimal("0.20")
COMMISSION_LARGE = Decimal("0.40")  # HITs with LARGE_HIT_ASSIGNMENTS or more assignments
LARGE_HIT_ASSIGNMENTS = 10
MIN_COMMISSION = CENT  # per assignment


@dataclass(frozen=True)
class CostEstimate:
    hits: int
    assignments_per_hit: int
    items_per_hit: int
    reward_per_assignment: Decimal
    commission_rate: Decimal
    rewards: Decimal
    commission: Decimal
    total: Decimal

    @property
    def assignments(self) -> int:
        return self.hits * self.assignments_per_hit

    @property
    def judgements(self) -> int:
        return self.assignments * self.items_per_hit

    def to_json(self) -> dict[str, Any]:
        """Return JSON-safe values (money as strings, so no cent is lost)."""
        data = {k: str(v) if isinstance(v, Decimal) else v for k, v in asdict(self).items()}
        return {**data, "assignments": self.assignments, "judgements": self.judgements}


def mturk_cost(
    *, hits: int, assignments_per_hit: int, items_per_hit: int, reward_per_assignment: Decimal
) -> CostEstimate:
    """Estimate what publishing `hits` HITs costs, commission included."""
    if hits < 0 or assignments_per_hit < 1 or items_per_hit < 1:
        raise ValueError("hits must be ≥ 0, assignments per HIT and items per HIT ≥ 1")
    reward = Decimal(reward_per_assignment)
    if reward < CENT:
        raise ValueError(f"the reward must be at least $0.01 per assignment (got ${reward})")
    rate = commission_rate(assignments_per_hit)
    fee = commission_per_assignment(reward, rate=rate)
    assignments = hits * assignments_per_hit
    rewards = reward * assignments
    commission = fee * assignments
    return CostEstimate(
        hits=hits,
        assignments_per_hit=assignments_per_hit,
        items_per_hit=items_per_hit,
        reward_per_assignment=reward,
        commission_rate=rate,
        rewards=rewards,
        commission=commission,
        total=rewards + commission,
    )


def commission_rate(assignments_per_hit: int) -> Decimal:
    """Return MTurk's commission rate for HITs with `assignments_per_hit` assignments."""
    return COMMISSION_LARGE if assignments_per_hit >= LARGE_HIT_ASSIGNMENTS else COMMISSION


def commission_per_assignment(reward: Decimal, *, rate: Decimal) -> Decimal:
    """Return MTurk's fee on one assignment: `rate` of the reward in cents, at least $0.01."""
    return max((reward * rate).quantize(CENT, rounding=ROUND_HALF_UP), MIN_COMMISSION)


def assignments_cost(
    *, assignments: int, assignments_per_hit: int, reward_per_assignment: Decimal
) -> Decimal:
    """Return what `assignments` assignments cost on MTurk, rewards plus commission.

    The money a batch has spent: its paid (and payable) work × (reward + MTurk's fee).
    """
    if assignments < 0:
        raise ValueError("assignments must be ≥ 0")
    reward = Decimal(reward_per_assignment)
    fee = commission_per_assignment(reward, rate=commission_rate(assignments_per_hit))
    return (reward + fee) * assignments


def judgements_for_dollars(
    dollars: Decimal,
    *,
    assignments_per_hit: int,
    items_per_hit: int,
    reward_per_assignment: Decimal,
) -> int:
    """The judgement budget a dollar amount pays for on MTurk, commission included.

    Whole assignments only: dollars ÷ (reward + its commission) assignments, each worth
    `items_per_hit` judgements (the adaptive strategy's `budget_judgements`).
    """
    one = mturk_cost(
        hits=1,
        assignments_per_hit=assignments_per_hit,
        items_per_hit=items_per_hit,
        reward_per_assignment=reward_per_assignment,
    )
    per_assignment = one.total / assignments_per_hit
    return int(Decimal(dollars) // per_assignment) * items_per_hit


def hits_for(candidates: int, hit_size: int) -> int:
    """Return how many HITs `candidates` pairs fill at `hit_size` pairs to judge per HIT."""
    return math.ceil(candidates / hit_size) if candidates > 0 else 0


def candidates_at_most(*, queries: int, k: int, annotators: int) -> int:
    """Return the candidate pairs before de-duplication: an upper bound before retrieval.

    De-duplication removes pairs several annotators propose (ECCV Caption: 64,850 → 46,424).
    """
    return queries * k * annotators


def estimate_before_retrieval(
    *, config: BatchConfig, reward_per_assignment: Decimal
) -> tuple[int, CostEstimate]:
    """Return the candidates at most and the cost of the HITs they would fill at most.

    An adaptive batch spends at most its budget: the HITs whose judgements fit in it.
    """
    if config.adaptive:
        per_hit = config.items_per_hit * config.assignments_per_hit
        hits = config.budget_judgements // per_hit
        candidates = hits * config.hit_size
    else:
        candidates = candidates_at_most(
            queries=config.n_image_queries + config.n_caption_queries,
            k=config.k,
            annotators=len(config.annotators),
        )
        hits = hits_for(candidates, config.hit_size)
    cost = mturk_cost(
        hits=hits,
        assignments_per_hit=config.assignments_per_hit,
        items_per_hit=config.items_per_hit,
        reward_per_assignment=reward_per_assignment,
    )
    return candidates, cost


@dataclass(frozen=True)
class BatchEstimate:
    """The crowd work and MTurk cost of a batch, from the best figure known so far.

    `basis` says which: "hits" (built, exact), "candidates" (pooled, exact HITs) or
    "config" (before retrieval: `candidates_at_most` and the HITs they fill are bounds).
    """

    basis: str
    cost: CostEstimate
    candidates: int | None = None
    candidates_at_most: int | None = None
    hits: int | None = None

    @property
    def upper_bound(self) -> bool:
        return self.basis == "config"

    def to_json(self) -> dict[str, Any]:
        """Return the estimate as the API and the wizard show it (money as Decimal)."""
        cost = self.cost
        return {
            "basis": self.basis,
            "upper_bound": self.upper_bound,
            "candidates": self.candidates,
            "candidates_at_most": self.candidates_at_most,
            "hits": self.hits,
            "hits_at_most": cost.hits if self.upper_bound else None,
            "assignments_per_hit": cost.assignments_per_hit,
            "items_per_hit": cost.items_per_hit,
            "assignments": cost.assignments,
            "judgements": cost.judgements,
            "reward_per_assignment": cost.reward_per_assignment,
            "commission_rate": cost.commission_rate,
            "rewards": cost.rewards,
            "commission": cost.commission,
            "total": cost.total,
        }


def cost_estimate(
    *,
    config: BatchConfig,
    reward_per_assignment: Decimal,
    candidates: int | None = None,
    hits: int | None = None,
) -> BatchEstimate:
    """Estimate a batch's work and cost: from its HITs, else its candidates, else its config.

    Built HITs count exactly; pooled candidates give the HITs exactly; before that only an
    upper bound is known (de-duplication removes pairs several annotators propose).
    """
    if hits is None and candidates is None:
        bound, cost = estimate_before_retrieval(
            config=config, reward_per_assignment=reward_per_assignment
        )
        return BatchEstimate(basis="config", cost=cost, candidates_at_most=bound)
    basis = "hits" if hits is not None else "candidates"
    if hits is None:
        hits = hits_for(candidates or 0, config.hit_size)
    cost = mturk_cost(
        hits=hits,
        assignments_per_hit=config.assignments_per_hit,
        items_per_hit=config.items_per_hit,
        reward_per_assignment=reward_per_assignment,
    )
    return BatchEstimate(basis=basis, cost=cost, candidates=candidates, hits=hits)
