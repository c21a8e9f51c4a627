"""Reports (staff only): a batch's annotator diversity and model bias, a dataset's statistics."""

from __future__ import annotations

from typing import Any

from django.shortcuts import get_object_or_404
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.exceptions import NotFound
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.errors import ServiceError
from annotation.models import Batch, Dataset
from annotation.strict_input import StrictQuerySerializer
from mitl.dataset_stats import stats_as_json
from pipeline.bias_page import bias_report_cached
from pipeline.dataset_stats import dataset_stats_compute

from .errors import Conflict, ErrorSerializer
from .fields import TextParameterField
from .permissions import IsStaff

NOT_READY = OpenApiResponse(ErrorSerializer, description="The report's data is not there yet.")


def _report(description: str) -> dict[Any, Any]:
    return {200: OpenApiResponse(OpenApiTypes.OBJECT, description=description), 409: NOT_READY}


@extend_schema(tags=["reports"])
class BatchDiversityView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(
        responses=_report(
            "Per direction: Kendall τ and rank of top-1 between every two annotators "
            "(ECCV Caption Table A.1)."
        )
    )
    def get(self, request: Request, batch_id: int) -> Response:
        """How differently the batch's annotators rank the same queries (after retrieval)."""
        batch = get_object_or_404(Batch, pk=batch_id)
        report = batch.reports.get("diversity")
        if report is None:
            raise Conflict(
                f"batch {batch.pk} has no diversity report yet (state {batch.state}); it is "
                "computed when pooling starts"
            )
        return Response(report)


@extend_schema(tags=["reports"])
class BatchBiasView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(
        responses=_report(
            "Model bias (ECCV Caption App. E): R@1 of every annotator on the release of each "
            "annotator subset, answer and rationale shares."
        )
    )
    def get(self, request: Request, batch_id: int) -> Response:
        """The batch's model-bias report, computed from its current verdicts (kept until
        they change)."""
        batch = get_object_or_404(Batch.objects.select_related("dataset"), pk=batch_id)
        try:
            return Response(bias_report_cached(batch=batch))
        except ServiceError as exc:
            raise Conflict(str(exc)) from None


class StatsQuerySerializer(StrictQuerySerializer):
    """The statistics' query string (any other parameter is a 400)."""

    queries_from = TextParameterField(
        required=False,
        help_text="Count over the queries of this positive set (e.g. eccv); every image and "
        "valid caption by default. A set the dataset does not have is a 404.",
    )


@extend_schema(tags=["reports"])
class DatasetStatsView(APIView):
    permission_classes = [IsStaff]

    @extend_schema(
        parameters=[StatsQuerySerializer],
        responses=_report(
            "Positives per set and their factor over the original; precision and recall "
            "against the human-verified sets (ECCV Caption Tables 2 and 3)."
        ),
    )
    def get(self, request: Request, name: str) -> Response:
        """Statistics of every positive set of the dataset."""
        dataset = get_object_or_404(Dataset, name=name)
        query = StatsQuerySerializer(data=request.query_params)
        query.is_valid(raise_exception=True)
        queries_from = query.validated_data.get("queries_from")
        if (
            queries_from is not None
            and not dataset.positive_sets.filter(name=queries_from).exists()
        ):
            # Like a path's name: the set it names is not there (the schema cannot list them).
            raise NotFound(
                f"queries_from: dataset {dataset.name!r} has no positive set {queries_from!r}"
            )
        try:
            stats = dataset_stats_compute(dataset=dataset, queries_from=queries_from)
        except ServiceError as exc:
            raise Conflict(str(exc)) from None
        return Response(stats_as_json(stats))
