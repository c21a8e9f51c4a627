"""Every page of the Django admin opens for staff without an error, and writes nothing that
the platform's services would refuse.

The walk goes over `admin.site._registry`, so a model registered later is walked too: its
list, history, view, add, change and delete pages, GET and POST, and each of its actions,
as a staff member granted every permission and as a superuser. Only Django's accounts and
the revocation of API tokens are written by forms; every other write is an action that
calls a service (`test_admin_actions.py`).
"""

from __future__ import annotations

import numpy as np
import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.db.models import Model
from django.test import Client, RequestFactory
from django.utils.timezone import now
from rest_framework.authtoken.models import Token

from annotation.models import (
    CalibratedRelevanceModel,
    Caption,
    Embedding,
    Evaluation,
    EvaluationJob,
    ImportJob,
    Instructions,
    QualificationAnswer,
    QualificationAttempt,
    QualificationPair,
    Release,
    RelevanceCalibration,
    TaskLease,
    Worker,
)

from .admin_pages import admin_url, form_as_shown, staff_with_every_permission, undone

pytestmark = pytest.mark.django_db

# What forms may still write, by model: Django's own accounts, and revoking an API token.
FORM_WRITES = {
    "auth.user": {"add", "change", "delete"},
    "auth.group": {"add", "change", "delete"},
    "authtoken.tokenproxy": {"delete"},
}

# What an allowed post answers: a row shown is saved as it was, or deleted; an empty add
# form is shown again with its errors (or saved, where nothing is required).
ALLOWED_POST = {"add": (200, 302), "change": (302,), "delete": (302,)}


def annotation_models():
    return list(apps.get_app_config("annotation").get_models())


@pytest.mark.parametrize("model", annotation_models(), ids=lambda m: m.__name__)
def test_every_model_is_registered(model):
    assert admin.site.is_registered(model), f"{model.__name__} is missing from the admin"


@pytest.fixture
def every_table_filled(released_batch, annotators):
    """A released batch fills most tables; the rest get one row each."""
    release = Release.objects.get(batches=released_batch)
    Evaluation.objects.create(
        release=release, model_name="tfidf", metrics={"i2t": {}}, rankings_sha256="0" * 64
    )
    ImportJob.objects.create(kind="dataset", params={"name": "more"})
    EvaluationJob.objects.create(release=release, model_name="queued", rankings_json=b'{"i2t": {}}')
    RelevanceCalibration.objects.create(dataset=released_batch.dataset, report={"sits": {}})
    CalibratedRelevanceModel.objects.create(
        dataset=released_batch.dataset,
        version="0" * 16,
        spec={"proxies": {"bow": 1}},
        model=b"not a pickle",
        figures={"pairs": 0},
    )
    TaskLease.objects.create(
        key="import:1", task="annotation.run_import", args=[1], state="queued", queued_at=now()
    )
    Embedding.objects.create(
        annotator=annotators[0],
        version="1",
        dataset=released_batch.dataset,
        modality="caption",
        ext_id=1,
        dim=2,
        vector=np.ones(2, dtype="<f4").tobytes(),
    )
    # The batch may have its first version already (made with the batch).
    Instructions.objects.get_or_create(
        batch=released_batch, version=1, defaults={"content": {"levels": []}}
    )
    caption = Caption.objects.filter(dataset=released_batch.dataset).first()
    pair = QualificationPair.objects.create(
        batch=released_batch,
        position=0,
        image_id=caption.image_id,
        caption=caption,
        positive=True,
        source="golden",
    )
    attempt = QualificationAttempt.objects.create(
        batch=released_batch, worker=Worker.objects.first(), number=1, answered=1, correct=1
    )
    QualificationAnswer.objects.create(attempt=attempt, pair=pair, level="yes", correct=True)
    someone = get_user_model().objects.create_user("someone", password="x" * 12)
    someone.groups.add(Group.objects.create(name="reviewers"))
    Token.objects.create(user=someone)


