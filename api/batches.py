"""Batches (staff only): create from a config, start, cancel, progress and cost estimates."""

from __future__ import annotations

import re
from decimal import Decimal
from typing import Any

import django_filters
from django.db.models import Count
from drf_spectacular.utils import OpenApiParameter, extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.errors import ServiceError
from annotation.models import Batch, BatchState, Dataset
from annotation.selectors import batch_progress
from mitl.config import BatchConfig, ConfigError, batch_config, parse_batch_config
from mitl.costs import CENT, estimate_before_retrieval, hits_for, mturk_cost
from mitl.services.pipeline import batch_cancel, batch_create, batch_start

from .permissions import IsStaff

# Config messages name their key in backticks, or as "unknown key 'x'" (mitl/config.py).
_CONFIG_KEY = re.compile(r"unknown key '(\w+)'|`(\w+)`|unknown annotator")
# States whose HITs are all built, and the state in which the candidates are all pooled.
_BUILT = frozenset({BatchState.ANNOTATING, BatchState.AGGREGATING, BatchState.RELEASED})
_POOLED = frozenset({BatchState.BUILDING})


def config_errors(message: str) -> dict[str, list[str]]:
    """Key a batch-config message by the config key it names ("config" itself otherwise)."""
    match = _CONFIG_KEY.search(message)
    if match is None:
        return {"non_field_errors": [message]}
    key = match.group(1) or match.group(2) or "annotators"
    return {key: [message]}


def checked_config(raw: Any) -> BatchConfig:
    """Parse a raw config; a bad value becomes a validation error keyed by its config key."""
    try:
        return parse_batch_config(raw)
    except ConfigError as exc:
        raise serializers.ValidationError(config_errors(str(exc))) from None


class StageProgressSerializer(serializers.Serializer):
    stage = serializers.ChoiceField(choices=BatchState.choices)
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    finished = serializers.BooleanField()


class BatchSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    annotators = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    progress = serializers.SerializerMethodField()

    class Meta:
        model = Batch
        fields = [
            "id",
            "name",
            "dataset",
            "state",
            "error",
            "config",
            "annotators",
            "progress",
            "created_at",
            "updated_at",
        ]

    @extend_schema_field(StageProgressSerializer(many=True))
    def get_progress(self, batch: Batch) -> list[dict[str, Any]]:
        return batch_progress(batch=batch)


class BatchCountsSerializer(serializers.Serializer):
    queries = serializers.IntegerField()
    candidates = serializers.IntegerField()
    hits = serializers.IntegerField()
    assignments = serializers.DictField(
        child=serializers.IntegerField(), help_text="Assignments per status."
    )


class BatchDetailSerializer(BatchSerializer):
    counts = serializers.SerializerMethodField()

    class Meta(BatchSerializer.Meta):
        fields = [*BatchSerializer.Meta.fields, "counts", "reports", "mturk"]

    @extend_schema_field(BatchCountsSerializer)
    def get_counts(self, batch: Batch) -> dict[str, Any]:
        by_status = (
            batch.hits.values("assignments__status")
            .exclude(assignments__status=None)
            .annotate(n=Count("assignments"))
            .order_by()
        )
        return {
            "queries": batch.queries.count(),
            "candidates": batch.candidates.count(),
            "hits": batch.hits.count(),
            "assignments": {row["assignments__status"]: row["n"] for row in by_status},
        }


class BatchCreateSerializer(serializers.Serializer):
    dataset = serializers.SlugRelatedField(
        slug_field="name", queryset=Dataset.objects.all(), help_text="Dataset name."
    )
    name = serializers.CharField(max_length=200)
    config = serializers.JSONField(
        help_text="Batch configuration (mitl.config.BatchConfig); missing keys take defaults."
    )

    def validate_config(self, value: Any) -> dict[str, Any]:
        return checked_config(value).to_json()


class CostSerializer(serializers.Serializer):
    basis = serializers.ChoiceField(
        choices=["config", "candidates", "hits"],
        help_text="config: before pooling, an upper bound from queries × k × annotators; "
        "candidates: from the pooled candidates; hits: from the HITs built.",
    )
    upper_bound = serializers.BooleanField(
        help_text="True when hits, assignments, judgements and money are maxima, not counts."
    )
    candidates = serializers.IntegerField(allow_null=True)
    candidates_at_most = serializers.IntegerField(allow_null=True)
    hits = serializers.IntegerField(allow_null=True, help_text="Null while only bounded.")
    hits_at_most = serializers.IntegerField(allow_null=True)
    assignments_per_hit = serializers.IntegerField()
    items_per_hit = serializers.IntegerField(help_text="Pairs per HIT, goldens included.")
    assignments = serializers.IntegerField()
    judgements = serializers.IntegerField()
    reward_per_assignment = serializers.DecimalField(max_digits=24, decimal_places=2)
    commission_rate = serializers.DecimalField(max_digits=4, decimal_places=2)
    rewards = serializers.DecimalField(max_digits=24, decimal_places=2)
    commission = serializers.DecimalField(max_digits=24, decimal_places=2)
    total = serializers.DecimalField(max_digits=24, decimal_places=2)


class RewardSerializer(serializers.Serializer):
    reward = serializers.DecimalField(
        max_digits=8,
        decimal_places=2,
        min_value=CENT,
        help_text="Reward per assignment in US dollars, e.g. 0.50.",
    )


class EstimateSerializer(RewardSerializer):
    config = serializers.JSONField(help_text="A batch configuration not yet created.")

    def validate_config(self, value: Any) -> BatchConfig:
        return checked_config(value)


