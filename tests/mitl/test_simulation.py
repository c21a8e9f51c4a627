"""Tests for the simulated crowd: accuracy, careless workers, follow-ups and timing."""

from __future__ import annotations

import numpy as np
import pytest

from mitl.judgements import MIDDLE_LEVELS, POSITIVE_LEVELS, SHORTCOMINGS, WRONG_CONCEPTS, Level
from mitl.simulation import WorkerProfile, answer, crowd_profiles, oracle_truth
from mitl.synthetic.truth import Truth

TRUTHS = (
    Truth(Level.YES),
    Truth(Level.WEAK_YES, ("misses_main_concept",)),
    Truth(Level.WEAK_YES, ("wrong_description",), ("color",)),
    Truth(Level.WEAK_NO, ("wrong_description", "not_in_image"), ("quantity", "other")),
    Truth(Level.NO),
)
CAREFUL = WorkerProfile("careful", accuracy=0.9)
CARELESS = WorkerProfile("careless", accuracy=0.9, careless=True)


def test_a_perfect_worker_always_gives_the_true_level():
    rng = np.random.default_rng(0)
    worker = WorkerProfile("perfect", accuracy=1.0)
    for truth in TRUTHS * 200:
        assert answer(truth, worker, rng).level is truth.level


def test_a_090_worker_agrees_with_the_truth_about_90_percent_of_the_time():
    rng = np.random.default_rng(1)
    truths = [TRUTHS[i] for i in rng.integers(len(TRUTHS), size=5000)]
    agreement = np.mean([answer(t, CAREFUL, rng).level is t.level for t in truths])
    assert abs(agreement - 0.9) <= 0.03


def test_mistakes_are_one_step_and_rarely_cross_the_boundary():
    rng = np.random.default_rng(2)
    order = [Level.YES, Level.WEAK_YES, Level.WEAK_NO, Level.NO]
    worker = WorkerProfile("sloppy", accuracy=0.0)
    crossed = within = 0
    for truth in TRUTHS * 1000:
        level = answer(truth, worker, rng).level
        assert abs(order.index(level) - order.index(truth.level)) == 1
        if (level in POSITIVE_LEVELS) != truth.is_positive:
            crossed += 1
        else:
            within += 1
    assert 0 < crossed < within


def test_careless_workers_are_faster_and_much_less_accurate():
    rng = np.random.default_rng(3)
    truths = [TRUTHS[i] for i in rng.integers(len(TRUTHS), size=3000)]
    careful = [answer(t, CAREFUL, rng) for t in truths]
    careless = [answer(t, CARELESS, rng) for t in truths]
    hits = [
        np.mean([a.level is t.level for a, t in zip(s, truths, strict=True)])
        for s in (careful, careless)
    ]
    assert hits[1] < hits[0] - 0.4
    assert np.median([a.elapsed_ms for a in careless]) < 0.5 * np.median(
        [a.elapsed_ms for a in careful]
    )


def test_elapsed_ms_is_a_positive_int_around_the_median():
    rng = np.random.default_rng(4)
    times = [answer(Truth(Level.YES), CAREFUL, rng).elapsed_ms for _ in range(2000)]
    assert all(isinstance(t, int) and t > 0 for t in times)
    assert 3000 < np.median(times) < 5000


@pytest.mark.parametrize("followups", [True, False])
def test_followups_come_iff_asked_and_use_only_the_vocabulary(followups):
    rng = np.random.default_rng(5)
    workers = [CAREFUL, CARELESS, WorkerProfile("wrong", accuracy=0.3)]
    for truth in TRUTHS * 300:
        for worker in workers:
            reply = answer(truth, worker, rng, followups=followups)
            if followups and reply.level in MIDDLE_LEVELS:
                assert reply.shortcomings and set(reply.shortcomings) <= set(SHORTCOMINGS)
                assert set(reply.wrong_concepts) <= set(WRONG_CONCEPTS)
                assert bool(reply.wrong_concepts) == ("wrong_description" in reply.shortcomings)
                assert bool(reply.other_text) == ("other" in reply.wrong_concepts)
            else:
                assert (reply.shortcomings, reply.wrong_concepts, reply.other_text) == ((), (), "")


