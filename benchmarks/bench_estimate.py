"""How often the estimated recall's 95% interval holds the true recall, and how wide it is.

A pure-Python simulation with full truth (`estimate_fixture`: the demo's synthetic
dataset, 100 image and 100 caption queries, four simulated annotators, a crowd that
answers the truth). Round by round it runs what an adaptive batch's selection runs
(`pipeline.curation_select.round_select`): the demo's budget and round size
(`mitl.curation.budget.round_budget`), the `learned` policy (`policy_select`), then
`estimate_share` of the round drawn at random from the pairs still unjudged, split over the
directions by their queries, judged with the policy's pairs. Each seed runs a first batch
and then a second one on the same queries that continues from what the first judged (its
rounds are later rounds, its samples drawn from what was unjudged then). After each batch
every direction's estimate combines every round so far, and is compared with the truth.

Estimators (`--estimator`, both by default, each on its own run of the same seeds):

- `rank_strata`, before: rank strata (top 10, ranked, tail) with Neyman's rule on the yields
  pooled over both directions, each stratum's variance from its rate smoothed by half a
  positive in every round, a normal interval (`estimate_baseline`). Its trajectory is
  also estimated with today's interval (`rank_strata_new_interval`, no extra run).
- `model_assisted`, after: ranked pairs stratified by the logistic fusion's prediction,
  Neyman's rule on anticipated yields (`mitl.curation.design`), unbiased stratum
  variances and Fay and Kim's mid-p gamma interval
  (`mitl.curation.estimate.remaining_estimate`). Its trajectory is also estimated with Fay
  and Feuer's gamma interval, used before (`model_assisted_fay_feuer`, no extra run).

Prints a table and ends with one JSON line: `interval_coverage` (share of the (seed,
direction, batch) cases whose true recall lies inside the interval; target ≥ 0.90) and
`mean_half_width` (mean (recall_high − recall_low)/2; target ≤ 0.12) per estimator;
`ratio` is model_assisted's mean half-width.

Measured (`python benchmarks/bench_estimate.py --seeds 20 --jobs 2`, estimate_share 0.1):
model_assisted coverage 0.95 at a mean half-width of 0.135 (each direction and batch
0.90–1.00), where Fay and Feuer's interval on the same samples gives 0.95 at 0.147 and
rank_strata 0.99 at 0.252. `--estimate-share 0.125`: 0.97 at 0.118 (Fay and Feuer 0.128).
docs/curation.md says why 0.12 at 0.1 is out of reach.

Usage: python benchmarks/bench_estimate.py [--seeds 20] [--jobs 2]
       [--estimator both|rank_strata|model_assisted] [--crowd-error 0.0]
"""

from __future__ import annotations

import argparse
import multiprocessing
import time
from collections import defaultdict
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from common import report_line
from estimate_baseline import remaining_estimate as remaining_estimate_before
from estimate_fixture import DIRECTIONS, World, world_make

from mitl.config import BatchConfig
from mitl.curation.budget import PRIOR_REPOST_SHARE, RoundBudget, round_budget
from mitl.curation.design import predicted_sample, with_predictions
from mitl.curation.estimate import (
    STRATA,
    RoundSample,
    StratumSample,
    gamma_interval,
    pooled_rates,
    remaining_estimate,
    sample_allocation,
    sample_draw,
    strata_sizes,
)
from mitl.curation.learned import group_model
from mitl.curation.policies import PolicySettings, policy_select
from mitl.curation.rankings import Pair

# The demo's batch (pipeline.demo: DEMO_BUDGET, ADAPTIVE_SETTINGS; tests check they agree).
DEMO_BUDGET = 11_000
# The learner annotator (crowd_learner) needs the annotators' features, which this world
# does not have: its rankings are not simulated here.
DEMO_SETTINGS = {
    "strategy": "adaptive",
    "adjudication": "learned",
    "assignments_per_hit": 2,
    "crowd_learner": True,
}
ESTIMATORS = ("rank_strata", "model_assisted")
COVERAGE_TARGET = 0.90
HALF_WIDTH_TARGET = 0.12
MAX_ROUNDS = 100


