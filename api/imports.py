"""Import endpoints (staff only): start a dataset or positive-set import, follow its progress.

POST /api/imports/dataset/ and /api/imports/positives/ take multipart forms, check the
files while the request waits (a bad file is a 400 naming the file, line and field, and
leaves nothing behind; so is a form field or file the endpoint does not know) and answer
202 with the queued job; GET /api/imports/<id>/ gives its status and progress.
"""

from __future__ import annotations

from typing import Any

from django.urls import path, reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema, extend_schema_field
from rest_framework import serializers, status
from rest_framework.parsers import FormParser, MultiPartParser
from rest_framework.permissions import IsAdminUser
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from annotation.imports.requests import (
    DATASET_PARAMS,
    DATASET_UPLOADS,
    POSITIVES_PARAMS,
    POSITIVES_UPLOADS,
    ImportRequestError,
)
from annotation.models import ImportJob, ImportKind
from annotation.strict_input import StrictSerializer
from annotation.tasks import import_job_submit
from mitl.formats.captions import CAPTION_FORMATS
from mitl.formats.positives import CXC_SCORE_RANGE

from .fields import StrictChoiceField
from .schema import beyond_schema


class DatasetImportRequestSerializer(StrictSerializer):
    name = serializers.SlugField(max_length=100, help_text="Unique name of the new dataset.")
    format = StrictChoiceField(  # an empty `format` is refused, not taken as tsv
        choices=CAPTION_FORMATS,
        default="tsv",
        help_text="tsv (caption_id, image_id, file_name, caption), coco (captions JSON with "
        "images and annotations) or karpathy (dataset_coco.json).",
    )
    split = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=32,
        help_text="karpathy only: import only this split (e.g. test).",
    )
    captions = serializers.FileField(help_text="The captions file.")
    images = serializers.FileField(
        required=False, help_text="A zip of the image files, by the file names the captions use."
    )
    images_s3 = serializers.CharField(
        required=False,
        allow_blank=True,
        max_length=1024,
        help_text="Instead of a zip: s3://bucket/prefix holding the image files.",
    )
    labels = serializers.FileField(
        required=False, help_text='Object labels, JSON {"<image id>": ["label", ...]}.'
    )
    description = serializers.CharField(required=False, allow_blank=True, default="")


class PositivesImportRequestSerializer(StrictSerializer):
    dataset = serializers.SlugField(max_length=100, help_text="The dataset the pairs belong to.")
    label = serializers.SlugField(max_length=100, help_text="Name of the new positive set.")
    i2t = serializers.FileField(
        required=False,
        help_text='ECCV Caption format: image_to_caption.json {"<image id>": [...]}.',
    )
    t2i = serializers.FileField(
        required=False,
        help_text='ECCV Caption format: caption_to_image.json {"<caption id>": [...]}.',
    )
    cxc = serializers.FileField(
        required=False, help_text="Instead of i2t and t2i: a CxC SITS CSV (sits_test.csv)."
    )
    min_score = serializers.FloatField(
        required=False,
        min_value=CXC_SCORE_RANGE[0],
        max_value=CXC_SCORE_RANGE[1],
        help_text="cxc only: the lowest rating that counts as a positive (default 3).",
    )
    ignore_unknown = serializers.BooleanField(
        default=False, help_text="Drop pairs whose ids the dataset does not hold."
    )


class ImportJobSerializer(serializers.ModelSerializer):
    dataset = serializers.SlugRelatedField(
        slug_field="name",
        read_only=True,
        allow_null=True,
        help_text="The dataset's name; null until a dataset import has created it.",
    )
    params = serializers.SerializerMethodField()
    url = serializers.SerializerMethodField()

    class Meta:
        model = ImportJob
        fields = [
            "id",
            "url",
            "kind",
            "status",
            "params",
            "dataset",
            "done",
            "total",
            "error",
            "created_at",
            "finished_at",
        ]
        read_only_fields = fields

    @extend_schema_field(OpenApiTypes.OBJECT)
    def get_params(self, job: ImportJob) -> dict[str, Any]:
        """What was asked for; uploads by their file names only."""
        params = dict(job.params)
        files = params.pop("files", {})
        params["files"] = {key: value.rsplit("/", 1)[-1] for key, value in files.items()}
        return params

    def get_url(self, job: ImportJob) -> str:
        return reverse("api:import-detail", args=[job.pk])


