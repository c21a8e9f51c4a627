"""The qualification round as MTurk's test: the QuestionForm and AnswerKey read back with
xml.etree, the pass mark computed by hand, and MTurk's scoring replayed on the answer key."""

from __future__ import annotations

import math
import xml.etree.ElementTree as ET

import pytest

from annotation.mturk.errors import MTurkInputError
from annotation.mturk.qualification_test import (
    ANSWER_KEY_NS,
    QUESTION_FORM_NS,
    XML_MAX_BYTES,
    QualificationQuestion,
    answer_key_xml,
    image_subtype,
    pairs_to_pass,
    pass_mark,
    qualification_requirement,
    question_form_xml,
    time_allowed_seconds,
)
from mitl.qualification import qualification_passed

QF = f"{{{QUESTION_FORM_NS}}}"
AK = f"{{{ANSWER_KEY_NS}}}"
TRICKY = 'A dog & a "cat" <3 on a <b>mat</b> > floor'
LEVELS = ["yes", "weak_yes", "weak_no", "no"]


def pairs() -> list[QualificationQuestion]:
    return [
        QualificationQuestion(
            identifier="pair-1",
            caption=TRICKY,
            image_url="https://mitl.example.org/mturk/qualification-images/7/s1g/?a=1&b=2",
            image_subtype="png",
            positive=True,
        ),
        QualificationQuestion(
            identifier="pair-2",
            caption="A red bus in the rain.",
            image_url="https://mitl.example.org/mturk/qualification-images/8/s2g/",
            image_subtype="jpeg",
            positive=False,
        ),
        QualificationQuestion(
            identifier="pair-3",
            caption="Two children play chess.",
            image_url="https://mitl.example.org/mturk/qualification-images/9/s3g/",
            image_subtype="png",
            positive=True,
        ),
    ]


def score(answer_key: str, answers: dict[str, str]) -> float:
    """Replay MTurk's scoring: summed AnswerScores over MaximumSummedScore, in percent."""
    root = ET.fromstring(answer_key)
    total = 0
    for question in root.findall(f"{AK}Question"):
        chosen = answers[question.findtext(f"{AK}QuestionIdentifier")]
        for option in question.findall(f"{AK}AnswerOption"):
            if [e.text for e in option.findall(f"{AK}SelectionIdentifier")] == [chosen]:
                total += int(option.findtext(f"{AK}AnswerScore"))
    mapping = f"{AK}QualificationValueMapping/{AK}PercentageMapping/{AK}MaximumSummedScore"
    maximum = int(root.findtext(mapping))
    return 100 * total / maximum


def test_the_test_has_an_overview_and_one_question_per_pair():
    xml = question_form_xml(pairs(), title="Qualification test: image descriptions (batch 12)")
    assert xml.startswith('<?xml version="1.0" encoding="UTF-8"?>\n')
    root = ET.fromstring(xml)
    assert root.tag == f"{QF}QuestionForm"
    overview = root.find(f"{QF}Overview")
    assert overview.findtext(f"{QF}Title") == "Qualification test: image descriptions (batch 12)"
    texts = "\n".join(text.text for text in overview.findall(f"{QF}Text"))
    for label in ("100% YES", "Partially YES, but…", "Mostly NO, because…", "100% NO"):
        assert label in texts

    questions = root.findall(f"{QF}Question")
    assert [q.findtext(f"{QF}QuestionIdentifier") for q in questions] == [
        "pair-1",
        "pair-2",
        "pair-3",
    ]
    first = questions[0]
    assert [child.tag.removeprefix(QF) for child in first] == [
        "QuestionIdentifier",
        "DisplayName",
        "IsRequired",
        "QuestionContent",
        "AnswerSpecification",
    ]
    assert first.findtext(f"{QF}DisplayName") == "Pair 1"
    assert first.findtext(f"{QF}IsRequired") == "true"
    binary = first.find(f"{QF}QuestionContent/{QF}Binary")
    assert binary.findtext(f"{QF}MimeType/{QF}Type") == "image"
    assert binary.findtext(f"{QF}MimeType/{QF}SubType") == "png"
    assert binary.findtext(f"{QF}DataURL") == pairs()[0].image_url  # & in the query survives
    assert binary.findtext(f"{QF}AltText") == "Image of pair 1"
    assert first.findtext(f"{QF}QuestionContent/{QF}Text") == f"Description: {TRICKY}"
    second = questions[1].find(f"{QF}QuestionContent/{QF}Binary")
    assert second.findtext(f"{QF}MimeType/{QF}SubType") == "jpeg"

    answer = first.find(f"{QF}AnswerSpecification/{QF}SelectionAnswer")
    assert answer.findtext(f"{QF}StyleSuggestion") == "radiobutton"
    selections = answer.findall(f"{QF}Selections/{QF}Selection")
    assert [s.findtext(f"{QF}SelectionIdentifier") for s in selections] == LEVELS
    assert [s.findtext(f"{QF}Text") for s in selections] == [
        "100% YES",
        "Partially YES, but…",
        "Mostly NO, because…",
        "100% NO",
    ]


