"""Datasets (any logged-in account: names and counts) and their contents (staff only).

Images, captions and positive sets stay with staff: a caption's own image is an original
pair, exactly what the golden true positives are made of, so a worker who could look
them up could pass the golden check without looking at the pairs.
"""

from __future__ import annotations

from typing import Any

import django_filters
from django.db.models import Count, Model, OuterRef, QuerySet, Subquery
from django.db.models.functions import Coalesce
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, viewsets
from rest_framework.decorators import action
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import (
    Batch,
    Caption,
    Dataset,
    Image,
    PositivePair,
    PositiveSet,
    PositiveSource,
    Release,
)
from annotation.selectors import positive_sets_counted

from .filters import TextFilter
from .permissions import IsStaff


def count_of(model: type[Model], link: str = "dataset", **conditions: Any) -> Coalesce:
    """Count `model` rows pointing at the outer row through `link`, in one subquery.

    Joining images, captions and sets in one query would multiply their rows; a subquery
    per count keeps each count a single indexed scan.
    """
    rows = (
        model.objects.filter(**{link: OuterRef("pk")}, **conditions)
        .order_by()
        .values(link)
        .annotate(n=Count("pk"))
        .values("n")
    )
    return Coalesce(Subquery(rows), 0)


class DatasetSerializer(serializers.ModelSerializer):
    images = serializers.IntegerField(source="n_images", read_only=True)
    captions = serializers.IntegerField(source="n_captions", read_only=True)
    invalid_captions = serializers.IntegerField(
        source="n_invalid_captions",
        read_only=True,
        help_text="Captions marked invalid (left out of releases).",
    )
    positive_sets = serializers.IntegerField(source="n_positive_sets", read_only=True)
    batches = serializers.IntegerField(source="n_batches", read_only=True)
    releases = serializers.IntegerField(source="n_releases", read_only=True)

    class Meta:
        model = Dataset
        fields = [
            "id",
            "name",
            "description",
            "meta",
            "created_at",
            "images",
            "captions",
            "invalid_captions",
            "positive_sets",
            "batches",
            "releases",
        ]


class PositiveSetSummarySerializer(serializers.ModelSerializer):
    pairs = serializers.IntegerField(
        source="n_pairs", read_only=True, help_text="Number of positive pairs."
    )

    class Meta:
        model = PositiveSet
        fields = ["id", "name", "source", "pairs"]


class DatasetDetailSerializer(DatasetSerializer):
    positive_set_list = serializers.SerializerMethodField()

    class Meta(DatasetSerializer.Meta):
        fields = [*DatasetSerializer.Meta.fields, "positive_set_list"]

    @extend_schema_field(PositiveSetSummarySerializer(many=True))
    def get_positive_set_list(self, dataset: Dataset) -> list[dict[str, Any]]:
        # Read by the view (annotation.selectors.positive_sets_counted), passed in the context.
        return PositiveSetSummarySerializer(self.context["positive_sets"], many=True).data


@extend_schema(tags=["datasets"])
class DatasetViewSet(viewsets.ReadOnlyModelViewSet):
    """Datasets by name, with counts. Imports have their own endpoints."""

    lookup_field = "name"
    lookup_value_regex = r"[-a-zA-Z0-9_]+"
    queryset = Dataset.objects.annotate(
        n_images=count_of(Image),
        n_captions=count_of(Caption),
        n_invalid_captions=count_of(Caption, is_invalid=True),
        n_positive_sets=count_of(PositiveSet),
        n_batches=count_of(Batch),
        n_releases=count_of(Release),
    ).order_by("name")

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return DatasetDetailSerializer if self.action == "retrieve" else DatasetSerializer

    def retrieve(self, request: Request, name: str) -> Response:
        """Return one dataset with its counts and its positive sets (pairs counted)."""
        dataset = self.get_object()
        context = {
            **self.get_serializer_context(),
            "positive_sets": positive_sets_counted(dataset=dataset),
        }
        return Response(DatasetDetailSerializer(dataset, context=context).data)


class ImageSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    file_url = serializers.SerializerMethodField()

    class Meta:
        model = Image
        fields = ["id", "dataset", "ext_id", "file_name", "labels", "file_url"]

    @extend_schema_field(serializers.CharField(allow_null=True))
    def get_file_url(self, image: Image) -> str | None:
        return image.file.url if image.file else None


class ImageFilter(django_filters.FilterSet):
    dataset = TextFilter(field_name="dataset__name", help_text="Dataset name.")

    class Meta:
        model = Image
        fields = ["dataset", "ext_id"]


