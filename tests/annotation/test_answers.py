"""The plain answers' check (`answers_plain`) takes exactly what the serializer takes.

Every submission's answers are read by it first; what it does not take plainly goes to
`SubmissionSerializer`, whose messages the API and MTurk's frame return. So for every body
here, either it gives None or it gives the serializer's own answers.
"""

from __future__ import annotations

from typing import Any

import pytest

from annotation.answers import SubmissionSerializer, answer_inputs, answers_plain
from mitl.judgements import OTHER_TEXT_MAX


def _answer(**changes: Any) -> dict[str, Any]:
    answer = {
        "item": 1,
        "level": "weak_yes",
        "shortcomings": ["grammar"],
        "wrong_concepts": [],
        "other_text": "",
        "elapsed_ms": 1200,
    }
    answer.update(changes)
    return {key: value for key, value in answer.items() if value is not _LEFT_OUT}


_LEFT_OUT = object()

PLAIN = [
    {"answers": [_answer(), _answer(item=2, level="no", shortcomings=[])]},
    {"answers": [_answer(shortcomings=_LEFT_OUT, wrong_concepts=_LEFT_OUT, other_text=_LEFT_OUT)]},
    {"answers": [_answer(other_text="  trimmed  ")]},
    {"answers": [_answer(other_text="x" * OTHER_TEXT_MAX + "   ")]},
    {
        "answers": [
            _answer(
                level="weak_no",
                shortcomings=["wrong_description"],
                wrong_concepts=["color", "other"],
                elapsed_ms=0,
            )
        ]
    },
]
NOT_PLAIN = [
    None,
    [],
    {},
    {"answers": []},
    {"answers": [_answer()], "extra": 1},
    {"answers": "1"},
    {"answers": [_answer(item=True)]},
    {"answers": [_answer(item="1")]},
    {"answers": [_answer(item=0)]},
    {"answers": [_answer(item=1.0)]},
    {"answers": [_answer(item=_LEFT_OUT)]},
    {"answers": [_answer(level="maybe")]},
    {"answers": [_answer(level=None)]},
    {"answers": [_answer(elapsed_ms=-1)]},
    {"answers": [_answer(shortcomings="grammar")]},
    {"answers": [_answer(shortcomings=["wrong_count"])]},
    {"answers": [_answer(wrong_concepts=[1])]},
    {"answers": [_answer(other_text="x" * (OTHER_TEXT_MAX + 1))]},
    {"answers": [_answer(other_text="nul\x00")]},
    {"answers": [_answer(other_text="café")]},  # plain ASCII only: the serializer reads it
    {"answers": [_answer(other_text=5)]},
    {"answers": [{**_answer(), "role": "golden_tp"}]},
    {"answers": [["item", 1]]},
]


def _serializer_answers(data: Any) -> list | None:
    serializer = SubmissionSerializer(data=data)
    return answer_inputs(serializer.validated_data) if serializer.is_valid() else None


@pytest.mark.parametrize("data", PLAIN)
def test_plain_bodies_give_the_serializers_answers(data):
    plain = answers_plain(data)
    assert plain is not None
    assert plain == _serializer_answers(data)


@pytest.mark.parametrize("data", NOT_PLAIN)
def test_anything_else_is_left_to_the_serializer(data):
    assert answers_plain(data) is None
