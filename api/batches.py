"""Batches (staff only): create from a config, start, cancel, progress and cost estimates."""

from __future__ import annotations

from typing import Any

import django_filters
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.errors import ServiceError
from annotation.human_work import batch_human_work
from annotation.models import Batch, BatchState, Dataset
from annotation.selectors import (
    batch_cost_estimate,
    batch_counts,
    batch_curation,
    batch_progress,
)
from annotation.strict_input import StrictQuerySerializer, StrictSerializer
from mitl.config import BatchConfig, ConfigError, parse_batch_config
from mitl.costs import cost_estimate
from pipeline.launch import batch_create_with_queries, queries_file_parse
from pipeline.round_controls import ROUND_CONTROLS
from pipeline.stages import batch_cancel
from pipeline.tasks import batch_start_queue

from .fields import JSONObjectField, RewardField
from .filters import TextFilter
from .permissions import IsStaff
from .schema import beyond_schema, conflict


def config_errors(message: str, key: str | None) -> dict[str, list[str]]:
    """Key a batch-config message by the config key it is about (non_field_errors otherwise)."""
    return {key or "non_field_errors": [message]}


def checked_config(raw: Any) -> BatchConfig:
    """Parse a raw config; a bad value becomes a validation error keyed by its config key."""
    try:
        return parse_batch_config(raw)
    except ConfigError as exc:
        raise serializers.ValidationError(config_errors(str(exc), exc.key)) from None


class StageProgressSerializer(serializers.Serializer):
    stage = serializers.ChoiceField(choices=BatchState.choices)
    done = serializers.IntegerField()
    total = serializers.IntegerField()
    finished = serializers.BooleanField()


class RecallEstimateSerializer(serializers.Serializer):
    found = serializers.IntegerField(help_text="Positives known or judged for the queries.")
    unfound = serializers.FloatField(help_text="Estimated positives not found yet.")
    unfound_low = serializers.FloatField()
    unfound_high = serializers.FloatField()
    recall = serializers.FloatField(help_text="found / (found + unfound).")
    recall_low = serializers.FloatField(help_text="Lower end of the 95% interval.")
    recall_high = serializers.FloatField(help_text="Upper end of the 95% interval.")
    rounds_used = serializers.IntegerField()


class RoundSerializer(serializers.Serializer):
    round = serializers.IntegerField()
    hits_planned = serializers.IntegerField()
    policy_pairs = serializers.IntegerField(help_text="Pairs the adjudication policy chose.")
    sample_pairs = serializers.IntegerField(help_text="Pairs drawn at random for the estimate.")
    rejudged = serializers.IntegerField(help_text="Earlier pairs shown again (split answers).")


class CurationSerializer(serializers.Serializer):
    strategy = serializers.CharField()
    adjudication = serializers.CharField(allow_null=True)
    round = serializers.IntegerField(help_text="The current round, from 0.")
    budget_judgements = serializers.IntegerField(allow_null=True)
    judgements_spent = serializers.IntegerField(allow_null=True)
    estimates = serializers.DictField(
        child=RecallEstimateSerializer(allow_null=True),
        help_text="Per direction (i2t, t2i): the estimated recall; null before any sample.",
    )
    rounds = RoundSerializer(many=True)
    queries_most_remaining = serializers.DictField(
        child=serializers.ListField(child=serializers.DictField()),
        help_text="Per direction: the queries with the most positives expected to remain.",
    )


class BatchSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    annotators = serializers.SlugRelatedField(slug_field="name", many=True, read_only=True)
    progress = serializers.SerializerMethodField()
    curation = serializers.SerializerMethodField()

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
            "round",
            "paused_at",
            "curation",
            "created_at",
            "updated_at",
        ]

    @extend_schema_field(StageProgressSerializer(many=True))
    def get_progress(self, batch: Batch) -> list[dict[str, Any]]:
        return batch_progress(batch=batch)

    @extend_schema_field(CurationSerializer)
    def get_curation(self, batch: Batch) -> dict[str, Any]:
        return batch_curation(batch=batch)


class BatchCountsSerializer(serializers.Serializer):
    queries = serializers.IntegerField()
    candidates = serializers.IntegerField()
    hits = serializers.IntegerField()
    assignments = serializers.DictField(
        child=serializers.IntegerField(), help_text="Assignments per status."
    )


