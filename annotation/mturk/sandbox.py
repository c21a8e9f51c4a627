"""Undoing a sandbox publication before the batch goes to production.

The sandbox is for trying the HITs out: its work must not reach the verdicts, and MTurk
would refuse the same request tokens again for a day (see `protocol.publication_nonce`).
"""

from __future__ import annotations

import logging
from typing import Any

from django.db import transaction

from annotation.handout import hits_lock, hits_recount_slots
from annotation.models import Assignment, Batch, WorkerSource

from .client import mturk_call, mturk_client_for
from .errors import MTurkError
from .protocol import EXPIRED_AT, SANDBOX
from .state import state_read

logger = logging.getLogger(__name__)


def mturk_sandbox_reset(*, batch: Batch, client: Any = None) -> int:
    """Expire a batch's sandbox HITs and forget them, with their MTurk test assignments.

    The sandbox is for trying the HITs out; its work must not reach the verdicts. Returns
    how many test assignments were deleted.
    """
    state = state_read(batch)
    if state.get("environment") != SANDBOX:
        raise MTurkError(f"batch {batch.pk} is not published on the sandbox: nothing to reset")
    client = mturk_client_for(production=False, client=client)
    for hit in batch.hits.filter(external_id__isnull=False).order_by("index"):
        try:
            mturk_call(
                client, "update_expiration_for_hit", HITId=hit.external_id, ExpireAt=EXPIRED_AT
            )
        except MTurkError as exc:  # gone already: nothing left to expire
            logger.info("batch %s: %s", batch.pk, exc)
    with transaction.atomic():
        hit_ids = hits_lock(hit_ids=batch.hits.values_list("pk", flat=True))  # HITs first
        _, deleted_by_model = Assignment.objects.filter(
            hit__batch=batch, worker__source=WorkerSource.MTURK
        ).delete()
        deleted = deleted_by_model.get(Assignment._meta.label, 0)
        batch.hits.update(external_id=None, published_at=None)
        hits_recount_slots(hit_ids=hit_ids)
        # The settings, and the qualification types: they live on in the sandbox, and the
        # next sandbox publication requires them again (with the workers granted them).
        kept = {key: state[key] for key in ("settings", "qualification") if key in state}
        Batch.objects.filter(pk=batch.pk).update(mturk=kept)
    return deleted
