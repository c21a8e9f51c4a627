"""Verdicts under the four rules: ECCV majority, strict, graded, and Dawid-Skene."""

from __future__ import annotations

import random

import numpy as np
import pytest

from mitl.aggregation import (
    GRADED_THRESHOLD,
    RULES,
    WorkerAnswer,
    aggregate,
    dawid_skene_verdicts,
    eccv_verdict,
    graded_verdict,
    strict_verdict,
)
from mitl.config import ConfigError, parse_batch_config
from mitl.judgements import Level
from mitl.simulation import WorkerProfile, answer
from mitl.synthetic.generation import generate
from mitl.synthetic.truth import judge, truth_matrix

Y, WY, WN, N = Level.YES, Level.WEAK_YES, Level.WEAK_NO, Level.NO

# --- eccv --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("levels", "is_positive"),
    [
        ([Y], True),
        ([WY], True),
        ([WN], False),
        ([N], False),
        ([Y, Y, N], True),
        ([WY, WY, N], True),
        ([WN, WN, Y], False),
        ([WY, WN, WN], False),
        ([Y, WY, WN, N, WY], True),
    ],
)
def test_the_label_is_the_majority_of_yes_votes(levels, is_positive):
    assert eccv_verdict(levels).is_positive is is_positive


@pytest.mark.parametrize(
    "levels",
    [[Y, N], [WY, WN], [Y, Y, N, N], [Y, WY, WN, N], [Y, Y, Y, WN, N, N]],
)
def test_a_tie_is_negative(levels):
    verdict = eccv_verdict(levels)
    assert verdict.is_positive is False
    assert verdict.confidence == 0.5


@pytest.mark.parametrize(
    ("levels", "score"),
    [
        ([Y], 1.0),
        ([WY], 0.5),
        ([WN], 0.0),
        ([N], 0.0),
        ([Y, WY], 0.75),
        ([Y, N], 0.5),
        ([WY, WN, N], 0.5 / 3),
        ([Y, Y, WY, N], 2.5 / 4),
    ],
)
def test_the_score_averages_yes_1_weak_yes_half_and_no_answers_0(levels, score):
    assert eccv_verdict(levels).score == pytest.approx(score)


def test_a_negative_verdict_can_still_have_a_positive_score():
    verdict = eccv_verdict([Y, WN, N])
    assert not verdict.is_positive
    assert verdict.score == pytest.approx(1 / 3)


@pytest.mark.parametrize(
    ("levels", "confidence"),
    [
        ([Y], 1.0),
        ([Y, WY, WY], 1.0),
        ([Y, Y, N], 2 / 3),
        ([N, WN, WY], 2 / 3),
        ([Y, WY, WY, N, WN], 3 / 5),
    ],
)
def test_confidence_is_the_share_of_votes_agreeing_with_the_label(levels, confidence):
    assert eccv_verdict(levels).confidence == pytest.approx(confidence)


def test_the_distribution_counts_every_level_including_unused_ones():
    verdict = eccv_verdict([Y, WN, WN])
    assert verdict.distribution == {"yes": 1, "weak_yes": 0, "weak_no": 2, "no": 0}


@pytest.mark.parametrize("levels", [[Y], [WY, N], [Y, Y, WY, WN, N, N, N]])
def test_the_distribution_adds_up_to_the_number_of_answers(levels):
    distribution = eccv_verdict(levels).distribution
    assert set(distribution) == {level.value for level in Level}
    assert sum(distribution.values()) == len(levels)


def test_answers_given_as_strings_are_read_as_levels():
    assert eccv_verdict(["weak_yes", "yes", "no"]) == eccv_verdict([WY, Y, N])


def test_an_unknown_answer_is_refused():
    with pytest.raises(ValueError):
        eccv_verdict(["maybe"])


def test_the_order_of_the_answers_does_not_matter():
    assert eccv_verdict([Y, N, WY, WN, WY]) == eccv_verdict([WY, WY, WN, N, Y])


def test_a_pair_without_answers_cannot_be_aggregated():
    with pytest.raises(ValueError, match="without judgements"):
        eccv_verdict([])


# --- strict ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("levels", "is_positive"),
    [
        ([Y], True),
        ([WY], False),  # positive under ECCV, not under strict
        ([Y, Y, WY], True),
        ([Y, WY, WY], False),
        ([Y, Y, N], True),
        ([Y, WY], False),  # one YES against one non-YES: a tie
        ([WN, N], False),
    ],
)
def test_strict_counts_only_100_percent_yes_as_a_positive_vote(levels, is_positive):
    assert strict_verdict(levels).is_positive is is_positive


