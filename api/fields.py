"""Serializer fields whose schema says exactly what they accept."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.utils import html

from mitl.costs import CENT


@extend_schema_field(OpenApiTypes.OBJECT)
class JSONObjectField(serializers.JSONField):
    """A JSON object (`{...}`), documented as `type: object`; the serializer refuses others."""


class EmptyValueChecked:
    """A form or query value sent empty (`?x=`) is checked, and so refused, instead of being
    taken as left out (DRF's default for a field that is not required)."""

    field_name: str

    def get_value(self, dictionary: Any) -> Any:
        if html.is_html_input(dictionary) and dictionary.get(self.field_name) == "":
            return ""
        return super().get_value(dictionary)  # type: ignore[misc]


class StrictChoiceField(EmptyValueChecked, serializers.ChoiceField):
    """A choice whose form field, when sent empty, is an invalid choice, not the default."""


class TextParameterField(EmptyValueChecked, serializers.CharField):
    """Text in a query string, taken as given (not trimmed); `?name=` is a 400, not left out."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(trim_whitespace=False, **kwargs)


# What a yes/no query parameter may say, in any case (`QueryFlagField`).
FLAG_VALUES = {"true": True, "1": True, "false": False, "0": False}


class QueryFlagField(EmptyValueChecked, serializers.BooleanField):
    """A yes/no query parameter: true or false (or 1 or 0), in any case; else a 400."""

    default_error_messages = {"flag": "must be true or false (got {value!r})"}

    def to_internal_value(self, data: Any) -> bool:
        value = FLAG_VALUES.get(str(data).lower())
        if value is None:
            self.fail("flag", value=data)
        return value


# Dollars and cents from 0.01 to 999999.99, as the schema's pattern says: "0.50", "12", "3.5".
REWARD_PATTERN = r"^([1-9][0-9]{0,5}(\.[0-9]{1,2})?|0?\.(0[1-9]|[1-9][0-9]?))$"


@extend_schema_field(
    {"type": "string", "format": "decimal", "pattern": REWARD_PATTERN, "example": "0.50"}
)
class RewardField(EmptyValueChecked, serializers.DecimalField):
    """A reward in US dollars, from 0.01, at most two decimals, written as text ("0.50")
    that the schema's pattern describes exactly (a strict serializer refuses a number)."""

    default_error_messages = {
        "reward": "write dollars and cents from 0.01 to 999999.99, e.g. 0.50 (got {value!r})"
    }

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(max_digits=8, decimal_places=2, min_value=CENT, **kwargs)

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, str) and not re.search(REWARD_PATTERN, data):  # as JSON Schema reads it
            self.fail("reward", value=data)
        return super().to_internal_value(data)