@dataclass
class Run:
    """What a seed's batches judged so far, and each round's recorded sample design."""

    outcomes: dict[Pair, bool] = field(default_factory=dict)
    round: int = 0
    positives_by_round: dict[str, dict[int, int]] = field(
        default_factory=lambda: {d: defaultdict(int) for d in DIRECTIONS}
    )
    # (batch, round, direction, stratum populations, design, sampled pair → stratum)
    records: list[tuple[int, int, str, dict[str, int], dict[str, Any], dict[Pair, str]]] = field(
        default_factory=list
    )


def demo_config(estimate_share: float, budget: int = DEMO_BUDGET) -> BatchConfig:
    """The demo's batch: its budget, round size, HITs and workers per HIT, policy."""
    return BatchConfig(
        annotators=("a", "b", "c", "d"),
        budget_judgements=budget,
        estimate_share=estimate_share,
        **DEMO_SETTINGS,  # type: ignore[arg-type]
    )


def direction_samples(
    world: World, run: Run, direction: str, batch: int | None = None
) -> list[RoundSample]:
    """Every recorded round's sample in one direction (of one batch, or of all).

    One batch's, with its predictions, as the next round's allocation reads them
    (`pipeline.curation.round_samples`); every batch's, as the estimate does
    (`pipeline.recall`): positives judged later count those of later batches too.
    """
    samples, designs = [], {}
    for batch_index, round_index, d, population, design, sampled in run.records:
        if d != direction or batch not in (None, batch_index):
            continue
        strata = {}
        for h in STRATA:
            verdicts = [run.outcomes[p] for p, stratum in sampled.items() if stratum == h]
            strata[h] = StratumSample(population[h], len(verdicts), sum(verdicts))
        later = run.positives_by_round[direction]
        positives_later = sum(n for r, n in later.items() if r > round_index)
        samples.append(RoundSample(round_index, strata, positives_later))
        designs[round_index] = design
    return with_predictions(samples, designs)


def direction_draw(
    world: World,
    run: Run,
    *,
    estimator: str,
    batch: int,
    direction: str,
    taken: dict[int, set[Pair]],
    share: int,
    rng: np.random.Generator,
) -> tuple[list[tuple[int, Pair, str]], dict[str, int], dict[str, Any]]:
    """One direction's random sample, drawn as `_unjudged_sample` draws it."""
    universes = world.universes(direction, taken)
    targets = world.targets(direction)
    if estimator == "rank_strata":  # the batch's yields pooled over both directions, as it was
        earlier = [s for d in DIRECTIONS for s in direction_samples(world, run, d, batch)]
        rates = pooled_rates(earlier)
        sizes = strata_sizes(universes)
        drawn = sample_draw(universes, targets, sample_allocation(sizes, share, rates), rng)
        return drawn, {h: sizes[h] for h in STRATA}, {}
    queries = [q for q in world.rankings if q.group == direction]
    all_taken = {p for pairs in taken.values() for p in pairs}
    model = group_model(queries, run.outcomes, all_taken)
    history = direction_samples(world, run, direction, batch)
    sample = predicted_sample(universes, targets, model, history, share, rng)
    return sample.drawn, sample.population, sample.design


def round_plans(config: BatchConfig) -> list[RoundBudget]:
    """Every round one batch buys, as `next_round_budget` plans it (the re-post reserve spent)."""
    plans: list[RoundBudget] = []
    spent = 0
    while len(plans) < MAX_ROUNDS:
        plan = round_budget(
            budget=config.budget_judgements,
            spent=spent,
            round_size=config.judgements_per_round,
            items_per_hit=config.items_per_hit,
            hit_size=config.hit_size,
            assignments_per_hit=config.assignments_per_hit,
            reposts=PRIOR_REPOST_SHARE,
        )
        if plan.hits == 0:
            return plans
        plans.append(plan)
        spent += plan.judgements_planned
    return plans


