"""The model-assisted sample: strata by predicted probability, allocation, brute-force truth."""

from __future__ import annotations

import math

import numpy as np
import pytest

from mitl.curation.design import (
    RANKED_STRATA,
    anticipated_rates,
    predicted_sample,
    ranked_calibration,
    ranked_strata,
    tail_rate,
    with_predictions,
)
from mitl.curation.estimate import (
    PRIOR_RATES,
    STRATA,
    QueryUniverse,
    RoundSample,
    StratumSample,
    pooled_rates,
    remaining_estimate,
)
from mitl.curation.learned import GroupModel, group_model, learned_order
from mitl.curation.policies import prior_yield, rank_band
from mitl.curation.rankings import QueryRankings

N_QUERIES, N_TARGETS, DEPTH = 6, 80, 25


def universes(taken: set[tuple[int, int]] = frozenset()) -> list[QueryUniverse]:
    """Image queries 0..5 over caption targets 0..79; each ranks targets 0..24 at rank t+1."""
    return [
        QueryUniverse(
            query_id=q,
            is_image_query=True,
            item_id=q,
            n_targets=N_TARGETS,
            ranked={(q, t): t + 1 for t in range(DEPTH)},
            taken=frozenset(p for p in taken if p[0] == q),
        )
        for q in range(N_QUERIES)
    ]


def model(predict) -> GroupModel:
    """A fusion whose prediction for (query, target) is `predict(query, target)`."""
    rows = [(q, (q, t)) for q in range(N_QUERIES) for t in range(DEPTH)]
    probabilities = np.array([predict(q, pair[1]) for q, pair in rows])
    return GroupModel(rows, probabilities, {q: 0.05 for q in range(N_QUERIES)})


def good(query: int, target: int) -> float:
    return 0.6 / math.sqrt(target + 1)


def test_ranked_pairs_are_cut_by_their_prediction_into_equal_neyman_weights() -> None:
    taken = {(0, 0), (1, 3)}
    strata = ranked_strata(universes(taken), model(good))
    assert [s.name for s in strata] == list(RANKED_STRATA) == ["ranked", "top"]
    ranked, top = strata
    assert ranked.population + top.population == N_QUERIES * DEPTH - len(taken)
    assert not {pair for _, pair in ranked.pairs + top.pairs} & taken
    # `top` holds the pairs predicted most likely: every one above every `ranked` one.
    assert min(good(*pair) for _, pair in top.pairs) >= max(good(*pair) for _, pair in ranked.pairs)
    assert top.predicted == pytest.approx(sum(good(*pair) for _, pair in top.pairs))

    def spread(pairs) -> float:
        return sum(math.sqrt(good(*p) * (1 - good(*p))) for _, p in pairs)

    # Equal shares of Σ√(p(1−p)), to within the pair that crosses the middle.
    assert abs(spread(ranked.pairs) - spread(top.pairs)) <= 2 * math.sqrt(0.25)
    # Without a fit, a pair's prediction is the prior yield of its rank band.
    prior = ranked_strata(universes(), None)
    assert prior[1].predicted == pytest.approx(
        sum(prior_yield(rank_band(pair[1] + 1)) for _, pair in prior[1].pairs)
    )
    best_ranked = max(rank_band(pair[1] + 1) for _, pair in prior[1].pairs)
    assert best_ranked <= min(rank_band(pair[1] + 1) for _, pair in prior[0].pairs)


def test_anticipated_rates_calibrate_the_fusion_on_earlier_samples_and_never_starve_the_tail():
    earlier = RoundSample(
        0,
        {
            "top": StratumSample(100, 10, 2, predicted=40.0),
            "ranked": StratumSample(400, 10, 0, predicted=20.0),
            "tail": StratumSample(5000, 20, 0),
        },
        0,
    )
    # The samples expected 10 x 0.4 + 10 x 0.05 = 4.5 positives and found 2.
    assert ranked_calibration([earlier]) == pytest.approx((2 + 2) / (4.5 + 2))
    assert ranked_calibration([]) == 1.0  # before any sample: the predictions as they are
    strata = ranked_strata(universes(), model(good))
    rates = anticipated_rates(strata, [earlier])
    for s in strata:
        assert rates[s.name] == pytest.approx(
            ranked_calibration([earlier]) * s.predicted / s.population
        )
    # 20 tail pairs, none positive: held near the prior (0.2 pseudo-positives in 30), where
    # the rank strata's pooled yield fell to a tenth of it and starved the tail.
    assert rates["tail"] == tail_rate([earlier]) == pytest.approx(0.2 / 30)
    assert pooled_rates([earlier])["tail"] == pytest.approx(PRIOR_RATES["tail"] / 21)