def test_a_careful_worker_copies_the_truths_rationale_in_vocabulary_order():
    rng = np.random.default_rng(6)
    worker = WorkerProfile("perfect", accuracy=1.0)
    reply = answer(TRUTHS[3], worker, rng)
    assert reply.shortcomings == ("not_in_image", "wrong_description")
    assert reply.wrong_concepts == ("quantity", "other") and reply.other_text


def test_answers_are_deterministic_given_the_generator():
    def replay(seed: int) -> list:
        rng = np.random.default_rng(seed)
        return [answer(t, w, rng) for t in TRUTHS * 20 for w in (CAREFUL, CARELESS)]

    assert replay(7) == replay(7)
    assert replay(7) != replay(8)


def test_crowd_profiles_are_seeded_and_have_the_careless_share():
    crowd = crowd_profiles(20, careless_share=0.1, accuracy_range=(0.8, 0.9), seed=3)
    assert crowd == crowd_profiles(20, careless_share=0.1, accuracy_range=(0.8, 0.9), seed=3)
    assert sum(worker.careless for worker in crowd) == 2
    assert len({worker.name for worker in crowd}) == 20
    assert all(0.8 <= worker.accuracy <= 0.9 and worker.median_ms > 0 for worker in crowd)
    assert crowd != crowd_profiles(20, careless_share=0.1, accuracy_range=(0.8, 0.9), seed=4)


def test_oracle_truth_is_yes_in_the_reference_set_and_no_outside():
    assert oracle_truth(True) == Truth(Level.YES)
    assert oracle_truth(False) == Truth(Level.NO)
    assert oracle_truth(True).is_positive and not oracle_truth(False).is_positive


LEARNER = WorkerProfile("learner", accuracy=1.0, learning_gain=0.4)


def test_an_untrained_learner_answers_at_random_a_learning_gain_share_of_the_time():
    # Accuracy 1.0 apart from the misread share: a random level is right 1 time in 4, so
    # the untrained learner agrees with the truth 0.6 + 0.4 / 4 = 70% of the time.
    rng = np.random.default_rng(11)
    truths = [TRUTHS[i] for i in rng.integers(len(TRUTHS), size=6000)]
    untrained = np.mean([answer(t, LEARNER, rng).level is t.level for t in truths])
    assert abs(untrained - 0.70) <= 0.02
    trained = [answer(t, LEARNER, rng, trained=True).level is t.level for t in truths]
    assert all(trained)


def test_an_untrained_learner_fails_golden_pairs_that_a_careful_worker_passes():
    # A golden TN (truth 100% NO) is failed by a YES-side answer: a random level lands there
    # half the time, so 0.4 / 2 = 20% of the untrained learner's answers fail it.
    rng = np.random.default_rng(12)
    failed = np.mean(
        [answer(Truth(Level.NO), LEARNER, rng).level in POSITIVE_LEVELS for _ in range(6000)]
    )
    assert abs(failed - 0.20) <= 0.02
    careful = WorkerProfile("careful", accuracy=0.9)
    assert not any(
        answer(Truth(Level.NO), careful, rng).level in POSITIVE_LEVELS for _ in range(2000)
    )


def test_a_learning_gain_outside_zero_to_one_is_refused():
    with pytest.raises(ValueError, match="learning_gain"):
        WorkerProfile("x", accuracy=0.9, learning_gain=1.5)


def test_crowd_profiles_make_a_share_of_the_careful_workers_learners_and_keep_the_rest():
    plain = crowd_profiles(20, careless_share=0.1, seed=5)
    mixed = crowd_profiles(20, careless_share=0.1, seed=5, learning_share=0.5, learning_gain=0.3)
    learners = [worker for worker in mixed if worker.learning_gain]
    assert len(learners) == 9  # half of the 18 careful workers
    assert all(worker.learning_gain == 0.3 and not worker.careless for worker in learners)
    # Everything else is the crowd drawn without learners.
    strip = [(w.name, w.accuracy, w.careless, w.median_ms) for w in mixed]
    assert strip == [(w.name, w.accuracy, w.careless, w.median_ms) for w in plain]
    assert not any(worker.learning_gain for worker in plain)
