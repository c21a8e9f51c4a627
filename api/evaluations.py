"""Evaluations (any logged-in account): submit a model's rankings on a release, read the board.

POST /api/releases/<id>/evaluations/ checks the rankings against the limits every way in
shares (`pipeline.evaluation_jobs.evaluation_limits`) while the request waits, then answers
202 with the queued job; GET …/evaluations/jobs/<job id>/ gives its status, progress and,
once done, the leaderboard row (the pattern of api/imports.py).
"""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.errors import ServiceError
from annotation.models import Evaluation, EvaluationJob, Release
from annotation.strict_input import StrictSerializer
from mitl.evaluation_inputs import DIRECTIONS, EvaluationError
from mitl.ranking_limits import RankingLimits, rankings_limited, size_refusal
from pipeline.evaluate import MODEL_NAME_MAX, leaderboard_of
from pipeline.evaluation_jobs import evaluation_job_visible, evaluation_limits
from pipeline.explain import may_read_explanation, shown_explanation
from pipeline.tasks import evaluation_job_submit

from .errors import ErrorSerializer
from .parsers import JSONParser
from .schema import beyond_schema

METRICS_HELP = (
    '{"i2t": {"recall@1": …, "r_precision": …, "map_at_r": …, "ndcg@10": …, "queries": …}, '
    '"t2i": {…}}; a metric over no query is null. A release with proxy qrels adds graded '
    'metrics per proxy, e.g. "ndcg@25:cider_d", "ncs@5:cider_d" (docs/relevance.md).'
)


EXPLANATION_HELP = (
    "Per direction (i2t, t2i): queries, failures (top-1 not a positive), failure_rate, "
    "explained, the query-agnostic and query-informed summaries of CA, NCS, CE, SD and "
    "sd_rate (means, how many failures define each, histograms, object hit/miss), "
    "confusions (missed concepts, truth → retrieved swaps) and the worst failures with "
    "their concept differences (docs/api.md)."
)


class ExplanationSerializer(serializers.Serializer):
    """A leaderboard row's stored explanation (`pipeline.explain.evaluation_explanation`)."""

    dataset = serializers.CharField()
    concept_sources = serializers.DictField(
        child=serializers.IntegerField(),
        help_text="How many images took their concepts from instances, labels or captions.",
    )
    explanation = serializers.DictField(child=serializers.JSONField(), help_text=EXPLANATION_HELP)
    images = serializers.DictField(
        child=serializers.JSONField(),
        help_text='The images the worst failures show: {"<image id>": {"src": URL or null, '
        '"caption", "concepts": {category: count}, "source"}}.',
    )


class EvaluationSerializer(serializers.ModelSerializer):
    metrics = serializers.JSONField(help_text=METRICS_HELP)

    class Meta:
        model = Evaluation
        fields = ["id", "release", "model_name", "metrics", "rankings_sha256", "created_at"]


class AgreementSerializer(serializers.Serializer):
    metrics = serializers.ListField(child=serializers.CharField())
    tau = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True)),
        help_text="Kendall τ-b between the model orderings of every two metrics.",
    )
    models = serializers.ListField(
        child=serializers.ListField(child=serializers.IntegerField()),
        help_text="How many models each τ is over.",
    )


class LeaderboardSerializer(serializers.Serializer):
    release = serializers.IntegerField()
    metrics = serializers.ListField(child=serializers.CharField(), help_text="Display order.")
    evaluations = EvaluationSerializer(many=True)
    agreement = serializers.DictField(child=AgreementSerializer(), help_text="Per direction.")


