"""The diversity report is computed after retrieval, kept with the batch, shown and released."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from django.contrib.auth.models import User

from annotation.models import Batch, Release
from pipeline.progress import StageTracker
from pipeline.simulate import crowd_simulate
from pipeline.stages import batch_run_until

pytestmark = pytest.mark.django_db


def test_report_compares_every_ordered_annotator_pair_per_direction(batch):
    batch_run_until(batch_id=batch.pk, until="building")
    batch.refresh_from_db()

    report = batch.reports["diversity"]
    assert set(report) == {"i2t", "t2i"}
    for direction in ("i2t", "t2i"):
        pairs = {(p["a"], p["b"]): p for p in report[direction]["pairs"]}
        assert set(pairs) == {("bow-plain", "tfidf"), ("tfidf", "bow-plain")}
        assert all(p["common_queries"] == 8 for p in pairs.values())
        tau = pairs[("tfidf", "bow-plain")]["kendall_tau"]["mean"]
        assert -1 <= tau <= 1
        assert tau == pytest.approx(pairs[("bow-plain", "tfidf")]["kendall_tau"]["mean"])


def test_report_is_shown_with_the_batch_and_in_the_api(batch, client):
    batch_run_until(batch_id=batch.pk, until="building")
    client.force_login(User.objects.create_user("staff", is_staff=True))  # a staff-only page
    page = client.get(f"/batches/{batch.pk}/")
    assert page.status_code == 200
    assert b"Annotator diversity" in page.content
    assert page.content.count(b"<td>tfidf</td>") == 4  # two directions, as A and as B

    detail = client.get(f"/api/batches/{batch.pk}/").json()
    assert detail["reports"]["diversity"]["t2i"]["annotators"] == ["bow-plain", "tfidf"]


def test_release_carries_the_report_in_its_manifest(batch):
    batch_run_until(batch_id=batch.pk, until="annotating")
    batch = Batch.objects.select_related("dataset").get(pk=batch.pk)
    from mitl.config import batch_config

    crowd_simulate(
        batch=batch,
        config=batch_config(batch),
        tracker=StageTracker(batch=batch, stage="annotating"),
    )
    batch_run_until(batch_id=batch.pk, until="released", force=True)

    release = Release.objects.get(batches=batch)
    folder = Path(release.path)
    assert (
        json.loads((folder / "diversity.json").read_text())
        == Batch.objects.get(pk=batch.pk).reports["diversity"]
    )
    assert "diversity.json" in release.manifest["files"]