def test_captions_are_escaped_not_interpreted():
    xml = question_form_xml(pairs(), title="T & <t>")
    assert TRICKY not in xml  # never raw: & and < would break the document or inject tags
    assert 'A dog &amp; a "cat" &lt;3 on a &lt;b&gt;mat&lt;/b&gt; &gt; floor' in xml
    root = ET.fromstring(xml)
    assert root.find(f"{QF}Question/{QF}QuestionContent/{QF}b") is None
    assert root.findtext(f"{QF}Overview/{QF}Title") == "T & <t>"


def test_characters_xml_cannot_hold_are_dropped():
    odd = QualificationQuestion(
        identifier="pair-1",
        caption="tab\there, bell\x07 and vertical tab\x0b gone",
        image_url="https://x.example/i.png",
        image_subtype="png",
        positive=True,
    )
    root = ET.fromstring(question_form_xml([odd], title="t"))
    text = root.findtext(f"{QF}Question/{QF}QuestionContent/{QF}Text")
    assert text == "Description: tab\there, bell and vertical tab gone"


def test_the_answer_key_gives_a_point_to_exactly_the_two_right_levels():
    root = ET.fromstring(answer_key_xml(pairs()))
    assert root.tag == f"{AK}AnswerKey"
    right = {
        q.findtext(f"{AK}QuestionIdentifier"): {
            o.findtext(f"{AK}SelectionIdentifier"): o.findtext(f"{AK}AnswerScore")
            for o in q.findall(f"{AK}AnswerOption")
        }
        for q in root.findall(f"{AK}Question")
    }
    assert right == {
        "pair-1": {"yes": "1", "weak_yes": "1"},  # positive: either YES
        "pair-2": {"weak_no": "1", "no": "1"},  # negative: either NO
        "pair-3": {"yes": "1", "weak_yes": "1"},
    }
    mapping = root.find(f"{AK}QualificationValueMapping/{AK}PercentageMapping")
    assert mapping.findtext(f"{AK}MaximumSummedScore") == "3"


def test_mturks_score_is_the_percentage_of_pairs_right():
    key = answer_key_xml(pairs())
    assert score(key, {"pair-1": "weak_yes", "pair-2": "no", "pair-3": "yes"}) == 100
    two_right = score(key, {"pair-1": "yes", "pair-2": "weak_no", "pair-3": "no"})
    assert two_right == pytest.approx(200 / 3)  # 66.67
    assert score(key, {"pair-1": "no", "pair-2": "yes", "pair-3": "weak_yes"}) == pytest.approx(
        100 / 3
    )
    # At a 2/3 pass share, 2 of 3 right passes here (as on the platform), whether MTurk
    # rounds 66.67 to 67 or truncates it to 66; 1 of 3 (33.3) does not.
    minimum = pass_mark(2 / 3, 3)
    assert minimum == 66
    assert math.floor(two_right) >= minimum and round(two_right) >= minimum
    assert math.ceil(100 / 3) < minimum


