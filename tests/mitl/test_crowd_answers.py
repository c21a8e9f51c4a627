"""Crowd-answer shares per annotator and rank (ECCV Caption, Appendix B), on hand-made inputs."""

from __future__ import annotations

from mitl.crowd_answers import (
    JudgedAnswer,
    answer_shares,
    positives_by_annotator,
    rationale_shares,
)
from mitl.judgements import Level, shortcomings_to_mask, wrong_concepts_to_mask

A, B, C = 1, 2, 4  # proposer bits of annotators A, B, C
NAMES = ["A", "B", "C"]

ANSWERS = [
    JudgedAnswer(Level.YES, 0, 0, ((0, 1), (1, 2))),
    JudgedAnswer(Level.WEAK_YES, shortcomings_to_mask(["grammar"]), 0, ((0, 1),)),
    JudgedAnswer(
        Level.WEAK_NO,
        shortcomings_to_mask(["wrong_description", "not_in_image"]),
        wrong_concepts_to_mask(["color"]),
        ((1, 1), (1, 3)),  # B proposed the pair from two queries, at ranks 1 and 3
    ),
    JudgedAnswer(Level.NO, 0, 0, ((0, 2),)),
]


def test_answer_shares_per_annotator_count_a_judgement_once_per_proposing_annotator():
    shares = answer_shares(ANSWERS, ["A", "B"])["by_annotator"]
    assert shares["A"] == {
        "judgements": 3,
        "shares": {"yes": 1 / 3, "weak_yes": 1 / 3, "weak_no": 0.0, "no": 1 / 3},
    }
    assert shares["B"]["judgements"] == 2
    assert shares["B"]["shares"] == {"yes": 0.5, "weak_yes": 0.0, "weak_no": 0.5, "no": 0.0}


def test_answer_shares_per_rank_count_each_rank_a_candidate_was_proposed_at():
    shares = answer_shares(ANSWERS, ["A", "B"])
    assert {r: s["judgements"] for r, s in shares["by_rank"].items()} == {"1": 3, "2": 2, "3": 1}
    assert shares["by_rank"]["2"]["shares"]["no"] == 0.5
    assert shares["by_annotator_rank"]["B"]["3"]["shares"]["weak_no"] == 1.0
    assert set(shares["by_annotator_rank"]["A"]) == {"1", "2"}


def test_an_annotator_without_judgements_has_no_shares():
    shares = answer_shares(ANSWERS, ["A", "B", "C"])["by_annotator"]["C"]
    assert shares == {
        "judgements": 0,
        "shares": dict.fromkeys(("yes", "weak_yes", "weak_no", "no")),
    }


def test_rationale_shares_cover_the_middle_answers_and_the_wrong_concepts():
    rationales = rationale_shares(ANSWERS, ["A", "B"])
    assert set(rationales["A"]) == {"weak_yes", "weak_no"}
    weak_yes = rationales["A"]["weak_yes"]
    assert weak_yes["judgements"] == 1
    assert weak_yes["shortcomings"]["grammar"] == 1.0
    assert weak_yes["shortcomings"]["wrong_description"] == 0.0
    assert weak_yes["wrong_description"] == 0
    assert set(weak_yes["wrong_concepts"].values()) == {None}  # no "wrong description" at all
    weak_no = rationales["B"]["weak_no"]
    assert weak_no["judgements"] == 1
    assert weak_no["shortcomings"]["not_in_image"] == 1.0
    assert weak_no["wrong_concepts"]["color"] == 1.0
    assert weak_no["wrong_concepts"]["species"] == 0.0
    assert rationales["A"]["weak_no"]["judgements"] == 0


def test_positives_found_by_one_annotator_only():
    candidates = [(A, True), (A | B, True), (B, False), (B, None), (C, True)]
    found = positives_by_annotator(candidates, NAMES)
    assert found["verified_positives"] == 3
    assert found["by_annotator"]["A"] == {
        "candidates": 2,
        "judged": 2,
        "verified": 2,
        "verified_share": 1.0,
        "only_this": 1,
        "only_this_share": 0.5,
    }
    assert found["by_annotator"]["B"]["candidates"] == 3
    assert found["by_annotator"]["B"]["judged"] == 2
    assert found["by_annotator"]["B"]["only_this"] == 0
    assert found["by_annotator"]["C"]["only_this_share"] == 1.0