def batch_run(world: World, run: Run, *, estimator: str, seed: int, batch: int, config) -> None:
    """Run one batch's rounds, as `round_select` chooses them, until its budget is spent."""
    for plan in round_plans(config):
        sample_total = round(plan.task_pairs * config.estimate_share)
        picks = policy_select(
            config.adjudication,
            world.rankings,
            run.outcomes,
            quota=plan.task_pairs - sample_total,
            settings=PolicySettings(step=config.k),
            excluded=world.known,
        )
        judged = [p.pair for p in picks]
        taken = _taken_by_query(world, set(run.outcomes) | world.known | set(judged))
        rng = np.random.default_rng([seed, batch, run.round])
        records = []  # stored with the round's candidates, after both directions drew
        for direction in DIRECTIONS:
            queries = sum(map(len, world.queries.values()))
            share = sample_total * len(world.queries[direction]) // queries
            drawn, population, design = direction_draw(
                world, run, estimator=estimator, batch=batch, direction=direction,
                taken=taken, share=share, rng=rng,
            )  # fmt: skip
            # Neyman's rule rounds each stratum's share: a pair or two may go unused.
            assert share - len(population) <= len(drawn) <= share, "sample size off"
            for _, pair, _ in drawn:
                for query_id in world.queries_of(pair):
                    taken[query_id].add(pair)
            sampled = {pair: stratum for _, pair, stratum in drawn}
            records.append((batch, run.round, direction, population, design, sampled))
            judged += list(sampled)
        run.records += records
        _judge(world, run, judged)
        run.round += 1


def _taken_by_query(world: World, pairs: set[Pair]) -> dict[int, set[Pair]]:
    """Judged, chosen or known pairs by the queries whose population holds them."""
    taken: dict[int, set[Pair]] = defaultdict(set)
    for pair in pairs:
        for query_id in world.queries_of(pair):
            taken[query_id].add(pair)
    return taken


def _judge(world: World, run: Run, pairs: list[Pair]) -> None:
    """The crowd's verdict on each pair, once."""
    for pair in pairs:
        assert pair not in run.outcomes and pair not in world.known, f"{pair} judged twice"
        positive = bool(world.verdicts[pair])
        run.outcomes[pair] = positive
        if positive:
            for direction in DIRECTIONS:
                if world.in_direction(pair, direction):
                    run.positives_by_round[direction][run.round] += 1


def cases_measure(world: World, run: Run, estimator: str) -> list[dict[str, Any]]:
    """Each direction's true recall against its estimates, after a batch.

    The recall is the crowd's (what the release ships over what the crowd would call
    positive), as the estimate states; `recall_truth` is the one against the real truth
    (true positives shipped over true positives), which differ when the crowd errs.
    """
    cases = []
    for direction in DIRECTIONS:
        found_pairs = {p for p, v in run.outcomes.items() if v} | world.known
        found_pairs = {p for p in found_pairs if world.in_direction(p, direction)}
        found, total = len(found_pairs), world.positives(direction)
        samples = direction_samples(world, run, direction)
        estimates = {estimator: _current(estimator)(found, samples)}
        if estimator == "rank_strata":  # the same samples, today's interval
            estimates["rank_strata_new_interval"] = remaining_estimate(found, samples)
        else:  # the same samples, Fay and Feuer's interval (before the mid-p one)
            estimates["model_assisted_fay_feuer"] = remaining_estimate(
                found, samples, gamma_interval
            )
        truly = sum(bool(world.truth[p]) for p in found_pairs) / world.positives(direction, True)
        for name, estimate in estimates.items():
            assert estimate is not None, f"{name}: no estimate"
            assert 0 <= estimate.recall_low <= estimate.recall <= estimate.recall_high <= 1
            assert 0 < found <= total
            cases.append(
                {
                    "estimator": name,
                    "direction": direction,
                    "recall": found / total,
                    "recall_truth": truly,
                    "estimate": estimate.recall,
                    "low": estimate.recall_low,
                    "high": estimate.recall_high,
                }
            )
    return cases


def _current(estimator: str):
    return remaining_estimate_before if estimator == "rank_strata" else remaining_estimate


def seed_run(task: tuple[int, str, float, tuple[float, float], int]) -> list[dict[str, Any]]:
    """Both batches of one seed with one estimator; every (direction, batch) case."""
    seed, estimator, share, crowd_error, budget = task
    world = world_make(seed, crowd_error=crowd_error)
    run = Run()
    config = demo_config(share, budget)
    cases = []
    for batch in (1, 2):
        batch_run(world, run, estimator=estimator, seed=seed, batch=batch, config=config)
        for case in cases_measure(world, run, estimator):
            cases.append({**case, "seed": seed, "batch": batch})
    return cases