class WorkCountSerializer(serializers.Serializer):
    hits = serializers.IntegerField()
    hits_done = serializers.IntegerField(help_text="HITs with all the approved work they need.")
    needed = serializers.IntegerField(help_text="Σ assignments per HIT.")
    approved = serializers.IntegerField(help_text="Approved, at most what each HIT needs.")
    submitted = serializers.IntegerField(help_text="Waiting for review.")
    open = serializers.IntegerField(help_text="Accepted, not submitted yet.")


class HumanWorkSerializer(serializers.Serializer):
    round = serializers.IntegerField()
    current_round = WorkCountSerializer()
    all_rounds = WorkCountSerializer()
    judgements = serializers.IntegerField(help_text="Answers stored, golden pairs included.")
    judgements_spent = serializers.IntegerField(
        help_text="As the budget counts them: stored plus the pairs of open work."
    )
    budget_judgements = serializers.IntegerField(allow_null=True)
    reward = serializers.DecimalField(max_digits=8, decimal_places=2)
    spent = serializers.DecimalField(
        max_digits=24,
        decimal_places=2,
        help_text="(approved + submitted) assignments × (reward + MTurk commission), USD.",
    )
    budget_dollars = serializers.DecimalField(
        max_digits=24,
        decimal_places=2,
        help_text="The judgement budget in USD; without one, what every needed assignment costs.",
    )
    per_hour = serializers.FloatField(
        allow_null=True, help_text="Assignments submitted per hour; null: no pace yet."
    )
    seconds_left = serializers.IntegerField(allow_null=True)
    time_left = serializers.CharField(help_text='As the page shows it; "—" without a pace.')


class BatchDetailSerializer(BatchSerializer):
    counts = serializers.SerializerMethodField()
    human_work = serializers.SerializerMethodField()

    class Meta(BatchSerializer.Meta):
        fields = [*BatchSerializer.Meta.fields, "counts", "human_work", "reports", "mturk"]

    @extend_schema_field(HumanWorkSerializer)
    def get_human_work(self, batch: Batch) -> dict[str, Any]:
        return batch_human_work(batch_id=batch.pk).to_json()

    @extend_schema_field(BatchCountsSerializer)
    def get_counts(self, batch: Batch) -> dict[str, Any]:
        # Read by the view (annotation.selectors.batch_counts) and passed in the context.
        return self.context["counts"]


class ControlSerializer(StrictSerializer):
    action = serializers.ChoiceField(
        choices=sorted(ROUND_CONTROLS),
        help_text="The batch page's round control to run: close_round, finish_after_round "
        "(keep_rounds undoes it), pause / unpause handing out HITs, cancel, resume (a failed "
        "or lost stage).",
    )


class ControlResultSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What the control did, in one sentence.")
    batch = BatchDetailSerializer()


class BatchCreateSerializer(StrictSerializer):
    dataset = serializers.SlugRelatedField(
        slug_field="name", queryset=Dataset.objects.all(), help_text="Dataset name."
    )
    name = serializers.CharField(max_length=200)
    config = JSONObjectField(
        help_text="Batch configuration (mitl.config.BatchConfig); missing keys take defaults."
    )
    queries = JSONObjectField(
        required=False,
        help_text='These queries instead of a sample: {"images": [ids], "captions": [ids]}, '
        "the dataset's own ids.",
    )
    skip_finished = serializers.BooleanField(
        default=False,
        help_text="Leave out queries that released batches on the dataset already finished.",
    )

    def validate_config(self, value: Any) -> dict[str, Any]:
        return checked_config(value).to_json()

    def validate_queries(self, value: Any) -> tuple[list[int], list[int]]:
        try:
            return queries_file_parse(value)
        except ServiceError as exc:
            raise serializers.ValidationError(str(exc)) from None


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


class RewardSerializer(StrictSerializer):
    reward = RewardField(help_text="Reward per assignment in US dollars, e.g. 0.50.")


class CostQuerySerializer(StrictQuerySerializer):
    """The cost endpoint's query string (any other parameter is a 400)."""

    reward = RewardField(
        required=False,
        help_text="Reward per assignment in US dollars, e.g. 0.50; left out, the batch's own "
        "(set in the wizard or on its MTurk page).",
    )


class EstimateSerializer(RewardSerializer):
    config = JSONObjectField(help_text="A batch configuration not yet created.")

    def validate_config(self, value: Any) -> BatchConfig:
        return checked_config(value)


