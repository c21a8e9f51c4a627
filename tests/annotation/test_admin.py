"""The Django admin registers every model, and each list and edit page opens for staff."""

from __future__ import annotations

import numpy as np
import pytest
from django.apps import apps
from django.contrib import admin
from django.contrib.auth import get_user_model
from django.urls import reverse
from django.utils.timezone import now

from annotation.models import (
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

pytestmark = pytest.mark.django_db


def annotation_models():
    return list(apps.get_app_config("annotation").get_models())


@pytest.mark.parametrize("model", annotation_models(), ids=lambda m: m.__name__)
def test_every_model_is_registered(model):
    assert admin.site.is_registered(model), f"{model.__name__} is missing from annotation/admin.py"


@pytest.fixture
def every_table_filled(released_batch, annotators):
    """A released batch fills most tables; the rest get one row each."""
    release = Release.objects.get(batches=released_batch)
    Evaluation.objects.create(
        release=release, model_name="tfidf", metrics={"i2t": {}}, rankings_sha256="0" * 64
    )
    ImportJob.objects.create(kind="dataset", params={"name": "more"})
    EvaluationJob.objects.create(release=release, model_name="queued", rankings={"i2t": {}})
    RelevanceCalibration.objects.create(dataset=released_batch.dataset, report={"sits": {}})
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


def test_staff_open_every_list_and_edit_page(client, every_table_filled):
    client.force_login(get_user_model().objects.create_superuser("root", password="x" * 12))
    for model in annotation_models():
        meta = model._meta
        listing = client.get(reverse(f"admin:{meta.app_label}_{meta.model_name}_changelist"))
        assert listing.status_code == 200, meta.model_name
        first = model.objects.order_by("pk").first()
        assert first is not None, f"no {meta.model_name} row to open"
        edit = client.get(
            reverse(f"admin:{meta.app_label}_{meta.model_name}_change", args=[first.pk])
        )
        assert edit.status_code == 200, meta.model_name
