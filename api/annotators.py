"""Machine annotators: any logged-in account reads them; staff register new ones."""

from __future__ import annotations

import django_filters
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework import mixins, serializers, status, viewsets
from rest_framework.request import Request
from rest_framework.response import Response

from annotation.models import MachineAnnotator
from annotation.strict_input import StrictModelSerializer
from mitl.annotators import ANNOTATOR_KINDS
from pipeline.annotators import annotator_create

from .fields import JSONObjectField
from .permissions import ReadOrStaffWrites
from .schema import beyond_schema, conflict


class MachineAnnotatorSerializer(StrictModelSerializer):
    kind = serializers.ChoiceField(
        choices=sorted(ANNOTATOR_KINDS), help_text="Annotator kind (mitl.annotators)."
    )
    config = JSONObjectField(
        required=False, help_text="Kind-specific settings, e.g. {'stop_words': false} for bow."
    )
    version = serializers.CharField(max_length=64, required=False, default="1")

    class Meta:
        model = MachineAnnotator
        fields = ["id", "name", "kind", "config", "version", "created_at"]
        read_only_fields = ["id", "created_at"]
        extra_kwargs = {"name": {"validators": []}}  # a repeat of the same one is allowed

    def validate_config(self, value: object) -> dict:
        if not isinstance(value, dict):
            raise serializers.ValidationError("must be a JSON object")
        return value


class MachineAnnotatorFilter(django_filters.FilterSet):
    kind = django_filters.ChoiceFilter(choices=[(kind, kind) for kind in sorted(ANNOTATOR_KINDS)])

    class Meta:
        model = MachineAnnotator
        fields = ["kind"]


@extend_schema(tags=["annotators"])
class MachineAnnotatorViewSet(
    mixins.ListModelMixin,
    mixins.RetrieveModelMixin,
    mixins.CreateModelMixin,
    viewsets.GenericViewSet,
):
    """Retrieval models that propose candidate pairs (`mitl.annotators`)."""

    permission_classes = [ReadOrStaffWrites]
    serializer_class = MachineAnnotatorSerializer
    queryset = MachineAnnotator.objects.order_by("name")
    filterset_class = MachineAnnotatorFilter

    @extend_schema(
        # JSON bodies only in the schema: `config` is an object, which a form cannot carry.
        request={"application/json": MachineAnnotatorSerializer},
        extensions=beyond_schema("the kind checks its config: its keys, values and files."),
        responses={
            201: MachineAnnotatorSerializer,
            200: OpenApiResponse(
                MachineAnnotatorSerializer, description="The identical annotator already existed."
            ),
            409: conflict("An annotator of this name exists with another kind, config or version."),
        },
    )
    def create(self, request: Request) -> Response:
        """Register an annotator after checking its kind and config (staff).

        Creating the same name, kind, config and version again returns the stored one (200);
        the same name with anything different is refused (409). The kind checks its config
        (keys, model files), which the schema cannot say: such a refusal is a 400.
        """
        serializer = self.get_serializer(data=request.data)
        serializer.is_valid(raise_exception=True)
        data = serializer.validated_data
        existed = MachineAnnotator.objects.filter(name=data["name"]).exists()
        annotator = annotator_create(
            name=data["name"],
            kind=data["kind"],
            config=data.get("config", {}),
            version=data["version"],
        )
        return Response(
            self.get_serializer(annotator).data,
            status=status.HTTP_200_OK if existed else status.HTTP_201_CREATED,
        )