def cost_estimate(
    *, config: BatchConfig, reward: Decimal, candidates: int | None = None, hits: int | None = None
) -> dict[str, Any]:
    """Estimate the crowd work and MTurk cost from the best figure known so far.

    Built HITs count exactly; pooled candidates give the HITs exactly; before that only an
    upper bound is known (de-duplication removes pairs several annotators propose).
    """
    bound = None
    if hits is None and candidates is None:
        basis = "config"
        bound, cost = estimate_before_retrieval(config=config, reward_per_assignment=reward)
    else:
        if hits is not None:
            basis = "hits"
        else:
            basis, hits = "candidates", hits_for(candidates, config.hit_size)
        cost = mturk_cost(
            hits=hits,
            assignments_per_hit=config.assignments_per_hit,
            items_per_hit=config.items_per_hit,
            reward_per_assignment=reward,
        )
    n_hits = cost.hits
    return {
        "basis": basis,
        "upper_bound": bound is not None,
        "candidates": candidates,
        "candidates_at_most": bound,
        "hits": hits,
        "hits_at_most": n_hits if bound is not None else None,
        "assignments_per_hit": cost.assignments_per_hit,
        "items_per_hit": cost.items_per_hit,
        "assignments": cost.assignments,
        "judgements": cost.judgements,
        "reward_per_assignment": cost.reward_per_assignment,
        "commission_rate": cost.commission_rate,
        "rewards": cost.rewards,
        "commission": cost.commission,
        "total": cost.total,
    }


def batch_cost(*, batch: Batch, reward: Decimal) -> dict[str, Any]:
    """Estimate a batch's cost from its HITs once built, its candidates once pooled."""
    config = batch_config(batch)
    hits = candidates = None
    if batch.state in _BUILT or (batch.state == BatchState.CANCELLED and batch.hits.exists()):
        hits = batch.hits.count()
    elif batch.state in _POOLED:
        candidates = batch.candidates.count()
    return cost_estimate(config=config, reward=reward, candidates=candidates, hits=hits)


class BatchFilter(django_filters.FilterSet):
    dataset = django_filters.CharFilter(field_name="dataset__name", help_text="Dataset name.")
    state = django_filters.ChoiceFilter(choices=BatchState.choices)

    class Meta:
        model = Batch
        fields = ["dataset", "state"]


@extend_schema(tags=["batches"])
class BatchViewSet(mixins.ListModelMixin, mixins.RetrieveModelMixin, viewsets.GenericViewSet):
    """Curation rounds over a dataset: config → queries → candidates → HITs → release."""

    permission_classes = [IsStaff]
    filterset_class = BatchFilter
    queryset = (
        Batch.objects.select_related("dataset")
        .prefetch_related("annotators", "progress")
        .order_by("-created_at", "-pk")
    )

    def get_serializer_class(self) -> type[serializers.Serializer]:
        if self.action == "list":
            return BatchSerializer
        if self.action == "create":
            return BatchCreateSerializer
        if self.action == "estimate":
            return EstimateSerializer
        return BatchDetailSerializer

    def _detail(self, batch: Batch, code: int = status.HTTP_200_OK) -> Response:
        batch = self.get_queryset().get(pk=batch.pk)  # fresh state, progress and annotators
        return Response(BatchDetailSerializer(batch).data, status=code)

    @extend_schema(request=BatchCreateSerializer, responses={201: BatchDetailSerializer})
    def create(self, request: Request) -> Response:
        """Create a draft batch; a bad config is a 400 whose `errors.config` names the key."""
        serializer = BatchCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        try:
            batch = batch_create(
                dataset=data["dataset"], name=data["name"], raw_config=data["config"]
            )
        except ServiceError as exc:
            # Unknown annotators, or more queries than the dataset has: still the config's fault.
            raise serializers.ValidationError({"config": config_errors(str(exc))}) from None
        return self._detail(batch, status.HTTP_201_CREATED)

    @extend_schema(request=None, responses=BatchDetailSerializer)
    @action(detail=True, methods=["post"])
    def start(self, request: Request, pk: str) -> Response:
        """Start a draft batch: the automatic stages run (400 when it has already started).

        Without a broker (the embedded default) the stages run before this call answers.
        """
        return self._detail(batch_start(batch=self.get_object()))

    @extend_schema(request=None, responses=BatchDetailSerializer)
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a batch that is not released: no stage runs any more, open HITs end."""
        return self._detail(batch_cancel(batch=self.get_object()))

    @extend_schema(responses=StageProgressSerializer(many=True))
    @action(detail=True, pagination_class=None, filterset_class=None)
    def progress(self, request: Request, pk: str) -> Response:
        """Done/total of every pipeline stage, in pipeline order."""
        return Response(batch_progress(batch=self.get_object()))

    @extend_schema(
        parameters=[
            OpenApiParameter(
                "reward",
                Decimal,
                required=True,
                description="Reward per assignment in US dollars, e.g. 0.50.",
            )
        ],
        responses=CostSerializer,
        filters=False,
    )
    @action(detail=True, filterset_class=None)
    def cost(self, request: Request, pk: str) -> Response:
        """What the batch costs on MTurk: from its HITs once built, an upper bound before."""
        batch = self.get_object()
        reward = RewardSerializer(data=request.query_params)
        reward.is_valid(raise_exception=True)
        estimate = batch_cost(batch=batch, reward=reward.validated_data["reward"])
        return Response(CostSerializer(estimate).data)

    @extend_schema(request=EstimateSerializer, responses={200: CostSerializer})
    @action(detail=False, methods=["post"], filterset_class=None)
    def estimate(self, request: Request) -> Response:
        """Estimate a config not yet created: always an upper bound (`hits_at_most`)."""
        serializer = EstimateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        estimate = cost_estimate(config=data["config"], reward=data["reward"])
        return Response(CostSerializer(estimate).data)
