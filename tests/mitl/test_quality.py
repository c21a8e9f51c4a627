"""The golden check: a known match needs a YES answer, a known mismatch a NO answer."""

from __future__ import annotations

import pytest

from mitl.hits import Role
from mitl.judgements import Level
from mitl.quality import (
    GoldenDecision,
    GoldenMiss,
    golden_check,
    golden_decision,
    golden_misses,
    golden_misses_summary,
    golden_suspect,
    goldens_to_suspend,
)


@pytest.mark.parametrize(
    ("role", "level", "passed"),
    [
        ("golden_tp", Level.YES, True),
        ("golden_tp", Level.WEAK_YES, True),
        ("golden_tp", Level.WEAK_NO, False),
        ("golden_tp", Level.NO, False),
        ("golden_tn", Level.YES, False),
        ("golden_tn", Level.WEAK_YES, False),
        ("golden_tn", Level.WEAK_NO, True),
        ("golden_tn", Level.NO, True),
    ],
)
def test_a_golden_passes_only_with_an_answer_on_its_side(role, level, passed):
    result = golden_check([(role, 0, level)])
    assert result.passed is passed
    assert len(result.failures) == (0 if passed else 1)


@pytest.mark.parametrize("level", list(Level))
def test_task_answers_never_fail_the_check(level):
    result = golden_check([("task", 3, level)])
    assert result.passed
    assert result.failures == ()


def test_no_answers_pass():
    assert golden_check([]).passed


def test_failure_messages_give_one_based_positions_and_the_answer():
    result = golden_check(
        [
            ("task", 0, Level.NO),
            ("golden_tp", 4, Level.WEAK_NO),
            ("golden_tn", 0, Level.WEAK_YES),
            ("golden_tn", 17, Level.NO),
        ]
    )
    assert not result.passed
    assert len(result.failures) == 2
    tp_failure, tn_failure = result.failures
    assert "pair 5 " in tp_failure
    assert "known match" in tp_failure
    assert Level.WEAK_NO.value in tp_failure
    assert "pair 1 " in tn_failure
    assert "known mismatch" in tn_failure
    assert Level.WEAK_YES.value in tn_failure


def test_every_failed_golden_is_reported_in_answer_order():
    answers = [("golden_tn", position, Level.YES) for position in (9, 2, 6)]
    result = golden_check(answers)
    assert [failure.split()[1] for failure in result.failures] == ["10", "3", "7"]


def test_one_failed_golden_fails_the_hit_even_when_others_pass():
    result = golden_check(
        [
            ("golden_tp", 0, Level.YES),
            ("golden_tp", 1, Level.YES),
            ("golden_tn", 2, Level.NO),
            ("golden_tn", 3, Level.YES),
        ]
    )
    assert not result.passed
    assert len(result.failures) == 1


def test_roles_from_the_packer_are_understood():
    result = golden_check([(Role.GOLDEN_TP, 0, Level.NO), (Role.GOLDEN_TN, 1, Level.YES)])
    assert len(result.failures) == 2


def test_a_generator_of_answers_is_accepted():
    answers = (("golden_tp", i, Level.NO) for i in range(3))
    assert len(golden_check(answers).failures) == 3


@pytest.mark.parametrize(
    ("passed", "policy", "decision"),
    [
        (True, "approve_or_flag", GoldenDecision.APPROVE),
        (False, "approve_or_flag", GoldenDecision.HOLD),
        (True, "approve_or_reject", GoldenDecision.APPROVE),
        (False, "approve_or_reject", GoldenDecision.REJECT),
        (True, "review_all", GoldenDecision.HOLD),
        (False, "review_all", GoldenDecision.HOLD),
    ],
)
def test_golden_decision_follows_the_batch_policy(passed, policy, decision):
    assert golden_decision(passed=passed, policy=policy) is decision


def test_golden_misses_skip_task_pairs_and_say_what_the_pair_is():
    misses = golden_misses(
        [
            ("task", 0, Level.NO),
            ("golden_tp", 2, Level.WEAK_NO),
            ("golden_tn", 5, Level.NO),
            ("golden_tn", 7, Level.YES),
        ]
    )
    assert misses == [GoldenMiss(3, True, Level.WEAK_NO), GoldenMiss(8, False, Level.YES)]
    assert [miss.describe() for miss in misses] == list(
        golden_check([("golden_tp", 2, Level.WEAK_NO), ("golden_tn", 7, Level.YES)]).failures
    )


def test_the_summary_a_worker_reads_counts_misses_without_naming_them():
    misses = [GoldenMiss(3, True, Level.NO), GoldenMiss(17, False, Level.WEAK_YES)]
    assert golden_misses_summary(misses) == "2 pairs with a known answer were answered wrongly."
    one = golden_misses_summary(misses[:1])
    assert one == "1 pair with a known answer was answered wrongly."
    assert "3" not in one


# --- suspending a golden pair that is wrong itself ------------------------------------------


@pytest.mark.parametrize(
    ("lone_failures", "threshold", "suspect"),
    [(2, 3, False), (3, 3, True), (4, 3, True), (0, 1, False), (1, 1, True), (9, 0, False)],
)
def test_a_golden_is_suspect_from_the_threshold_of_lone_failures_on_and_0_never(
    lone_failures, threshold, suspect
):
    assert golden_suspect(lone_failures=lone_failures, threshold=threshold) is suspect


def test_only_workers_whose_one_miss_is_that_golden_count_towards_suspending_it():
    tn, tp = "tn-pair", "tp-pair"

    def sheet(tn_level: Level, tp_level: Level) -> list[tuple[str, str, Level]]:
        return [(tn, Role.GOLDEN_TN, tn_level), (tp, Role.GOLDEN_TP, tp_level)]

    honest = sheet(Level.YES, Level.YES)  # the golden TN (a real match) answered YES
    careless = sheet(Level.YES, Level.NO)  # misses both: says nothing about either
    passed = sheet(Level.NO, Level.YES)
    two = {"w1": honest, "w2": honest, "w3": careless, "w4": passed}
    assert goldens_to_suspend(two, threshold=3) == []
    assert goldens_to_suspend(
        {**two, "w5": sheet(Level.WEAK_YES, Level.WEAK_YES)}, threshold=3
    ) == [tn]
    assert goldens_to_suspend({**two, "w5": honest}, threshold=0) == []
