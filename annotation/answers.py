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