def test_the_predicted_sample_draws_its_allocation_uniformly_and_records_its_design() -> None:
    taken = {(q, t) for q in range(N_QUERIES) for t in range(3)}  # each query's top 3
    sample = predicted_sample(
        universes(taken), np.arange(N_TARGETS), model(good), [], 30, np.random.default_rng(0)
    )
    pairs = [pair for _, pair, _ in sample.drawn]
    assert len(pairs) == len(set(pairs)) == 30 and not set(pairs) & taken
    by_stratum = {h: [p for _, p, s in sample.drawn if s == h] for h in STRATA}
    assert all(p[1] >= DEPTH for p in by_stratum["tail"])  # nobody ranks a tail pair
    assert all(p[1] < DEPTH for p in by_stratum["top"] + by_stratum["ranked"])
    assert all(len(by_stratum[h]) >= 2 for h in STRATA)  # every stratum is sampled
    # The round record: populations under the rank strata's names, predictions beside them.
    assert set(sample.population) == set(STRATA)
    assert sample.population["tail"] == N_QUERIES * (N_TARGETS - DEPTH)
    assert sample.population["top"] + sample.population["ranked"] == N_QUERIES * (DEPTH - 3)
    assert set(sample.design) == {"top", "ranked"}
    assert all(set(d) == {"predicted", "rate"} for d in sample.design.values())


def test_the_fusion_predicts_the_pairs_in_the_order_the_learned_policy_takes_them() -> None:
    rankings, outcomes = [], {}
    for q in range(12):
        good_list = [(q, 100 + t) for t in range(10)]
        rankings.append(QueryRankings(q, {7: good_list, 8: list(reversed(good_list))}, "i2t"))
        if q < 8:  # annotator 7's top 3 positive, its bottom 3 negative; richer queries first
            outcomes |= {p: True for p in good_list[: 3 if q < 4 else 2]}
            outcomes |= {p: False for p in good_list[-3:]}
    fit = group_model(rankings, outcomes, set(outcomes))
    assert fit.probabilities is not None and fit.tail is not None
    by_pair = dict(zip(fit.rows, fit.probabilities.tolist(), strict=True))
    order = learned_order(rankings, outcomes, set(outcomes))
    assert [by_pair[row] for row in order] == sorted(by_pair.values(), reverse=True)
    # An unranked pair's prediction rests on its query's yield alone: equal yields (3 of 6
    # judged pairs positive, none judged), equal predictions; another yield, another one.
    assert set(fit.tail) == set(range(12))
    assert fit.tail[0] == pytest.approx(fit.tail[10]) != pytest.approx(fit.tail[5])
    assert group_model(rankings, {}, set()).probabilities is None  # nothing to fit on


def _batch_of_rounds(truth: np.ndarray, predict, rng: np.random.Generator) -> tuple[int, object]:
    """Four rounds: a fixed policy takes 4 best-ranked untaken pairs a query, then a sample.

    Returns the positives never found and the estimate combining the four rounds.
    """
    outcomes: dict[tuple[int, int], bool] = {}
    records, positives_at = [], []
    fit = model(predict)
    for round_index in range(4):
        picks = []
        for q in range(N_QUERIES):
            free = [(q, t) for t in range(DEPTH) if (q, t) not in outcomes]
            picks += free[:4]
        taken = set(outcomes) | set(picks)
        history = with_predictions(
            [s for s, _ in records], {r: d for r, (_, d) in enumerate(records)}
        )
        sample = predicted_sample(universes(taken), np.arange(N_TARGETS), fit, history, 16, rng)
        for pair in picks + [pair for _, pair, _ in sample.drawn]:
            outcomes[pair] = bool(truth[pair])
            if truth[pair]:
                positives_at.append(round_index)
        strata = {
            h: StratumSample(
                sample.population[h],
                sum(s == h for *_, s in sample.drawn),
                sum(bool(truth[p]) for _, p, s in sample.drawn if s == h),
            )
            for h in STRATA
        }
        records.append((RoundSample(round_index, strata, 0), sample.design))
    samples = [
        RoundSample(r, s.strata, sum(at > r for at in positives_at))
        for r, (s, _) in enumerate(records)
    ]
    found = sum(outcomes.values())
    return int(truth.sum()) - found, remaining_estimate(found, samples)


@pytest.mark.parametrize(
    "predict", [good, lambda q, t: 1 - good(q, t)], ids=["good model", "inverted model"]
)
def test_rounds_of_predicted_samples_are_unbiased_and_cover_brute_force_truth(predict) -> None:
    """Whatever the fusion predicts, the estimate is on target: a poor model costs width."""
    truth_rng = np.random.default_rng(11)
    chance = np.where(
        np.arange(N_TARGETS) < 5, 0.5, np.where(np.arange(N_TARGETS) < DEPTH, 0.2, 0.06)
    )
    truth = truth_rng.random((N_QUERIES, N_TARGETS)) < chance
    errors, covered, trials = [], 0, 300
    for trial in range(trials):
        unfound, estimate = _batch_of_rounds(truth, predict, np.random.default_rng(trial))
        assert estimate is not None
        errors.append(estimate.counted - estimate.known - unfound)  # before clipping at 0
        covered += estimate.low <= unfound <= estimate.high
    assert abs(np.mean(errors)) < 3 * np.std(errors) / math.sqrt(trials)
    assert covered / trials >= 0.9
