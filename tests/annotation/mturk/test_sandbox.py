"""A sandbox publication is reset before production: its HITs expired, its work deleted."""

from __future__ import annotations

import pytest

from annotation.models import HIT, Batch, Judgement
from annotation.mturk.errors import MTurkError
from annotation.mturk.publish import mturk_publish
from annotation.mturk.sandbox import mturk_sandbox_reset

from .helpers import (
    accept_and_submit,
    publish,
    stub_past,
)

pytestmark = pytest.mark.django_db


def test_a_sandbox_publication_is_reset_before_production(annotating_batch, client, stub):
    hits = publish(annotating_batch, client, stub)
    accept_and_submit(hits[0], "A1TESTER", "3ASG1")
    with pytest.raises(MTurkError, match="published on the sandbox: reset it first"):
        mturk_publish(batch=annotating_batch, client=client, production=True)
    for hit in hits:
        stub.add_response(
            "update_expiration_for_hit", {}, {"HITId": hit.external_id, "ExpireAt": stub_past()}
        )
    assert mturk_sandbox_reset(batch=annotating_batch, client=client) == 1
    stub.assert_no_pending_responses()
    assert not Judgement.objects.exists()
    assert not annotating_batch.hits.filter(external_id__isnull=False).exists()
    assert list(Batch.objects.get(pk=annotating_batch.pk).mturk) == ["settings"]  # kept
    assert set(HIT.objects.values_list("active_assignments", flat=True)) == {0}