def test_strict_keeps_the_graded_score_and_the_distribution_of_eccv():
    levels = [Y, WY, WY, N]
    strict, eccv = strict_verdict(levels), eccv_verdict(levels)
    assert (strict.score, strict.distribution) == (eccv.score, eccv.distribution)
    assert strict.is_positive is False and eccv.is_positive is True
    assert strict.confidence == pytest.approx(3 / 4)  # three answers are not "100% YES"


# --- graded ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("levels", "is_positive"),
    [
        ([WY], True),  # 0.5: at the threshold
        ([Y, N], True),  # 0.5: a mean, not a vote, so this "tie" is positive
        ([WY, N], False),  # 0.25
        ([WY, WY, N], False),  # 1/3: positive under ECCV, not here
        ([Y, WY, WN], True),  # 0.5
        ([Y, WN, N], False),  # 1/3
        ([Y, Y, N, N, N], False),  # 0.4
    ],
)
def test_graded_is_positive_when_the_mean_score_reaches_one_half(levels, is_positive):
    verdict = graded_verdict(levels)
    assert GRADED_THRESHOLD == 0.5
    assert verdict.is_positive is is_positive
    assert (verdict.score >= 0.5) is is_positive


def test_graded_confidence_is_the_share_of_answers_on_the_side_of_the_label():
    assert graded_verdict([Y, WY, N]).confidence == pytest.approx(2 / 3)
    assert graded_verdict([WY, N, N]).confidence == pytest.approx(2 / 3)


def test_graded_threshold_can_be_raised():
    assert graded_verdict([Y, WY], threshold=0.8).is_positive is False
    assert graded_verdict([Y, Y, WY], threshold=0.8).is_positive is True


def test_the_voting_rules_refuse_a_pair_without_answers():
    for rule in (strict_verdict, graded_verdict):
        with pytest.raises(ValueError, match="without judgements"):
            rule([])


# --- aggregate ---------------------------------------------------------------------------------


def answers_of(table: dict[str, list[tuple[str, Level]]]) -> list[WorkerAnswer]:
    return [
        WorkerAnswer(task=task, worker=worker, level=level)
        for task, rows in table.items()
        for worker, level in rows
    ]


HAND_MADE = {
    "a": [("w1", Y), ("w2", Y), ("w3", N)],
    "b": [("w1", WY), ("w2", WY), ("w3", N)],
    "c": [("w1", Y), ("w2", N)],
    "d": [("w1", WN), ("w2", WN), ("w3", WY)],
}


@pytest.mark.parametrize(
    ("rule", "positives"),
    [
        ("eccv", {"a", "b"}),
        ("strict", {"a"}),
        ("graded", {"a", "c"}),
    ],
)
def test_aggregate_applies_the_rule_per_task(rule, positives):
    verdicts = aggregate(rule, answers_of(HAND_MADE))
    assert set(verdicts) == set(HAND_MADE)
    assert {task for task, v in verdicts.items() if v.is_positive} == positives
    for task, verdict in verdicts.items():
        assert sum(verdict.distribution.values()) == len(HAND_MADE[task])


def test_known_tasks_get_no_verdict_and_do_not_change_voting_rules():
    table = {**HAND_MADE, "golden": [("w1", N), ("w2", N), ("w3", Y)]}
    verdicts = aggregate("eccv", answers_of(table), known={"golden": True})
    assert "golden" not in verdicts
    assert verdicts == aggregate("eccv", answers_of(HAND_MADE))


def test_aggregate_refuses_an_unknown_rule_and_names_the_rules():
    with pytest.raises(ValueError, match="eccv, strict, graded, dawid_skene"):
        aggregate("mean", answers_of(HAND_MADE))


@pytest.mark.parametrize("rule", RULES)
def test_batch_config_accepts_every_rule(rule):
    assert parse_batch_config({"annotators": ["a"], "aggregation": rule}).aggregation == rule


def test_batch_config_lists_the_allowed_rules_for_an_unknown_one():
    with pytest.raises(ConfigError) as caught:
        parse_batch_config({"annotators": ["a"], "aggregation": "majority"})
    assert "eccv, strict, graded, dawid_skene" in str(caught.value)
    assert "'majority'" in str(caught.value)


# --- Dawid-Skene -------------------------------------------------------------------------------


def test_dawid_skene_agrees_with_a_unanimous_crowd():
    table = {f"t{i}": [(f"w{w}", Y if i % 2 else N) for w in range(3)] for i in range(10)}
    table["mixed"] = [("w0", Y), ("w1", WY), ("w2", N)]
    verdicts = dawid_skene_verdicts(answers_of(table))
    for i in range(10):
        verdict = verdicts[f"t{i}"]
        assert verdict.is_positive is bool(i % 2)
        assert verdict.confidence > 0.9
    assert 0.5 <= verdicts["mixed"].confidence <= 1.0


