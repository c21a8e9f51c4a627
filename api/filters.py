"""The filter backend of every list: django-filter, but a malformed filter value is a 400.

django-filter ignores what its form field cannot read (`?is_invalid=maybe` filters nothing),
an empty choice (`?state=`) and a parameter that names no filter (`?stat=draft`), and reads
integer ids as decimals (`?ext_id=0.5`); the schema promises booleans, integers and choices,
so such values, an unknown parameter and a filter given twice are refused in the one error
format. A list's query string is checked where it is paginated (`api.pagination`): its
filters' names and the page parameters are all it takes.
"""

from __future__ import annotations

import re
from typing import Any

import django_filters
from django.core.exceptions import FieldDoesNotExist
from django.db import models
from django_filters.rest_framework import DjangoFilterBackend
from django_filters.utils import get_model_field
from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.request import Request

from annotation.strict_input import unknown_keys_message

_INTEGER = re.compile(r"-?[0-9]+")
_INTEGER_FIELDS = (models.IntegerField, models.AutoField, models.ForeignKey)


@extend_schema_field({"type": "string", "pattern": "^[^\\u0000]*$"})
class TextFilter(django_filters.CharFilter):
    """A text filter whose schema says what its form field refuses: NUL characters (a 400)."""


class StrictFilterBackend(DjangoFilterBackend):
    """django-filter's backend that answers a malformed or repeated filter value with a 400."""

    def get_filterset(self, request: Request, queryset: Any, view: Any) -> Any:
        filterset = super().get_filterset(request, queryset, view)
        if filterset is not None:
            errors = {}
            for name, field in filterset.filters.items():
                message = _problem(field, request.query_params.getlist(name), filterset)
                if message:
                    errors[name] = [message]
            if errors:
                raise serializers.ValidationError(errors)
        return filterset


def filter_names(view: Any) -> list[str]:
    """The query parameters a list's filters take (its filterset's or `filterset_fields`)."""
    filterset_class = getattr(view, "filterset_class", None)
    if filterset_class is not None:
        return list(filterset_class.base_filters)
    return list(getattr(view, "filterset_fields", None) or ())


def query_params_known_only(request: Request, known: list[str]) -> None:
    """Refuse query parameters the endpoint does not take, with a 400 naming each one."""
    unknown = [name for name in request.query_params if name not in known]
    if unknown:
        message = unknown_keys_message(known, what="parameter")
        raise serializers.ValidationError({name: [message] for name in unknown})


def _problem(field: Any, values: list[str], filterset: Any) -> str | None:
    if not values:
        return None
    if len(values) > 1:
        return "give this parameter once"
    value = values[0]
    if isinstance(field, django_filters.ChoiceFilter) and value == "":
        return "an empty value is not a choice: leave the parameter out to list all"
    if isinstance(field, django_filters.BooleanFilter) and value not in ("true", "false"):
        return "must be true or false"
    if (
        isinstance(field, django_filters.NumberFilter)
        and _is_integer(field, filterset)
        and not _INTEGER.fullmatch(value)
    ):
        return "must be a whole number"
    return None


def _is_integer(field: Any, filterset: Any) -> bool:
    try:
        model_field = get_model_field(filterset._meta.model, field.field_name)
    except FieldDoesNotExist:
        return False
    return isinstance(model_field, _INTEGER_FIELDS)