@pytest.fixture
def released_batch(batch):
    from mitl.config import batch_config
    from pipeline.progress import StageTracker
    from pipeline.simulate import crowd_simulate
    from pipeline.stages import batch_run_until

    batch_run_until(batch_id=batch.pk, until="annotating")
    crowd_simulate(
        batch=batch,
        config=batch_config(batch),
        tracker=StageTracker(batch=batch, stage="annotating"),
    )
    assert batch_run_until(batch_id=batch.pk, until="released", force=True) == "released"
    return batch


class AdminWalk:
    """One account's walk through the pages of registered models; collects what went wrong."""

    def __init__(self, user) -> None:
        self.user = user
        self.client = Client(raise_request_exception=False)  # a 500 is noted, not raised
        self.client.force_login(user)
        self.problems: list[str] = []

    def expect(self, what: str, response, *codes: int) -> None:
        if response.status_code not in codes:
            error = getattr(response, "exc_info", None)
            cause = f" ({error[1]!r})" if error else ""
            self.problems.append(f"{what}: {response.status_code}, not {codes}{cause}")

    def model(self, model: type[Model], model_admin: admin.ModelAdmin) -> None:
        label = model._meta.label_lower
        writes = FORM_WRITES.get(label, set())
        row = model.objects.order_by("pk").first()
        assert row is not None, f"no {label} row to open"
        for view, args in (("changelist", ()), ("history", (row.pk,))):
            self.expect(f"{label} {view}", self.client.get(admin_url(model, view, *args)), 200)
        self.write(label, row, "add", "add" in writes, admin_url(model, "add"))
        self.write(label, row, "change", "change" in writes, admin_url(model, "change", row.pk))
        self.write(label, row, "delete", "delete" in writes, admin_url(model, "delete", row.pk))
        self.actions(label, row, model_admin)

    def write(self, label: str, row: Model, view: str, allowed: bool, url: str) -> None:
        """Open the page, post its form back as shown, and check that only an allowed write
        happened (undone afterwards, so the walk goes on from the same rows)."""
        page = self.client.get(url)
        shown = allowed or view == "change"  # a row is shown read-only where not changed
        self.expect(f"{label} {view} page", page, 200 if shown else 403)
        sent = form_as_shown(page.content.decode(), f"{row._meta.model_name}_form")
        sent = {"post": "yes"} if view == "delete" else {**sent, "_save": "Save"}
        before = _snapshot(row)
        with undone():
            posted = self.client.post(url, sent)
            self.expect(
                f"{label} {view} post", posted, *(ALLOWED_POST[view] if allowed else (403,))
            )
            if not allowed and _snapshot(row) != before:
                self.problems.append(f"{label} {view} post wrote to the table")

    def actions(self, label: str, row: Model, model_admin: admin.ModelAdmin) -> None:
        request = RequestFactory().get("/")
        request.user = self.user
        for name in model_admin.get_actions(request):
            with undone():
                posted = self.client.post(
                    admin_url(type(row), "changelist"),
                    {"action": name, "_selected_action": [row.pk], "index": 0},
                )
                self.expect(f"{label} action {name}", posted, 200, 302)


def _snapshot(row: Model) -> tuple[int, list[dict]]:
    """The table's size and the row's stored values."""
    model, key = type(row), row._meta.pk.attname
    return model.objects.count(), list(model.objects.filter(**{key: getattr(row, key)}).values())


def test_staff_walk_every_admin_page_without_an_error_or_a_write_a_service_would_refuse(
    every_table_filled,
):
    users = get_user_model().objects
    accounts = [
        staff_with_every_permission("staff"),
        users.create_superuser("root", password="x" * 12),
    ]
    problems = []
    for user in accounts:
        walk = AdminWalk(user)
        walk.expect("index", walk.client.get("/admin/"), 200)
        for model, model_admin in admin.site._registry.items():
            walk.model(model, model_admin)
        problems += [f"{user.username}: {problem}" for problem in walk.problems]
    assert not problems, "\n".join(problems)
