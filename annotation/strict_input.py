"""Input serializers that refuse the keys they do not know, instead of dropping them.

DRF ignores a key that names no field, so a typo (`"levle"`), a read-only field sent back
(`"id"`) or a key a client should not send (an answer's `"role"`) passes unseen and the
request seems to have worked. Every serializer that reads input (a body, a query string)
derives from `StrictSerializer` or `StrictModelSerializer`: such a key is a 400 naming it,
at any depth (nested serializers and the items of lists too). The API, the HIT page and
MTurk's frame read their input through these, so the rule is the same everywhere; the
schema says it too (`additionalProperties: false`, api/schema.py).

In a JSON body, a value must also have the JSON type the schema gives its field: DRF would
turn `"version": 1` into "1", `"item": "5"` into 5 and `"golden": "yes"` into true, which
the schema does not allow. Form data and query strings are all text, so there DRF reads
the text as before.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from rest_framework import serializers
from rest_framework.utils import html

READ_ONLY = "read-only field: it cannot be set"
# The JSON type each kind of field takes, in the order checked (subclasses first).
JSON_TYPES: tuple[tuple[type[serializers.Field], tuple[type, ...], str], ...] = (
    (serializers.BooleanField, (bool,), "true or false"),
    (serializers.IntegerField, (int,), "a whole number"),
    (serializers.FloatField, (int, float), "a number"),
    (serializers.DecimalField, (str,), 'a string such as "0.50"'),
    (serializers.MultipleChoiceField, (list,), "an array"),
    (serializers.ChoiceField, (str,), "a string"),  # of choices that are strings
    (serializers.CharField, (str,), "a string"),
)
JSON_NAMES = {bool: "boolean", int: "number", float: "number", str: "string", list: "array"}


def unknown_keys_message(known: list[str], *, what: str = "field") -> str:
    """Say that a key is not taken, and which ones are."""
    return f"unknown {what} (known: {', '.join(known) or 'none'})"


# Comments, not docstrings, on these bases: the schema would show a base's docstring as
# the description of every serializer that has none of its own.
class UnknownKeysRefused:
    # A serializer mixin: keys that are not writable fields are a validation error.

    unknown_key_kind = "field"  # how the message names a key: a query's are "parameter"s

    def writable_fields_named(self) -> list[str]:
        fields = self.fields  # type: ignore[attr-defined]
        return [name for name, field in fields.items() if not field.read_only]

    def unknown_key_errors(self, data: Mapping[Any, Any]) -> dict[str, list[str]]:
        """A message for each key of `data` that names no writable field."""
        fields = self.fields  # type: ignore[attr-defined]
        known = self.writable_fields_named()
        unknown = unknown_keys_message(known, what=self.unknown_key_kind)
        return {
            str(key): [READ_ONLY if key in fields else unknown] for key in data if key not in known
        }

    def json_type_errors(self, data: Mapping[Any, Any]) -> dict[str, list[str]]:
        """A message for each value of a JSON body whose type is not its field's."""
        if html.is_html_input(data):
            return {}  # form data and query strings: text, read by the fields
        fields = self.fields  # type: ignore[attr-defined]
        errors = {}
        for name, value in data.items():
            wanted = _json_type(fields.get(name))
            if wanted is None or value is None:  # None: the field says whether it takes null
                continue
            types, what = wanted
            if (isinstance(value, bool) and bool not in types) or not isinstance(value, types):
                got = JSON_NAMES.get(type(value), "object")
                errors[str(name)] = [f"must be {what} (got {got})"]
        return errors

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, Mapping):
            errors = self.unknown_key_errors(data) or self.json_type_errors(data)
            if errors:
                raise serializers.ValidationError(errors)
        return super().to_internal_value(data)  # type: ignore[misc]


def _json_type(field: serializers.Field | None) -> tuple[tuple[type, ...], str] | None:
    if field is None:
        return None
    for kind, types, what in JSON_TYPES:
        if isinstance(field, kind):
            if kind is serializers.ChoiceField and not all(
                isinstance(choice, str) for choice in field.choices
            ):
                return None  # choices of other types: the field reads them
            return types, what
    return None


class StrictSerializer(UnknownKeysRefused, serializers.Serializer):
    pass  # a serializer for input: an unknown key is refused (400), never ignored


class StrictModelSerializer(UnknownKeysRefused, serializers.ModelSerializer):
    pass  # a model serializer for input: an unknown or read-only key is refused, not ignored


class StrictQuerySerializer(StrictSerializer):
    unknown_key_kind = "parameter"  # reads a query string: its keys are parameters
