"""Graded qrels: grades follow the verdict score and agree with the released positives."""

from __future__ import annotations

import pytest

from mitl.qrels import TOP_GRADE, qrels_text, relevance_grade


@pytest.mark.parametrize(
    ("is_positive", "score", "grade"),
    [
        (True, None, 3),  # a known positive without a verdict
        (True, 1.0, 3),
        (True, 0.75, 3),
        (True, 0.7, 2),
        (True, 0.5, 2),
        (True, 1 / 3, 1),  # e.g. "Partially YES" twice and "100% NO" once
        (True, 0.0, 1),  # an original positive the crowd rejected stays relevant
        (False, 0.0, 0),
        (False, 0.5, 0),  # judged, yet not released: not relevant
        (False, None, 0),
    ],
)
def test_the_grade_of_a_pair(is_positive, score, grade):
    assert relevance_grade(is_positive=is_positive, score=score) == grade
    assert TOP_GRADE == 3


def parse(text: str) -> dict[tuple[int, int], int]:
    rows = {}
    for line in text.splitlines():
        query, zero, doc, grade = line.split(" ")
        assert zero == "0"
        rows[(int(query), int(doc))] = int(grade)
    return rows


# Symmetric, as in a release: the same pairs seen from both sides.
I2T = {"1": [10, 11], "2": [11], "30": [12]}
T2I = {"10": [1], "11": [1, 2], "12": [30]}
SCORES = {(1, 11): 0.5, (1, 13): 0.0, (1, 14): 0.6, (2, 11): 1.0, (3, 12): 0.25, (30, 12): 1.0}


def test_image_queries_list_their_positives_and_judged_pairs():
    assert parse(qrels_text(I2T, SCORES, direction="i2t")) == {
        (1, 10): 3,  # known positive, no verdict
        (1, 11): 2,
        (1, 13): 0,  # judged negative
        (1, 14): 0,  # a fair score, but the rule said negative: not released, not relevant
        (2, 11): 3,
        (30, 12): 3,
    }


def test_caption_queries_read_the_same_pairs_the_other_way_round():
    assert parse(qrels_text(T2I, SCORES, direction="t2i")) == {
        (10, 1): 3,
        (11, 1): 2,
        (11, 2): 3,
        (12, 3): 0,
        (12, 30): 3,
    }


def test_relevance_one_or_more_marks_exactly_the_released_positives():
    for positives, direction in ((I2T, "i2t"), (T2I, "t2i")):
        relevant = {
            pair
            for pair, grade in parse(qrels_text(positives, SCORES, direction=direction)).items()
            if grade >= 1
        }
        assert relevant == {(int(q), d) for q, docs in positives.items() for d in docs}


def test_lines_are_sorted_numerically_by_query_then_document():
    text = qrels_text({"9": [5, 40], "10": [3]}, {(9, 100): 0.0}, direction="i2t")
    assert text == "9 0 5 3\n9 0 40 3\n9 0 100 0\n10 0 3 3\n"


def test_queries_outside_the_release_are_left_out():
    assert qrels_text({"1": []}, {(2, 5): 1.0}, direction="i2t") == ""


def test_an_unknown_direction_is_refused():
    with pytest.raises(ValueError, match="i2t or t2i"):
        qrels_text({}, {}, direction="both")
