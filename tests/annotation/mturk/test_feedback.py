"""The feedback of a rejection: how many check pairs failed (never which), within MTurk's
limit."""

from __future__ import annotations

from annotation.mturk.feedback import FEEDBACK_MAX, rejection_feedback
from mitl.judgements import Level
from mitl.quality import GoldenMiss


def test_rejection_feedback_counts_the_failed_check_pairs_without_naming_them():
    text = rejection_feedback(
        reviewer_text="Rejected automatically: 2 pairs with a known answer were answered wrongly.",
        misses=[GoldenMiss(3, True, Level.NO), GoldenMiss(9, False, Level.WEAK_YES)],
    )
    assert "Rejected automatically" not in text  # the friendlier wording replaces it
    assert text == "2 pairs with a known answer were answered wrongly."
    # The HIT is re-posted: neither the places nor the answers may tell where goldens are.
    assert "3" not in text and "9" not in text and "Partially" not in text


def test_a_reviewers_words_come_first_and_the_text_fits_mturks_limit():
    text = rejection_feedback(
        reviewer_text="You answered every pair the same way.",
        misses=[GoldenMiss(n, True, Level.NO) for n in range(1, 80)],
    )
    assert text == "You answered every pair the same way. 79 pairs with a known answer were " + (
        "answered wrongly."
    )
    long = rejection_feedback(reviewer_text="x" * 2000, misses=[GoldenMiss(1, True, Level.NO)])
    assert len(long) == FEEDBACK_MAX
    assert long.endswith("…")
    alone = rejection_feedback(reviewer_text="Spam.", misses=[])
    assert alone == "Spam."
