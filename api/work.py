"""Annotator endpoints: take the next HIT, read it, submit it. Workers see only their own.

Any logged-in account works here as a worker (staff too); another worker's assignment is
a 404, so nobody learns that it exists.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import QuerySet
from django.urls import reverse
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import generics, serializers, status
from rest_framework.decorators import api_view
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.answers import SubmissionSerializer, answer_inputs, submission_summary
from annotation.errors import ServiceError
from annotation.handout import hit_assign_next, worker_for_user
from annotation.models import Assignment, AssignmentStatus, Worker
from annotation.rounds import round_waits_for_worker
from annotation.selectors import assignment_page
from annotation.submissions import assignment_submit_own
from pipeline.tasks import annotation_close_check_queue, complete_rounds_close_queue

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
    request=SubmissionSerializer,
    parameters=[
        OpenApiParameter(
            "take_next",
            bool,
            description="Also take the next HIT, as `POST /api/assignments/next/` would, and "
            "return it as `next_assignment` (null when none is free): one request per HIT.",
        )
    ],
    responses={
        201: SubmitResultSerializer,
        200: OpenApiResponse(SubmitResultSerializer, description="Already submitted: stored."),
    },
)
@api_view(["POST"])
def assignment_submit_view(request: Request, assignment_id: int) -> Response:
    """Store the caller's answers for a whole HIT; a repeated submit returns the stored result."""
    take_next = _query_flag(request, "take_next")
    serializer = SubmissionSerializer(data=request.data)
    serializer.is_valid(raise_exception=True)  # a 400 naming the field (api/errors.py)
    worker = worker_for_user(user=request.user)
    try:
        result = assignment_submit_own(
            assignment_id=assignment_id,
            worker=worker,
            answers=answer_inputs(serializer.validated_data),
        )
    except ServiceError as exc:
        return Response({"detail": str(exc)}, status=400)
    if result is None:
        return _not_found(assignment_id)
    if result.created:  # this may have been the round's last work: it then closes
        annotation_close_check_queue(batch_id=result.assignment.hit.batch_id)
    body = {**submission_summary(result), "next": reverse("frontend:work")}
    if take_next:
        try:
            following = _next_or_none(worker)
        except ServiceError:  # blocked meanwhile: the work is stored, no more is given
            following = None
        body["next_assignment"] = None if following is None else _payload(following)
        body["next_reason"] = None if following is not None else no_hit_reason(worker)
    return Response(body, status=201 if result.created else 200)


def _query_flag(request: Request, name: str) -> bool:
    """Read a yes/no query parameter; anything else is a 400 that names it."""
    value = request.query_params.get(name, "false").lower()
    if value not in ("true", "1", "false", "0"):
        raise serializers.ValidationError({name: f"must be true or false (got {value!r})"})
    return value in ("true", "1")


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