@extend_schema(tags=["datasets"])
class ImageViewSet(viewsets.ReadOnlyModelViewSet):
    """Images (staff): filter by `dataset` (name) and `ext_id` (the dataset's own id)."""

    permission_classes = [IsStaff]
    serializer_class = ImageSerializer
    filterset_class = ImageFilter
    queryset = Image.objects.select_related("dataset").order_by("dataset_id", "ext_id")


class CaptionSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    image = serializers.IntegerField(
        source="image.ext_id", read_only=True, help_text="Its own image (ext_id)."
    )

    class Meta:
        model = Caption
        fields = [
            "id",
            "dataset",
            "ext_id",
            "image",
            "text",
            "is_invalid",
            "invalid_reason",
            "invalid_marked_at",
        ]


class CaptionFilter(django_filters.FilterSet):
    dataset = TextFilter(field_name="dataset__name", help_text="Dataset name.")
    image = django_filters.NumberFilter(
        field_name="image__ext_id", help_text="Captions written for this image (ext_id)."
    )
    text = TextFilter(
        field_name="text", lookup_expr="icontains", help_text="Text contains (any case)."
    )

    class Meta:
        model = Caption
        fields = ["dataset", "ext_id", "image", "is_invalid", "text"]


@extend_schema(tags=["datasets"])
class CaptionViewSet(viewsets.ReadOnlyModelViewSet):
    """Captions (staff): filter by `dataset`, `is_invalid`, `image`, `ext_id`, `text`."""

    permission_classes = [IsStaff]
    serializer_class = CaptionSerializer
    filterset_class = CaptionFilter
    queryset = Caption.objects.select_related("dataset", "image").order_by("dataset_id", "ext_id")


class PositiveSetSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    pairs = serializers.IntegerField(
        source="n_pairs", read_only=True, help_text="Number of positive pairs."
    )
    query_counts = serializers.SerializerMethodField(
        help_text="How many image (i2t) and caption (t2i) queries the set names; null when it "
        "records none (`covers` says what it covers then)."
    )
    covers = serializers.CharField(
        source="coverage",
        read_only=True,
        help_text="Which queries the set covers, in words: its query counts; for a set that "
        "records none, every image and caption (the original set), the queries of its batch "
        "(human-verified), or 'queries not recorded' (an import that named none).",
    )

    class Meta:
        model = PositiveSet
        fields = [
            "id",
            "dataset",
            "name",
            "source",
            "description",
            "pairs",
            "query_counts",
            "covers",
            "created_at",
        ]

    @extend_schema_field(serializers.DictField(child=serializers.IntegerField(), allow_null=True))
    def get_query_counts(self, positive_set: PositiveSet) -> dict[str, int] | None:
        queries = positive_set.queries or {}
        if not queries:
            return None
        return {direction: len(queries.get(direction) or ()) for direction in ("i2t", "t2i")}


class PositiveSetFilter(django_filters.FilterSet):
    dataset = TextFilter(field_name="dataset__name", help_text="Dataset name.")
    name = TextFilter(help_text="Positive set name, e.g. original, eccv.")
    source = django_filters.ChoiceFilter(choices=PositiveSource.choices)

    class Meta:
        model = PositiveSet
        fields = ["dataset", "name", "source"]


class PositivePairSerializer(serializers.Serializer):
    image = serializers.IntegerField(source="image__ext_id", help_text="Image ext_id.")
    caption = serializers.IntegerField(source="caption__ext_id", help_text="Caption ext_id.")


@extend_schema(tags=["datasets"])
class PositiveSetViewSet(viewsets.ReadOnlyModelViewSet):
    """Positive sets (staff): filter by `dataset`, `name`, `source`; `pairs/` lists the pairs."""

    permission_classes = [IsStaff]
    serializer_class = PositiveSetSerializer
    filterset_class = PositiveSetFilter
    queryset = (
        PositiveSet.objects.select_related("dataset")
        .annotate(n_pairs=count_of(PositivePair, "positive_set"))
        .order_by("dataset_id", "pk")
    )

    @extend_schema(responses=PositivePairSerializer(many=True), filters=False)
    @action(detail=True, filterset_class=None)
    def pairs(self, request: Request, pk: str) -> Response:
        """List the set's pairs as dataset ids, by image then caption."""
        positive_set = self.get_object()
        rows: QuerySet = (
            PositivePair.objects.filter(positive_set=positive_set)
            .order_by("image__ext_id", "caption__ext_id")
            .values("image__ext_id", "caption__ext_id")
        )
        page = self.paginate_queryset(rows)
        return self.get_paginated_response(PositivePairSerializer(page, many=True).data)
