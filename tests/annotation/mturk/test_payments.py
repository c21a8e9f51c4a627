"""Published work through the Stubber: the HITs' time on the market, and blocked workers."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from annotation.models import Assignment, Worker
from annotation.mturk.errors import MTurkError
from annotation.mturk.hit_page import mturk_assignment_open
from annotation.mturk.payments import mturk_hits_expire, mturk_hits_extend, mturk_worker_block

from .helpers import (
    hits_of,
    publish,
    stub_past,
)

pytestmark = pytest.mark.django_db


def test_hits_are_extended_or_expired(annotating_batch, client, stub):
    hits = publish(annotating_batch, client, stub)
    now = datetime(2025, 3, 1, 12, tzinfo=UTC)
    for hit in hits:
        stub.add_response(
            "update_expiration_for_hit",
            {},
            {"HITId": hit.external_id, "ExpireAt": now + timedelta(hours=24)},
        )
    assert mturk_hits_extend(batch=annotating_batch, hours=24, client=client, now=now) == len(hits)
    for hit in hits:
        stub.add_response(
            "update_expiration_for_hit", {}, {"HITId": hit.external_id, "ExpireAt": stub_past()}
        )
    assert mturk_hits_expire(batch=annotating_batch, client=client) == len(hits)
    stub.assert_no_pending_responses()


def test_blocking_a_worker_blocks_it_on_mturk_and_here(annotating_batch, client, stub):
    hit = hits_of(annotating_batch)[0]
    assignment = mturk_assignment_open(hit=hit, worker_id="A1SPAM", assignment_id="3ASG1")
    stub.add_response("create_worker_block", {}, {"WorkerId": "A1SPAM", "Reason": "Random answers"})
    mturk_worker_block(
        worker=assignment.worker, reason="Random answers", production=False, client=client
    )
    stub.assert_no_pending_responses()
    assert Worker.objects.get(external_id="A1SPAM").is_blocked
    assert Assignment.objects.get(pk=assignment.pk).status == "expired"  # its open work freed
    with pytest.raises(MTurkError, match="say why"):
        mturk_worker_block(worker=assignment.worker, reason=" ", production=False, client=client)
