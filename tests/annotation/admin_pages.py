"""What the admin tests share: staff accounts, the admin's URLs, a form sent back as shown,
and a write that is undone once its response is checked."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager
from html.parser import HTMLParser

from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser, Permission
from django.db import transaction
from django.db.models import Model
from django.urls import reverse


def staff_with_every_permission(username: str) -> AbstractBaseUser:
    """A staff account (not a superuser) granted every model permission there is, so what it
    cannot do is refused by the admin itself."""
    user = get_user_model().objects.create_user(username, password="x" * 12, is_staff=True)
    user.user_permissions.set(Permission.objects.all())
    return user


def admin_url(model: type[Model], view: str, *args: object) -> str:
    meta = model._meta
    return reverse(f"admin:{meta.app_label}_{meta.model_name}_{view}", args=args)


@contextmanager
def undone() -> Iterator[None]:
    """Run the requests inside, then roll back what they wrote (the next step starts afresh)."""
    with transaction.atomic():
        yield
        transaction.set_rollback(True)


class _FormFields(HTMLParser):
    """What a browser would send from the form with this id, submitted untouched."""

    def __init__(self, form_id: str) -> None:
        super().__init__()
        self.form_id = form_id
        self.inside = False
        self.fields: dict[str, list[str]] = defaultdict(list)
        self.select: str | None = None
        self.multiple = False
        self.first_option: str | None = None
        self.textarea: str | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {key: value or "" for key, value in attrs}
        if tag == "form":
            self.inside = found.get("id") == self.form_id
        name = found.get("name")
        if not self.inside or "disabled" in found:
            return
        kind = found.get("type", "text")
        if tag == "input" and name and kind not in _NOT_SENT:
            if kind not in ("checkbox", "radio"):
                self.fields[name].append(found.get("value", ""))
            elif "checked" in found:
                self.fields[name].append(found.get("value", "on"))
        elif tag == "select" and name:
            self.select, self.first_option = name, None
            self.multiple = "multiple" in found
        elif tag == "option" and self.select:
            value = found.get("value", "")
            self.first_option = value if self.first_option is None else self.first_option
            if "selected" in found:
                self.fields[self.select].append(value)
        elif tag == "textarea" and name:
            self.textarea = name
            self.fields[name].append("")

    def handle_endtag(self, tag: str) -> None:
        if tag == "form":
            self.inside = False
        elif tag == "select" and self.select:
            # A single choice with none marked sends its first option, as a browser does.
            if not self.multiple and self.select not in self.fields and self.first_option:
                self.fields[self.select].append(self.first_option)
            self.select = None
        elif tag == "textarea":
            self.textarea = None

    def handle_data(self, data: str) -> None:
        if self.textarea:
            shown = self.fields[self.textarea]
            # A browser drops the newline that opens a textarea's text.
            shown[-1] += data if shown[-1] else data.removeprefix("\n")


_NOT_SENT = {"submit", "button", "file", "image", "reset"}


def form_as_shown(html: str, form_id: str) -> dict[str, list[str]]:
    """The fields of the page's form `form_id` as a browser would post them unchanged."""
    parser = _FormFields(form_id)
    parser.feed(html)
    return dict(parser.fields)
