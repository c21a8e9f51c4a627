"""Annotator endpoints: take the next HIT, read it, submit it. Workers see only their own."""

from __future__ import annotations

from typing import Any

from django.urls import reverse
from rest_framework import serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.assignments import (
    AnswerInput,
    assignment_submit,
    hit_assign_next,
    worker_for_user,
)
from annotation.models import Assignment
from annotation.selectors import assignment_page
from annotation.services import ServiceError
from mitl.judgements import OTHER_TEXT_MAX, SHORTCOMINGS, WRONG_CONCEPTS, Level


class AnswerSerializer(serializers.Serializer):
    item = serializers.IntegerField(min_value=1)
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


class SubmissionSerializer(serializers.Serializer):
    answers = AnswerSerializer(many=True, allow_empty=False)


def _own_assignment(request: Request, assignment_id: int) -> Assignment | None:
    """Return the assignment when it is the requesting worker's; None hides others' work."""
    worker = worker_for_user(user=request.user)
    return (
        Assignment.objects.select_related("hit__batch", "worker")
        .filter(pk=assignment_id, worker=worker)
        .first()
    )


def _not_found(assignment_id: int) -> Response:
    return Response({"detail": f"assignment {assignment_id} not found"}, status=404)


@api_view(["POST"])
def assignment_next(request: Request) -> Response:
    """Give the caller its open assignment, or the next free HIT (204 when there is none)."""
    worker = worker_for_user(user=request.user)
    try:
        assignment = hit_assign_next(worker=worker)
    except ServiceError as exc:
        return Response({"detail": str(exc)}, status=403)
    if assignment is None:
        return Response(status=status.HTTP_204_NO_CONTENT)
    return Response(_payload(assignment), status=200)


@api_view(["GET"])
def assignment_detail(request: Request, assignment_id: int) -> Response:
    """Return one of the caller's assignments with its pairs, in page order."""
    assignment = _own_assignment(request, assignment_id)
    if assignment is None:
        return _not_found(assignment_id)
    return Response(_payload(assignment))


@api_view(["POST"])
def assignment_submit_view(request: Request, assignment_id: int) -> Response:
    """Store the caller's answers for a whole HIT; a repeated submit returns the stored result."""
    assignment = _own_assignment(request, assignment_id)
    if assignment is None:
        return _not_found(assignment_id)
    serializer = SubmissionSerializer(data=request.data)
    if not serializer.is_valid():
        return Response({"detail": "invalid submission", "errors": serializer.errors}, status=400)
    answers = [
        AnswerInput(
            item_id=answer["item"],
            level=answer["level"],
            shortcomings=answer["shortcomings"],
            wrong_concepts=answer["wrong_concepts"],
            other_text=answer["other_text"],
            elapsed_ms=answer["elapsed_ms"],
        )
        for answer in serializer.validated_data["answers"]
    ]
    config = assignment.hit.batch.config
    try:
        result = assignment_submit(
            assignment=assignment,
            answers=answers,
            followups_required=config.get("followups", True),
            golden_policy=config.get("golden_policy", "approve_or_flag"),
            worker=assignment.worker,
        )
    except ServiceError as exc:
        return Response({"detail": str(exc)}, status=400)
    body = {
        "assignment": result.assignment.pk,
        "status": result.assignment.status,
        "created": result.created,
        "judgements": len(result.judgements),
        "golden_passed": result.assignment.golden_passed,
        "next": reverse("frontend:work"),
    }
    return Response(body, status=201 if result.created else 200)


def _payload(assignment: Assignment) -> dict[str, Any]:
    page = assignment_page(assignment=assignment)
    return {
        "id": assignment.pk,
        "hit": assignment.hit_id,
        "status": assignment.status,
        "deadline": assignment.deadline,
        "followups": page["followups"],
        "items": page["items"],
        "submit_url": reverse("api:assignment-submit", args=[assignment.pk]),
    }
