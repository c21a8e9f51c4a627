"""The feedback of a rejection: the failed check pairs and answers, within MTurk's limit."""

from __future__ import annotations

from annotation.mturk.feedback import FEEDBACK_MAX, rejection_feedback
from mitl.judgements import Level
from mitl.quality import GoldenMiss


def test_rejection_feedback_names_each_failed_check_pair_and_the_answer_given():
    text = rejection_feedback(
        reviewer_text="Rejected automatically: pair 3 is a known match but was answered no",
        misses=[GoldenMiss(3, True, Level.NO), GoldenMiss(9, False, Level.WEAK_YES)],
    )
    assert "Rejected automatically" not in text  # the friendlier wording replaces it
    assert "pair 3 matches its description, but you answered “100% NO”" in text
    assert "pair 9 does not match its description, but you answered “Partially YES, but…”" in text


def test_a_reviewers_words_come_first_and_the_text_fits_mturks_limit():
    text = rejection_feedback(
        reviewer_text="You answered every pair the same way.",
        misses=[GoldenMiss(n, True, Level.NO) for n in range(1, 80)],
    )
    assert text.startswith("You answered every pair the same way. Check pairs")
    assert len(text) == FEEDBACK_MAX
    assert text.endswith("…")
    alone = rejection_feedback(reviewer_text="Spam.", misses=[])
    assert alone == "Spam."