class EvaluationJobSerializer(serializers.ModelSerializer):
    url = serializers.SerializerMethodField()
    evaluation = EvaluationSerializer(
        allow_null=True,
        read_only=True,
        help_text="The leaderboard row, once the job is done (null until then).",
    )

    class Meta:
        model = EvaluationJob
        fields = [
            "id",
            "url",
            "release",
            "model_name",
            "status",
            "done",
            "total",
            "error",
            "evaluation",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields

    def get_url(self, job: EvaluationJob) -> str:
        return reverse("api:evaluation-job", args=[job.release_id, job.pk])


@extend_schema_field(OpenApiTypes.OBJECT)
class RankingsField(serializers.Field):
    """Rankings as the JSON parser gave them; `rankings_limited` checks them, in one pass."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class RankingsSubmissionSerializer(StrictSerializer):
    """A model's rankings; context `limits` (RankingLimits) caps their depth and queries."""

    model_name = serializers.CharField(max_length=MODEL_NAME_MAX)
    rankings = RankingsField(
        help_text='{"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>": '
        "[image ids, best first]}}, every query of the release ranked."
    )

    def validate_rankings(self, value: Any) -> dict[str, dict[int, list[int]]]:
        limits: RankingLimits = self.context["limits"]
        try:
            return rankings_limited(value, limits)
        except EvaluationError as exc:
            raise serializers.ValidationError(str(exc)) from None


class RankingsParser(JSONParser):
    """JSON rankings within the size limit every way in shares (EVALUATION_MAX_BODY_MB)."""

    def max_bytes(self) -> int | None:
        return evaluation_limits().max_bytes

    def too_large(self, size: int, limit: int) -> str:
        return size_refusal(size, limit)


@extend_schema(tags=["evaluations"])
class ReleaseEvaluationsView(APIView):
    """A release's leaderboard, and scoring a model on it."""

    parser_classes = [RankingsParser]

    @extend_schema(responses=LeaderboardSerializer)
    def get(self, request: Request, release_id: int) -> Response:
        """Every model's metrics on the release, and how alike the metrics order them."""
        release = get_object_or_404(Release, pk=release_id)
        board = leaderboard_of(release=release)
        body = {
            "release": release.pk,
            "metrics": board.metrics,
            "evaluations": board.evaluations,
            "agreement": {
                direction: {
                    "metrics": board.agreement[direction].metrics,
                    "tau": board.agreement[direction].tau,
                    "models": board.agreement[direction].models,
                }
                for direction in DIRECTIONS
            },
        }
        return Response(LeaderboardSerializer(body).data)

    @extend_schema(
        request=RankingsSubmissionSerializer,
        responses={
            202: OpenApiResponse(
                EvaluationJobSerializer,
                description="The rankings are within the limits and queued for scoring: "
                "follow `url` (also the Location header) until `status` is done or failed.",
            ),
        },
        extensions=beyond_schema("every query of the release is ranked, by the dataset's ids."),
    )
    def post(self, request: Request, release_id: int) -> Response:
        """Check a model's rankings against the limits and queue their scoring on the release."""
        release = get_object_or_404(Release.objects.select_related("dataset"), pk=release_id)
        serializer = RankingsSubmissionSerializer(
            data=request.data, context={"limits": evaluation_limits(release=release)}
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            job = evaluation_job_submit(
                release=release,
                model_name=data["model_name"],
                rankings=data["rankings"],
                submitted_by=request.user,
            )
        except ServiceError as exc:  # the rankings were checked above: the name is at fault
            raise serializers.ValidationError({"model_name": [str(exc)]}) from None
        body = EvaluationJobSerializer(job).data
        return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


@extend_schema(tags=["evaluations"])
class EvaluationJobView(APIView):
    """The scoring of rankings sent to a leaderboard."""

    @extend_schema(
        responses={
            200: EvaluationJobSerializer,
            404: OpenApiResponse(
                ErrorSerializer,
                description="No such job on this release, or another account sent it.",
            ),
        }
    )
    def get(self, request: Request, release_id: int, job_id: int) -> Response:
        """A job's status (queued, running, done, failed), its progress, error and result."""
        job = (
            EvaluationJob.objects.select_related("evaluation")
            .defer("rankings_json")
            .filter(pk=job_id, release_id=release_id)
            .first()
        )
        if not evaluation_job_visible(job, request.user):
            raise NotFound(f"release {release_id} has no evaluation job {job_id} of yours")
        return Response(EvaluationJobSerializer(job).data)


@extend_schema(tags=["evaluations"])
class EvaluationExplanationView(APIView):
    """Why a model's top-1 results miss on a release, concept by concept."""

    @extend_schema(
        responses={
            200: ExplanationSerializer,
            403: OpenApiResponse(
                ErrorSerializer,
                description="Neither staff nor the account that submitted the model: an "
                "explanation shows dataset images and captions.",
            ),
            404: OpenApiResponse(
                ErrorSerializer,
                description="No such evaluation on this release, or it has no explanation "
                "(its dataset had no image concepts when it was evaluated).",
            ),
        }
    )
    def get(self, request: Request, release_id: int, evaluation_id: int) -> Response:
        """A leaderboard row's concept failure metrics (Lymperaiou et al., sections 4-5)."""
        evaluation = Evaluation.objects.filter(pk=evaluation_id, release_id=release_id).first()
        if not may_read_explanation(evaluation, request.user):
            raise PermissionDenied(
                "only staff and the account that submitted the model see its explanation"
            )
        if evaluation is None:
            raise NotFound(f"release {release_id} has no evaluation {evaluation_id}")
        if evaluation.explanation is None:
            raise NotFound(
                f"evaluation {evaluation.pk} ({evaluation.model_name}) has no explanation: its "
                "dataset had no image concepts when it was evaluated; import instances "
                "(import_instances) or labels, or install WordNet, then run `python manage.py "
                "explain --release <release dir> --rankings FILE`"
            )
        return Response(shown_explanation(evaluation))
