"""Web forms that refuse a posted field they do not have, as the API does.

Django ignores a field no form declares, so a typo in a script or a page left open across
a change seems to work while part of it is dropped. A `KnownFieldsForm` puts an error above
the form instead, naming the field. Known are the form's own fields (with its prefix), the
fields of the other forms posted with it (`also_known`), its named buttons and Django's
CSRF token.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django import forms

CSRF_FIELD = "csrfmiddlewaretoken"


def form_field_names(form: forms.BaseForm) -> list[str]:
    """The names a form's fields post under (its prefix included)."""
    return [form.add_prefix(name) for name in form.fields]


class KnownFieldsForm(forms.Form):
    """A form whose data may hold only its fields, `buttons`, `also_known` and the CSRF token."""

    buttons: tuple[str, ...] = ()  # names of the submit buttons that post a value

    def __init__(self, *args: Any, also_known: Iterable[str] = (), **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.also_known = tuple(also_known)

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        known = {CSRF_FIELD, *form_field_names(self), *self.buttons, *self.also_known}
        unknown = sorted({*self.data, *self.files} - known)
        if unknown:
            names = ", ".join(repr(name) for name in unknown)
            self.add_error(
                None,
                f"This form has no field {names}: nothing was done. Reload the page and try again.",
            )
        return data
