"""Reviews (staff only): submitted work waiting for a person, its answers, approve or reject."""

from __future__ import annotations

from typing import Any

from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import Assignment
from annotation.review import assignment_review
from annotation.review_selectors import assignment_review_rows, review_queue
from annotation.strict_input import StrictSerializer
from pipeline.tasks import annotation_close_check_queue

from .permissions import IsStaff
from .schema import conflict

# The queue as the review page reads it (flagged first, oldest first); pages slice it.
REVIEW_QUEUE_MAX = 1000


class ReviewSerializer(serializers.ModelSerializer):
    worker = serializers.StringRelatedField(help_text="source:external id, e.g. platform:ann")
    batch = serializers.IntegerField(source="hit.batch_id")
    batch_name = serializers.CharField(source="hit.batch.name")
    awaits_mturk = serializers.BooleanField(
        read_only=True,
        help_text="MTurk work that MTurk has not confirmed yet: it cannot be approved until "
        "the MTurk sync finds it listed (its ids may be made up).",
    )

    class Meta:
        model = Assignment
        fields = [
            "id",
            "hit",
            "batch",
            "batch_name",
            "worker",
            "status",
            "flagged",
            "golden_passed",
            "accepted_at",
            "submitted_at",
            "reviewed_at",
            "feedback",
            "awaits_mturk",
        ]


class ReviewRowSerializer(serializers.Serializer):
    position = serializers.IntegerField(help_text="1-based position on the HIT page.")
    item_id = serializers.IntegerField()
    role = serializers.CharField(help_text="task, golden_tp or golden_tn.")
    image = serializers.IntegerField(source="image.ext_id", help_text="Image ext_id.")
    image_url = serializers.SerializerMethodField()
    caption = serializers.CharField()
    answer = serializers.CharField()
    expected = serializers.CharField(allow_null=True, help_text="Golden pairs only.")
    golden_ok = serializers.BooleanField(allow_null=True, help_text="Golden pairs only.")
    shortcomings = serializers.ListField(child=serializers.CharField())
    wrong_concepts = serializers.ListField(child=serializers.CharField())
    other_text = serializers.CharField(allow_blank=True)
    elapsed_s = serializers.FloatField()

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_image_url(self, row: dict[str, Any]) -> str | None:
        image = row["image"]
        return image.file.url if image.file else None


class ReviewDetailSerializer(ReviewSerializer):
    rows = serializers.SerializerMethodField()

    class Meta(ReviewSerializer.Meta):
        fields = [*ReviewSerializer.Meta.fields, "rows"]

    @extend_schema_field(ReviewRowSerializer(many=True))
    def get_rows(self, assignment: Assignment) -> list[dict[str, Any]]:
        return ReviewRowSerializer(assignment_review_rows(assignment=assignment), many=True).data


class ApprovalSerializer(StrictSerializer):
    feedback = serializers.CharField(
        required=False, allow_blank=True, default="", help_text="What the worker reads."
    )


class RejectionSerializer(StrictSerializer):
    feedback = serializers.CharField(help_text="Why the work is rejected: the worker reads it.")


NOT_WAITING = conflict(
    "The work is not waiting for review (decided already), or, to approve, MTurk has not "
    "confirmed it yet."
)


@extend_schema(tags=["reviews"])
class ReviewViewSet(viewsets.ReadOnlyModelViewSet):
    """Submitted work beside the golden truth; approving or rejecting it (staff)."""

    permission_classes = [IsStaff]
    filterset_class = None
    queryset = Assignment.objects.select_related("worker", "hit__batch").order_by("pk")

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return ReviewDetailSerializer if self.action == "retrieve" else ReviewSerializer

    def list(self, request: Request) -> Response:
        """Submissions waiting for a person: flagged first (failed golden check), oldest first.

        MTurk work that MTurk has not confirmed yet is not listed: it cannot be approved.
        """
        page = self.paginate_queryset(review_queue(limit=REVIEW_QUEUE_MAX))  # checks the query
        return self.get_paginated_response(ReviewSerializer(page, many=True).data)

    def retrieve(self, request: Request, pk: str) -> Response:
        """One assignment's answers, each beside the golden truth where there is one."""
        return Response(ReviewDetailSerializer(self.get_object()).data)

    @extend_schema(request=ApprovalSerializer, responses={200: ReviewSerializer, 409: NOT_WAITING})
    @action(detail=True, methods=["post"])
    def approve(self, request: Request, pk: str) -> Response:
        """Approve submitted work (409 when it is not waiting for review, or is MTurk work
        that MTurk has not confirmed yet: run the MTurk sync first; 403 for your own work)."""
        return self._decide(request, ApprovalSerializer(data=request.data), approve=True)

    @extend_schema(request=RejectionSerializer, responses={200: ReviewSerializer, 409: NOT_WAITING})
    @action(detail=True, methods=["post"])
    def reject(self, request: Request, pk: str) -> Response:
        """Reject submitted work; `feedback` says why. Its slot on the HIT opens again.

        409 when it is not waiting for review, 403 for your own work."""
        return self._decide(request, RejectionSerializer(data=request.data), approve=False)

    def _decide(
        self, request: Request, decision: serializers.Serializer, *, approve: bool
    ) -> Response:
        assignment = self.get_object()
        decision.is_valid(raise_exception=True)
        reviewed = assignment_review(
            assignment=assignment,
            approve=approve,
            feedback=decision.validated_data["feedback"],
            reviewer=request.user,
        )
        if approve:  # this may have been the round's last work: it then closes
            annotation_close_check_queue(batch_id=assignment.hit.batch_id)
        return Response(ReviewSerializer(self.get_queryset().get(pk=reviewed.pk)).data)
