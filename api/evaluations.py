"""Evaluations (any logged-in account): submit a model's rankings on a release, read the board."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.exceptions import NotFound, PermissionDenied
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.errors import ServiceError
from annotation.models import Evaluation, Release
from mitl.evaluation_inputs import DIRECTIONS, EvaluationError, rankings_parse
from pipeline.evaluate import MODEL_NAME_MAX, evaluation_submit, leaderboard_of
from pipeline.explain import may_read_explanation, shown_explanation

from .errors import ErrorSerializer
from .parsers import JSONParser, size_text

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


@extend_schema_field(OpenApiTypes.OBJECT)
class RankingsField(serializers.Field):
    """Rankings as the JSON parser gave them; `rankings_parse` checks them, in one pass."""

    def to_internal_value(self, data: Any) -> Any:
        return data

    def to_representation(self, value: Any) -> Any:
        return value


class RankingsSubmissionSerializer(serializers.Serializer):
    """A model's rankings; context `max_queries` caps the ranked queries per direction."""

    model_name = serializers.CharField(max_length=MODEL_NAME_MAX)
    rankings = RankingsField(
        help_text='{"i2t": {"<image id>": [caption ids, best first]}, "t2i": {"<caption id>": '
        "[image ids, best first]}}, every query of the release ranked."
    )

    def validate_rankings(self, value: Any) -> dict[str, dict[int, list[int]]]:
        try:
            return rankings_parse(
                value,
                max_length=settings.EVALUATION_MAX_RANKING_LENGTH,
                max_queries=self.context.get("max_queries"),
            )
        except EvaluationError as exc:
            raise serializers.ValidationError(str(exc)) from None


class RankingsParser(JSONParser):
    """JSON rankings up to EVALUATION_MAX_BODY_BYTES: they are scored while the client waits."""

    max_bytes_setting = "EVALUATION_MAX_BODY_BYTES"

    def too_large(self, size: int, limit: int) -> str:
        return (
            f"the rankings have {size_text(size)}; the API takes at most {size_text(limit)} "
            "(EVALUATION_MAX_BODY_MB). Rank each query of the release only as deep as the "
            "metrics need, or score large rankings offline with `python manage.py evaluate "
            "--release <release dir> --rankings <file>`"
        )


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
            201: EvaluationSerializer,
            200: OpenApiResponse(
                EvaluationSerializer,
                description="The model already had a row: the same rankings return it "
                "unchanged, other rankings replace its metrics.",
            ),
        },
    )
    def post(self, request: Request, release_id: int) -> Response:
        """Score a model's rankings on the release and store its leaderboard row."""
        release = get_object_or_404(Release.objects.select_related("dataset"), pk=release_id)
        # A ranked query is an image or caption of the dataset: more keys is a wrong file.
        dataset = release.dataset
        max_queries = {"i2t": dataset.images.count(), "t2i": dataset.captions.count()}
        serializer = RankingsSubmissionSerializer(
            data=request.data, context={"max_queries": max_queries}
        )
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        existed = Evaluation.objects.filter(
            release=release, model_name=data["model_name"].strip()
        ).exists()
        try:
            evaluation = evaluation_submit(
                release=release,
                model_name=data["model_name"],
                rankings=data["rankings"],
                submitted_by=request.user,
            )
        except ServiceError as exc:  # the name was checked above: the rankings do not fit
            raise serializers.ValidationError({"rankings": [str(exc)]}) from None
        return Response(
            EvaluationSerializer(evaluation).data,
            status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED,
        )


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
