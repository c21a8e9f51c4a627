"""Releases (any logged-in account): list, manifest, and the zip download."""

from __future__ import annotations

from typing import Any

import django_filters
from django.http import FileResponse
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import renderers, serializers, viewsets
from rest_framework.decorators import action
from rest_framework.exceptions import NotFound
from rest_framework.request import Request

from annotation.models import Release
from annotation.selectors import release_zip

from .filters import TextFilter


class ReleaseSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(slug_field="name", read_only=True)
    batches = serializers.PrimaryKeyRelatedField(many=True, read_only=True)
    download_url = serializers.SerializerMethodField()
    evaluations_url = serializers.SerializerMethodField()

    class Meta:
        model = Release
        fields = [
            "id",
            "dataset",
            "name",
            "version",
            "rule",
            "batches",
            "created_at",
            "download_url",
            "evaluations_url",
        ]

    def get_download_url(self, release: Release) -> str:
        return reverse("api:release-download", args=[release.pk])

    def get_evaluations_url(self, release: Release) -> str:
        return reverse("api:release-evaluations", args=[release.pk])


class ReleaseDetailSerializer(ReleaseSerializer):
    class Meta(ReleaseSerializer.Meta):
        fields = [*ReleaseSerializer.Meta.fields, "manifest"]


class ReleaseFilter(django_filters.FilterSet):
    dataset = TextFilter(field_name="dataset__name", help_text="Dataset name.")

    class Meta:
        model = Release
        fields = ["dataset", "name", "version"]


class ZipRenderer(renderers.BaseRenderer):
    """Accept `Accept: application/zip` for downloads; an error still goes out as JSON."""

    media_type = "application/zip"
    format = "zip"
    charset = None
    render_style = "binary"

    def render(
        self,
        data: Any,
        accepted_media_type: str | None = None,
        renderer_context: dict[str, Any] | None = None,
    ) -> bytes:
        # Only error bodies get here: the zip itself is a FileResponse, never rendered.
        response = (renderer_context or {}).get("response")
        if response is not None:
            response["Content-Type"] = "application/json"
        return renderers.JSONRenderer().render(data)


@extend_schema(tags=["releases"])
class ReleaseViewSet(viewsets.ReadOnlyModelViewSet):
    """Immutable, versioned extended positive sets; filter by `dataset`, `name`, `version`."""

    filterset_class = ReleaseFilter
    queryset = (
        Release.objects.select_related("dataset")
        .prefetch_related("batches")
        .order_by("-created_at", "-pk")
    )

    def get_serializer_class(self) -> type[serializers.Serializer]:
        return ReleaseDetailSerializer if self.action == "retrieve" else ReleaseSerializer

    @extend_schema(
        responses={
            (200, "application/zip"): OpenApiResponse(
                OpenApiTypes.BINARY, description="<name>-v<version>.zip"
            )
        },
        filters=False,
    )
    @action(
        detail=True,
        filterset_class=None,
        renderer_classes=[renderers.JSONRenderer, ZipRenderer],
    )
    def download(self, request: Request, pk: str) -> FileResponse:
        """Download the release as one zip (404 when its zip is missing on disk)."""
        release = self.get_object()
        bundle = release_zip(release=release)
        if bundle is None:
            raise NotFound(f"release {release} has no zip file")
        return FileResponse(
            bundle.path.open("rb"),
            as_attachment=True,
            filename=bundle.filename,
            content_type="application/zip",
        )
