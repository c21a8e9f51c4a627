"""Annotator endpoints: take the next HIT, read it, submit it. Workers see only their own.

Any logged-in account works here as a worker (staff too); another worker's assignment is
a 404, so nobody learns that it exists.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view, parser_classes
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.answers import (
    ANSWERED_OTHERWISE,
    SubmissionSerializer,
    submission_answers,
    submission_summary,
)
from annotation.errors import ServiceError
from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, AssignmentStatus, Worker
from annotation.rounds import round_waits_for_worker
from annotation.selectors import assignment_page
from annotation.strict_input import StrictQuerySerializer
from annotation.submissions import assignment_submit_own
from pipeline.tasks import annotation_close_check_queue, complete_rounds_close_queue

from .fields import FLAG_VALUES, QueryFlagField
from .parsers import JSONParser
from .schema import beyond_schema

NO_HIT_REASON_HEADER = "X-No-HIT-Reason"


class PageItemSerializer(serializers.Serializer):
    id = serializers.IntegerField(
        help_text="The pair's number on this page, 1, 2, … (never a database id): answer it "
        "by this number (`item`)."
    )
    position = serializers.IntegerField(help_text="Order on the page, from 0.")
    image_url = serializers.CharField(allow_null=True, help_text="Null for text-only datasets.")
    caption = serializers.CharField()


class AssignmentPageSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    hit = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AssignmentStatus.choices)
    deadline = serializers.DateTimeField(allow_null=True)
    followups = serializers.BooleanField(help_text="Whether the middle answers need a reason.")
    items = PageItemSerializer(many=True, help_text="Every pair, in page order, no roles.")
    submit_url = serializers.CharField()


class SubmitResultSerializer(serializers.Serializer):
    assignment = serializers.IntegerField()
    status = serializers.ChoiceField(choices=AssignmentStatus.choices)
    created = serializers.BooleanField(help_text="False when this repeats a stored submission.")
    judgements = serializers.IntegerField()
    golden_passed = serializers.BooleanField(allow_null=True)
    message = serializers.CharField(
        help_text="What became of the HIT, in a sentence for the worker (never which pair "
        "was a check)."
    )
    next = serializers.CharField(help_text="The page to go to next.")
    next_assignment = AssignmentPageSerializer(
        required=False,
        allow_null=True,
        help_text="With `take_next=true` only: the caller's next HIT, null when none is free.",
    )
    next_reason = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="With `take_next=true` only: why no HIT is free when `next_assignment` is "
        "null (as the next-HIT answer's X-No-HIT-Reason header), else null.",
    )


class SubmitConflictSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="Says that the stored answers stand.")
    stored = SubmitResultSerializer(
        required=False,
        help_text="What the first submission stored; absent when the HIT no longer takes answers.",
    )


class SubmitQuerySerializer(StrictQuerySerializer):
    """The submit endpoint's query string (any other parameter is a 400)."""

    take_next = QueryFlagField(
        default=False,
        help_text="Also take the next HIT, as `POST /api/assignments/next/` would, and "
        "return it as `next_assignment` (null when none is free): one request per HIT.",
    )


class OwnAssignmentSerializer(serializers.ModelSerializer):
    """One of the caller's assignments; nothing that tells golden pairs apart."""

    class Meta:
        model = Assignment
        fields = [
            "id",
            "hit",
            "status",
            "accepted_at",
            "deadline",
            "submitted_at",
            "reviewed_at",
            "feedback",
        ]


class OwnAssignmentFilter(django_filters.FilterSet):
    class Meta:
        model = Assignment
        fields = ["status"]


@extend_schema(tags=["work"])
class AssignmentListView(generics.ListAPIView):
    """The caller's own assignments, newest first; filter by `status`."""

    serializer_class = OwnAssignmentSerializer
    filterset_class = OwnAssignmentFilter

    def get_queryset(self) -> QuerySet[Assignment]:
        if getattr(self, "swagger_fake_view", False):  # the schema generator has no user
            return Assignment.objects.none()
        worker = worker_for_user(user=self.request.user)
        return Assignment.objects.filter(worker=worker).order_by("-accepted_at", "-pk")


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