def summary(cases: list[dict[str, Any]]) -> dict[str, dict[str, float]]:
    """Coverage and mean half-width per estimator, overall and per (direction, batch)."""
    out: dict[str, dict[str, float]] = {}
    groups: dict[tuple[str, str], list[dict[str, Any]]] = defaultdict(list)
    for case in cases:
        groups[(case["estimator"], "all")].append(case)
        groups[(case["estimator"], f"{case['direction']} batch {case['batch']}")].append(case)
    for (name, part), group in groups.items():
        out.setdefault(name, {})[f"coverage {part}"] = float(
            np.mean([c["low"] <= c["recall"] <= c["high"] for c in group])
        )
        out[name][f"half-width {part}"] = float(
            np.mean([(c["high"] - c["low"]) / 2 for c in group])
        )
        out[name][f"error {part}"] = float(
            np.mean([abs(c["estimate"] - c["recall"]) for c in group])
        )
        out[name][f"truth coverage {part}"] = float(
            np.mean([c["low"] <= c["recall_truth"] <= c["high"] for c in group])
        )
    return out


def table_print(figures: dict[str, dict[str, float]]) -> None:
    names = list(figures)
    print(f"{'':<34}" + "".join(f"{n:>26}" for n in names))
    rows = sorted(
        {k.split(" ", 1)[1] for f in figures.values() for k in f if k.startswith("coverage")}
    )
    rows.remove("all")
    for part in [*rows, "all"]:
        cells = [
            f"{f[f'coverage {part}']:.2f} ±{f[f'half-width {part}']:.3f} "
            f"err {f[f'error {part}']:.3f}"
            for f in figures.values()
        ]
        print(f"{part + ': coverage ±half-width':<34}" + "".join(f"{c:>26}" for c in cells))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seeds", type=int, default=20)
    parser.add_argument("--first-seed", type=int, default=0)
    parser.add_argument("--jobs", type=int, default=2)
    parser.add_argument("--estimator", choices=("both", *ESTIMATORS), default="both")
    parser.add_argument("--estimate-share", type=float, default=0.1)
    parser.add_argument("--budget", type=int, default=DEMO_BUDGET, help="judgements per batch")
    parser.add_argument(
        "--crowd-error",
        default="0,0",
        help="MISSED,INVENTED: chance that the crowd calls a positive pair negative and a "
        "negative one positive (fixed per pair), e.g. 0.1,0.01",
    )
    args = parser.parse_args()
    missed, invented = (float(x) for x in args.crowd_error.split(","))
    started = time.perf_counter()
    estimators = ESTIMATORS if args.estimator == "both" else (args.estimator,)
    seeds = range(args.first_seed, args.first_seed + args.seeds)
    tasks = [
        (s, e, args.estimate_share, (missed, invented), args.budget)
        for e in estimators
        for s in seeds
    ]
    with multiprocessing.get_context("fork").Pool(args.jobs) as pool:
        cases = [case for chunk in pool.imap(seed_run, tasks) for case in chunk]
    figures = summary(cases)
    elapsed = time.perf_counter() - started
    plans = round_plans(demo_config(args.estimate_share, args.budget))
    print(
        f"{len(seeds)} seeds x 2 batches x 2 directions; per batch {args.budget} judgements, "
        f"{len(plans)} rounds of {plans[0].task_pairs} pairs, estimate_share "
        f"{args.estimate_share}; crowd error {args.crowd_error}; {elapsed:.0f} s"
    )
    table_print(figures)
    if missed or invented:
        for name, f in figures.items():
            truth = f["truth coverage all"]
            print(f"{name}: coverage of the true recall (not the crowd's) {truth:.2f}")
    for name, f in figures.items():
        assert 0 < f["half-width all"] < 0.5 and 0 <= f["coverage all"] <= 1, name
    after = figures.get("model_assisted", {}).get("half-width all")
    report_line(
        "estimate",
        None if after is None else round(after, 4),
        HALF_WIDTH_TARGET,
        "lower",
        interval_coverage={n: round(f["coverage all"], 4) for n, f in figures.items()},
        mean_half_width={n: round(f["half-width all"], 4) for n, f in figures.items()},
        coverage_target=COVERAGE_TARGET,
        cases=len(seeds) * 4,
        estimate_share=args.estimate_share,
        crowd_error=[missed, invented],
        seconds=round(elapsed, 1),
    )


if __name__ == "__main__":
    main()