class BatchFilter(django_filters.FilterSet):
    dataset = TextFilter(field_name="dataset__name", help_text="Dataset name.")
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
        return self._detail_of(batch, code)

    def _detail_of(self, batch: Batch, code: int = status.HTTP_200_OK) -> Response:
        context = {**self.get_serializer_context(), "counts": batch_counts(batch=batch)}
        return Response(BatchDetailSerializer(batch, context=context).data, status=code)

    def retrieve(self, request: Request, pk: str) -> Response:
        """Return one batch with its progress, counts, reports and MTurk state."""
        return self._detail_of(self.get_object())

    # JSON bodies only in the schema: `config` is an object, which a form cannot carry.
    @extend_schema(
        request={"application/json": BatchCreateSerializer},
        responses={201: BatchDetailSerializer},
        extensions=beyond_schema(
            "the dataset and the config's annotators must exist, the queries must be the "
            "dataset's, and the config's values must agree (mitl/config.py: e.g. "
            "golden_negative_depth at least k)."
        ),
    )
    def create(self, request: Request) -> Response:
        """Create a draft batch; a bad config is a 400 whose `errors.config` names the key."""
        serializer = BatchCreateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        image_ids, caption_ids = data.get("queries", (None, None))
        try:
            batch = batch_create_with_queries(
                dataset=data["dataset"],
                name=data["name"],
                raw_config=data["config"],
                image_ids=image_ids,
                caption_ids=caption_ids,
                skip_finished=data["skip_finished"],
            )
        except ServiceError as exc:
            if exc.field == "queries":
                raise serializers.ValidationError({"queries": [str(exc)]}) from None
            # Unknown annotators, or more queries than the dataset has: still the config's fault.
            raise serializers.ValidationError(
                {"config": config_errors(str(exc), exc.field)}
            ) from None
        return self._detail(batch, status.HTTP_201_CREATED)

    @extend_schema(
        request=None,
        responses={200: BatchDetailSerializer, 409: conflict("The batch has already started.")},
    )
    @action(detail=True, methods=["post"])
    def start(self, request: Request, pk: str) -> Response:
        """Start a draft batch: the automatic stages run (409 when it has already started).

        Without a broker (the embedded default) the stages run before this call answers.
        """
        return self._detail(batch_start_queue(batch=self.get_object()))

    @extend_schema(
        request=None,
        responses={
            200: BatchDetailSerializer,
            409: conflict("The batch is released or cancelled already."),
        },
    )
    @action(detail=True, methods=["post"])
    def cancel(self, request: Request, pk: str) -> Response:
        """Cancel a batch that is not released: no stage runs any more, open HITs end (409
        when it is released or cancelled already)."""
        return self._detail(batch_cancel(batch=self.get_object()))

    @extend_schema(
        request={"application/json": ControlSerializer},
        responses={
            200: ControlResultSerializer,
            409: conflict("The batch's state does not allow this control now."),
        },
    )
    @action(detail=True, methods=["post"])
    def control(self, request: Request, pk: str) -> Response:
        """Run one of the batch page's round controls (409, saying why, when the batch's state
        does not allow it); the answer says what it did and shows the batch after it."""
        batch = self.get_object()
        serializer = ControlSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        said = ROUND_CONTROLS[serializer.validated_data["action"]](batch_id=batch.pk)
        return Response({"detail": said, "batch": self._detail(batch).data})

    @extend_schema(responses=StageProgressSerializer(many=True))
    @action(detail=True, pagination_class=None, filterset_class=None)
    def progress(self, request: Request, pk: str) -> Response:
        """Done/total of every pipeline stage, in pipeline order."""
        return Response(batch_progress(batch=self.get_object()))

    @extend_schema(
        parameters=[CostQuerySerializer],
        responses=CostSerializer,
        filters=False,
    )
    @action(detail=True, filterset_class=None)
    def cost(self, request: Request, pk: str) -> Response:
        """What the batch costs on MTurk: from its HITs once built, an upper bound before."""
        batch = self.get_object()
        reward = CostQuerySerializer(data=request.query_params)
        reward.is_valid(raise_exception=True)
        estimate = batch_cost_estimate(batch=batch, reward=reward.validated_data.get("reward"))
        return Response(CostSerializer(estimate.to_json()).data)

    @extend_schema(
        request={"application/json": EstimateSerializer},
        responses={200: CostSerializer},
        extensions=beyond_schema(
            "the config's keys, ranges and agreement between values (mitl/config.py)."
        ),
    )
    @action(detail=False, methods=["post"], filterset_class=None)
    def estimate(self, request: Request) -> Response:
        """Estimate a config not yet created: always an upper bound (`hits_at_most`)."""
        serializer = EstimateSerializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        estimate = cost_estimate(config=data["config"], reward_per_assignment=data["reward"])
        return Response(CostSerializer(estimate.to_json()).data)
