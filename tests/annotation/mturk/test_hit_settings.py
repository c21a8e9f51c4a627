"""A batch's HIT type settings: validated, stored with their cost, frozen once published."""

from __future__ import annotations

from decimal import Decimal

import pytest

from annotation.models import Batch
from annotation.mturk.errors import MTurkError
from annotation.mturk.hit_settings import mturk_settings_save

pytestmark = pytest.mark.django_db


def test_settings_are_validated_stored_with_the_cost_and_frozen_once_published(
    annotating_batch, client, stub
):
    with pytest.raises(MTurkError, match="whole cents"):
        mturk_settings_save(batch=annotating_batch, raw={"reward": "0.333"})
    saved = mturk_settings_save(batch=annotating_batch, raw={"reward": "1.00", "locales": "GB"})
    state = Batch.objects.get(pk=annotating_batch.pk).mturk
    assert state["settings"]["reward"] == "1.00" and saved.locales == ("GB",)
    hits = annotating_batch.hits.count()
    assert state["cost_estimate"]["total"] == str(Decimal("1.20") * hits * 2)
    annotating_batch.hits.filter(index=0).update(external_id="3HITX")
    with pytest.raises(MTurkError, match="can no longer change"):
        mturk_settings_save(batch=annotating_batch, raw={"reward": "2.00"})
