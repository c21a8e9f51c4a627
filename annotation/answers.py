"""The one parser of a HIT's answers, for the API, the platform page and MTurk's frame.

A DRF serializer used as a validator: each of the three entry points checks the same
fields with the same messages before `annotation.submissions` stores anything; a key it
does not know (an answer's `"role"`) is refused, not ignored (`annotation.strict_input`).
"""

from __future__ import annotations

from typing import Any

from rest_framework import serializers

from mitl.judgements import OTHER_TEXT_MAX, SHORTCOMINGS, WRONG_CONCEPTS, Level

from .models import AssignmentStatus
from .strict_input import StrictSerializer
from .submissions import AnswerInput, SubmissionResult, answers_from_rows


class AnswerSerializer(StrictSerializer):
    item = serializers.IntegerField(
        min_value=1, help_text="The pair's number on the worker's page (its `id` there)."
    )
    level = serializers.ChoiceField(choices=[level.value for level in Level])
    shortcomings = serializers.ListField(
        child=serializers.ChoiceField(choices=SHORTCOMINGS), required=False, default=list
    )
    wrong_concepts = serializers.ListField(
        child=serializers.ChoiceField(choices=WRONG_CONCEPTS), required=False, default=list
    )
    other_text = serializers.CharField(
        max_length=OTHER_TEXT_MAX, required=False, allow_blank=True, default=""
    )
    elapsed_ms = serializers.IntegerField(min_value=0)


class SubmissionSerializer(StrictSerializer):
    answers = AnswerSerializer(many=True, allow_empty=False)


def answer_inputs(validated: dict[str, Any]) -> list[AnswerInput]:
    """Turn a validated SubmissionSerializer's data into the service's answers."""
    return answers_from_rows(validated["answers"])


_LEVELS = frozenset(level.value for level in Level)
_SHORTCOMINGS = frozenset(SHORTCOMINGS)
_WRONG_CONCEPTS = frozenset(WRONG_CONCEPTS)
_ANSWER_KEYS = frozenset(AnswerSerializer().fields)


def answers_plain(data: Any) -> list[AnswerInput] | None:
    """The answers of a JSON body in the form every page and client sends, checked as
    `SubmissionSerializer` checks them, without its field-by-field work; None for anything
    else (an error, or a form it would convert): validate with the serializer then, for
    the same data or the same messages.

    Every HIT's submission goes through this, 18 answers each: the serializer's checks
    were a tenth of a submission's Python time (benchmarks/README.md).
    """
    if type(data) is not dict or data.keys() != {"answers"}:
        return None
    rows = data["answers"]
    if type(rows) is not list or not rows:
        return None
    answers = []
    for row in rows:
        answer = _answer_plain(row)
        if answer is None:
            return None
        answers.append(answer)
    return answers


def _answer_plain(row: Any) -> AnswerInput | None:
    """One answer as the serializer would take it, or None to let the serializer judge."""
    if type(row) is not dict or not _ANSWER_KEYS.issuperset(row):
        return None
    item, level, elapsed_ms = row.get("item"), row.get("level"), row.get("elapsed_ms")
    shortcomings = row.get("shortcomings", [])
    wrong_concepts = row.get("wrong_concepts", [])
    other_text = row.get("other_text", "")
    plain = (
        type(item) is int
        and item >= 1
        and type(elapsed_ms) is int
        and elapsed_ms >= 0
        and type(level) is str
        and level in _LEVELS
        and _choices_plain(shortcomings, _SHORTCOMINGS)
        and _choices_plain(wrong_concepts, _WRONG_CONCEPTS)
        # ASCII without NUL: the text needs none of CharField's checks but its length.
        and type(other_text) is str
        and other_text.isascii()
        and "\x00" not in other_text
        and len(other_text.strip()) <= OTHER_TEXT_MAX
    )
    if not plain:
        return None
    return AnswerInput(
        item_id=item,
        level=level,
        shortcomings=list(shortcomings),
        wrong_concepts=list(wrong_concepts),
        other_text=other_text.strip(),  # as CharField trims it
        elapsed_ms=elapsed_ms,
    )


def _choices_plain(values: Any, choices: frozenset[str]) -> bool:
    return type(values) is list and all(type(v) is str and v in choices for v in values)


def submission_answers(data: Any) -> list[AnswerInput]:
    """The answers of a submission's body; a `ValidationError` (a 400 naming the field)
    with the serializer's messages when they are not right."""
    answers = answers_plain(data)
    if answers is not None:
        return answers
    serializer = SubmissionSerializer(data=data)
    serializer.is_valid(raise_exception=True)
    return answer_inputs(serializer.validated_data)


def submission_summary(result: SubmissionResult) -> dict[str, Any]:
    """Say what was stored: status, whether this call stored it, the golden result, and a
    sentence for the worker (`submission_message`)."""
    status, golden_passed = result.assignment.status, result.assignment.golden_passed
    return {
        "assignment": result.assignment.pk,
        "status": status,
        "created": result.created,
        "judgements": len(result.judgements),
        "golden_passed": golden_passed,
        "message": submission_message(status=status, golden_passed=golden_passed),
    }


# A repeat with other answers (a second tab, an edited retry): the API's and MTurk's 409.
ANSWERED_OTHERWISE = (
    "this HIT was submitted before with other answers: those stand, these were not stored"
)
CHECK_MISSED = "a check pair was answered differently from its known answer"


def submission_message(*, status: str, golden_passed: bool | None) -> str:
    """Tell the worker plainly what became of a submitted HIT.

    Never which pair was the check: a worker who learns that could answer it alone.
    """
    if status == AssignmentStatus.APPROVED:
        return "Submitted and approved. Thank you!"
    if status == AssignmentStatus.REJECTED:
        return f"Submitted, but not accepted: {CHECK_MISSED}. My work says more."
    if status == AssignmentStatus.SUBMITTED and golden_passed is False:
        return f"Submitted; it waits for a review because {CHECK_MISSED}."
    if status == AssignmentStatus.SUBMITTED:
        return "Submitted; it waits for a review."
    return f"Submitted ({status})."