class ImportErrorSerializer(serializers.Serializer):
    detail = serializers.CharField(help_text="What is wrong, naming the file, line and field.")
    errors = serializers.DictField(
        child=serializers.ListField(child=serializers.CharField()),
        required=False,
        help_text="Messages per request field (form field or uploaded file).",
    )


def _invalid(errors: dict[str, Any]) -> Response:
    field, messages = next(iter(errors.items()))
    first = messages[0] if isinstance(messages, list) and messages else messages
    return Response(
        {"detail": f"{field}: {first}", "errors": errors}, status=status.HTTP_400_BAD_REQUEST
    )


def _create(
    request: Request,
    kind: str,
    data: dict[str, Any],
    param_keys: tuple[str, ...],
    upload_keys: tuple[str, ...],
) -> Response:
    params = {key: data[key] for key in param_keys if data.get(key) not in (None, "")}
    uploads = {key: data[key] for key in upload_keys if data.get(key)}
    try:
        job = import_job_submit(kind=kind, params=params, uploads=uploads, created_by=request.user)
    except ImportRequestError as exc:
        return Response(
            {"detail": str(exc), "errors": exc.errors}, status=status.HTTP_400_BAD_REQUEST
        )
    body = ImportJobSerializer(job).data
    return Response(body, status=status.HTTP_202_ACCEPTED, headers={"Location": body["url"]})


class DatasetImportView(APIView):
    permission_classes = [IsAdminUser]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        operation_id="imports_dataset_create",
        summary="Import a dataset (captions, optional images and labels)",
        request={"multipart/form-data": DatasetImportRequestSerializer},
        responses={202: ImportJobSerializer, 400: ImportErrorSerializer},
        extensions=beyond_schema(
            "the files are read (file, line and field named), the name must be new, "
            "split goes with karpathy only, and images with images_s3 is one too many."
        ),
        tags=["imports"],
    )
    def post(self, request: Request) -> Response:
        """Check the files now and queue the import; 202 with the job to follow."""
        serializer = DatasetImportRequestSerializer(data=request.data)
        if not serializer.is_valid():
            return _invalid(serializer.errors)
        return _create(
            request, ImportKind.DATASET, serializer.validated_data, DATASET_PARAMS, DATASET_UPLOADS
        )


class PositivesImportView(APIView):
    permission_classes = [IsAdminUser]
    parser_classes = [MultiPartParser, FormParser]

    @extend_schema(
        operation_id="imports_positives_create",
        summary="Import a positive set (ECCV Caption files or a CxC SITS CSV)",
        request={"multipart/form-data": PositivesImportRequestSerializer},
        responses={202: ImportJobSerializer, 400: ImportErrorSerializer},
        extensions=beyond_schema(
            "the dataset must exist and the label be new there, i2t and t2i or cxc (not "
            "both) are read, min_score goes with cxc only."
        ),
        tags=["imports"],
    )
    def post(self, request: Request) -> Response:
        """Check the files now and queue the import; 202 with the job to follow."""
        serializer = PositivesImportRequestSerializer(data=request.data)
        if not serializer.is_valid():
            return _invalid(serializer.errors)
        data = dict(serializer.validated_data)
        if not data.get("ignore_unknown"):
            data.pop("ignore_unknown", None)
        return _create(request, ImportKind.POSITIVES, data, POSITIVES_PARAMS, POSITIVES_UPLOADS)


class ImportJobView(APIView):
    permission_classes = [IsAdminUser]

    @extend_schema(
        operation_id="imports_retrieve",
        summary="An import's status and progress",
        responses={200: ImportJobSerializer, 404: ImportErrorSerializer},
        tags=["imports"],
    )
    def get(self, request: Request, job_id: int) -> Response:
        """Return the job: status (queued, running, done, failed), done/total, error."""
        job = ImportJob.objects.select_related("dataset").filter(pk=job_id).first()
        if job is None:
            return Response(
                {"detail": f"import {job_id} does not exist"}, status=status.HTTP_404_NOT_FOUND
            )
        return Response(ImportJobSerializer(job).data)


# Included by api/urls.py under imports/ (names live in the "api" namespace).
urlpatterns = [
    path("dataset/", DatasetImportView.as_view(), name="import-dataset"),
    path("positives/", PositivesImportView.as_view(), name="import-positives"),
    path("<int:job_id>/", ImportJobView.as_view(), name="import-detail"),
]
