"""Serializer fields whose schema says exactly what they accept."""

from __future__ import annotations

from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils import html


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.JSONField):
    """A JSON object (`{...}`), documented as `type: object`; the serializer refuses others."""


class StrictChoiceField(serializers.ChoiceField):
    """A choice whose form field, when sent empty, is an invalid choice, not the default."""

    def get_value(self, dictionary: Any) -> Any:
        if html.is_html_input(dictionary) and dictionary.get(self.field_name) == "":
            return ""
        return super().get_value(dictionary)