@extend_schema(
    tags=["work"],
    request=None,
    responses={
        200: AssignmentPageSerializer,
        204: OpenApiResponse(
            description="No HIT is free right now; the X-No-HIT-Reason header says why, "
            "briefly (a 204 has no body)."
        ),
    },
)
@api_view(["POST"])
def assignment_next(request: Request) -> Response:
    """Give the caller its open assignment, or the next free HIT (204 when there is none)."""
    worker = worker_for_user(user=request.user)
    try:
        assignment = _next_or_none(worker)
    except ServiceError as exc:
        return Response({"detail": str(exc)}, status=403)
    if assignment is None:
        response = Response(status=status.HTTP_204_NO_CONTENT)
        response[NO_HIT_REASON_HEADER] = no_hit_reason(worker)
        return response
    return Response(_payload(assignment), status=200)


def _next_or_none(worker: Worker) -> Assignment | None:
    """The worker's next HIT; when none is free, close the rounds that are complete first
    (their next round may then have HITs: with eager Celery it is built at once)."""
    assignment = hit_assign_next(worker=worker)
    if assignment is None and complete_rounds_close_queue():
        assignment = hit_assign_next(worker=worker)
    return assignment


def no_hit_reason(worker: Worker) -> str:
    """Say briefly, in ASCII (it goes in a header), why no batch has a HIT for the worker."""
    waits = round_waits_for_worker(worker=worker)
    if not waits:
        return "no HIT is free right now"
    return "; ".join(f"batch {wait.batch_id}: {wait.why}" for wait in waits)


@extend_schema(tags=["work"], responses=AssignmentPageSerializer)
@api_view(["GET"])
def assignment_detail(request: Request, assignment_id: int) -> Response:
    """Return one of the caller's assignments with its pairs, in page order."""
    assignment = _own_assignment(request, assignment_id)
    if assignment is None:
        return _not_found(assignment_id)
    return Response(_payload(assignment))


@extend_schema(
    tags=["work"],
    request={"application/json": SubmissionSerializer},  # answers are a list of objects
    parameters=[SubmitQuerySerializer],
    responses={
        201: SubmitResultSerializer,
        200: OpenApiResponse(
            SubmitResultSerializer,
            description="Submitted before with the same answers (a retry): what was stored.",
        ),
        409: OpenApiResponse(
            SubmitConflictSerializer,
            description="Submitted before with other answers: those stand (`stored`); or the "
            "HIT no longer takes answers (its time limit passed, its batch closed), without "
            "`stored`.",
        ),
    },
    extensions=beyond_schema(
        "every pair of the HIT answered once, by its item id, with the reasons the batch asks "
        "for (`followups`)."
    ),
)
@api_view(["POST"])
@parser_classes([JSONParser])  # a form cannot carry the list of answers: 415, as the schema says
def assignment_submit_view(request: Request, assignment_id: int) -> Response:
    """Store the caller's answers for a whole HIT. A repeat with the same answers returns the
    stored result (200); one with other answers is a 409 carrying it (`stored`)."""
    take_next = _take_next(request)
    answers = submission_answers(request.data)  # a 400 naming the field (api/errors.py)
    worker = worker_for_user(user=request.user)
    result = assignment_submit_own(  # a refusal is a 400, or 409 for the HIT's state
        assignment_id=assignment_id, worker=worker, answers=answers
    )
    if result is None:
        return _not_found(assignment_id)
    # Approved work may have been the round's last: it then closes. Work that is not approved
    # leaves its own HIT short of approved work, so the round cannot be complete yet.
    if result.created and result.assignment.status == AssignmentStatus.APPROVED:
        annotation_close_check_queue(batch_id=result.assignment.hit.batch_id)
    body = {**submission_summary(result), "next": reverse("frontend:work")}
    if result.differs:
        return Response({"detail": ANSWERED_OTHERWISE, "stored": body}, status=409)
    if take_next:
        try:
            following = _next_or_none(worker)
        except ServiceError:  # blocked meanwhile: the work is stored, no more is given
            following = None
        body["next_assignment"] = None if following is None else _payload(following)
        body["next_reason"] = None if following is not None else no_hit_reason(worker)
    return Response(body, status=201 if result.created else 200)


def _take_next(request: Request) -> bool:
    """The submit's `take_next` flag; anything but the plain forms is the serializer's to
    read (and to refuse with its message)."""
    params = request.query_params
    if not params:
        return False
    if params.keys() == {"take_next"} and len(values := params.getlist("take_next")) == 1:
        flag = FLAG_VALUES.get(values[0].lower())
        if flag is not None:
            return flag
    query = SubmitQuerySerializer(data=params)
    query.is_valid(raise_exception=True)
    return query.validated_data["take_next"]


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