@pytest.mark.parametrize(
    ("share", "count", "to_pass", "minimum"),
    [
        (0.8, 5, 4, 80),
        (0.8, 10, 8, 80),
        (0.75, 4, 3, 75),
        (2 / 3, 3, 2, 66),  # 66.67% rounded down
        (0.7, 10, 7, 70),  # 0.7 × 10 is 7.000000000000001 in floating point: still 7
        (0.8, 3, 3, 100),  # 2 of 3 is 66.67% < 80%: all three
        (0.5, 3, 2, 66),
        (1.0, 7, 7, 100),
    ],
)
def test_the_pass_mark_by_hand(share, count, to_pass, minimum):
    assert pairs_to_pass(share, count) == to_pass
    assert pass_mark(share, count) == minimum


@pytest.mark.parametrize("share", [0.5, 2 / 3, 0.7, 0.8, 0.85, 0.5000000000001, 0.9999999999])
def test_mturks_test_and_the_platforms_round_pass_the_same_workers(share):
    # One rule for both: 0.5000000000001 of 2 needs both right (1 of 2 is below it), which
    # the float product rounded to 9 places (1.0000000000002 → 1) had let through on MTurk.
    for count in range(1, 51):
        need = pairs_to_pass(share, count)
        assert qualification_passed(need, count, share), (share, count)
        assert not qualification_passed(need - 1, count, share), (share, count)
    assert pairs_to_pass(0.5000000000001, 2) == 2


def test_the_pass_mark_splits_passing_and_failing_workers_under_any_rounding():
    for count in range(1, 51):
        for percent in range(50, 101):
            share = percent / 100
            need = pairs_to_pass(share, count)
            minimum = pass_mark(share, count)
            passing = 100 * need / count
            failing = 100 * (need - 1) / count
            assert math.floor(passing) >= minimum, (share, count)
            assert math.ceil(failing) < minimum, (share, count)


def test_the_requirement_and_the_time_allowed():
    assert qualification_requirement("3QUAL", minimum=80, actions_guarded="Accept") == {
        "QualificationTypeId": "3QUAL",
        "Comparator": "GreaterThanOrEqualTo",
        "IntegerValues": [80],
        "ActionsGuarded": "Accept",
    }
    assert time_allowed_seconds(3) == 300  # at least five minutes
    assert time_allowed_seconds(12) == 720  # a minute a pair


def test_image_types_come_from_the_file_name():
    assert image_subtype("images/abc.JPG") == "jpeg"
    assert image_subtype("x.jpeg") == "jpeg"
    assert image_subtype("x.png") == "png"
    assert image_subtype("x.tif") == "tiff"
    with pytest.raises(MTurkInputError, match=r"cannot tell the image type of 'x\.svgz'"):
        image_subtype("x.svgz")


def test_a_test_too_long_for_mturk_says_how_to_fix_it():
    many = [
        QualificationQuestion(
            identifier=f"pair-{n}",
            caption="a long description " * 80,
            image_url=f"https://x.example/{n}.png",
            image_subtype="png",
            positive=True,
        )
        for n in range(1, 51)
    ]
    with pytest.raises(MTurkInputError) as refusal:
        question_form_xml(many, title="t")
    assert f"MTurk takes {XML_MAX_BYTES}" in str(refusal.value)
    assert "Use fewer qualification pairs" in str(refusal.value)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ({"identifier": "pair 1"}, "not a usable question identifier"),
        ({"image_url": "/relative.png"}, "needs a public URL"),
        ({"image_subtype": "svg+xml"}, "not an image type MTurk shows"),
    ],
)
def test_unusable_pairs_are_refused(change, message):
    pair = pairs()[0]
    bad = QualificationQuestion(**{**pair.__dict__, **change})
    with pytest.raises(MTurkInputError, match=message):
        question_form_xml([bad], title="t")
    with pytest.raises(MTurkInputError, match="at least one pair"):
        answer_key_xml([])