def test_dawid_skene_keeps_the_graded_score_and_the_distribution():
    verdicts = dawid_skene_verdicts(answers_of(HAND_MADE))
    for task, levels in HAND_MADE.items():
        expected = eccv_verdict([level for _, level in levels])
        assert verdicts[task].score == pytest.approx(expected.score)
        assert verdicts[task].distribution == expected.distribution


def test_dawid_skene_without_a_negative_answer_calls_everything_positive():
    table = {"a": [("w1", Y), ("w2", WY)], "b": [("w1", Y)]}
    verdicts = dawid_skene_verdicts(answers_of(table))
    assert all(v.is_positive and v.confidence == 1.0 for v in verdicts.values())


def test_dawid_skene_of_nothing_is_empty():
    assert dawid_skene_verdicts([]) == {}


MIRROR = {Y: N, WY: WN, WN: WY, N: Y}


def simulated_crowd(*, adversarial: int, seed: int = 11):
    """Judge synthetic pairs with 12 workers, `adversarial` of whom mirror their answers.

    Returns (answers, known golden labels, truth of every task).
    """
    generated = generate(n_images=60, seed=3)
    truth = truth_matrix(generated)
    rng = np.random.default_rng(seed)
    positives, negatives = np.argwhere(truth), np.argwhere(~truth)

    def draw(pairs: np.ndarray, n: int) -> list[tuple[int, int]]:
        return [tuple(map(int, p)) for p in pairs[rng.choice(len(pairs), n, replace=False)]]

    tasks = {
        ("task", i, c): bool(truth[i, c]) for i, c in draw(positives, 120) + draw(negatives, 120)
    }
    known = {("golden", i, c): True for i, c in draw(positives, 24)}
    known |= {("golden", i, c): False for i, c in draw(negatives, 24)}
    workers = [WorkerProfile(name=f"w{k:02d}", accuracy=0.9) for k in range(12)]
    liars = {worker.name for worker in workers[:adversarial]}
    answers = []
    for key in [*tasks, *known]:
        _, i, c = key
        pair_truth = judge(generated.scenes[i], generated.captions[c])
        for k in rng.choice(len(workers), 3, replace=False):
            level = answer(pair_truth, workers[k], rng, followups=False).level
            level = MIRROR[level] if workers[k].name in liars else level
            answers.append(WorkerAnswer(task=key, worker=workers[k].name, level=level))
    return answers, known, tasks


def accuracy(verdicts, truth) -> float:
    return sum(verdicts[task].is_positive == label for task, label in truth.items()) / len(truth)


def test_dawid_skene_beats_majority_vote_when_some_workers_answer_the_opposite():
    answers, known, truth = simulated_crowd(adversarial=4)
    ds = aggregate("dawid_skene", answers, known=known)
    majority = aggregate("eccv", answers, known=known)
    assert set(ds) == set(majority) == set(truth)  # golden pairs get no verdict
    ds_accuracy, majority_accuracy = accuracy(ds, truth), accuracy(majority, truth)
    assert majority_accuracy < 0.85  # the adversaries really hurt the vote …
    assert ds_accuracy >= 0.95  # … and Dawid-Skene reads them the other way round
    assert ds_accuracy > majority_accuracy + 0.1


def test_dawid_skene_is_as_good_as_majority_vote_with_an_honest_crowd():
    answers, known, truth = simulated_crowd(adversarial=0)
    ds = aggregate("dawid_skene", answers, known=known)
    majority = aggregate("eccv", answers, known=known)
    assert accuracy(ds, truth) >= accuracy(majority, truth) - 0.02
    assert accuracy(ds, truth) >= 0.9


def test_dawid_skene_confidence_is_the_posterior_of_its_label():
    answers, known, _ = simulated_crowd(adversarial=4)
    for verdict in aggregate("dawid_skene", answers, known=known).values():
        assert 0.5 <= verdict.confidence <= 1.0


def test_dawid_skene_gives_the_same_verdicts_whatever_the_order_of_the_answers():
    answers, known, _ = simulated_crowd(adversarial=4)
    shuffled = list(answers)
    random.Random(5).shuffle(shuffled)
    first = aggregate("dawid_skene", answers, known=known)
    again = aggregate("dawid_skene", shuffled, known=dict(reversed(list(known.items()))))
    assert first == again
